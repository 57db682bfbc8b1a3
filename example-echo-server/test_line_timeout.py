#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The line deadline: a slowloris client that sends one byte at a time and
never ends its line gets ERR line timeout and a close at
--line-timeout-ms, although its bytes keep it from being idle; a client
whose lines end in time stays; echo-load's slowloris mode agrees."""

import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args,
                      run_load, slack, stats)

LINE_TIMEOUT_MS = 1000
HEARTBEAT_MS = 400
IDLE_MS = 700


def slowloris(port):
    log("a line that never ends, one byte every 150 ms")
    c = Conn(port)
    c.sock.settimeout(0.05)
    t0 = time.monotonic()
    got = []
    eof = False
    i = 0
    while time.monotonic() - t0 < slack(6.0) and not eof:
        try:
            c.sock.sendall(b"x")
        except OSError:
            break
        i += 1
        end = time.monotonic() + 0.15
        while time.monotonic() < end:
            try:
                d = c.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                d = b""
            if not d:
                eof = True
                break
            for line in d.split(b"\n")[:-1]:
                got.append((line, (time.monotonic() - t0) * 1000))
    took = (time.monotonic() - t0) * 1000
    lines = [g[0] for g in got]
    log("  got %r after %d bytes, closed=%s at %.0f ms" % (got, i, eof, took))
    check(b"ERR line timeout" in lines, "ERR line timeout came")
    check(eof, "then the server closed")
    check(b"BYE idle" not in lines and b"PING" not in lines,
          "its bytes kept it active: no PING, no BYE idle")
    at = [g[1] for g in got if g[0] == b"ERR line timeout"]
    if at:
        check(at[0] >= LINE_TIMEOUT_MS - 2,
              "not before the line deadline (%.0f ms)" % at[0])
        check(at[0] <= LINE_TIMEOUT_MS + slack(2000),
              "and not long after it (%.0f ms)" % at[0])
    c.close()


def lines_in_time(port):
    log("lines sent slowly, each ending within the deadline")
    c = Conn(port)
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < 2.5:
        for ch in "abcde":
            c.send(ch)
            time.sleep(0.1)
        c.send("\n")
        check(c.text() == "abcde", "line %d echoed" % n)
        n += 1
    check(n >= 3, "%d lines over %.1f s, longer than the deadline"
          % (n, time.monotonic() - t0))
    c.close()


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--line-timeout-ms", LINE_TIMEOUT_MS,
                 "--heartbeat-ms", HEARTBEAT_MS, "--idle-ms", IDLE_MS)
    slowloris(srv.port)
    lines_in_time(srv.port)
    s = stats(srv.port)
    check(s.get("line_timeouts") == 1, "STATS line_timeouts=1: %s"
          % s.get("line_timeouts"))
    rc, _, r = run_load(args.load, srv.port, "--mode", "slowloris",
                        "--conns", 20, "--duration-ms", 3000,
                        "--interval-ms", 100, "--idle-ms", IDLE_MS,
                        "--heartbeat-ms", HEARTBEAT_MS,
                        "--line-timeout-ms", LINE_TIMEOUT_MS,
                        "--slack-ms", slack(1500))
    check(rc == 0, "echo-load slowloris: no violation")
    check(r.get("line_timeouts", 0) >= 20,
          "every slowloris connection was cut: %d"
          % r.get("line_timeouts", 0))
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
