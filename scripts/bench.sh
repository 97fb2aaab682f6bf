#!/usr/bin/env bash
# Tracing cost on this machine, all in one run so the numbers compare (timings here are noisy:
# read ratios). Prints a markdown table for docs/benchmarks.md.
#   - bare costs: a ptrace stop at an int3, one PTRACE_SINGLESTEP (scripts/bench/ptrace_cost.c);
#   - cilkview-rs per fixture: instructions, marks hit, native time, traced time, overhead ratio,
#     instructions per second, and the cost per mark hit: traced time of the marked binary minus
#     that of its serial elision (the same instructions but the marks' NOPs) over the marks hit —
#     in single-step mode that is the NOP's own step plus the handling of the hit.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p cilkview-cli
bin=target/release/cilkview-rs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
inc="-I crates/cilkview-marks/include -I fixtures"
cc -O2 scripts/bench/ptrace_cost.c -o "$work/ptrace_cost"
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F)"
counter=$("$bin" run --json "$work/c.json" /bin/true 2>/dev/null; python3 -c "import json;c=json.load(open('$work/c.json'))['counter'];print(c['mode']+': '+c['reason'])")
echo "counter (auto): $counter"
"$work/ptrace_cost" 20000 | sed 's/^/bare, two CPUs: /'
taskset -c 0 "$work/ptrace_cost" 20000 | sed 's/^/bare, one CPU:  /'

secs() { # seconds taken by a command, stdout/stderr discarded
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
    python3 -c "print(f'{$t1 - $t0:.3f}')"
}

echo
echo "| fixture (args) | instructions | marks hit | native s | traced s | overhead | instr/s traced | µs per mark hit (≥1000 hits) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
while read -r name args; do
    cc -O2 -static $inc "fixtures/$name.c" -o "$work/$name"
    cc -O2 -static -DCILKVIEW_DISABLE $inc "fixtures/$name.c" -o "$work/$name.elided"
    native=$(secs "$work/$name" $args)
    traced=$(secs "$bin" run --json "$work/$name.json" "$work/$name" -- $args)
    elided=$(secs "$bin" run "$work/$name.elided" -- $args)
    python3 - "$name" "$args" "$work/$name.json" "$native" "$traced" "$elided" <<'PY'
import json, sys
name, args, path, native, traced, elided = sys.argv[1], sys.argv[2], sys.argv[3], *map(float, sys.argv[4:])
r = json.load(open(path))
w, e = r["work"], r["events"]
# Below ~1000 hits the difference is lost in the timing noise of a VM: not reported.
per_hit = f"{(traced - elided) / e * 1e6:.0f}" if e >= 1000 else "–"
print(f"| {name} ({args}) | {w:,} | {e:,} | {native:.3f} | {traced:.2f} | {traced / max(native, 1e-3):,.0f}× | {w / traced:,.0f} | {per_hit} |")
PY
done <<'LIST'
known_spawn
known_scope
known_loop 1
known_regions
fib 15
fib 18
snippet_a 100
snippet_b 100
stencil_outer 32 1
stencil_inner 32 1
LIST
