"""A program run natively and under `cilkview-rs run`, in turn, for the bench scripts that set
the tool's wall time against the program's (bench-native.sh, bench-targets.sh).

Both runs discard the program's output; each round runs the program natively, then traced with
`--json`, so that a noisy stretch of the machine slows both alike. The fastest traced run's
report is kept (its notes say that run's waits and CPU time)."""
import json, os, subprocess, time


def timed(cmd):
    """Wall and CPU seconds (user + system of the command and its children) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime


def fastest(rounds, tool, counter, report_path, cmd):
    """(the fastest native wall time, the fastest traced run's wall time, its CPU time, its JSON
    report) over `rounds` rounds of `cmd`, traced by `tool run --counter COUNTER`."""
    native = traced = float("inf")
    cpu, report = None, None
    for _ in range(rounds):
        native = min(native, timed(cmd)[0])
        wall, c = timed([tool, "run", "--counter", counter, "--json", report_path] + cmd)
        if wall < traced:
            traced, cpu = wall, c
            with open(report_path) as f:
                report = json.load(f)
    return native, traced, cpu, report
