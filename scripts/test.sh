#!/usr/bin/env bash
# The whole test suite, both tiers (the fast one: scripts/test-fast.sh): installs what the tests
# need (scripts/setup.sh), then `cargo test --workspace`. What CI runs (.ci/run). Extra arguments
# go to cargo test (e.g. a test name filter).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
cargo test --workspace "$@"
