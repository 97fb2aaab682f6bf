#!/usr/bin/env python3
"""interleave.py N LABEL=CMD ...: run the commands in turn, N rounds (stdout/stderr discarded), so
that a noisy stretch of the machine hits all of them alike; print per label the fastest and the
median wall seconds, then the least and the median CPU seconds (user + system of the command and
its children), then the median over the rounds of the ratio of the command's wall time to the
first command's in the same round (a slow stretch of the machine slows both alike), then the
share of the machine's CPU time the host took (steal, /proc/stat) while the command ran, in
percent: `LABEL wall_fastest wall_median cpu_least cpu_median paired_median steal_percent`.
CMD is split on spaces."""
import os, statistics, subprocess, sys, time


def steal_ticks():
    """The machine's steal time so far, in clock ticks (0 where the kernel does not say)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0


n = int(sys.argv[1])
cmds = [arg.split("=", 1) for arg in sys.argv[2:]]
runs = {label: [] for label, _ in cmds}
ticks_per_cpu_second = os.sysconf("SC_CLK_TCK") * os.cpu_count()
for _ in range(n):
    for label, cmd in cmds:
        s0, t0 = steal_ticks(), time.perf_counter()
        p = subprocess.Popen(cmd.split(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        wall, stolen = time.perf_counter() - t0, steal_ticks() - s0
        runs[label].append((wall, ru.ru_utime + ru.ru_stime, stolen))
first = [w for w, _, _ in runs[cmds[0][0]]]
for label, r in runs.items():
    wall, cpu = [w for w, _, _ in r], [c for _, c, _ in r]
    paired = statistics.median(w / f for w, f in zip(wall, first))
    steal = 100 * sum(s for _, _, s in r) / (sum(wall) * ticks_per_cpu_second)
    print(f"{label} {min(wall):.4f} {statistics.median(wall):.4f} "
          f"{min(cpu):.4f} {statistics.median(cpu):.4f} {paired:.3f} {steal:.1f}")
