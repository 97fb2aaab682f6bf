#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The analysis's speed against its targets (docs/benchmarks.md, "The analysis's speed against
# its targets"), each figure a ratio or a cost per event taken within this one run:
#   - the engine alone (`throughput`: plain, fib's calls only, --profile) in ns per event, and
#     --profile over plain;
#   - the session and engine on packed hits (`session_throughput`: the time in the session's
#     calls, not the example's generator) in ns per hit, two hits a word (emulate's form) and
#     one (`--ones`, the native drain's);
#   - fully marked fib under --counter native and under --counter emulate against fib run
#     natively (the fastest of ROUNDS runs each, interleaved), with the tool's own CPU time per
#     mark hit: the traced run's CPU time (the tool's and the program's) less the program's
#     threads' (the report's `cpu-time` note), i.e. the analysis end to end, drain included;
#   - with a cilkbench checkout: Cilk-5's fib and cholesky ported (scripts/bench/port_cilk5.py)
#     under --counter native, as the issue measured them.
#
#   scripts/bench-targets.sh [CILKBENCH_DIR]
#
# Environment: ROUNDS (default 3), EVENTS (the engine's and session's run length, default 10^8),
# FIB_NATIVE (default 40), FIB_EMULATE (default 32), TOOL (a cilkview-rs built already).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
repo=$PWD
rounds=${ROUNDS:-3}
events=${EVENTS:-100000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build -q --release -p cilkview-engine --example throughput
cargo build -q --release -p cilkview-analysis --example session_throughput
if [ -z "${TOOL:-}" ]; then
    cargo build --release --quiet -p cilkview-cli
    TOOL=$repo/target/release/cilkview-rs
fi
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

# The engine's and session's figures: ROUNDS rounds, each running the five in turn, so that
# the guest's speed, which moves from minute to minute, moves all five alike; the fastest of
# each ("N ns/event" or "N ns per hit").
faster() { # faster BEST X: the smaller, BEST empty at first
    if [ -z "$1" ] || awk "BEGIN{exit !($2 < $1)}"; then echo "$2"; else echo "$1"; fi
}
engine=target/release/examples/throughput
plain="" calls="" prof="" session="" ones=""
for _ in $(seq "$rounds"); do
    plain=$(faster "$plain" "$("$engine" "$events" | ns_figure)")
    calls=$(faster "$calls" "$("$engine" "$events" --calls-only | ns_figure)")
    prof=$(faster "$prof" "$("$engine" "$((events / 10))" --profile | ns_figure)")
    session=$(faster "$session" "$(target/release/examples/session_throughput "$events" | ns_figure)")
    ones=$(faster "$ones" "$(target/release/examples/session_throughput "$events" --ones | ns_figure)")
done

# traced LABEL COUNTER TARGET_RATIO PROGRAM ARGS...: a table row, the program natively against
# the tool, ROUNDS rounds interleaved, the fastest of each.
traced() {
    python3 - "$rounds" "$TOOL" "$work/r.json" "$@" <<'PY'
import re, sys
sys.path.insert(0, "scripts/bench")
from traced_rounds import fastest
rounds, tool, js, label, counter, target = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])
cmd = sys.argv[7:]
def program_cpu(r):  # seconds, the report's cpu-time note (native); None under emulate
    for n in r["counter"].get("notes", []):
        m = re.search(r"threads ran ([0-9.]+) ms on the CPU", n["text"])
        if m:
            return float(m[1]) / 1e3
    return None
native, traced, cpu, r = fastest(rounds, tool, counter, js, cmd)
hits, own = r["events"], program_cpu(r)
# Under emulate the program's CPU time is QEMU's too: the tool's share is not separable.
tool_cpu = (cpu - own) if own is not None else None
ratio = traced / native
met = "**met**" if ratio <= target else "not met"
tool = f"{tool_cpu / hits * 1e9:.1f} ns" if tool_cpu is not None else "-"
print(f"| {label} | {hits:,} | {native:.3f} s | {traced:.3f} s | {ratio:.1f}x | {tool} | <= {target:g}x: {met} |")
PY
}

echo
echo "| the engine and session alone | ns per event | target |"
echo "|---|---:|---|"
met() { awk "BEGIN{print ($1 <= $2) ? \"**met**\" : \"not met\"}"; }
echo "| engine, plain (\`throughput $events\`) | $plain | <= 3: $(met "$plain" 3) |"
echo "| engine, fib's calls only (\`--calls-only\`) | $calls | - |"
ratio=$(awk "BEGIN{printf \"%.1f\", $prof / $plain}")
echo "| engine, \`--profile\` (3 sites) | $prof ($ratio× plain) | <= 2× plain: $(met "$ratio" 2) |"
echo "| session and engine on packed hits, two a word (\`session_throughput\`) | $session | <= 5: $(met "$session" 5) |"
echo "| the same, one hit a word (\`--ones\`, the native drain's form) | $ones | <= 5: $(met "$ones" 5) |"

echo
echo "| program | mark hits | native | traced | ratio | the tool's CPU per hit | target |"
echo "|---|---:|---:|---:|---:|---:|---|"
inc="-I crates/cilkview-marks/include -I fixtures"
# shellcheck disable=SC2086
cc -O2 $inc fixtures/fib.c -o "$work/fib"
traced "fixtures/fib.c ${FIB_EMULATE:-32}, --counter emulate" emulate 12 "$work/fib" "${FIB_EMULATE:-32}"
if [ -f "${1:-}/cilk5/fib.c" ]; then
    python3 scripts/bench/port_cilk5.py "$1/cilk5" "$work/src" >/dev/null
    for name in fib cholesky; do
        gcc -O3 -g -w -I crates/cilkview-marks/include -I "$work/src" "$work/src/$name.c" \
            "$work/src/getoptions.c" -o "$work/$name" -lm
    done
    traced "Cilk-5 fib ${FIB_NATIVE:-40}, --counter native" native 10 "$work/fib" "${FIB_NATIVE:-40}"
    traced "Cilk-5 cholesky -n 2000 -z 20000, --counter native" native 1.3 "$work/cholesky" -n 2000 -z 20000
else
    traced "fixtures/fib.c ${FIB_NATIVE:-40}, --counter native" native 10 "$work/fib" "${FIB_NATIVE:-40}"
    echo "skipped: Cilk-5's cholesky (no cilkbench checkout given)"
fi
