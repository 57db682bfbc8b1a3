#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How many of a program's instructions a callgrind profile spends in timers.

    callgrind-timers.py CALLGRIND_OUT REPO_ROOT

Prints one line, key=value:

    total_ir=...      every instruction the program ran in user space
    timer_ir=...      of them, in timer code (below)
    xtimer_start=...  calls of the echo server's xtimer_start (arms and
                      re-arms of a connection's or a request's timer)

Timer code is uvtw (every function whose source file is in REPO_ROOT/lib/)
and libuv's uv_timer_* functions, counted at their entries: the inclusive
cost of every call into timer code from outside it, minus the inclusive
cost of every call from timer code into the echo server's own code (the
timer callbacks: what a timer does when it fires is the server's work, not
the timer's).  So nothing is counted twice (uv_timer_start calling
uv_timer_stop, a callback that re-arms its timer), and the wheel's work in
its driver callback and its uv_prepare_t counts, as does the uv_timer_t
that drives it.  libuv's own per-iteration timer check (uv__run_timers,
uv__next_timeout) is not counted: Debian's libuv has no symbols for it.
Nor is uvtw_wheel_stats, which the server calls once per loop iteration to
publish its STATS counts (the uv backend counts those in its own code).
"""

import os
import re
import sys

UV_TIMER = {"uv_timer_start", "uv_timer_stop", "uv_timer_init",
            "uv_timer_again", "uv_timer_set_repeat", "uv_timer_get_repeat",
            "uv_timer_get_due_in"}
# Monitoring, not timing: neither these nor what they call are counted.
EXCLUDED = {"uvtw_wheel_stats"}


def parse(path):
    """Returns (totals, fn_file, self_cost, edges, calls): edges maps
    (caller, callee) to inclusive cost, calls to call counts."""
    names = {}  # (kind, id) -> name, for compressed names
    fn_file = {}
    self_cost = {}
    edges = {}
    calls = {}
    fl = fn = cfn = None
    pending_call = None
    total = None

    def name(kind, rest):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", rest)
        if not m:
            return rest
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names.get(key, rest)

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if pending_call is not None:
                    edges[pending_call] = edges.get(pending_call, 0) + cost
                    pending_call = None
                elif fn is not None:
                    self_cost[fn] = self_cost.get(fn, 0) + cost
                continue
            key, _, rest = line.partition("=")
            if key == "fl":
                fl = name("fl", rest)
            elif key in ("fi", "fe"):
                name("fl", rest)  # inlined code: the function stays
            elif key == "fn":
                fn = name("fn", rest)
                fn_file.setdefault(fn, fl)
            elif key in ("cfi", "cfl"):
                name("fl", rest)
            elif key == "cfn":
                cfn = name("fn", rest)
            elif key in ("ob", "cob"):
                name("ob", rest)
            elif key == "calls":
                n = int(rest.split()[0])
                pending_call = (fn, cfn)
                calls[pending_call] = calls.get(pending_call, 0) + n
            elif key in ("summary", "totals"):
                total = int(rest.split()[0])
    if total is None:
        total = sum(self_cost.values())
    return total, fn_file, self_cost, edges, calls


def main():
    if len(sys.argv) != 3:
        print("usage: callgrind-timers.py CALLGRIND_OUT REPO_ROOT",
              file=sys.stderr)
        return 2
    total, fn_file, _, edges, calls = parse(sys.argv[1])
    root = os.path.realpath(sys.argv[2])
    lib = os.path.join(root, "lib") + os.sep
    server = os.path.join(root, "example-echo-server") + os.sep

    def in_dir(fn, d):
        f = fn_file.get(fn) or ""
        return f.startswith(d) or (not os.path.isabs(f) and
                                   os.path.join(root, f).startswith(d))

    def is_timer(fn):
        return (fn in UV_TIMER or in_dir(fn, lib)) and fn not in EXCLUDED

    timer = 0
    for (caller, callee), cost in edges.items():
        if is_timer(callee) and not is_timer(caller) and \
                caller not in EXCLUDED:
            timer += cost
        elif is_timer(caller) and not is_timer(callee) and \
                in_dir(callee, server):
            timer -= cost
    starts = sum(n for (_, callee), n in calls.items()
                 if callee == "xtimer_start")
    print("total_ir=%d timer_ir=%d xtimer_start=%d" % (total, timer, starts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
