#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Request deadlines: work on the threadpool against a deadline on the
loop.  Exactly one reply per request: OK when the work wins, TIMEOUT when
the deadline does, never both."""

import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args,
                      run_load, stats)


def test_by_hand(port):
    log("one connection, many requests in flight")
    c = Conn(port)
    # (id, work_ms, deadline_ms, expected): at least 150 ms apart, so a
    # loaded machine cannot turn one answer into the other.
    cases = [("w1", 20, 400, "OK"), ("d1", 500, 100, "TIMEOUT"),
             ("w2", 100, 600, "OK"), ("d2", 700, 50, "TIMEOUT"),
             ("w3", 0, 300, "OK"), ("d3", 400, 0, "TIMEOUT"),
             ("w4", 250, 1000, "OK"), ("d4", 900, 300, "TIMEOUT")]
    c.send("".join("REQ %s %d %d\n" % (i, w, d) for i, w, d, _ in cases))
    t0 = c.t_last
    got = {}
    # Every request is over after 900 ms; wait 1.5 s more for a second
    # reply that must not come.
    end = t0 + 2.4
    while time.monotonic() < end:
        try:
            line = c.text(timeout=max(0.01, end - time.monotonic()))
        except TimeoutError:
            break
        kind, _, rid = line.partition(" ")
        got.setdefault(rid, []).append((kind, (time.monotonic() - t0) * 1e3))
    for rid, w, d, want in cases:
        replies = got.get(rid, [])
        check(len(replies) == 1 and replies[0][0] == want,
              "REQ %s work=%d deadline=%d -> %s (got %s)"
              % (rid, w, d, want,
                 ", ".join("%s@%.0fms" % r for r in replies) or "nothing"))
        if want == "TIMEOUT" and replies:
            check(replies[0][1] >= d - 2, "  not before its deadline")
    c.send("after\n")
    check(c.text() == "after", "the connection still echoes")
    c.close()


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--threads", "64")
    test_by_hand(srv.port)

    # Random work and deadlines from the same range: about half of each
    # kind.  8 x 4 requests in flight stay below the 64 threads, so work
    # starts at once and the answer depends on work vs deadline only.  A
    # request counts only where they are 200 ms apart: on a loaded 2-core
    # machine a pool thread's wake-ups (to start the work, and at its end)
    # can each be tens of ms late.
    rc, _, r = run_load(args.load, srv.port, "--mode", "rpc", "--conns", 8,
                        "--inflight", 4, "--work-ms", "10-800",
                        "--deadline-ms", "10-800", "--margin-ms", 200,
                        "--duration-ms", 4000)
    check(rc == 0, "echo-load rpc: no violation")
    check(r.get("ok", 0) >= 50 and r.get("timeout", 0) >= 50,
          "both answers happen: ok=%d timeout=%d"
          % (r.get("ok", 0), r.get("timeout", 0)))

    s = {}
    for _ in range(50):
        s = stats(srv.port)
        if s.get("tasks") == 0:
            break
        time.sleep(0.1)
    check(s.get("tasks") == 0 and s.get("timers") == 1,
          "nothing left in flight: %s" % s)
    check(s.get("req_ok", 0) + s.get("req_timeout", 0)
          == r.get("ok", 0) + r.get("timeout", 0) + 8,
          "STATS counts every reply once")
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
