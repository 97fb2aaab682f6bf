#!/usr/bin/env bash
# --counter native against the program run natively, in one run so the numbers compare (timings
# here are noisy: read ratios; each time is the fastest of ROUNDS runs, native and traced
# interleaved). Prints a markdown table for docs/benchmarks.md:
#   - coarse floating-point programs: a double matmul of 8 chunks of 160^2 per round
#     (fixtures/coarse_matmul.c) and the 256^2 stencil (fixtures/stencil_outer.c);
#   - gzip -6 of 8 MB (unmarked: the fixed costs of the tool, ptrace and the set-up);
#   - a fine-grained fib with a mark hit every few instructions: the cost per mark hit end to end,
#     (traced - native) / hits, and on the program's thread: the same less the tool's fixed cost
#     (a traced /bin/true) and the time the program waited for the analysis (the reason says it).
#   - attach: the same programs started natively and attached to (--counter native) until they
#     exit, their wall time against unattached runs.
# Also the counter's reason (TSC frequency, the per-hit cost taken off each strand).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p cilkview-cli
bin=target/release/cilkview-rs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
inc="-I crates/cilkview-marks/include -I fixtures"
rounds=${ROUNDS:-5}
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" run --counter native --json "$work/c.json" /bin/true >/dev/null 2>&1
echo "counter: $(python3 -c "import json;print(json.load(open('$work/c.json'))['counter']['reason'])")"
cc -O2 $inc fixtures/coarse_matmul.c -o "$work/coarse_matmul"
cc -O2 $inc fixtures/stencil_outer.c -o "$work/stencil_outer"
cc -O2 $inc fixtures/fib.c -o "$work/fib"
head -c 6000000 /dev/urandom | base64 > "$work/gzip.in"  # ~8 MB of text
echo
fixed=$(python3 - "$bin" <<'PY'
import subprocess, sys, time
best = float("inf")
for _ in range(5):
    t0 = time.perf_counter()
    subprocess.run([sys.argv[1], "run", "--counter", "native", "/bin/true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    best = min(best, time.perf_counter() - t0)
print(f"{best:.4f}")
PY
)
echo "fixed cost of a traced run (/bin/true): $fixed s"
echo
echo "| program | marks hit | native s | --counter native s | ratio | per hit, end to end | per hit, program's thread |"
echo "|---|---:|---:|---:|---:|---:|---:|"
while IFS='|' read -r label cmd; do
    # shellcheck disable=SC2086
    read -r nw tw hits waited < <(python3 - "$rounds" "$bin" "$work/r.json" $cmd <<'PY'
import re, sys
sys.path.insert(0, "scripts/bench")
from traced_rounds import fastest
rounds, tool, js, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
def waited_of(r):  # seconds the program waited for the analysis (the counter's notes)
    says = " ".join([r["counter"]["reason"]] + [n["text"] for n in r["counter"].get("notes", [])])
    m = re.search(r"waited for the analysis at \d+ mark hits, ([0-9.]+) ms", says)
    return float(m.group(1)) / 1e3 if m else 0.0
native, traced, _, r = fastest(rounds, tool, "native", js, cmd)
waited = waited_of(r)
print(f"{native:.4f} {traced:.4f} {r['events']} {waited:.4f}")
PY
)
    python3 - "$label" "$hits" "$nw" "$tw" "$waited" "$fixed" <<'PY'
import sys
label, hits = sys.argv[1], int(sys.argv[2])
nw, tw, waited, fixed = map(float, sys.argv[3:7])
per = f"{(tw - nw) / hits * 1e9:.1f} ns" if hits > 100000 else "-"
own = f"{max(tw - nw - waited - fixed, 0) / hits * 1e9:.1f} ns" if hits > 100000 else "-"
print(f"| {label} | {hits:,} | {nw:.3f} | {tw:.3f} | {tw / nw:.2f}x | {per} | {own} |")
PY
done <<EOF2
coarse double matmul, 8 chunks of 160^2 x 48 rounds|$work/coarse_matmul 48
stencil 256^2 x 2000 steps (FP)|$work/stencil_outer 256 2000
gzip -6, 8 MB (no marks)|$(command -v gzip) -6 -c $work/gzip.in
fib 30 (fully marked, fine-grained)|$work/fib 30
fib 32 (fully marked, fine-grained)|$work/fib 32
EOF2

# attach at the same speed: each program started natively, `cilkview-rs attach --counter native`
# 20 ms after its start (the stencil runs 4x longer than above, the attach missing less of it) and
# until it exits; its own wall time (start to exit) against unattached
# runs and `run --counter native`, the fastest of ROUNDS each, interleaved. (A program of a few
# ms, fib 32, ends before an attach; the stencil is the fine-grained one here.)
echo
echo "| attach, until the program exits | marks hit while attached | native s | run --counter native s | attached s | ratio, attached / native |"
echo "|---|---:|---:|---:|---:|---:|"
while IFS='|' read -r label cmd; do
    rm -f "$work/a.json"
    # shellcheck disable=SC2086
    python3 - "$label" "$rounds" "$bin" "$work/a.json" $cmd <<'PY'
import json, subprocess, sys, time
label, rounds, tool, js, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def run(how):
    t0 = time.perf_counter()
    if how == "run":
        subprocess.run([tool, "run", "--counter", "native"] + cmd, **quiet)
        return time.perf_counter() - t0
    p = subprocess.Popen(cmd, **quiet)
    if how == "attach":
        time.sleep(0.02)
        a = subprocess.Popen([tool, "attach", "--counter", "native", "--duration", "600",
                              "--json", js, str(p.pid)], **quiet)
    p.wait()
    t = time.perf_counter() - t0
    if how == "attach":
        a.wait()
    return t
best = {how: float("inf") for how in ("native", "run", "attach")}
for _ in range(rounds):
    for how in best:
        best[how] = min(best[how], run(how))
hits = json.load(open(js))["events"]
n, r, a = best["native"], best["run"], best["attach"]
print(f"| {label} | {hits:,} | {n:.3f} | {r:.3f} | {a:.3f} | {a / n:.2f}x |")
PY
done <<EOF2
coarse double matmul, 8 chunks of 160^2 x 48 rounds|$work/coarse_matmul 48
stencil 256^2 x 8000 steps (FP)|$work/stencil_outer 256 8000
EOF2
