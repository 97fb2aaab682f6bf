#!/usr/bin/env bash
# Counting cost on this machine, all in one run so the numbers compare (timings here are noisy:
# read ratios). Prints markdown tables for docs/benchmarks.md:
#   - native vs --counter emulate vs --counter step, per fixture (step only where it takes seconds),
#     a fine-grained fib with >= 25 million mark hits (also against bare QEMU and QEMU with a plugin
#     that only counts, scripts/bench/count_plugin.c, and on one CPU) and a coarse program (in turn
#     with native, bare QEMU and the counting-only plugin);
#   - the cost of a mark hit under emulation (marked vs -DCILKVIEW_DISABLE, both emulated);
#   - peak memory (tool + emulated program) from 10^7 to 10^9 instructions;
#   - bare costs: a ptrace stop at an int3, one PTRACE_SINGLESTEP (scripts/bench/ptrace_cost.c);
#   - cilkview-rs per fixture: instructions, marks hit, native time, traced time, overhead ratio,
#     instructions per second, and the cost per mark hit: traced time of the marked binary minus
#     that of its serial elision (the same instructions but the marks' NOPs) over the marks hit —
#     in single-step mode that is the NOP's own step plus the handling of the hit.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
cargo build --release --quiet -p cilkview-cli
bin=target/release/cilkview-rs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
inc="-I crates/cilkview-marks/include -I fixtures"
cc -O2 scripts/bench/ptrace_cost.c -o "$work/ptrace_cost"
# QEMU with a plugin that only counts (the floor of exact counting; scripts/bench/count_plugin.c)
cc -O2 -shared -fPIC -I crates/cilkview-qemu-plugin/plugin scripts/bench/count_plugin.c \
    -o "$work/count_plugin.so"
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F)"
counter=$("$bin" run --json "$work/c.json" /bin/true 2>/dev/null; python3 -c "import json;c=json.load(open('$work/c.json'))['counter'];print(c['mode']+': '+c['reason'])")
echo "counter (auto): $counter"
"$work/ptrace_cost" 20000 | sed 's/^/bare, two CPUs: /'
taskset -c 0 "$work/ptrace_cost" 20000 | sed 's/^/bare, one CPU:  /'

secs() { # seconds taken by a command, stdout/stderr discarded
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
    python3 -c "print(f'{$t1 - $t0:.3f}')"
}

# time_of CMD...: "wall cpu maxrss_kib" of a command, the fastest of 3 runs (cpu: user+sys of the
# command and its children, e.g. QEMU; maxrss: the largest process of the tree)
time_of() {
    python3 scripts/bench/timeit.py 3 "$@"
}
if "$bin" run --counter emulate --json "$work/e.json" /bin/true >/dev/null 2>&1; then
    echo
    cpu=$(emulated_cpu "$work/e.json")
    echo "Emulation: $(counter_note "$work/e.json" emulator), -cpu $cpu"
    echo
    echo "| program (args) | instructions | marks hit | native s (cpu) | emulate s (cpu) | emulate / native | step s | step / native |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    while IFS='|' read -r name args step; do
        cc -O2 -static $inc "fixtures/$name.c" -o "$work/$name"
        read -r nw nc _ < <(time_of "$work/$name" $args)
        read -r ew ec _ < <(time_of "$bin" run --counter emulate --json "$work/$name.json" "$work/$name" $args)
        if [ "$step" = step ]; then
            read -r sw sc _ < <(time_of "$bin" run --counter step "$work/$name" $args)
        else
            sw=-; sc=-
        fi
        python3 - "$name" "$args" "$work/$name.json" "$nw" "$nc" "$ew" "$ec" "$sw" <<'PY'
import json, sys
name, args, path = sys.argv[1:4]
nw, nc, ew, ec = map(float, sys.argv[4:8])
sw = sys.argv[8]
r = json.load(open(path))
w, e = r["work"], r["events"]
ratio = lambda a, b: f"{a / max(b, 1e-3):,.1f}×"
step = f"{float(sw):.2f} | {ratio(float(sw), nw)}" if sw != "-" else "– | –"
print(f"| {name} ({args}) | {w:,} | {e:,} | {nw:.4f} ({nc:.4f}) | {ew:.3f} ({ec:.3f}) | {ratio(ew, nw)} wall, {ratio(ec, nc)} cpu | {step} |")
PY
    done <<'LIST'
