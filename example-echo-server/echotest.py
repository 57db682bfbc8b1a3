# SPDX-License-Identifier: MIT
"""Helpers shared by the echo server's tests (test_*.py).

Each test starts uvtw-echo-server on port 0, reads the port from the line
it prints, talks to it with sockets or echo-load, then stops it with
SIGTERM and checks that it exits 0 and that no sanitizer complained.
Timing bounds are generous on purpose: the tests run on loaded 2-core
machines, and a sanitizer tree scales them (--time-scale).

Every process a test starts (servers, echo-load) goes through spawn(): it
dies with the test, whatever way the test ends.  A test that stops early
(a failed wait, an exception, SIGTERM) kills what is still running when
the interpreter exits, and the kernel kills it if the test itself is
killed (PR_SET_PDEATHSIG).  The echo-server-leftovers test checks that
none is left after the label's tests.
"""

import argparse
import atexit
import ctypes
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                   "ThreadSanitizer")

# The tops of the lateness buckets STATS and the exit line report, in ms:
# 0, then 2^i - 1 for i = 1 to 14; the last bucket is open, ">=16384ms".
LATENESS_TOPS = [0] + [(1 << i) - 1 for i in range(1, 15)]
LATENESS_OPEN = 1 << 14

_failures = []
# The processes spawn() started, killed at exit if still running.
_children = []
# Scales every bound on how long something may take (parse_args).
_time_scale = 1.0


def slack(amount):
    """A bound on how long something may take (any unit; an int stays an
    int), scaled for this tree: sanitizers slow the server several times."""
    scaled = amount * _time_scale
    return int(scaled) if isinstance(amount, int) else scaled


PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    """In the child, before exec: SIGKILL when the test's thread dies."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(argv, preexec=None, **kwargs):
    """subprocess.Popen(argv, **kwargs) for a process that must not
    outlive the test: see the module's comment."""
    def child():
        _die_with_parent()
        if preexec:
            preexec()
    p = subprocess.Popen(argv, preexec_fn=child, **kwargs)
    _children.append(p)
    return p


def _kill_children():
    for p in _children:
        if p.poll() is None:
            log("killing %s (pid %d): the test ended before it did"
                % (os.path.basename(p.args[0]), p.pid))
            p.kill()
            p.wait()


def _exit_on_sigterm(signum, frame):
    sys.exit("stopped by signal %d" % signum)


atexit.register(_kill_children)
signal.signal(signal.SIGTERM, _exit_on_sigterm)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True, help="uvtw-echo-server")
    p.add_argument("--load", required=True, help="echo-load")
    p.add_argument("--timers", default="wheel", choices=("wheel", "uv"))
    p.add_argument("--loops", default="1",
                   help="--loops for the servers the test starts")
    p.add_argument("--sanitized", action="store_true",
                   help="a sanitizer build: memory is not measured")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiplies the bounds on how long things take")
    args = p.parse_args()
    global _time_scale
    _time_scale = args.time_scale
    return args


