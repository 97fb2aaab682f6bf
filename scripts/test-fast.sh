#!/usr/bin/env bash
# The fast test tier: everything that runs no traced process, in seconds once built.
#   engine      unit tests, hand-computed cases, the property test against an explicit dag
#   analysis    the pipeline on synthetic event streams (no ptrace)
#   report      model, exporters, export manager, --fail-below gates
#   marks       the .cilkview_marks reader on synthetic sections and bad files (its tests that
#               compile C fixtures, tests/fixtures_marks.rs, header.rs, elision.rs, are slow-tier)
#   events      the backend/analysis seam types
#   cilkview    the Rust marks crate: the serial order on the calling thread (its records test
#               builds the Rust fixtures with cargo: slow tier)
# The slow tier runs real programs under the tracer: `cargo test -p cilkview-tracer` and
# `cargo test -p cilkview-cli` (or `cargo test --workspace` for both tiers).
# Extra arguments go to cargo test (e.g. a test name filter).
set -euo pipefail
cd "$(dirname "$0")/.."
# (Target flags such as --test apply to every -p of one cargo call, hence three calls; the engine's
# long_run test streams 10^8 events and stays in the slow tier.)
cargo test -p cilkview-engine --lib --test cases --test dag_model "$@"
cargo test -p cilkview-marks --lib --test errors "$@"
cargo test -p cilkview-analysis -p cilkview-report -p cilkview-events --lib --tests "$@"
cargo test -p cilkview --test serial "$@"
