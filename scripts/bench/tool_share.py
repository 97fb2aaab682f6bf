"""What a native report says the tool took from the program's CPU time, for the bench scripts
that set work against CPU time (bench-cilk5.sh, bench-bots.sh).

Each mark hit's stub (the cost the counter measured in the program, else at start-up) times the
hits, and the program's waits for the analysis, read from the counter's notes of a JSON report.
The hit's cost is the tool's own measurement, taken off the work too: a ratio of work to the CPU
time less this checks that no other time is lost or counted twice, not that cost (the fine
tree's test against the same tree unmarked does: docs/benchmarks.md, "Fine strands"). The notes
are of one run (with --repeat, of the run whose work the report's is: `counter.noise.median_run`).
"""
import re


def taken_ns(report):
    """Nanoseconds of the program's CPU time that were the tool's, or None if unknown."""
    notes = " ".join(n["text"] for n in report["counter"].get("notes", []))
    # The cpu-time note's figures: the hits' cost as taken off the strands (the estimate moves
    # during the run), the waits on the program's CPU.
    cpu = re.search(r"mark hits' cost \(([0-9.]+) ms\) and its waits for the analysis "
                    r"\(([0-9.]+) ms\)", notes)
    if cpu:
        return (float(cpu[1]) + float(cpu[2])) * 1e6
    hit = re.search(r"a mark hit cost ([0-9.]+) ns in the program", notes) or re.search(
        r"([0-9.]+) ns per mark hit measured at start-up", notes)
    if not hit:
        return None
    waited = re.search(r"waited for the analysis at \d+ mark hits, ([0-9.]+) ms", notes)
    return report["events"] * float(hit[1]) + (float(waited[1]) * 1e6 if waited else 0)


def accounted(report):
    """The report's own check of a time measurement (the native counter's `cpu-time` note): the
    share of the program's CPU time (the kernel's count, less the tool's stops) that the work,
    the mark hits' cost and the waits account for, as a fraction; None if the report has none."""
    for note in report["counter"].get("notes", []):
        if note["id"] == "cpu-time":
            share = re.search(r"account for ([0-9.]+)%", note["text"])
            return float(share[1]) / 100 if share else None
    return None
