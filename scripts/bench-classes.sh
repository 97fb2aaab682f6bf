#!/usr/bin/env bash
# Emulation speed by program class: `cilkview-rs run --counter emulate` (release build) against
# the native program, bare QEMU (the same -cpu as the tool's, no plugin, no analysis) and QEMU
# with a plugin that only counts instructions (scripts/bench/count_plugin.c), run in turn, ROUNDS rounds (scripts/bench/interleave.py): integer (nqueens, recursive), floating point
# (matmul, a stencil) and memory-bound (fixtures/stream.c: copy/scale/add/triad over 96 MB of
# 64-bit integers). Static gcc -O2 builds. Prints a markdown table for docs/benchmarks.md
# ("Speed by program class"); ratios of the fastest runs, per round (the median over rounds of
# each round's ratio to native: a slow stretch of the shared machine hits a round alike), and of
# the least CPU time (user + system, the tool's analysis thread included), which a loaded
# machine disturbs least.
#
# Usage: scripts/bench-classes.sh        Environment: ROUNDS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
cargo build --release --quiet -p cilkview-cli
bin=target/release/cilkview-rs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rounds=${ROUNDS:-3}
inc="-I crates/cilkview-marks/include -I fixtures"
cc -O2 -shared -fPIC -I crates/cilkview-qemu-plugin/plugin scripts/bench/count_plugin.c \
    -o "$work/count_plugin.so"
for f in nqueens matmul stencil_outer stream; do
    # shellcheck disable=SC2086
    gcc -O2 -static $inc "fixtures/$f.c" -o "$work/$f"
done
"$bin" run --counter emulate --json "$work/e.json" "$work/nqueens" 4 >/dev/null 2>&1
cpu=$(emulated_cpu "$work/e.json")
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg); qemu -cpu $cpu"
echo
echo "| program | class | native s | bare QEMU s | cilkview-rs s | tool / native | bare QEMU / native | tool / native, per round | tool / bare QEMU, per round | CPU: tool / native | CPU: bare QEMU / native | CPU: counting only / bare QEMU | CPU: tool / bare QEMU |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
while IFS='|' read -r label class cmd; do
    python3 scripts/bench/interleave.py "$rounds" "native=$work/$cmd" \
        "qemu=qemu-x86_64 -cpu $cpu $work/$cmd" \
        "counting=qemu-x86_64 -cpu $cpu -plugin $work/count_plugin.so $work/$cmd" \
        "tool=$bin run --counter emulate $work/$cmd" >"$work/t.txt"
    python3 - "$label" "$class" "$work/t.txt" <<'PY'
import sys
label, cls = sys.argv[1:3]
t = {l.split()[0]: tuple(map(float, l.split()[1:])) for l in open(sys.argv[3])}
n, q, e = (t[k][0] for k in ("native", "qemu", "tool"))
nc, qc, cc, ec = (t[k][2] for k in ("native", "qemu", "counting", "tool"))
qp, ep = t["qemu"][4], t["tool"][4]
print(f"| {label} | {cls} | {n:.3f} | {q:.3f} | {e:.3f} | {e / n:.1f}× | {q / n:.1f}× | {ep:.1f}× | "
      f"{ep / qp:.2f}× | {ec / nc:.1f}× | {qc / nc:.1f}× | {cc / qc:.2f}× | {ec / qc:.2f}× |")
PY
done <<LIST
nqueens 12 (recursive, cv_spawn)|integer|nqueens 12
matmul 256² doubles (recursive, cv_spawn)|floating point|matmul 256
stencil 256², 400 sweeps (cv_for)|floating point|stencil_outer 256 400
stream 4M × 64-bit, 4 × copy/scale/add/triad (cv_for)|memory|stream 4194304 4
LIST
