#!/usr/bin/env bash
# What the Rust `cilkview` crate's marks cost a program: the Rust fixtures built with the crate's
# marks (default feature `marks`) and without them (--no-default-features: the serial elision),
# release profile without LTO (a user's default), compared by
#   - instructions executed with RAYON_NUM_THREADS=1 (the run `cilkview-rs run` measures: the
#     crate runs everything on the calling thread), by valgrind --tool=callgrind ("Collected"),
#     exact and repeatable;
#   - wall time, median of RUNS runs, the marked and elided builds interleaved, serial
#     (RAYON_NUM_THREADS=1) and on rayon's pool (all cores).
# Prints a markdown table for docs/benchmarks.md and crates/cilkview/README.md.
#
# Usage: scripts/bench-rust-marks.sh          Environment: RUNS (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs=${RUNS:-5}
tool=target/release/cilkview-rs
[[ -x $tool ]] || tool=target/debug/cilkview-rs

# fixture, arguments under callgrind (~10-50M instructions), arguments for timing (~0.2-1 s).
# Only the fine-grained fixtures: the others are made of burn loops, which no mark slows down.
cases=(
    "rs_fib_cutoff 24,3 36,3"
    "rs_fib_cutoff 24,12 38,12"
    "rs_scale 100000,10,1 2000000,100,1"
    "rs_scale 100000,10,1024 2000000,100,1024"
)

build() { # target dir, cargo flags...
    local target=$1
    shift
    cargo build -q --release --bins -p cilkview-rust-fixtures --target-dir "$target" \
        --config profile.release.lto=false "$@"
}
build "$work/marked"
build "$work/elided" --no-default-features


echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F)"
echo "$(rustc --version); release profile, lto off; median of $runs runs, marked and elided interleaved"
echo
echo "| program (instr. args / time args) | instructions, marked | elision | extra | per mark hit | time 1 thread, marked | elision | ratio | time $(nproc) threads, marked | elision | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for case in "${cases[@]}"; do
    read -r name iargs targs <<<"$case"
    IFS=, read -r -a ia <<<"$iargs"
    IFS=, read -r -a ta <<<"$targs"
    m=$work/marked/release/$name
    e=$work/elided/release/$name
    if [[ $(RAYON_NUM_THREADS=1 "$m" "${ia[@]}") != $(RAYON_NUM_THREADS=1 "$e" "${ia[@]}") ]]; then
        echo "error: $name: marked and elided builds print different results" >&2
        exit 1
    fi
    im=$(RAYON_NUM_THREADS=1 instructions "$m" "${ia[@]}")
    ie=$(RAYON_NUM_THREADS=1 instructions "$e" "${ia[@]}")
    # Mark hits: the marked build's NOPs executed, counted by cilkview-rs (emulation) if built.
    hits=-
    if [[ -x $tool ]]; then
        hits=$("$tool" run --counter emulate --json "$work/r.json" "$m" "${ia[@]}" \
            >/dev/null 2>&1 && python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"])' "$work/r.json" || echo -)
    fi
    s1m=() s1e=() spm=() spe=()
    for _ in $(seq "$runs"); do
        s1m+=("$(RAYON_NUM_THREADS=1 microseconds "$m" "${ta[@]}")")
        s1e+=("$(RAYON_NUM_THREADS=1 microseconds "$e" "${ta[@]}")")
        spm+=("$(RAYON_NUM_THREADS="$(nproc)" microseconds "$m" "${ta[@]}")")
        spe+=("$(RAYON_NUM_THREADS="$(nproc)" microseconds "$e" "${ta[@]}")")
    done
    python3 - "$name" "$iargs" "$targs" "$im" "$ie" "$hits" \
        "$(median "${s1m[@]}")" "$(median "${s1e[@]}")" "$(median "${spm[@]}")" "$(median "${spe[@]}")" <<'PY'
import sys
name, iargs, targs = sys.argv[1:4]
im, ie = int(sys.argv[4]), int(sys.argv[5])
hits = sys.argv[6]
s1m, s1e, spm, spe = (int(x) for x in sys.argv[7:11])
per = f"{(im - ie) / int(hits):.2f} ({int(hits):,} hits)" if hits.isdigit() and int(hits) else "-"
print(f"| {name} ({iargs.replace(',', ' ')} / {targs.replace(',', ' ')}) | {im:,} | {ie:,} | "
      f"{(im / ie - 1) * 100:+.1f}% | {per} | {s1m / 1e6:.3f} s | {s1e / 1e6:.3f} s | {s1m / s1e:.2f} | "
      f"{spm / 1e6:.3f} s | {spe / 1e6:.3f} s | {spm / spe:.2f} |")
PY
done
