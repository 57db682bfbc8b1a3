#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Echo, heartbeat and idle close with small timings (heartbeat 100 ms,
idle 300 ms), STATS, timer lateness in STATS and the exit line, and BYE
busy past --max-conns."""

import signal
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, lateness, log,
                      parse_args, parse_fields, run_load, slack, stats)

HB = 100
IDLE = 300
# Never early; late by at most slack(LATE) ms: a loaded 2-core machine can
# hold a sanitizer build's loop off the CPU for seconds.
LATE = 1000


def test_echo(port):
    log("echo")
    c = Conn(port)
    c.send("hello world\n")
    check(c.text() == "hello world", "a line comes back unchanged")
    c.send("crlf\r\n\nPINGX\nREQUEST 1 2 3\nreq a 1 1\n")
    check(c.line() == b"crlf\r", "CRLF: the \\r is kept")
    check(c.line() == b"", "an empty line is echoed")
    check(c.text() == "PINGX", "not a command: echoed")
    check(c.text() == "REQUEST 1 2 3", "REQUEST is not REQ: echoed")
    check(c.text() == "req a 1 1", "commands are case-sensitive: echoed")
    c.send("PONG\nafter pong\n")
    check(c.text() == "after pong", "PONG gets no reply")
    c.send("sp")
    time.sleep(0.05)
    c.send("lit\n")
    check(c.text() == "split", "a line in two packets")
    c.send("STATS\n")
    s = c.text()
    check(s.startswith("STATS conns=1 "), "STATS: %s" % s)
    c.close()


def test_heartbeat_idle(port):
    log("heartbeat and idle close")
    c = Conn(port)
    c.send("x\n")
    c.text()
    t0 = c.t_last
    times = []
    while True:
        line = c.text(timeout=IDLE / 1000 + slack(LATE / 1000 + 2))
        if line is None:
            break
        times.append((line, (time.monotonic() - t0) * 1000))
        if line.startswith("BYE"):
            break
    log("  saw %s" % ", ".join("%s@%.0fms" % t for t in times))
    pings = [t for l, t in times if l == "PING"]
    byes = [(l, t) for l, t in times if l.startswith("BYE")]
    check(len(pings) >= 1, "PING after silence")
    check(pings and pings[0] >= HB - 2 and pings[0] <= HB + slack(LATE),
          "first PING at >= %d ms of silence" % HB)
    check(byes and byes[0][0] == "BYE idle", "BYE idle")
    check(byes and IDLE - 2 <= byes[0][1] <= IDLE + slack(LATE),
          "BYE idle at %d..%d ms of silence" % (IDLE, IDLE + slack(LATE)))
    eof, rest = c.expect_eof()
    check(eof and not rest, "then the server closes")
    c.close()
    # Each PING and the BYE was a timer callback, counted by its lateness
    # (the wheel counts its tasks too, so more is fine).
    s = stats(port)
    late = lateness(s)
    check(late is not None and late[0] >= len(times),
          "STATS lateness: %s callbacks (at least the %d seen), p50 %s, "
          "p99 %s, max %s" % (s.get("lateness_n"), len(times),
                              s.get("lateness_p50"), s.get("lateness_p99"),
                              s.get("lateness_max")))


def test_pong_keeps_alive(port):
    log("PONG counts as activity")
    c = Conn(port)
    end = time.monotonic() + 4 * IDLE / 1000
    pongs = 0
    ok = True
    while time.monotonic() < end:
        try:
            line = c.text(timeout=0.05)
        except TimeoutError:
            continue
        if line == "PING":
            c.send("PONG\n")
            pongs += 1
        else:
            ok = False
            log("  unexpected: %r" % line)
            break
    check(ok and pongs >= 2,
          "answering PING with PONG keeps it open for %d ms (%d PONGs)"
          % (4 * IDLE, pongs))
    t0 = c.t_last
    lines = []
    while True:
        line = c.text(timeout=IDLE / 1000 + slack(LATE / 1000 + 2))
        if line is None or line.startswith("BYE"):
            lines.append(line)
            break
        lines.append(line)
    took = (time.monotonic() - t0) * 1000
    check(lines[-1] == "BYE idle" and IDLE - 2 <= took <= IDLE + slack(LATE),
          "then silence: BYE idle after %.0f ms" % took)
    c.close()


def test_lateness(server_exe, timers):
    """A server stopped past a timer's deadline runs it late, and its
    histogram shows it: a PING due 300 ms after the echo, with the server
    stopped from right after the echo for 1 s, runs some 700 ms late, in
    the bucket 512..1023 ms; max reports that bucket's top (or 511 if the
    stop began late, on a loaded machine)."""
    log("lateness of a timer run late")
    srv = Server(server_exe, timers, "--heartbeat-ms", 300, "--idle-ms",
                 60000)
    c = Conn(srv.port)
    c.send("x\n")
    check(c.text() == "x", "echo")
    srv.proc.send_signal(signal.SIGSTOP)
    time.sleep(1.0)
    srv.proc.send_signal(signal.SIGCONT)
    check(c.text(timeout=slack(5)) == "PING", "the PING comes after SIGCONT")
    c.send("STATS\n")
    line = c.text()
    while line == "PING":
        line = c.text()
    s = parse_fields(line)
    late = lateness(s)
    check(late is not None and late[0] >= 1 and late[1][2] >= 511,
          "STATS lateness_max=%s (want >=511ms) lateness_n=%s"
          % (s.get("lateness_max"), s.get("lateness_n")))
    c.close()
    srv.stop_and_check()


def test_busy(server_exe, timers):
    log("max-conns")
    srv = Server(server_exe, timers, "--max-conns", "2", "--idle-ms", "10000")
    a = Conn(srv.port)
    b = Conn(srv.port)
    a.send("a\n")
    b.send("b\n")
    check(a.text() == "a" and b.text() == "b", "two connections work")
    c = Conn(srv.port)
    check(c.text() == "BYE busy", "the third gets BYE busy")
    eof, _ = c.expect_eof()
    check(eof, "and is closed")
    a.send("still\n")
    check(a.text() == "still", "the first two still work")
    a.send("STATS\n")  # from a: a new connection would be busy too
    s = a.text()
    check(" busy=1 " in s and " conns=2 " in s, "STATS counts it: %s" % s)
    a.close()
    b.close()
    # A freed place can be taken again.
    for _ in range(slack(50)):
        if stats(srv.port).get("conns", 9) == 0:
            break
        time.sleep(0.05)
    d = Conn(srv.port)
    d.send("d\n")
    check(d.text() == "d", "a freed place is taken again")
    d.close()
    srv.stop_and_check()


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--heartbeat-ms", str(HB),
                 "--idle-ms", str(IDLE))
    test_echo(srv.port)
    test_heartbeat_idle(srv.port)
    test_pong_keeps_alive(srv.port)

    rc, _, r = run_load(args.load, srv.port, "--mode", "idle", "--conns", 50,
                        "--duration-ms", 2000, "--idle-ms", IDLE,
                        "--heartbeat-ms", HB, "--slack-ms", slack(LATE))
    check(rc == 0, "echo-load idle: no violation")
    check(r.get("idle_closes", 0) >= 50, "echo-load idle: every connection "
          "was closed for idleness, again and again (%d)"
          % r.get("idle_closes", 0))
    rc, _, r = run_load(args.load, srv.port, "--mode", "active", "--conns",
                        50, "--duration-ms", 2000, "--interval-ms", 20,
                        "--idle-ms", IDLE)
    check(rc == 0, "echo-load active: no violation")
    check(r.get("echoed", 0) > 1000, "echo-load active: lines echoed")
    s = stats(srv.port)
    check(s.get("idle_closes", 0) >= 52, "STATS idle_closes=%s"
          % s.get("idle_closes"))
    srv.stop_and_check()

    test_lateness(args.server, args.timers)
    test_busy(args.server, args.timers)
    finish()


if __name__ == "__main__":
    main()
