#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""SIGTERM (and SIGINT) with connections and requests in flight: every
client gets BYE shutdown and then EOF, the server exits 0, and in an ASan
build it reports no leak."""

import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import Conn, Server, check, finish, log, parse_args, slack, spawn


def scenario(args, sig):
    log("%s with work in flight" % signal.Signals(sig).name)
    # A short drain: the requests below outlast any drain (see test_drain).
    srv = Server(args.server, args.timers, "--stats-ms", "200",
                 "--drain-ms", "1000")
    conns = []
    for i in range(40):
        c = Conn(srv.port)
        if i % 4 == 0:
            c.send("hello %d\n" % i)
            c.text()
        elif i % 4 == 1:
            # work far longer than the test: shutdown must not wait for it
            c.send("REQ a%d 30000 60000\nREQ b%d 30000 50\nREQ c%d 0 60000\n"
                   % (i, i, i))
        elif i % 4 == 2:
            c.send("half a line")
        conns.append(c)
    # Queue more work than the threadpool has threads (default 32).
    c = Conn(srv.port)
    c.send("".join("REQ q%d 20000 60000\n" % j for j in range(100)))
    conns.append(c)
    # And a load client that is told to expect the shutdown.
    load = spawn(
        [args.load, "--port", str(srv.port), "--mode", "mixed", "--conns",
         "100", "--duration-ms", "20000", "--interval-ms", "20",
         "--allow-shutdown", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(1.0)

    # One signal only: a second one during shutdown kills the server at
    # once, by design (a second Ctrl-C).
    t0 = time.monotonic()
    err = srv.stop_and_check(sig, timeout=30)
    took = time.monotonic() - t0
    # Well before the 20 s and 30 s of work in flight.
    bound = min(slack(10.0), 15.0)
    check(took < bound, "exit within %.0f s (%.1f s), work in flight or not"
          % (bound, took))
    check("shutting down" in err, "it says why it stops")

    good = 0
    for c in conns:
        eof, lines = c.expect_eof(timeout=slack(5.0))
        if eof and lines and lines[-1] == b"BYE shutdown":
            good += 1
        else:
            log("  conn: eof=%s last lines %r" % (eof, lines[-3:]))
        c.close()
    check(good == len(conns),
          "every connection got BYE shutdown then EOF (%d/%d)"
          % (good, len(conns)))
    out = load.communicate(timeout=slack(30))[0].decode()
    log("  | " + out.strip().replace("\n", "\n  | "))
    check(load.returncode == 0 and "shutdown_closes=100" in out,
          "echo-load saw 100 BYE shutdown and no violation")


def main():
    args = parse_args()
    scenario(args, signal.SIGTERM)
    scenario(args, signal.SIGINT)
    finish()


if __name__ == "__main__":
    main()
