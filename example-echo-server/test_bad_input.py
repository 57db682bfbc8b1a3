#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Bad input: long lines, malformed REQ, junk bytes, a client that does not
read, and abrupt disconnects with requests in flight.  None of it may
crash the server or leave anything behind (STATS returns to idle, and
under ASan the exit reports no leak)."""

import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args, slack,
                      stats)

MAX_LINE = 4096


def test_long_lines(port):
    log("long lines")
    c = Conn(port)
    c.send(b"a" * MAX_LINE + b"\n")
    check(c.line() == b"a" * MAX_LINE, "a line of exactly --max-line bytes "
          "is echoed")
    c.send(b"b" * MAX_LINE + b"\r\n")
    check(c.line() == b"b" * MAX_LINE + b"\r", "... also with CRLF")
    c.send(b"before\n" + b"c" * (MAX_LINE + 1) + b"\nafter\n")
    check(c.line() == b"before", "lines before a long one are answered")
    check(c.text() == "ERR line too long", "one byte more: ERR line too long")
    eof, rest = c.expect_eof()
    check(eof and not rest, "and the connection is closed")

    c = Conn(port)
    try:
        for _ in range(10):  # no newline ever: 10 x 1000 bytes
            c.send(b"d" * 1000)
            time.sleep(0.01)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may already have closed
    check(c.text() == "ERR line too long", "a long line in many packets")
    eof, _ = c.expect_eof()
    check(eof, "is closed too")


def test_bad_req(port):
    log("malformed REQ")
    c = Conn(port)
    bad = ["REQ", "REQ a", "REQ a 1", "REQ a 1 2 3", "REQ a -1 5",
           "REQ a 1x 5", "REQ a 1 +5", "REQ a 99999999999 5",
           "REQ a 100000 5", "REQ a 5 99999999",
           "REQ " + "i" * 65 + " 1 1", "REQ \x01\x02 1 1", "REQ  "]
    for b in bad:
        c.send(b.encode() + b"\n")
        line = c.text()
        check(line is not None and line.startswith("ERR "),
              "%r -> %r" % (b[:30], line))
    c.send("still open\n")
    check(c.text() == "still open", "the connection stays open")
    c.send("REQ\tt1\t1\t500\n")
    check(c.text() == "OK t1", "tabs separate fields too")
    c.close()


def test_junk(port):
    log("junk bytes and many lines at once")
    c = Conn(port)
    junk = bytes(b for b in range(256) if b != 10) * 3
    c.send(junk + b"\n")
    check(c.line() == junk, "every byte but \\n, NUL included, is echoed")
    lines = [b"line %d" % i for i in range(2000)]
    c.send(b"\n".join(lines) + b"\n")
    got = [c.line() for _ in lines]
    check(got == lines, "2000 lines in one send come back in order")
    c.close()


def test_no_reader(port):
    log("a client that sends but never reads")
    c = Conn(port)
    c.sock.setblocking(False)
    sent = 0
    chunk = b"z" * 1023 + b"\n"
    end = time.monotonic() + 3
    while time.monotonic() < end and sent < 64 << 20:
        try:
            sent += c.sock.send(chunk)
        except BlockingIOError:
            time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            break
    log("  sent %d KB before the server stopped reading" % (sent >> 10))
    s = stats(port)
    check(s.get("conns") == 2, "the server still answers others: %s" % s)
    check(sent < 48 << 20, "it stopped reading instead of buffering it all")
    c.reset()


def test_abrupt(port, max_reqs_port):
    log("abrupt disconnects with requests in flight")
    for i in range(5):
        c = Conn(port)
        reqs = "".join("REQ r%d 300 1000\nREQ s%d 800 100\n" % (j, j)
                       for j in range(20))
        c.send(reqs + "half a li")
        if i % 2:
            c.reset()  # RST
        else:
            c.close()  # FIN
    # One that leaves after its deadlines have answered but before the work
    # ends, and one that leaves while it is being answered.
    c = Conn(port)
    c.send("".join("REQ q%d 600 50\n" % j for j in range(10)))
    for _ in range(10):
        c.text()
    c.reset()
    c = Conn(port)
    c.send("".join("REQ p%d 10 1000\n" % j for j in range(100)))
    time.sleep(0.005)
    c.reset()

    # The server answers at once; it may take a moment (on a loaded
    # machine) to see the last reset, so the count is polled.
    s = {}
    for _ in range(slack(50)):
        s = stats(port)
        if s.get("conns") == 1:
            break
        time.sleep(0.1)
    check(s.get("conns") == 1, "the server lives on: %s" % s)
    # The work still finishes later; after that nothing may be left.
    s = {}
    for _ in range(slack(100)):
        s = stats(port)
        if s.get("tasks") == 0 and s.get("timers") == 1:
            break
        time.sleep(0.1)
    check(s.get("tasks") == 0 and s.get("timers") == 1,
          "all work ended, only STATS' own timer is left: %s" % s)

    log("max-reqs")
    c = Conn(max_reqs_port)
    c.send("".join("REQ m%d 100 2000\n" % j for j in range(10)))
    got = sorted(c.text() for _ in range(10))
    oks = [g for g in got if g.startswith("OK m")]
    errs = [g for g in got if g.startswith("ERR too many requests")]
    check(len(oks) == 8 and len(errs) == 2,
          "--max-reqs 8: 8 OK, 2 ERR (%s)" % got)
    c.close()


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--max-line", str(MAX_LINE))
    srv2 = Server(args.server, args.timers, "--max-reqs", "8")
    test_long_lines(srv.port)
    test_bad_req(srv.port)
    test_junk(srv.port)
    test_no_reader(srv.port)
    test_abrupt(srv.port, srv2.port)
    srv.stop_and_check()
    srv2.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
