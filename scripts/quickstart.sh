#!/usr/bin/env bash
# Builds cilkview-rs and analyzes the fib sample: the report goes to stderr, the JSON and gnuplot
# files (and, when gnuplot is installed, the plot) to out/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p cilkview-cli
mkdir -p out
# -static keeps the dynamic loader's ~100k serial instructions out of the measure (and out of
# single-stepping, on machines without a hardware instruction counter).
cc -O2 -static -I crates/cilkview-marks/include fixtures/fib.c -o out/fib 2>/dev/null ||
    cc -O2 -I crates/cilkview-marks/include fixtures/fib.c -o out/fib
target/release/cilkview-rs run --json out/fib.json --gnuplot out/fib out/fib -- "${1:-15}"
if command -v gnuplot >/dev/null; then
    (cd out && gnuplot fib.plt) && echo "plot: out/fib.png" >&2
else
    echo "gnuplot not installed: out/fib.plt is ready for it (apt-get install gnuplot-nox)" >&2
fi
