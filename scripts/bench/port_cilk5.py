#!/usr/bin/env python3
"""port_cilk5.py SRC DST: ports Cilk-5 programs (cilkbench's cilk5/ folder: Cilk Plus keywords)
to cilkview.h's marks, so that gcc builds them as their serial elision with every spawn, sync
and parallel loop marked. For the scripts that measure real programs nobody here wrote
(bench-cilk5.sh); their code is fetched, never committed.

What it does to each .c/.cpp/.h file of SRC, written to DST:
- `#include <cilk/cilk.h>` becomes `#include "cilkview.h"`; `<cilk/cilk_stub.h>` is dropped;
- a statement holding `cilk_spawn` becomes `cv_spawn(statement without the keyword);` (a
  declaration `T x = cilk_spawn f(...)` becomes `T x; cv_spawn(x = f(...));`);
- `cilk_sync` becomes `cv_sync()`, `cilk_for` becomes `cv_for`;
- a function whose body holds any of them gets `cv_function();` first;
- the kernel the program times, between `gettimeofday(&t1, ...)` and `gettimeofday(&t2, ...)`,
  becomes the region "kernel", and its CPU time (CLOCK_PROCESS_CPUTIME_ID: preemption and
  other programs' load not counted) is printed on stderr as `kernel cpu NS ns, K preemptions`
  (KERNEL_CPU, written to DST as cv_kernel_cpu.h).
Programs using reducers (`<cilk/reducer*.h>`) are refused: the marks have no reducers.
Prints one line per file: the counts of each change."""
import pathlib
import re
import sys


def code_mask(text):
    """For each character: True where it is code (not in a comment, string or character)."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    while i < n:
        two = text[i : i + 2]
        if two == "/*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif two == "//":
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text[i] in "\"'":
            quote, end = text[i], i + 1
            while end < n and text[end] != quote:
                end += 2 if text[end] == "\\" else 1
            end += 1
        else:
            i += 1
            continue
        for k in range(i, min(end, n)):
            mask[k] = False
        i = end
    return mask


def code_positions(text, mask, word):
    """Where `word` occurs as a whole word in code."""
    return [
        m.start()
        for m in re.finditer(r"\b" + word + r"\b", text)
        if mask[m.start()]
    ]


def function_bodies(text, mask):
    """(open brace, close brace) of each top-level brace block preceded by `)`: a function."""
    bodies, depth, start = [], 0, None
    for i, c in enumerate(text):
        if not mask[i] or c not in "{}":
            continue
        if c == "{":
            if depth == 0:
                before = "".join(ch for k, ch in enumerate(text[:i]) if mask[k]).rstrip()
                start = i if before.endswith(")") else None
            depth += 1
        else:
            depth -= 1
            if depth == 0 and start is not None:
                bodies.append((start, i))
                start = None
    return bodies


def statement_around(text, mask, pos):
    """(start, end) of the statement holding `pos`: after the previous `;`, `{` or `}` in code,
    up to and including the next `;` outside parentheses."""
    start = pos
    while start > 0 and not (mask[start - 1] and text[start - 1] in ";{}"):
        start -= 1
    while text[start].isspace() or not mask[start]:
        start += 1
    depth, end = 0, pos
    while True:
        c = text[end]
        if mask[end]:
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif c == ";" and depth == 0:
                return start, end + 1
        end += 1


DECLARATION = re.compile(r"^((?:[A-Za-z_]\w*[\s*]+)+?)([A-Za-z_]\w*)\s*=\s*cilk_spawn\b(.*);$", re.S)


def spawned(statement):
    """The statement of one spawn, marked."""
    m = DECLARATION.match(statement)
    if m and m.group(1).split()[0] not in ("return",):
        kind, name, call = m.group(1).rstrip(), m.group(2), m.group(3).strip()
        return f"{kind} {name}; cv_spawn({name} = {call});"
    body = re.sub(r"\bcilk_spawn\b\s*", "", statement[:-1]).strip()
    return f"cv_spawn({body});"


def port(text, name):
    if re.search(r"#include\s*<cilk/reducer", text):
        raise SystemExit(f"port_cilk5: {name} uses reducers, which the marks do not model")
    counts = {"spawn": 0, "sync": 0, "for": 0, "function": 0, "region": 0}
    text = re.sub(
        r"#include\s*<cilk/cilk\.h>", '#include "cilkview.h"\n#include "cv_kernel_cpu.h"', text
    )
    text = re.sub(r"#include\s*<cilk/cilk_stub\.h>\n?", "", text)
    # Spawns, last first, so that earlier positions stay valid.
    mask = code_mask(text)
    for pos in reversed(code_positions(text, mask, "cilk_spawn")):
        start, end = statement_around(text, mask, pos)
        text = text[:start] + spawned(text[start:end]) + text[end:]
        mask = code_mask(text)
        counts["spawn"] += 1
    for pos in reversed(code_positions(text, mask, "cilk_sync")):
        end = pos + len("cilk_sync")
        text = text[:pos] + "cv_sync()" + text[end:]
        counts["sync"] += 1
    mask = code_mask(text)
    for pos in reversed(code_positions(text, mask, "cilk_for")):
        text = text[:pos] + "cv_for" + text[pos + len("cilk_for") :]
        counts["for"] += 1
    # cv_function() first in every function that now spawns, syncs or runs a parallel loop.
    mask = code_mask(text)
    marked = [p for w in ("cv_spawn", "cv_sync", "cv_for") for p in code_positions(text, mask, w)]
    for start, end in reversed(function_bodies(text, mask)):
        if any(start < p < end for p in marked):
            text = text[: start + 1] + " cv_function();" + text[start + 1 :]
            counts["function"] += 1
    # The kernel the program times.
    text, begins = re.subn(
        r"(gettimeofday\s*\(\s*&t1\s*,[^;]*;)", r'\1 cv_kernel_cpu(0); cv_region_begin("kernel");', text
    )
    text, ends = re.subn(
        r"(gettimeofday\s*\(\s*&t2\s*,[^;]*;)", r'cv_region_end("kernel"); cv_kernel_cpu(1); \1', text
    )
    counts["region"] = min(begins, ends)
    return text, counts


KERNEL_CPU = """/* Written by port_cilk5.py: the kernel's CPU time and involuntary context switches (each
   a preemption), printed on stderr. */
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
static void cv_kernel_cpu(int end)
{
    static struct timespec start;
    static long switches;
    struct timespec now;
    struct rusage usage;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    getrusage(RUSAGE_SELF, &usage);
    if (!end) {
        start = now;
        switches = usage.ru_nivcsw;
    } else {
        fprintf(stderr, "kernel cpu %lld ns, %ld preemptions\\n",
                (long long)(now.tv_sec - start.tv_sec) * 1000000000LL + (now.tv_nsec - start.tv_nsec),
                usage.ru_nivcsw - switches);
    }
}
"""


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "cv_kernel_cpu.h").write_text(KERNEL_CPU)
    for path in sorted(src.iterdir()):
        if path.suffix not in (".c", ".cpp", ".h"):
            continue
        text = path.read_text(errors="replace")
        if "cilk" not in text:
            (dst / path.name).write_text(text)
            continue
        try:
            ported, counts = port(text, path.name)
        except SystemExit as refusal:
            print(refusal, file=sys.stderr)
            continue
        (dst / path.name).write_text(ported)
        print(path.name, " ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
