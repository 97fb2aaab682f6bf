#!/usr/bin/env python3
"""interleave.py N LABEL=CMD ...: run the commands in turn, N rounds (stdout/stderr discarded), so
that a noisy stretch of the machine hits all of them alike; print per label the fastest and the
median wall seconds: `LABEL fastest median`. CMD is split on spaces."""
import statistics, subprocess, sys, time

n = int(sys.argv[1])
cmds = [arg.split("=", 1) for arg in sys.argv[2:]]
walls = {label: [] for label, _ in cmds}
for _ in range(n):
    for label, cmd in cmds:
        t0 = time.perf_counter()
        subprocess.run(cmd.split(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls[label].append(time.perf_counter() - t0)
for label, w in walls.items():
    print(f"{label} {min(w):.4f} {statistics.median(w):.4f}")
