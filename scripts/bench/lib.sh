# shellcheck shell=bash
# scripts/bench/lib.sh -- what the benchmark scripts share (sourced, not run): the instructions a
# command executes, by callgrind (exact, repeatable, independent of the load), a run's
# wall-clock time, the median of a list, an example's ns-per-event figure, the CPU QEMU emulates.

# instructions CMD [ARGS...]: the instructions CMD executes under valgrind --tool=callgrind
# (its "Collected" total), CMD's own output dropped. Its child processes are counted where
# callgrind follows them (CALLGRIND_FLAGS, e.g. --trace-children=no, go before CMD). A variable
# assigned before the call (RAYON_NUM_THREADS=1 instructions …) reaches CMD.
instructions() {
    # shellcheck disable=SC2086 # CALLGRIND_FLAGS is a list of words
    valgrind --tool=callgrind --callgrind-out-file=/dev/null ${CALLGRIND_FLAGS:-} "$@" 2>&1 >/dev/null |
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}

# microseconds CMD [ARGS...]: the wall-clock time of one run of CMD, its output dropped.
microseconds() {
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000))
}

# median X...: the middle value of its arguments (numbers; the lower middle of an even count).
median() {
    printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

# ns_figure: the time per event of an example's output on standard input, its last "N ns/event"
# (throughput) or "N ns per hit" (session_throughput).
ns_figure() {
    grep -o '[0-9.]* ns[ /]\(per \)\?\(event\|hit\)' | tail -1 | cut -d' ' -f1
}

# emulated_cpu JSON: the `-cpu` model an emulated run used (the report's emulator note, whose
# detail reads `emulated CPU: -cpu MODEL`), for bare QEMU runs that compare with it.
emulated_cpu() {
    python3 - "$1" <<'PY'
import json, re, sys
counter = json.load(open(sys.argv[1]))["counter"]
said = " ".join(n.get("detail") or "" for n in counter.get("notes", []))
print(re.search(r"-cpu (\S+)", said).group(1))
PY
}

# counter_note JSON ID: the text of the report's counter note ID (e.g. `emulator`).
counter_note() {
    python3 -c 'import json,sys; print(next(n["text"] for n in json.load(open(sys.argv[1]))["counter"].get("notes", []) if n["id"] == sys.argv[2]))' "$1" "$2"
}
