#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The time counter against the exact one on real programs nobody here wrote: cilkbench's Cilk-5
# suite (https://github.com/neboat/cilkbench, cilk5/), ported to cilkview.h's marks at run time
# by scripts/bench/port_cilk5.py (never committed: the suite is not ours), built with gcc -O3.
# For each program, the kernel it times itself (region "kernel") measured by `--counter emulate`
# (exact), by `--counter native` in one run and with `--repeat 5`; native's kernel work against
# the kernel's CPU time in runs without the tool (the least of 3: the port prints it, see
# port_cilk5.py; CPU time, so other programs' load counts only through the caches), the mean
# strand by time (whole program: work / mark hits), the preemptions of the kernel in the traced
# run, the report's noise bound (--repeat 5: work ±, span −), and how much slower the critical
# path runs per instruction than the whole kernel (native span / exact span over native work /
# exact work: well above 1, the span's strands wait on memory or the kernel, e.g. page faults).
#
#   scripts/bench-cilk5.sh CILKBENCH_DIR        (a checkout of cilkbench: its cilk5/ folder)
#
# Environment: ONLY=name,... (a subset), SIZE=full (the issue's inputs; default small: each
# kernel ~0.01-0.3 s natively), TOOL (a cilkview-rs built already; default: cargo build
# --release). Prints a markdown table for docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ -f "${1:-}/cilk5/fib.c" ] || { echo "usage: $0 CILKBENCH_DIR (a cilkbench checkout)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${TOOL:-}" ]; then
    cargo build --release --quiet -p cilkview-cli
    TOOL=$repo/target/release/cilkview-rs
fi

# name | arguments (small) | arguments (full)
programs=$(cat <<'TABLE'
fib|27|35
nqueens|10|12
cilksort|-n 500000|-n 5000000
fft|-n 1048576|-n 8388608
heat|-nx 512 -ny 512 -nt 20|
lu|-n 256|-n 1024
matmul|-n 256|-n 1024
rectmul|-x 256 -y 256 -z 256|-x 1024 -y 1024 -z 1024
strassen|-n 512|-n 2048
cholesky|-n 500 -z 2000|-n 2000 -z 20000
TABLE
)

python3 scripts/bench/port_cilk5.py "$1/cilk5" "$work/src" >/dev/null
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg); cilkbench $(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo "$1"); $(gcc --version | head -1)"
echo
echo "| program | arguments | exact | native, 1 run | native \`--repeat 5\` | work / kernel CPU untraced (1 run; repeat 5) | work / kernel CPU of the traced runs (1 run; repeat 5) | the same, less the stubs and waits | the report's CPU check (1 run; repeat 5) | mean strand | preemptions | noise (repeat 5: work; span) | span's time per instruction / the kernel's (repeat 5) |"
echo "|---|---|---:|---:|---:|---|---|---|---|---:|---:|---|---:|"
while IFS='|' read -r name small full; do
    if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        continue
    fi
    args=$small
    [ "${SIZE:-small}" = full ] && args=${full:-$small}
    gcc -O3 -g -w -I crates/cilkview-marks/include -I "$work/src" "$work/src/$name.c" \
        "$work/src/getoptions.c" -o "$work/$name" -lm
    : >"$work/untraced"
    for _ in 1 2 3; do
        # shellcheck disable=SC2086
        "$work/$name" $args 2>>"$work/untraced" >/dev/null
    done
    row=()
    for how in "emulate" "native" "native --repeat 5"; do
        json=$work/$name.json
        # shellcheck disable=SC2086
        "$TOOL" run --counter $how --json "$json" "$work/$name" $args >/dev/null 2>"$work/err" ||
            { echo "| $name | \`$args\` | tool failed ($how): $(grep -m1 error "$work/err") |"; continue 2; }
        row+=("$(python3 - "$json" "$work/err" "$work/untraced" "$how" "${row[0]:-}" <<'PY'
import json, re, sys
path, err, untraced, how, exact = sys.argv[1:6]
r = json.load(open(path))
k = next(g for g in r["regions"] if g["label"] == "kernel")
par = k["parallelism"]
if how == "emulate":
    print(f"{par:,.1f}|{k['work']}|{k['span']}")
    sys.exit()
# The critical path's time per instruction against the whole kernel's: how much slower its
# strands run (memory or the kernel: page faults) than the average.
_, exact_work, exact_span = exact.split("|")
slower = (k["span"] / int(exact_span)) / (k["work"] / int(exact_work))
kernel = re.compile(r"kernel cpu (\d+) ns, (\d+) preemptions")
own = min(int(m[1]) for m in kernel.finditer(open(untraced).read()))
traced = [(int(m[1]), int(m[2])) for m in kernel.finditer(open(err).read())]
preempted = sum(p for _, p in traced) // len(traced)
# The kernel's CPU time in the traced runs themselves (with --repeat, that of the run whose work
# the report's is, whose notes it gives: `median_run`): taken at the same moment as the work, so
# the machine's speed, which drifts up to 2x on a shared VM, is the same for both; it includes
# the stubs' ~10 ns per hit, which the work does not.
median_run = (r["counter"].get("noise") or {}).get("median_run")
same = traced[median_run - 1][0] if median_run else sorted(c for c, _ in traced)[len(traced) // 2]
strand = r["work"] / max(r["events"], 1)
noise = re.search(r"work [\d.]+ ms (±[\d.]+%).*span [\d.]+ ms (−[\d.]+%)", open(err).read())
noise = f"{noise[1]}; {noise[2]}" if noise else "-"
# The same less what the report says the tool took from the program (tool_share.py; of the same
# run as `same`; over the whole program's hits, the kernel's being most of them).
sys.path.insert(0, "scripts/bench")
from tool_share import accounted, taken_ns
taken = taken_ns(r)
less = f"{k['work'] / (same - taken):.2f}" if taken is not None and same > taken else "-"
# The report's own check: the whole program's work, hits' cost and waits over its CPU time by
# the kernel's count, less the tool's stops (the `cpu-time` note; the median run's).
share = accounted(r)
check = f"{share:.2f}" if share is not None else "-"
print(f"{par:,.1f}|{k['work'] / own:.2f}|{strand:,.0f} ns|{preempted}|{noise}|{slower:.1f}x|{k['work'] / same:.2f}|{less}|{check}")
PY
)")
    done
    exact=${row[0]%%|*}
    IFS='|' read -r one one_ratio strand preempted _ _ one_same one_less one_check <<<"${row[1]}"
    IFS='|' read -r rep rep_ratio _ _ noise slower rep_same rep_less rep_check <<<"${row[2]}"
    echo "| $name | \`$args\` | $exact | $one | $rep | $one_ratio; $rep_ratio | $one_same; $rep_same | $one_less; $rep_less | $one_check; $rep_check | $strand | $preempted | $noise | $slower |"
done <<<"$programs"