known_spawn||step
known_loop|1|step
known_regions||step
fib|15|step
nqueens|6|step
fib|33|-
fib|38|-
fib_cutoff|34|-
fib_cutoff|38|-
nqueens|11|-
matmul|256|-
stencil_outer|256 400|-
LIST
    echo
    echo "Fine-grained fib against the targets, native, bare QEMU, QEMU with a plugin that only counts"
    echo "(scripts/bench/count_plugin.c: the floor of exact counting) and emulate run in turn, 31 rounds"
    echo "(15 for fib_cutoff 38; fastest and median: the ratios of single runs on this VM vary by up to"
    echo "±50%; \"per round\": the median of each round's ratio to native's time in that round). The last"
    echo "column: the tool on one CPU (\`taskset -c 0\`: QEMU and the analysis share it; the program has"
    echo "one thread, so native is the same either way). Host steal: the share of the two vCPUs' time"
    echo "the host took while the tool (on two CPUs) ran (/proc/stat; 0 on a quiet host):"
    echo
    echo "| program (args) | marks hit | instructions per hit | native s | bare QEMU s | emulate s | bare QEMU / native | emulate / native (fastest) | emulate / native (median) | bare QEMU / native, per round | counting only / native, per round | emulate / native, per round | emulate on one CPU / native, per round | host steal |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for fib in "fib_cutoff 34 31" "fib_cutoff 38 15" "fib 33 31"; do
        set -- $fib  # program, n, rounds (the short runs get more: their medians move most)
        "$bin" run --counter emulate --json "$work/t.json" "$work/$1" $2 >/dev/null 2>&1
        python3 scripts/bench/interleave.py "$3" "native=$work/$1 $2" "qemu=qemu-x86_64 -cpu $cpu $work/$1 $2" \
            "counting=qemu-x86_64 -cpu $cpu -plugin $work/count_plugin.so $work/$1 $2" \
            "emulate=$bin run --counter emulate $work/$1 $2" \
            "one_cpu=taskset -c 0 $bin run --counter emulate $work/$1 $2" > "$work/t.txt"
        python3 - "$1 $2" "$work/t.json" "$work/t.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
t = {l.split()[0]: tuple(map(float, l.split()[1:])) for l in open(sys.argv[3])}
(nf, nm), (qf, qm), (ef, em) = (t[k][:2] for k in ("native", "qemu", "emulate"))
qp, cp, ep, op = t["qemu"][4], t["counting"][4], t["emulate"][4], t["one_cpu"][4]
print(f"| {sys.argv[1]} | {r['events']:,} | {r['work'] / r['events']:.1f} | {nf:.4f} / {nm:.4f} | "
      f"{qf:.3f} / {qm:.3f} | {ef:.3f} / {em:.3f} | {qf / nf:.1f}× | {ef / nf:.1f}× | {em / nm:.1f}× | "
      f"{qp:.1f}× | {cp:.1f}× | {ep:.1f}× | {op:.1f}× | {t['emulate'][5]:.1f}% |")
PY
    done
    echo
    echo "Coarse programs against bare QEMU (the same -cpu, no plugin, no analysis) and QEMU with the"
    echo "plugin that only counts, in turn, 7 rounds: gzip -6 of 8 MB (the issue's and the prototype's"
    echo "coarse program; unmarked, so all counting, no hit), nqueens 11 (fastest; \"per round\" as above):"
    echo
    echo "| program | native s | bare QEMU s | counting only s | emulate s | bare QEMU / native (fastest) | emulate / native (fastest) | bare QEMU / native, per round | counting only / native, per round | emulate / native, per round | emulate / bare QEMU (the two per round) | host steal |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    head -c 6000000 /dev/urandom | base64 > "$work/gzip.in"  # ~8 MB of text
    for prog in "$(command -v gzip) -6 -c $work/gzip.in" "$work/nqueens 11"; do
        python3 scripts/bench/interleave.py 7 "native=$prog" "qemu=qemu-x86_64 -cpu $cpu $prog" \
            "counting=qemu-x86_64 -cpu $cpu -plugin $work/count_plugin.so $prog" \
            "emulate=$bin run --counter emulate $prog" > "$work/c.txt"
        python3 - "$(basename "${prog%% *}")" "$work/c.txt" <<'PY'