def raise_nofile(want=8192):
    """1,000 connections need more descriptors than a default 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, want)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def log(msg):
    print(msg, flush=True)


def check(cond, msg):
    """Records a failure instead of stopping, so one run shows them all."""
    if cond:
        log("  ok   " + msg)
    else:
        log("  FAIL " + msg)
        _failures.append(msg)
    return cond


def finish():
    if _failures:
        log("%d check(s) failed:" % len(_failures))
        for f in _failures:
            log("  - " + f)
        sys.exit(1)
    log("all checks passed")
    sys.exit(0)


class Server:
    """uvtw-echo-server on a free port; stderr goes to a temporary file."""

    def __init__(self, exe, timers, *extra, start_timeout=15.0,
                 nofile=None):
        raise_nofile()
        self.err = tempfile.TemporaryFile()
        self.argv = ([exe, "--port", "0", "--timers", timers]
                     + [str(a) for a in extra])
        log("starting: " + " ".join(self.argv)
            + (" (ulimit -n %d)" % nofile if nofile else ""))

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = spawn(self.argv, preexec=limit, stdout=subprocess.PIPE,
                          stderr=self.err)
        line = b""
        deadline = time.monotonic() + slack(start_timeout)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [],
                                              left)[0]:
                self.proc.kill()
                raise RuntimeError("server printed no port: %r" % line)
            b = os.read(self.proc.stdout.fileno(), 1)
            if not b:
                raise RuntimeError("server exited: %s" % self.stderr())
            line += b
        m = re.search(rb"listening on \S+:(\d+)", line)
        if not m:
            raise RuntimeError("unexpected first line: %r" % line)
        self.port = int(m.group(1))
        self.rc = None

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def peak_rss_kb(self):
        """VmHWM of the running server, in KiB (Linux)."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        """Signals the server; returns (exit code, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        timeout = slack(timeout)
        try:
            self.rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.rc = self.proc.wait()
            log("server did not exit within %.0f s after the signal"
                % timeout)
            self.rc = "timeout"
        self.proc.stdout.close()
        return self.rc, self.stderr()

    def stop_and_check(self, sig=signal.SIGTERM, timeout=30.0):
        rc, err = self.stop(sig, timeout)
        check(rc == 0, "server exits 0 on %s (got %s)"
              % (signal.Signals(sig).name, rc))
        bad = [m for m in SANITIZER_MARKS if m in err]
        check(not bad, "no sanitizer report (%s)" % ", ".join(bad or ["-"]))
        exit_line = ""
        for line in err.splitlines():
            if "exit:" in line:
                exit_line = line
            if "exit:" in line or bad:
                log("  server: " + line)
        check(lateness(parse_fields(exit_line)) is not None,
              "the exit line reports lateness_n, _p50, _p99 and _max")
        return err


class Conn:
    """A line-oriented client socket with timeouts."""

    def __init__(self, port, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=slack(10))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.t_last = time.monotonic()  # our last send: activity

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        # Taken before sending: the server cannot see the bytes earlier, so
        # "not before X ms of silence" checks stay on the safe side.
        self.t_last = time.monotonic()
        self.sock.sendall(data)

    def line(self, timeout=None):
        """The next line (bytes, without \\n); None at EOF; raises
        TimeoutError if nothing complete comes within timeout seconds
        (by default slack(5): a wait, not a bound the test asserts)."""
        if timeout is None:
            timeout = slack(5.0)
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no line in %.1f s (have %r)"
                                   % (timeout, self.buf[:80]))
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                d = b""
            if not d:
                self.eof = True
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def text(self, timeout=None):
        line = self.line(timeout)
        return None if line is None else line.decode(errors="replace")

    def expect_eof(self, timeout=None):
        """True if the server closes (after any lines, which are returned
        in a list)."""
        rest = []
        try:
            while True:
                line = self.line(timeout)
                if line is None:
                    return True, rest
                rest.append(line)
        except TimeoutError:
            return False, rest

    def reset(self):
        """Closes abruptly: RST, not FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                             b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.sock.close()

    def close(self):
        self.sock.close()


def parse_fields(line):
    """The key=value words of a STATS or exit line, as a dict; values that
    are digits become ints."""
    out = {}
    for kv in (line or "").split():
        k, eq, v = kv.partition("=")
        if eq:
            out[k] = int(v) if v.isdigit() else v
    return out


def lateness(fields):
    """The lateness fields of parse_fields' dict as (n, [p50, p99, max]),
    each quantile the top of its bucket in ms (LATENESS_OPEN for
    ">=16384ms"); None if one is missing or not what the server prints:
    a bucket's top, quantiles in order, all 0 when nothing was counted."""
    n = fields.get("lateness_n")
    if not isinstance(n, int):
        return None
    qs = []
    for k in ("lateness_p50", "lateness_p99", "lateness_max"):
        m = re.fullmatch(r"(<=|>=)(\d+)ms", str(fields.get(k, "")))
        if not m:
            return None
        v = int(m.group(2))
        if v not in (LATENESS_TOPS if m.group(1) == "<="
                     else [LATENESS_OPEN]):
            return None
        qs.append(v)
    if qs != sorted(qs) or (n == 0 and qs != [0, 0, 0]):
        return None
    return n, qs


def stats(port):
    """STATS from a fresh connection, as a dict of ints."""
    c = Conn(port)
    c.send("STATS\n")
    line = c.text()
    c.close()
    return parse_fields(line)


def run_load(exe, port, *args, timeout=120):
    """Runs echo-load; returns (exit code, output, RESULT dict)."""
    argv = [exe, "--port", str(port)] + [str(a) for a in args]
    log("running: " + " ".join(argv))
    p = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.communicate(timeout=slack(timeout))[0].decode(errors="replace")
    for line in out.splitlines():
        log("  | " + line)
    result = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            for kv in line.split()[1:]:
                k, _, v = kv.partition("=")
                try:
                    result[k] = float(v)
                except ValueError:
                    result[k] = v  # server_loop_conns=3,4
    return p.returncode, out, result
