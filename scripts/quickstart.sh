#!/usr/bin/env bash
# From a fresh clone: installs what is missing (scripts/setup.sh), builds cilkview-rs (cargo's
# progress shown) and analyzes the fib sample: the report goes to stderr, the JSON and gnuplot
# files (and, with gnuplot, the plot) to out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "quickstart: building cilkview-rs (cargo build --release: about two minutes the first time on 2 cores)" >&2
cargo build --release -p cilkview-cli
mkdir -p out
# -static keeps the dynamic loader's ~100k serial instructions out of the measure (the report
# of a small dynamically linked run is mostly the loader's start-up; link your programs
# statically too when their runs are short).
cc -O2 -static -I crates/cilkview-marks/include fixtures/fib.c -o out/fib 2>/dev/null ||
    cc -O2 -I crates/cilkview-marks/include fixtures/fib.c -o out/fib
target/release/cilkview-rs run --json out/fib.json --gnuplot out/fib out/fib -- "${1:-15}"
if command -v gnuplot >/dev/null; then
    gnuplot out/fib.plt && echo "plot: out/fib.png" >&2
else
    echo "gnuplot not installed: out/fib.plt is ready for it (apt-get install gnuplot-nox)" >&2
fi
