#!/usr/bin/env bash
# Engine throughput and peak memory at three run lengths (the engine alone, no tracing), without
# and with call-site profiling, and a profiled run with 10^6 distinct call sites.
# Usage: scripts/bench-engine.sh [N ...]   (default: 10^7 10^8 10^9 events)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p cilkview-engine --example throughput
cargo build -q --release -p cilkview-analysis --example session_throughput
bin=target/release/examples/throughput
session=target/release/examples/session_throughput
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for n in "${@:-10000000 100000000 1000000000}"; do
  for n1 in $n; do
    echo "plain:    $($bin "$n1")"
    echo "profiled: $($bin "$n1" --profile)"
  done
done
# The analysis session around the engine (probe lookup, per-thread engines, nesting checks,
# progress): fib's five marks per call, as a backend delivers them.
for n in "${@:-10000000 100000000}"; do
  for n1 in $n; do
    echo "session:  $($session "$n1")"
  done
done
# Many children out at once: frames of 10^6 spawned calls, then a sync (the profiler keeps each
# child's end until the sync: a later dependence may name it).
echo "plain, 10^6 children per sync:    $($bin 10000000 --children 1000000)"
echo "profiled, 10^6 children per sync: $($bin 10000000 --profile --children 1000000)"
# Memory proportional to the sites: 10^5 and 10^6 distinct sites, each invoked ~10 times.
for s in 100000 1000000; do
  echo "profiled, $s distinct sites: $($bin $((s * 90)) --profile --sites "$s")"
done
