#!/usr/bin/env python3
"""interleave.py N LABEL=CMD ...: run the commands in turn, N rounds (stdout/stderr discarded), so
that a noisy stretch of the machine hits all of them alike; print per label the fastest and the
median wall seconds, then the least and the median CPU seconds (user + system of the command and
its children), then the median over the rounds of the ratio of the command's wall time to the
first command's in the same round (a slow stretch of the machine slows both alike): `LABEL
wall_fastest wall_median cpu_least cpu_median paired_median`. CMD is split on spaces."""
import os, statistics, subprocess, sys, time

n = int(sys.argv[1])
cmds = [arg.split("=", 1) for arg in sys.argv[2:]]
runs = {label: [] for label, _ in cmds}
for _ in range(n):
    for label, cmd in cmds:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd.split(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        runs[label].append((time.perf_counter() - t0, ru.ru_utime + ru.ru_stime))
first = [w for w, _ in runs[cmds[0][0]]]
for label, r in runs.items():
    wall, cpu = [w for w, _ in r], [c for _, c in r]
    paired = statistics.median(w / f for w, f in zip(wall, first))
    print(f"{label} {min(wall):.4f} {statistics.median(wall):.4f} "
          f"{min(cpu):.4f} {statistics.median(cpu):.4f} {paired:.3f}")
