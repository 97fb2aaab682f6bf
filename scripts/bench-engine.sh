#!/usr/bin/env bash
# Engine throughput and peak memory at three run lengths (the engine alone, no tracing).
# Usage: scripts/bench-engine.sh [N ...]   (default: 10^7 10^8 10^9 events)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p cilkview-engine --example throughput
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for n in "${@:-10000000 100000000 1000000000}"; do
  for n1 in $n; do target/release/examples/throughput "$n1"; done
done
