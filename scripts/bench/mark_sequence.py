# gdb script: run a non-PIE program marked with cilkview.h and print the sequence of marks
# it executes, one per line ("kind" or "kind label"), to the file named by $MARK_SEQUENCE_OUT.
# The records are read from the section dumped by objcopy to $MARK_SECTION (a raw file).
# Used by scripts/check-mark-order.sh:  gdb -q -batch -x mark_sequence.py --args PROG ARGS...
import os
import struct

import gdb

KINDS = {1: "function-enter", 2: "function-exit", 3: "spawn", 4: "spawn-return", 5: "sync",
         6: "loop-begin", 7: "iteration-begin", 8: "iteration-end", 9: "loop-end",
         10: "region-begin", 11: "region-end"}

data = open(os.environ["MARK_SECTION"], "rb").read()
marks = {}
pos = 0
while pos + 16 <= len(data):
    if data[pos] == 0:
        pos += 1
        continue
    version, kind, _operand, _flags, length = struct.unpack_from("<BBBBI", data, pos)
    (address,) = struct.unpack_from("<Q", data, pos + 8)
    name = KINDS[kind]
    if kind in (10, 11):
        label = data[pos + 16:pos + length].split(b"\0")[0].decode()
        name += " " + label
    if address:
        marks[address] = name
    pos += length

sequence = []


class Mark(gdb.Breakpoint):
    def __init__(self, address, name):
        super().__init__("*%#x" % address, internal=True)
        self.name = name

    def stop(self):
        sequence.append(self.name)
        return False


gdb.execute("set pagination off")
gdb.execute("set confirm off")
for address, name in marks.items():
    Mark(address, name)
gdb.execute("run")  # the program's output goes where gdb's goes
with open(os.environ["MARK_SEQUENCE_OUT"], "w") as out:
    out.write("".join(name + "\n" for name in sequence))
