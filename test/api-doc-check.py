#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/api.md lists every public call of include/uvtw.h, as declared.

    api-doc-check.py HEADER PAGE

Every UVTW_EXTERN function of HEADER must have a "### name" heading in
PAGE followed by a fenced block whose first line is its declaration, the
same as in HEADER up to white space; every "### uvtw_*" heading of PAGE
must name a function HEADER declares.  Prints each violation and exits 1;
exits 1 as well if HEADER declares no function, so that the check cannot
pass on a header it failed to read.
"""

import re
import sys


def declarations(header):
    """{name: declaration}, each declaration on one line, without
    UVTW_EXTERN, white space collapsed."""
    out = {}
    for m in re.finditer(r"^UVTW_EXTERN\s+([^;]*;)", header, re.M):
        decl = " ".join(m.group(1).split())
        name = re.search(r"(uvtw_\w+)\(", decl)
        if name:
            out[name.group(1)] = decl
    return out


def entries(page):
    """{name: the first line of the fenced block after its heading}."""
    out = {}
    lines = page.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"### (uvtw_\w+)\s*$", line)
        if not m:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        sig = None
        if j + 1 < len(lines) and lines[j].startswith("```"):
            sig = " ".join(lines[j + 1].split())
        out[m.group(1)] = sig
    return out


def main():
    if len(sys.argv) != 3:
        print("usage: api-doc-check.py HEADER PAGE", file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        decls = declarations(f.read())
    with open(sys.argv[2], encoding="utf-8") as f:
        docs = entries(f.read())
    page = sys.argv[2]
    if not decls:
        print("api-doc-check: no UVTW_EXTERN function in %s" % sys.argv[1])
        return 1
    bad = 0
    for name, decl in decls.items():
        if name not in docs:
            print("api-doc-check: %s is not in %s (a '### %s' heading)"
                  % (name, page, name))
            bad = 1
        elif docs[name] != decl:
            print("api-doc-check: %s: %s says\n  %s\nthe header\n  %s"
                  % (name, page, docs[name], decl))
            bad = 1
    for name in docs:
        if name not in decls:
            print("api-doc-check: %s has %s, which the header does not "
                  "declare" % (page, name))
            bad = 1
    if not bad:
        print("api-doc-check: ok, %d functions" % len(decls))
    return bad


if __name__ == "__main__":
    sys.exit(main())
