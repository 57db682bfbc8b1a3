#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Graceful drain.  On SIGTERM the server stops accepting at once, stops
reading, and lets the requests it has finish, OK or TIMEOUT, for up to
--drain-ms, saying nothing new to idle connections; then BYE shutdown to
all, and exit 0.  The drain ends early when nothing is left in flight, is
cut at --drain-ms, and a second SIGTERM skips it."""

import signal
import socket
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import Conn, Server, check, finish, log, parse_args, slack


def read_all(c, timeout):
    """Lines with their arrival time (s since the call) until EOF, for up
    to slack(timeout) s."""
    out = []
    timeout = slack(timeout)
    t0 = time.monotonic()
    while True:
        try:
            line = c.text(timeout=max(0.1, timeout - (time.monotonic() - t0)))
        except TimeoutError:
            return out, False
        if line is None:
            return out, True
        out.append((line, time.monotonic() - t0))


def answered(args):
    log("requests in flight at SIGTERM get their answer, then BYE shutdown")
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--drain-ms", 8000, "--heartbeat-ms", 1000, "--idle-ms",
                 60000)
    work = Conn(srv.port)
    work.send("REQ ok1 800 6000\nREQ ok2 1500 6000\nREQ to1 20000 1200\n")
    idle = Conn(srv.port)
    late = Conn(srv.port)
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    # New clients are refused once the listeners are closed.
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
        s.settimeout(2)
        refused = s.recv(100) == b""
        s.close()
    except OSError:
        refused = True
    check(refused, "no new connection after SIGTERM")
    late.send("hello after SIGTERM\nREQ new 0 1000\n")
    lines, eof = read_all(work, 15)
    took = time.monotonic() - t0
    log("  work: %r" % lines)
    got = [l for l, _ in lines]
    check(eof and got[-1:] == ["BYE shutdown"],
          "BYE shutdown, then EOF, last")
    check(sorted(got[:-1]) == ["OK ok1", "OK ok2", "TIMEOUT to1"],
          "every request started before SIGTERM answered: %r" % got[:-1])
    check(took < 6.0, "the drain ended when nothing was left (%.1f s)"
          % took)
    # The drain took longer than --heartbeat-ms: a PING would have come.
    lines, eof = read_all(idle, 10)
    log("  idle: %r" % lines)
    check(eof and [l for l, _ in lines] == ["BYE shutdown"],
          "an idle connection gets nothing new (no PING), then BYE shutdown")
    lines, eof = read_all(late, 10)
    log("  late: %r" % lines)
    check(eof and [l for l, _ in lines] == ["BYE shutdown"],
          "input sent after SIGTERM is not read: only BYE shutdown")
    srv.stop_and_check(timeout=30)


def cut(args):
    log("the drain is cut at --drain-ms")
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--drain-ms", 1000)
    c = Conn(srv.port)
    c.send("REQ long 30000 60000\n")
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    lines, eof = read_all(c, 15)
    took = time.monotonic() - t0
    check(eof and [l for l, _ in lines] == ["BYE shutdown"],
          "BYE shutdown without an answer: %r" % lines)
    # Not cut, it would last the work's 30 s.
    check(0.9 <= took < slack(8.0),
          "after the drain's 1000 ms (%.1f s)" % took)
    srv.stop_and_check(timeout=30)


def twice(args):
    log("a second SIGTERM skips the drain")
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--drain-ms", 60000)
    c = Conn(srv.port)
    c.send("REQ long 30000 60000\n")
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    srv.proc.send_signal(signal.SIGTERM)
    lines, eof = read_all(c, 20)
    took = time.monotonic() - t0
    check(eof and [l for l, _ in lines] == ["BYE shutdown"],
          "BYE shutdown: %r" % lines)
    check(took < slack(10.0),
          "long before the drain's 60 s (%.1f s)" % took)
    try:
        srv.proc.wait(20)  # a third signal would kill it, by design
    except Exception:
        pass
    err = srv.stop_and_check(timeout=30)
    check("skipping the drain" in err, "it says so")


def main():
    args = parse_args()
    answered(args)
    cut(args)
    twice(args)
    finish()


if __name__ == "__main__":
    main()
