#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Work that nobody waits for stops, and no connection takes the whole
threadpool.  With the defaults (32 threads, 64 requests in flight, 8 per
connection): a client that sends 64 requests of a minute's work with 1 ms
deadlines and leaves does not hold the pool, and another client's request
is served at once; a connection past its share gets BUSY while another
connection is still admitted; works whose deadline passed, or whose
connection closed, end at once instead of sleeping on."""

import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args, slack,
                      stats)

THREADS = 32  # the defaults: --threads, and --max-work-per-conn = 32 / 4
PER_CONN = THREADS // 4
LONG_MS = 60000
# How long abandoned works may take to end and their done calls to reach
# the loop: "at once", on a loaded machine under a sanitizer.
SETTLE_S = 10


def wait_idle(port, what):
    """Polls STATS until no work is in flight; returns the last STATS."""
    s = {}
    until = time.monotonic() + slack(SETTLE_S)
    while time.monotonic() < until:
        s = stats(port)
        if s.get("work_inflight") == 0 and s.get("tasks") == 0:
            break
        time.sleep(0.05)
    check(s.get("work_inflight") == 0 and s.get("tasks") == 0,
          "%s: no work left within %.0f s (work_inflight=%s tasks=%s)"
          % (what, slack(SETTLE_S), s.get("work_inflight"), s.get("tasks")))
    return s


def served_at_once(port, rid):
    """REQ <rid> 10 2000 on a new connection must be OK, and within a
    second (scaled) in at least one of three tries: a held pool would make
    every try wait behind a minute of work, past its 2 s deadline."""
    c = Conn(port)
    times = []
    answers = []
    for i in range(3):
        t0 = time.monotonic()
        c.send("REQ %s%d 10 2000\n" % (rid, i))
        answers.append(c.text(timeout=slack(10)))
        times.append((time.monotonic() - t0) * 1000)
    c.close()
    check(all(a == "OK %s%d" % (rid, i) for i, a in enumerate(answers)),
          "another client's REQ %s 10 2000 -> OK (got %s)" % (rid, answers))
    check(min(times) <= slack(1000),
          "  within %.0f ms in one try of three (took %s ms)"
          % (slack(1000), ", ".join("%.0f" % t for t in times)))


def test_leaver(port, deadline_ms, rid):
    log("a client sends 64 x REQ hN %d %d and leaves"
        % (LONG_MS, deadline_ms))
    c = Conn(port)
    c.send("".join("REQ h%d %d %d\n" % (i, LONG_MS, deadline_ms)
                   for i in range(64)))
    # Its deadlines pass; works that had started before them run.  (With
    # a 1 ms deadline, whether any starts depends on the threads' timing;
    # with 200 ms, they all have.)
    time.sleep(deadline_ms / 1000 + 0.1)
    c.close()
    served_at_once(port, rid)
    return wait_idle(port, "the leaver's works ended")


def test_fair_share(port):
    log("one connection asks for more than its share of the pool")
    greedy = Conn(port)
    n = 3 * PER_CONN
    greedy.send("".join("REQ g%d %d %d\n" % (i, LONG_MS, LONG_MS)
                        for i in range(n)))
    busy = []
    for _ in range(n - PER_CONN):
        busy.append(greedy.text(timeout=slack(10)))
    check(all(b is not None and b.startswith("BUSY g") for b in busy),
          "%d of %d are admitted, the other %d get BUSY (got %s)"
          % (PER_CONN, n, n - PER_CONN, sorted(set(
              (b or "EOF").split()[0] for b in busy))))
    s = stats(port)
    check(s.get("work_inflight") == PER_CONN,
          "work_inflight=%s == %d" % (s.get("work_inflight"), PER_CONN))
    served_at_once(port, "o")
    log("its deadline passes: TIMEOUT, and its works end")
    greedy2 = Conn(port)
    greedy2.send("".join("REQ d%d %d 200\n" % (i, LONG_MS)
                         for i in range(PER_CONN)))
    got = sorted(greedy2.text(timeout=slack(10)) for _ in range(PER_CONN))
    check(got == sorted("TIMEOUT d%d" % i for i in range(PER_CONN)),
          "%d x REQ dN %d 200 -> TIMEOUT each (got %s)"
          % (PER_CONN, LONG_MS, got))
    # Its share comes back with the works' done calls, a moment after the
    # TIMEOUTs: BUSY until then.
    answer = None
    until = time.monotonic() + slack(SETTLE_S)
    while time.monotonic() < until:
        greedy2.send("REQ d 10 5000\n")
        answer = greedy2.text(timeout=slack(10))
        if answer != "BUSY d":
            break
        time.sleep(0.05)
    check(answer == "OK d",
          "then the same connection is served again (%s)" % answer)
    greedy2.close()
    # A reset, not a FIN: a FIN is a half-close, after which the server
    # still answers the requests in flight (test_half_close.py).
    greedy.reset()
    wait_idle(port, "the greedy connection left")


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--loops", args.loops)
    test_leaver(srv.port, 1, "v")
    s = test_leaver(srv.port, 200, "w")
    log("  STATS: %s" % s)
    check(s.get("work_abandoned", 0) >= 1,
          "works that ran were told to stop: work_abandoned=%s"
          % s.get("work_abandoned"))
    test_fair_share(srv.port)
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
