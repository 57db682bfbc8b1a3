#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""--loops 2: two loop threads, each with its own wheel and its own
listener on the one port (SO_REUSEPORT).  Connections spread over both,
STATS on any connection reports the whole server (its lateness
histogram too: the loops' buckets added), and echo-load's mixed and rpc
runs see no violation.  Run in the TSan build too.

The POSIX fallback (uvtw-echo-server-posix, or any unix but Linux) has
one listening socket that both loops poll, and whichever wakes first
accepts up to 64 connections in a row: how they spread is up to the
scheduler, so there the test checks only that every connection is
served and that STATS sums every loop."""

import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, lateness, log,
                      parse_args, parse_fields, run_load, slack)

CONNS = 40


def test_stats_fresh(args, loops):
    """STATS right after the last request: the counts of the other loop,
    which is idle now, are the ones it had when it went idle, not those
    of an iteration before (its last reply is sent in an iteration of its
    own).  A long heartbeat keeps the loops asleep, so nothing refreshes
    the counts behind the test's back."""
    log("STATS after the last reply, with both loops idle")
    srv = Server(args.server, args.timers, "--loops", loops,
                 "--heartbeat-ms", 60000, "--idle-ms", 120000)
    conns = [Conn(srv.port) for _ in range(CONNS)]
    for i, c in enumerate(conns):
        c.send("REQ f%d 5 10000\n" % i)
    check(all(c.text(timeout=slack(15.0)) == "OK f%d" % i
              for i, c in enumerate(conns)), "every request is answered")
    # A loaded machine may take a while to finish the last iteration; an
    # idle loop whose counts are stale stays so for the whole wait.
    s = {}
    until = time.monotonic() + slack(5)
    while time.monotonic() < until:
        time.sleep(0.1)
        conns[0].send("STATS\n")
        s = parse_fields(conns[0].text())
        if s.get("timers") == CONNS and s.get("tasks") == 0:
            break
    log("  STATS: %s" % s)
    check(s.get("timers") == CONNS and s.get("tasks") == 0
          and s.get("work_inflight") == 0,
          "timers=%s (want %d) tasks=%s (want 0) work_inflight=%s"
          % (s.get("timers"), CONNS, s.get("tasks"), s.get("work_inflight")))
    for c in conns:
        c.close()
    srv.stop_and_check()


def test_lateness_summed(args, loops):
    """Connections on every loop are left silent until BYE idle: each PING
    and BYE a client sees is a timer callback of its loop, so STATS from
    any one loop counts at least all of them (lateness_n) only if it adds
    the other loops' buckets to its own.  Once the connections are gone
    the loops are idle, so their published counts are final."""
    log("lateness over the loops: PINGs and BYEs of %d connections"
        % CONNS)
    srv = Server(args.server, args.timers, "--loops", loops,
                 "--heartbeat-ms", 100, "--idle-ms", 300)
    conns = [Conn(srv.port) for _ in range(CONNS)]
    seen = 0
    closed = 0
    for c in conns:
        eof, lines = c.expect_eof(timeout=slack(10.0))
        seen += len(lines)
        closed += eof and lines[-1:] == [b"BYE idle"]
        c.close()
    check(closed == CONNS, "%d of %d connections saw BYE idle, then EOF "
          "(%d lines)" % (closed, CONNS, seen))
    s = {}
    late = None
    until = time.monotonic() + slack(5)
    while time.monotonic() < until:
        c = Conn(srv.port)
        c.send("STATS\n")
        s = parse_fields(c.text())
        c.close()
        late = lateness(s)
        if late is not None and late[0] >= seen:
            break
        time.sleep(0.1)
    log("  STATS: %s" % s)
    check(late is not None and late[0] >= seen,
          "lateness_n=%s counts the %d PINGs and BYEs of both loops "
          "(p50 %s, p99 %s, max %s)"
          % (s.get("lateness_n"), seen, s.get("lateness_p50"),
             s.get("lateness_p99"), s.get("lateness_max")))
    srv.stop_and_check()


def main():
    args = parse_args()
    loops = args.loops if args.loops not in ("1", "0") else "2"
    test_stats_fresh(args, loops)
    test_lateness_summed(args, loops)
    srv = Server(args.server, args.timers, "--loops", loops,
                 "--heartbeat-ms", 1000, "--idle-ms", 3000,
                 "--threads", 32)
    # The server says so when it starts (loop.c).
    shared = "share one listening socket" in srv.stderr()
    log("listeners: %s" % ("one shared by the loops (POSIX fallback)"
                           if shared else "one per loop (SO_REUSEPORT)"))
    log("%d connections over %s loops" % (CONNS, loops))
    conns = [Conn(srv.port) for _ in range(CONNS)]
    for i, c in enumerate(conns):
        c.send("hello %d\n" % i)
    check(all(c.text() == "hello %d" % i for i, c in enumerate(conns)),
          "every connection echoes")
    s = {}
    for _ in range(slack(50)):  # until the other loop has read its connections
        conns[0].send("STATS\n")
        s = parse_fields(conns[0].text())
        if s.get("timers") == CONNS:
            break
        time.sleep(0.1)
    log("  STATS: %s" % s)
    per_loop = [int(x) for x in str(s.get("loop_conns", "")).split(",")
                if x.isdigit()]
    check(s.get("loops") == int(loops) and len(per_loop) == int(loops),
          "STATS reports %s loops: loop_conns=%s" % (loops,
                                                     s.get("loop_conns")))
    if not shared:
        check(all(n > 0 for n in per_loop),
              "connections went to every loop: %s" % per_loop)
    check(s.get("conns") == CONNS and sum(per_loop) == CONNS,
          "the whole server: conns=%s, their sum %d" % (s.get("conns"),
                                                        sum(per_loop)))
    check(s.get("timers") == CONNS,
          "one timer per connection, summed over the loops: timers=%s"
          % s.get("timers"))
    for c in conns:
        c.close()

    rc, _, r = run_load(args.load, srv.port, "--mode", "mixed", "--conns",
                        200, "--duration-ms", 5000, "--interval-ms", 100,
                        "--idle-ms", 3000, "--heartbeat-ms", 1000,
                        "--slack-ms", slack(1000))
    check(rc == 0, "echo-load mixed over %s loops: no violation" % loops)
    check(r.get("server_loops") == float(loops),
          "echo-load reports the loops: %s, connections %s"
          % (r.get("server_loops"), r.get("server_loop_conns")))
    rc, _, r = run_load(args.load, srv.port, "--mode", "rpc", "--conns", 8,
                        "--inflight", 2, "--work-ms", "10-100",
                        "--deadline-ms", "400-600", "--duration-ms", 3000,
                        "--margin-ms", 100)
    check(rc == 0 and r.get("ok", 0) > 0,
          "echo-load rpc over %s loops: all OK, no violation" % loops)
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
