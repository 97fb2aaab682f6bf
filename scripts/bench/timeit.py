#!/usr/bin/env python3
"""timeit.py N CMD...: run CMD N times (stdout/stderr discarded); print the fastest run's wall and
CPU (user+sys of the process and its children) seconds and the largest peak RSS (KiB)."""
import resource, subprocess, sys, time

n, cmd = int(sys.argv[1]), sys.argv[2:]
best_wall = best_cpu = float("inf")
rss = 0
for _ in range(n):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, ru = __import__("os").wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    best_wall = min(best_wall, wall)
    best_cpu = min(best_cpu, ru.ru_utime + ru.ru_stime)
    rss = max(rss, ru.ru_maxrss)
print(f"{best_wall:.4f} {best_cpu:.4f} {rss}")
