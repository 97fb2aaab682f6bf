#!/usr/bin/env bash
# The analysis's cost per event, in one run: the engine alone (plain and --profile, the
# `throughput` example) and the session around it (`session_throughput`: packed decode, probe ->
# kind lookup, per-thread dispatch, nesting checks), as wall-clock ns per event with the ratios to
# the plain engine taken within this run, and, when valgrind is installed, as instructions per
# event under callgrind (the engine's rows: the engine alone, its batches' hand-over; load-independent: the difference between runs of N and 2N events,
# which cancels start-up and the report; session_throughput runs three passes, so its count is
# divided by 3N).
# Then, with valgrind, the native counter's tool per mark hit (callgrind on the tool alone, fib 20
# and 22: varies by ~10% between runs with the polls and context-switch records the load brings).
# Then the same with the analysis on its own thread, each thread per mark hit.
# Usage: scripts/bench-hot-path.sh [N]   (default: 10^7 events for timing; callgrind uses 10^6)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
n=${1:-10000000}
cargo build -q --release -p cilkview-engine --example throughput
cargo build -q --release -p cilkview-analysis --example session_throughput
engine=target/release/examples/throughput
session=target/release/examples/session_throughput
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
plain=$($engine "$n" | ns_figure)
profiled=$($engine "$n" --profile | ns_figure)
sess=$($session "$n" | ns_figure)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "| path | ns per event | vs plain engine |"
echo "|---|---:|---:|"
echo "| engine, plain | $plain | 1.00 |"
echo "| engine, --profile (3 sites) | $profiled | $(ratio "$profiled" "$plain") |"
echo "| session + engine (packed hits) | $sess | $(ratio "$sess" "$plain") |"
command -v valgrind >/dev/null || { echo "skipped: instructions per event (valgrind not installed)"; exit 0; }
per_event() { # per_event PASSES CMD [ARGS...]: (instructions at 2N - at N) / (PASSES x N)
    local passes=$1 one two
    shift
    local cmd=$1
    shift
    one=$(instructions "$cmd" 1000000 "$@")
    two=$(instructions "$cmd" 2000000 "$@")
    awk -v a="$one" -v b="$two" -v p="$passes" 'BEGIN { printf "%.1f", (b - a) / (p * 1000000) }'
}
echo
echo "| path (callgrind, 10^6 and 2*10^6 events) | instructions per event |"
echo "|---|---:|"
# The engine alone: only what runs inside the example's batches' hand-over (Sink::flush, i.e.
# Engine::process_batch) is counted; --per-event: each event handed over as it is generated, the
# generator's instructions counted too (how the example measured before it had batches).
alone() { CALLGRIND_FLAGS="--toggle-collect=*Sink*flush*" per_event "$@"; }
echo "| engine alone, plain (batches) | $(alone 1 $engine) |"
echo "| engine alone, plain, fib's calls, spawns and syncs only (--calls-only) | $(alone 1 $engine --calls-only) |"
echo "| engine alone, --profile (3 sites) | $(alone 1 $engine --profile) |"
echo "| engine alone, --profile, fib's calls, spawns and syncs only (--calls-only --profile) | $(alone 1 $engine --calls-only --profile) |"
echo "| engine and generator, plain, --per-event | $(per_event 1 $engine --per-event) |"
echo "| engine and generator, --profile, --per-event | $(per_event 1 $engine --profile --per-event) |"
echo "| session + engine (packed hits; the example's generator and packing included) | $(per_event 3 $session) |"
# The session and engine alone (Session::run_of_hits: not the example's generator and packing),
# on the plugin's two hits a word and on the native drain's one hit a word (--ones).
only_session() { CALLGRIND_FLAGS="--toggle-collect=*run_of_hits*" per_event 3 "$@"; }
echo "| session + engine alone (run_of_hits), two hits a word | $(only_session $session) |"
echo "| session + engine alone (run_of_hits), one hit a word (--ones) | $(only_session $session --ones) |"
# The native counter's tool per mark hit: the drain (ring, off-CPU intervals, ticks -> ns,
# packing) and the session and engine behind it, the tool's process alone (the program's own
# instructions are not counted: --trace-children=no), fib 20 and 22 (fixtures/fib.c, -O2).
cargo build -q --release -p cilkview-cli
tool=target/release/cilkview-rs
fib=$(mktemp -d)/fib
gcc -O2 -Icrates/cilkview-marks/include fixtures/fib.c -o "$fib"
tool_instructions() { # tool_instructions N [OPTIONS...]: the tool's own instructions measuring fib N
    local n=$1
    shift
    CALLGRIND_FLAGS=--trace-children=no instructions "$tool" run "$@" "$fib" "$n"
}
per_hit() { # per_hit OPTIONS...: the tool's instructions per mark hit from fib 20 to fib 22
    local one two
    one=$(tool_instructions 20 "$@")
    two=$(tool_instructions 22 "$@")
    awk -v a="$one" -v b="$two" -v h1="$(hits 20)" -v h2="$(hits 22)" 'BEGIN { printf "%.1f", (b - a) / (h2 - h1) }'
}
hits() { # hits N: the mark hits of fib N (the report's events)
    "$tool" run --counter native --json "$fib.json" "$fib" "$1" >/dev/null 2>&1
    sed -n 's/.*"events": *\([0-9]*\).*/\1/p' "$fib.json" | head -1
}
echo "| run --counter native, the tool per mark hit (fib 20 and 22) | $(per_hit --counter native) |"
# Under emulate the tool's process reads the plugin's ring (QEMU's instructions are not counted);
# with --profile it also writes the profiles (their drawing a cost per context, not per hit).
echo "| run --counter emulate, the tool per mark hit | $(per_hit --counter emulate) |"
echo "| run --counter emulate --profile, the tool per mark hit | $(per_hit --counter emulate --profile "$(dirname "$fib")/profile") |"
# The same with the analysis on a thread of its own (CILKVIEW_ANALYSIS_THREAD=1, the default on 3
# cores or more): each thread's instructions per hit (callgrind --separate-threads=yes: the
# tool's first thread drains and batches, the busiest other one is the analysis's).
thread_instructions() { # thread_instructions N: "DRAIN ANALYSIS", the two threads measuring fib N
    local out
    out=$(mktemp -d)
    CILKVIEW_ANALYSIS_THREAD=1 valgrind --tool=callgrind --trace-children=no --separate-threads=yes \
        --callgrind-out-file="$out/cg" "$tool" run --counter native "$fib" "$1" >/dev/null 2>&1
    local drain analysis
    drain=$(sed -n 's/^totals: //p' "$out/cg-01")
    analysis=$(find "$out" -name 'cg-*' ! -name 'cg-01' -exec sed -n 's/^totals: //p' {} + |
        sort -n | tail -1)
    rm -rf "$out"
    echo "$drain $analysis"
}
read -r d1 a1 < <(thread_instructions 20)
read -r d2 a2 < <(thread_instructions 22)
h=$(($(hits 22) - $(hits 20)))
echo "| the same, the analysis on its own thread: the drain's thread per mark hit | $(awk -v a="$d1" -v b="$d2" -v h="$h" 'BEGIN { printf "%.1f", (b - a) / h }') |"
echo "| the same, the analysis's thread per mark hit | $(awk -v a="$a1" -v b="$a2" -v h="$h" 'BEGIN { printf "%.1f", (b - a) / h }') |"
rm -rf "$(dirname "$fib")"
