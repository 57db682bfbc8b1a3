#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Overload is visible: under a low descriptor limit (ulimit -n 64) more
clients connect than the server can accept.  Every failed accept is
counted in STATS accept_errors and logged at most once a second with the
count; the connections it has are served meanwhile; and once descriptors
come back, the clients that waited are served too."""

import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args, slack,
                      stats)

NOFILE = 64
CLIENTS = 120
KEEP = 30  # clients left after the others close: fewer than NOFILE


def main():
    args = parse_args()
    t0 = time.monotonic()
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--heartbeat-ms", 60000, "--idle-ms", 120000,
                 nofile=NOFILE)
    log("%d clients against a server with %d descriptors" % (CLIENTS, NOFILE))
    first = Conn(srv.port)
    first.send("first\n")
    check(first.text() == "first", "a first client is served")
    conns = []
    for i in range(CLIENTS):
        conns.append(Conn(srv.port))  # the kernel completes the handshake
    time.sleep(1.5)
    first.send("still here\n")
    check(first.text(timeout=slack(10.0)) == "still here",
          "out of descriptors, it still serves the connections it has")
    check(srv.alive(), "the server is running")

    log("descriptors come back: the clients close, the waiting ones are "
        "accepted")
    for c in conns[: CLIENTS - KEEP]:
        c.close()
    time.sleep(1.0)
    # The rest were accepted now or are waiting in the kernel's queue:
    # each one that gets an echo has been accepted after the shortage.
    served = 0
    for c in conns[CLIENTS - KEEP:]:
        try:
            c.send("late\n")
            if c.text(timeout=slack(10.0)) == "late":
                served += 1
        except (OSError, TimeoutError):
            pass
    check(served == KEEP,
          "every client still connected is served: %d/%d" % (served, KEEP))
    for c in conns[CLIENTS - KEEP:]:
        c.close()
    time.sleep(0.5)
    s = stats(srv.port)
    log("  STATS: %s" % s)
    check(s.get("accept_errors", 0) >= 1,
          "STATS counts the failed accepts: accept_errors=%s"
          % s.get("accept_errors"))
    first.close()
    err = srv.stop_and_check()
    secs = time.monotonic() - t0
    logged = [l for l in err.splitlines() if "accept:" in l]
    for line in logged[:3]:
        log("  server: " + line)
    check(logged and "accept errors so far" in logged[0],
          "stderr says so, with the count")
    check(len(logged) <= secs + 1,
          "at most once a second (%d lines in %.1f s)" % (len(logged), secs))
    finish()


if __name__ == "__main__":
    main()
