#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Command lines: every bad option of uvtw-echo-server and echo-load exits
2 with a message that names it, whatever is wrong with it (a bad address,
a sign, a space, hex, an exponent, an overflow), and numbers written with
digits only are taken as they are."""

import subprocess
import sys

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import Conn, Server, check, finish, log, parse_args

# (option, value): each must be refused.
SERVER_BAD = [
    ("host", "1.2.3.4.5"),
    ("host", "localhost"),
    ("host", ""),
    ("max-work-ms", " -18446744073709551615"),
    ("max-work-ms", "-1"),
    ("max-work-ms", " 5"),
    ("max-work-ms", "5 "),
    ("max-work-ms", "+5"),
    ("max-work-ms", "0x10"),
    ("max-work-ms", "1e3"),
    ("max-work-ms", ""),
    ("max-work-ms", "18446744073709551616"),
    ("max-work-ms", "99999999999999999999999"),
    ("port", "65536"),
    ("threads", "0"),
    ("loops", "\t1"),
    ("timers", "heap"),
]

LOAD_BAD = [
    ("conns", " 5"),
    ("conns", "-5"),
    ("work-ms", " 5-10"),
    ("work-ms", "5- 10"),
    ("work-ms", "10-5"),
    ("deadline-ms", "5--10"),
    ("idle-share", " 0.5"),
    ("idle-share", "1e-1"),
    ("idle-share", "-0"),
    ("idle-share", "0.5.1"),
    ("idle-share", "2"),
    ("seed", "18446744073709551616"),
]


def refused(argv, name):
    """Runs argv, which must exit 2 at once with a message naming --name."""
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=10)
        rc, err = p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        # Taken: the program ran with it (kill()ed by subprocess.run).
        rc, err = "still running after 10 s", (e.stderr or b"").decode()
    first = (err.strip().splitlines() or ["(nothing on stderr)"])[0]
    check(rc == 2 and ("--" + name) in err,
          "%r -> exit 2 naming --%s (exit %s: %s)"
          % (argv[-1], name, rc, first))


def main():
    args = parse_args()
    log("uvtw-echo-server")
    for name, value in SERVER_BAD:
        refused([args.server, "--port", "0", "--timers", args.timers,
                 "--loops", args.loops, "--" + name, value], name)
    log("echo-load")
    # --port 1 and a short run: a value that is wrongly taken ends in a
    # connect error (exit 1), not in a hang.
    for name, value in LOAD_BAD:
        refused([args.load, "--port", "1", "--duration-ms", "1",
                 "--" + name, value], name)

    log("digits only are taken, leading zeros too")
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--max-work-ms", "0100", "--host", "127.0.0.1")
    c = Conn(srv.port)
    c.send("REQ a 101 1000\nREQ b 100 5000\n")
    line = c.text()
    check(line is not None and line.startswith("ERR work_ms must be <= 100 "),
          "--max-work-ms 0100 is 100: %r" % line)
    check(c.text(timeout=10) == "OK b", "REQ b 100 5000 -> OK b")
    c.close()
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
