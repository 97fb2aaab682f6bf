#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The Barcelona OpenMP Tasks Suite (BOTS), unmodified, under `cilkview-rs run --openmp`: each
# program built with gcc -fopenmp -O3 from BOTS's own sources, run under the tool with BOTS's own
# check (-c), its "parallel" region's measures read from the JSON report, and (TIMING=1) its
# speedup at 2 threads measured natively beside the range the tool predicts for it.
#
#   scripts/bench-bots.sh [BOTS_DIR]
#
# BOTS is GPL-2: it is not in this repository. BOTS_DIR is a checkout of it; without one the
# script clones https://github.com/bsc-pm/bots (commit $BOTS_COMMIT) into a temporary folder.
# Environment: COUNTER (default emulate), TIMING=1 (also time each program natively at 1 and 2
# threads, ROUNDS rounds, default 7, alternated; the speedup is the median of the rounds'
# ratios of BOTS's own "Time Program", which times the parallel kernel only; RT=1: under
# SCHED_FIFO, chrt -f 10, as scripts/bench-omp-task-cost.sh), ONLY=name,...
# (a subset), TOOL=path (a cilkview-rs already built). Prints a markdown table for docs/openmp.md; exits non-zero if a program fails
# its check or the tool fails.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
counter=${COUNTER:-emulate}
rounds=${ROUNDS:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/bots.sh
source scripts/bench/bots.sh
bots_locate "${1:-}" "$work"

if [ -z "${TOOL:-}" ]; then
    cargo build --release --quiet -p cilkview-cli
    TOOL=$repo/target/release/cilkview-rs
fi
tool=$TOOL
in=$bots_inputs
programs=$(bots_programs)

echo "machine: $(uname -m), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "BOTS: $(git -C "$bots" rev-parse --short HEAD 2>/dev/null || echo "$bots"); $(gcc --version | head -1); counter $counter"
echo
header="| program | arguments | check | tasks | work per spawn | region parallelism | predicted at 2 (Cilkview) | predicted at 2 (--openmp) |"
rule="|---|---|---|---:|---:|---:|---|---|"
if [ "${TIMING:-0}" = 1 ]; then
    header="$header measured at 2 |"
    rule="$rule---:|"
fi
if [ "$counter" = native ]; then
    # The whole program's work by time against its CPU time (user + system) in the same traced
    # run, printed at its exit by a preloaded library (bench/cpu_at_exit.c). It holds the
    # stubs' ~10 ns per hit, the loader's start-up and the tool's set-up, which the work does
    # not; the last column is the report's own check ("cpu-time" note), which takes them off.
    gcc -O2 -shared -fPIC scripts/bench/cpu_at_exit.c -o "$work/cpu_at_exit.so"
    preload=(env "LD_PRELOAD=$work/cpu_at_exit.so")
    header="$header work / CPU time (the same run) | work / (CPU time − stubs − waits) | the report's CPU check |"
    rule="$rule---:|---:|---:|"
fi
echo "$header"
echo "$rule"
failed=0
[ "$counter" = native ] || preload=()
while IFS='|' read -r name dir sources defines libs args; do
    [ -n "$name" ] || continue
    if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        continue
    fi
    exe=$work/$name
    bots_build "$name" "$dir" "$sources" "$defines" "$libs" "$exe"
    args=$(bots_args "$args")
    # shellcheck disable=SC2086
    if ! "${preload[@]}" "$tool" run --openmp --counter "$counter" --json "$work/$name.json" "$exe" $args -c \
        >"$work/$name.out" 2>"$work/$name.err"; then
        echo "| $name | \`$args\` | tool failed: $(grep -m1 error "$work/$name.err") | | | | | |"
        failed=1
        continue
    fi
    check=$(sed -n 's/^Verification *= *//p' "$work/$name.out")
    [ "$check" = successful ] || failed=1
    speedup=""
    if [ "${TIMING:-0}" = 1 ]; then
        # shellcheck disable=SC2086
        speedup=$(python3 - "$rounds" "${RT:-0}" "$exe" $args <<'PY'
import os, re, statistics, subprocess, sys
rounds, cmd = int(sys.argv[1]), sys.argv[3:]
if sys.argv[2] == "1":
    cmd = ["chrt", "-f", "10"] + cmd
def kernel(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True).stdout
    return float(re.search(r"Time Program\s*=\s*([0-9.]+)", out).group(1))
ratios = []
for _ in range(rounds):
    one, two = kernel(1), kernel(2)
    ratios.append(one / two)
print(f"{statistics.median(ratios):.2f}")
PY
)
    fi
    python3 - "$work/$name.json" "$name" "$args" "$check" "$speedup" "$in" "$work/$name.err" <<'PY'
import json, re, sys
path, name, args, check, speedup, inputs, err = sys.argv[1:8]
r = json.load(open(path))
region = next(g for g in r["regions"] if g["label"] == "parallel")
w, spawns, bspan = region["work"], region["spawns"], region["burdened_span"]
par, delta, cost = region["parallelism"], r["span_coefficient"], r.get("runtime", r.get("openmp"))["task_cost"]
tasks = {c["name"]: c["value"] for c in r.get("runtime", r.get("openmp"))["counts"]}
def lower(c, p=2):  # docs/openmp.md: the lower bound with a cost per spawn on the work
    return w / ((w + spawns * c) / p + 2 * delta * (1 - 1 / p) * bspan)
upper = min(2.0, par)
per = f"{w / spawns:,.0f}" if spawns else "-"
row = (f"| {name} | `{args.replace(inputs + '/', '')}` | {check or 'none'} | "
       f"{tasks.get('tasks', 0):,} | {per} | {par:,.2f} | "
       f"{lower(0):.2f} – {upper:.2f} | {lower(cost):.2f} – {upper:.2f} |")
if speedup:
    s = float(speedup)
    place = "inside" if lower(cost) - 0.05 <= s <= upper + 0.05 else ("above" if s > upper else "BELOW")
    row += f" {s:.2f} ({place}) |"
if r["unit"] == "nanoseconds":
    cpu = re.search(rf"CPUAT \d+ ([0-9.]+) ([0-9.]+) \d+ {name[:15]}\n", open(err).read())
    cpu_ns = (float(cpu[1]) + float(cpu[2])) * 1e9 if cpu else None
    row += f" {r['work'] / cpu_ns:.2f} |" if cpu else " - |"
    # The CPU time less what the report says the tool took from the program (tool_share.py).
    sys.path.insert(0, "scripts/bench")
    from tool_share import accounted, taken_ns
    taken = taken_ns(r)
    row += f" {r['work'] / (cpu_ns - taken):.2f} |" if cpu and taken is not None else " - |"
    # The report's own check: (work + stubs + waits) over the program's CPU time as the kernel
    # counts it, less the tool's stops (its set-up at exec: ~1.5-2 ms, which the preloaded
    # library's CPU time holds).
    share = accounted(r)
    row += f" {share:.2f} |" if share is not None else " - |"
print(row)
PY
done <<<"$programs"
exit $failed
