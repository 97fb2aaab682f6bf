#!/usr/bin/env bash
# --counter native against the program run natively, in one run so the numbers compare (timings
# here are noisy: read ratios; each time is the fastest of ROUNDS runs, native and traced
# interleaved). Prints a markdown table for docs/benchmarks.md:
#   - coarse floating-point programs: a double matmul of 8 chunks of 160^2 per round
#     (scripts/bench/coarse_matmul.c) and the 256^2 stencil (fixtures/stencil_outer.c);
#   - gzip -6 of 8 MB (unmarked: the fixed costs of the tool, ptrace and the set-up);
#   - a fine-grained fib with a mark hit every few instructions: the cost per mark hit, (traced -
#     native) / hits, on the program's thread.
# Also the counter's reason (TSC frequency, the per-hit cost taken off each strand).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p cilkview-cli
bin=target/release/cilkview-rs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
inc="-I crates/cilkview-marks/include -I fixtures"
rounds=${ROUNDS:-5}
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" run --counter native --json "$work/c.json" /bin/true >/dev/null 2>&1
echo "counter: $(python3 -c "import json;print(json.load(open('$work/c.json'))['counter']['reason'])")"
cc -O2 $inc scripts/bench/coarse_matmul.c -o "$work/coarse_matmul"
cc -O2 $inc fixtures/stencil_outer.c -o "$work/stencil_outer"
cc -O2 $inc fixtures/fib.c -o "$work/fib"
head -c 6000000 /dev/urandom | base64 > "$work/gzip.in"  # ~8 MB of text
echo
echo "| program | marks hit | native s | --counter native s | ratio | per hit |"
echo "|---|---:|---:|---:|---:|---:|"
while IFS='|' read -r label cmd; do
    # shellcheck disable=SC2086
    read -r nw tw hits < <(python3 - "$rounds" "$bin" "$work/r.json" $cmd <<'PY'
import json, subprocess, sys, time
rounds, tool, js, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
def run(c):
    t0 = time.perf_counter()
    subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0
native = traced = float("inf")
for _ in range(rounds):
    native = min(native, run(cmd))
    traced = min(traced, run([tool, "run", "--counter", "native", "--json", js] + cmd))
hits = json.load(open(js))["events"]
print(f"{native:.4f} {traced:.4f} {hits}")
PY
)
    python3 - "$label" "$hits" "$nw" "$tw" <<'PY'
import sys
label, hits, nw, tw = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
per = f"{(tw - nw) / hits * 1e9:.1f} ns" if hits > 100000 else "-"
print(f"| {label} | {hits:,} | {nw:.3f} | {tw:.3f} | {tw / nw:.2f}x | {per} |")
PY
done <<EOF2
coarse double matmul, 8 chunks of 160^2 x 48 rounds|$work/coarse_matmul 48
stencil 256^2 x 2000 steps (FP)|$work/stencil_outer 256 2000
gzip -6, 8 MB (no marks)|$(command -v gzip) -6 -c $work/gzip.in
fib 30 (fully marked, fine-grained)|$work/fib 30
fib 32 (fully marked, fine-grained)|$work/fib 32
EOF2
