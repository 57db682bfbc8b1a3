#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fails if a process that the echo server tests started is still running
once they are over: CTest runs this as the cleanup of their fixture, after
the last of them.  A process counts if it runs one of the given programs
and has MARK in its environment (CTest gives it to each echo server test,
whose processes inherit it).  Each one found is named and killed.

  leftovers.py MARK PROGRAM...
"""

import os
import signal
import sys

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree


def leftovers(mark, programs):
    """(pid, program, command line) of each process of one of programs
    with mark in its environment."""
    found = []
    me = os.getpid()
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        if pid == me:
            continue
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours to read
            continue
        exe = exe.removesuffix(" (deleted)")  # rebuilt since it started
        if exe in programs and mark in env:
            found.append((pid, exe, cmd.strip()))
    return found


def main():
    mark = sys.argv[1].encode()
    programs = {os.path.realpath(p) for p in sys.argv[2:]}
    found = leftovers(mark, programs)
    for pid, exe, cmd in found:
        print("left running: pid %d, %s" % (pid, cmd), flush=True)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if found:
        print("%d process(es) outlived the echo server tests (killed now)"
              % len(found))
        sys.exit(1)
    print("no process of %s is left running"
          % ", ".join(sorted(os.path.basename(p) for p in programs)))


if __name__ == "__main__":
    main()
