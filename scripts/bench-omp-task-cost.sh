#!/usr/bin/env bash
# An OpenMP runtime's cost per task at 2 threads, the calibration of `--openmp`'s `--task-cost`
# (docs/openmp.md): libgomp's (CC=gcc, the default) or libomp's (CC=clang): fixtures/omp_fine.c without its marks (ROUNDS rounds of 64 tasks of 2w + 1
# instructions and a taskwait), for several w, run natively as its serial elision (built without
# -fopenmp: Ts), and with -fopenmp at OMP_NUM_THREADS=1 (T1) and 2 (T2), in turn, ROUNDS_TIMED
# rounds (default 9; medians). Its work W and spawns N are counted by `run --openmp` (emulation).
# The cost per task at 2 threads is what the lower bound must charge for T2 to be its
# prediction, the span aside: W/((W + N·c)/2) = Ts/T2, so c = (2·T2/Ts − 1)·W/N instructions,
# (2·T2 − Ts)/N in time; at 1 thread, (T1 − Ts)/N. Under libomp (CC=clang) W also holds libomp's
# own instructions per task at one thread (the program allocates each task in libomp, which
# begins and completes it: the tool counts them), so the base is T1, the time of what W counts:
# c = (2·T2/T1 − 1)·W/N, (2·T2 − T1)/N in time. Prints a markdown table; timings on a shared
# machine are noisy (the load is printed: compare rows of one run). RT=1 runs the timed programs
# under SCHED_FIFO (chrt -f 10, as root): other processes then wait while they run (the kernel's
# real-time throttling still leaves them 5% of each second), which makes the measures those of an
# idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${TOOL:-}" ]; then
    cargo build --release --quiet -p cilkview-cli
    TOOL=target/release/cilkview-rs
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
inc="-I crates/cilkview-marks/include -I fixtures -DCILKVIEW_DISABLE"
# shellcheck disable=SC2086
cc=${CC:-gcc}
case "$cc" in *clang*) runtime=libomp base=T1 ;; *) runtime=libgomp base=Ts ;; esac
# shellcheck disable=SC2086
$cc -O2 $inc fixtures/omp_fine.c -o "$work/serial" -Wno-unknown-pragmas
# shellcheck disable=SC2086
$cc -O2 -fopenmp $inc fixtures/omp_fine.c -o "$work/omp"
echo "machine: $(uname -m), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg); $($cc --version | head -1) ($runtime); SCHED_FIFO: ${RT:-0}"
echo
echo "| instructions per task (2w + 1) | tasks | Ts (serial elision) s | T1 s | T2 s | $runtime per task at 1 | per task at 2 | per task at 2, instructions | speedup at 2 ($base/T2) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for w in ${GRAINS:-0 20 200 2000 5000 20000}; do
    # ~300M instructions of tasks, at least 2,000 rounds of fine ones (their cost dominates).
    rounds=$(( 300000000 / (64 * (2 * w + 40)) ))
    [ "$rounds" -gt 20000 ] && rounds=20000
    "$TOOL" run --openmp --counter emulate --json "$work/a.json" "$work/omp" 64 "$w" "$rounds" \
        >/dev/null 2>&1
    python3 - "$work" "$w" "$rounds" "${ROUNDS_TIMED:-9}" "${RT:-0}" "$base" <<'PY'
import json, os, statistics, subprocess, sys, time
work, w, rounds, timed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
prefix = ["chrt", "-f", "10"] if sys.argv[5] == "1" else []
a = json.load(open(f"{work}/a.json"))
region = next(g for g in a["regions"] if g["label"] == "parallel")
W, N = region["work"], region["spawns"]
args = ["64", str(w), str(rounds)]
def run(exe, threads=None):
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    subprocess.run(prefix + [f"{work}/{exe}"] + args, env=env, stdout=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - t0
ts, t1, t2 = [], [], []
for _ in range(timed):
    ts.append(run("serial")); t1.append(run("omp", 1)); t2.append(run("omp", 2))
Ts, T1, T2 = map(statistics.median, (ts, t1, t2))
Tb = T1 if sys.argv[6] == "T1" else Ts
per1, per2 = (T1 - Ts) / N * 1e6, (2 * T2 - Tb) / N * 1e6
instr = (2 * T2 / Tb - 1) * W / N
print(f"| {2 * w + 1:,} | {N:,} | {Ts:.4f} | {T1:.4f} | {T2:.4f} | {per1:.2f} µs | "
      f"{per2:.2f} µs | {instr:,.0f} | {Tb / T2:.2f} |")
PY
done
