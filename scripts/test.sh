#!/usr/bin/env bash
# The whole test suite, what CI runs (.ci/run): installs what the tests need (scripts/setup.sh),
# then runs both tiers, each test once:
#   fast  `cargo test --workspace`: every pure test (seconds once built); a test that starts a
#         process here fails, naming the convention (cilkview_fixtures::slow_tier)
#   slow  `cargo test --workspace -- --ignored`: the tests marked #[ignore = "slow: <what it
#         runs>"], which compile and run real programs (the tracer, QEMU, cargo, gnuplot, ...)
# (`cargo test --workspace -- --include-ignored` runs both in one go, without that check.)
# Then lists what was skipped here (cilkview_fixtures::skip: `N skipped:` and the reasons).
# Extra arguments go to both cargo test runs, before the `--` (e.g. a test name filter, -p CRATE).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test

target=$(cargo metadata --no-deps --format-version 1 |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
export CILKVIEW_SKIP_LOG="${target:-target}/test-skips.log"
mkdir -p "$(dirname "$CILKVIEW_SKIP_LOG")"
: >"$CILKVIEW_SKIP_LOG"

failed=()
cargo test --workspace --no-fail-fast "$@" || failed+=("fast")
cargo test --workspace --no-fail-fast "$@" -- --ignored || failed+=("slow")

echo
if [ -s "$CILKVIEW_SKIP_LOG" ]; then
    echo "$(wc -l <"$CILKVIEW_SKIP_LOG") skipped (package test: reason; $CILKVIEW_SKIP_LOG):"
    sort "$CILKVIEW_SKIP_LOG" | uniq -c |
        awk '{ n = $1; sub(/^ *[0-9]+ /, ""); print "  " (n > 1 ? n "× " : "") $0 }'
else
    echo "0 skipped"
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]} tier" >&2
    exit 1
fi
echo "both tiers passed"
