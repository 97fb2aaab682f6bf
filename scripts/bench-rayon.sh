#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# A rayon program nobody here wrote, measured by time and exactly: rayon-demo's parallel
# mergesort (https://github.com/rayon-rs/rayon, rayon-demo/src/mergesort/mod.rs: `rsort`,
# `rsort_into`, `rmerge`, `seq_merge`), its `rayon::join` made `cilkview::join` (the same call
# with the marks), built at run time against this repository's `cilkview` crate (never
# committed: the demo is rayon's), sorting N pseudo-random u32 inside region "sort".
#
#   scripts/bench-rayon.sh RAYON_DIR [N]       (a checkout of rayon; N default 4000000)
#
# Prints, for the region: parallelism by `--counter emulate` (exact), by `--counter native` in
# one run and with `--repeat 5`, and the whole program's work by time against its CPU time in
# the same traced run (scripts/bench/cpu_at_exit.c, preloaded); and the critical path's time per
# instruction against the work's (`report --against`). Environment: TOOL (a cilkview-rs built
# already; default: cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
src=${1:-}
n=${2:-4000000}
[ -f "$src/rayon-demo/src/mergesort/mod.rs" ] || [ -d "$src/.git" ] || [ -f "$src/HEAD" ] ||
    { echo "usage: $0 RAYON_DIR [N] (a rayon checkout)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${TOOL:-}" ]; then
    cargo build --release --quiet -p cilkview-cli
    TOOL=$repo/target/release/cilkview-rs
fi
if [ -f "$src/rayon-demo/src/mergesort/mod.rs" ]; then
    demo=$(cat "$src/rayon-demo/src/mergesort/mod.rs")
else # a bare mirror
    demo=$(git -C "$src" show HEAD:rayon-demo/src/mergesort/mod.rs)
fi

mkdir -p "$work/ms/src"
cat >"$work/ms/Cargo.toml" <<EOF
[package]
name = "mergesort"
version = "0.1.0"
edition = "2021"
[dependencies]
cilkview = { path = "$repo/crates/cilkview" }
[profile.release]
debug = true
[workspace]
EOF
{
    # The algorithm: from its imports to the end of seq_merge (before its tests and benches).
    printf '%s\n' "$demo" | sed -n '/^use std::mem::MaybeUninit;/,/^#\[test\]/p' | sed '$d' |
        sed 's/rayon::join/cilkview::join/g'
    cat <<'EOF'

fn main() {
    let n: usize = std::env::args().nth(1).map_or(4_000_000, |s| s.parse().unwrap());
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut v: Vec<u32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        })
        .collect();
    {
        let _region = cilkview::region!("sort");
        merge_sort(&mut v);
    }
    assert!(v.windows(2).all(|w| w[0] <= w[1]));
    println!("sorted {n}");
}
EOF
} >"$work/ms/src/main.rs"
CARGO_TARGET_DIR=$work/target cargo build --release --quiet --offline --manifest-path "$work/ms/Cargo.toml"
exe=$work/target/release/mergesort
gcc -O2 -shared -fPIC scripts/bench/cpu_at_exit.c -o "$work/cpu_at_exit.so"

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg); rayon $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo "$src"); $(rustc --version)"
"$TOOL" run --counter emulate --json "$work/exact.json" "$exe" "$n" >/dev/null 2>"$work/exact.err" ||
    { cat "$work/exact.err" >&2; exit 1; }
for how in "native" "native --repeat 5"; do
    tag=${how// /_}
    # shellcheck disable=SC2086
    env "LD_PRELOAD=$work/cpu_at_exit.so" "$TOOL" run --counter $how --json "$work/$tag.json" \
        "$exe" "$n" >/dev/null 2>"$work/$tag.err"
    "$TOOL" report "$work/$tag.json" --against "$work/exact.json" --json "$work/$tag.against.json" \
        2>/dev/null
done
python3 - "$work" <<'PY'
import json, re, statistics, sys
work = sys.argv[1]
def region(r):
    return next(g for g in r["regions"] if g["label"] == "sort")
exact = json.load(open(f"{work}/exact.json"))
print(f"\n| | parallelism of region sort | work / CPU time (same run) | the report's CPU check | span's time per instruction / the work's |")
print("|---|---:|---:|---:|---:|")
print(f"| exact (emulate) | {region(exact)['parallelism']:,.1f} | | | |")
sys.path.insert(0, "scripts/bench")
from tool_share import accounted
for tag, name in [("native", "native, 1 run"), ("native_--repeat_5", "native `--repeat 5`")]:
    r = json.load(open(f"{work}/{tag}.json"))
    cpus = [float(m[1]) + float(m[2]) for m in
            re.finditer(r"CPUAT \d+ ([0-9.]+) ([0-9.]+) \d+ mergesort\n", open(f"{work}/{tag}.err").read())]
    cpu = statistics.median(cpus) * 1e9
    a = json.load(open(f"{work}/{tag}.against.json"))["against"]["parts"]
    slower = next(p for p in a if p["label"] == "sort")["span_slower"]
    # The report's own check (`cpu-time` note): work, hits' cost and waits over the program's
    # CPU time by the kernel's count, less the tool's stops.
    share = accounted(r)
    check = f"{share:.2f}" if share is not None else "-"
    print(f"| {name} | {region(r)['parallelism']:,.1f} | {r['work'] / cpu:.2f} | {check} | {slower:.1f}x |")
PY