import sys
t = {l.split()[0]: tuple(map(float, l.split()[1:])) for l in open(sys.argv[2])}
n, q, c, e = (t[k][0] for k in ("native", "qemu", "counting", "emulate"))
qp, cp, ep = (t[k][4] for k in ("qemu", "counting", "emulate"))
print(f"| {sys.argv[1]} | {n:.3f} | {q:.3f} | {c:.3f} | {e:.3f} | {q / n:.1f}× | {e / n:.1f}× | "
      f"{qp:.2f}× | {cp:.2f}× | {ep:.2f}× | {ep / qp:.2f}× | {t['emulate'][5]:.1f}% |")
PY
    done
    echo
    echo "Cost of a mark hit under emulation (marked vs its serial elision, both emulated, in turn,"
    echo "9 rounds; CPU of the tool and QEMU together, and wall time; least and median):"
    echo
    for fib in "fib 32" "fib_cutoff 34"; do
        set -- $fib
        cc -O2 -static $inc "fixtures/$1.c" -o "$work/$1m"
        cc -O2 -static -DCILKVIEW_DISABLE $inc "fixtures/$1.c" -o "$work/$1e"
        "$bin" run --counter emulate --json "$work/$1m.json" "$work/$1m" $2 >/dev/null 2>&1
        "$bin" run --counter emulate --json "$work/$1e.json" "$work/$1e" $2 >/dev/null 2>&1
        python3 scripts/bench/interleave.py 9 "marked=$bin run --counter emulate $work/$1m $2" \
            "elided=$bin run --counter emulate $work/$1e $2" > "$work/h.txt"
        python3 - "$fib" "$work/$1m.json" "$work/$1e.json" "$work/h.txt" <<'PY'
import json, sys
m, x = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
t = {l.split()[0]: tuple(map(float, l.split()[1:])) for l in open(sys.argv[4])}
(mw, mwm, mc, mcm), (xw, xwm, xc, xcm) = t["marked"][:4], t["elided"][:4]
hits = m["events"]
ns = lambda a, b: (a - b) / hits * 1e9
print(f"- {sys.argv[1]}: {hits:,} mark hits ({m['work'] - x['work']:,} more instructions executed "
      f"by the marked build): CPU {ns(mc, xc):.1f} ns per mark hit (median {ns(mcm, xcm):.1f}), "
      f"plugin, ring and analysis included; wall {ns(mw, xw):.1f} ns (median {ns(mwm, xwm):.1f})")
PY
    done
    echo
    echo "Peak memory (max RSS of the tool and the emulated program) as the run grows:"
    echo
    echo "| fib n | instructions | marks hit | emulate s | peak RSS KiB |"
    echo "|---:|---:|---:|---:|---:|"
    for n in 28 33 38; do
        read -r ew _ rss < <(time_of "$bin" run --counter emulate --json "$work/m$n.json" "$work/fibm" $n)
        python3 -c "import json;r=json.load(open('$work/m$n.json'));print(f\"| {$n} | {r['work']:,} | {r['events']:,} | $ew | $rss |\")"
    done
fi

echo
echo "Single-stepping (--counter step) per fixture:"
echo
echo "| fixture (args) | instructions | marks hit | native s | traced s | overhead | instr/s traced | µs per mark hit (≥1000 hits) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
while read -r name args; do
    cc -O2 -static $inc "fixtures/$name.c" -o "$work/$name"
    cc -O2 -static -DCILKVIEW_DISABLE $inc "fixtures/$name.c" -o "$work/$name.elided"
    native=$(secs "$work/$name" $args)
    traced=$(secs "$bin" run --counter step --json "$work/$name.json" "$work/$name" -- $args)
    elided=$(secs "$bin" run --counter step "$work/$name.elided" -- $args)
    python3 - "$name" "$args" "$work/$name.json" "$native" "$traced" "$elided" <<'PY'
import json, sys
name, args, path, native, traced, elided = sys.argv[1], sys.argv[2], sys.argv[3], *map(float, sys.argv[4:])
r = json.load(open(path))
w, e = r["work"], r["events"]
# Below ~1000 hits the difference is lost in the timing noise of a VM: not reported.
per_hit = f"{(traced - elided) / e * 1e6:.0f}" if e >= 1000 else "–"
print(f"| {name} ({args}) | {w:,} | {e:,} | {native:.3f} | {traced:.2f} | {traced / max(native, 1e-3):,.0f}× | {w / traced:,.0f} | {per_hit} |")
PY
done <<'LIST'
known_spawn
known_scope
known_loop 1
known_regions
fib 15
fib 18
snippet_a 100
snippet_b 100
stencil_outer 32 1
stencil_inner 32 1
LIST
