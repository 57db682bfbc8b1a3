#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Admission for work: a flood of requests whose work outlasts their
deadline.  Past --max-work-inflight a REQ gets BUSY <id> at once; an
admitted one gets TIMEOUT at its deadline, and its work is abandoned:
cancelled if it had not started, told to stop if it runs.  Nothing is
left in flight soon after, and the pool serves new requests."""

import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args, slack,
                      stats)

THREADS = 4
INFLIGHT = 8
FLOOD = 300
WORK_MS = 3000
DEADLINE_MS = 100
# "At once", on a loaded machine under a sanitizer: a busy machine can
# hold the server off a core for longer than the deadline.
BUSY_SLACK_MS = 2000


def main():
    args = parse_args()
    # One connection floods: its share of the pool is the whole admission
    # bound here (test_abandon.py tests the share).
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--threads", THREADS, "--max-work-inflight", INFLIGHT,
                 "--max-work-per-conn", INFLIGHT,
                 "--heartbeat-ms", 60000, "--idle-ms", 120000)
    log("a flood of %d requests, %d ms of work each, %d ms deadlines, "
        "%d threads, at most %d in flight"
        % (FLOOD, WORK_MS, DEADLINE_MS, THREADS, INFLIGHT))
    c = Conn(srv.port)
    t0 = time.monotonic()
    c.send("".join("REQ f%d %d %d\n" % (i, WORK_MS, DEADLINE_MS)
                   for i in range(FLOOD)))
    replies = {}
    twice = []
    busy_late = []
    while len(replies) < FLOOD:
        line = c.text(timeout=slack(20.0))
        if line is None:
            break
        kind, _, rid = line.partition(" ")
        if rid in replies:
            twice.append(line)
        replies[rid] = kind
        took = (time.monotonic() - t0) * 1000
        if kind == "BUSY" and took > DEADLINE_MS + slack(BUSY_SLACK_MS):
            busy_late.append((rid, took))
    kinds = {}
    for k in replies.values():
        kinds[k] = kinds.get(k, 0) + 1
    log("  replies: %s" % kinds)
    check(len(replies) == FLOOD and not twice,
          "exactly one reply per request (%d, twice: %r)"
          % (len(replies), twice[:3]))
    check(set(kinds) <= {"BUSY", "TIMEOUT"},
          "each is BUSY or TIMEOUT: %s" % kinds)
    check(kinds.get("BUSY", 0) >= FLOOD // 2,
          "most are turned away at once: %d BUSY" % kinds.get("BUSY", 0))
    check(not busy_late,
          "BUSY comes at once: within the deadline + %d ms (late: %r)"
          % (slack(BUSY_SLACK_MS), busy_late[:3]))

    # The abandoned works' done calls come a moment after their TIMEOUT,
    # not after their 3 s of work (the wait allows for a loaded machine).
    timeouts = kinds.get("TIMEOUT", 0)
    until = time.monotonic() + slack(15)
    while True:
        s = stats(srv.port)
        if (s.get("work_inflight") == 0 and s.get("tasks") == 0) \
                or time.monotonic() > until:
            break
        time.sleep(0.1)
    log("  STATS: %s" % s)
    check(s.get("req_busy") == kinds.get("BUSY", 0),
          "STATS req_busy=%s matches" % s.get("req_busy"))
    stopped = s.get("req_cancelled", 0) + s.get("work_abandoned", 0)
    # Each TIMEOUT's work is cancelled if it has not started, else told to
    # stop; only one that ran its 3 s anyway (a thread held off a core for
    # that long) would count in neither.
    check(stopped >= max(1, timeouts // 2),
          "the works of the %d TIMEOUTs were cancelled (req_cancelled=%s) "
          "or stopped early (work_abandoned=%s)"
          % (timeouts, s.get("req_cancelled"), s.get("work_abandoned")))
    check(s.get("work_inflight") == 0 and s.get("tasks") == 0,
          "nothing left in flight: work_inflight=%s tasks=%s"
          % (s.get("work_inflight"), s.get("tasks")))

    log("the pool serves new requests")
    c.send("REQ ok 10 10000\n")
    check(c.text(timeout=slack(15.0)) == "OK ok", "REQ ok 10 10000 -> OK")
    c.close()
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
