#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the C examples of Markdown files out as programs.

Every ```c fenced block is example code.  The blocks of one level-2
section ("## Title") are one program, in the order they appear: the first
block starts the program (its #includes), later ones complete it (main).
A program of README.md goes to OUTDIR/readme-<title-slug>.c, one of
docs/<page>.md to OUTDIR/docs-<page>-<title-slug>.c, and its name (the file
name without .c) is printed on its own line.  Any other output file in
OUTDIR that starts with "readme-" or "docs-" is removed, so that a renamed
section or page leaves no stale program.

Usage: readme-examples.py OUTDIR FILE.md...
"""

import os
import re
import sys


def programs(markdown, path):
    """Yields (section title, C source) for every section with C blocks."""
    title = None
    blocks = {}
    order = []
    block = None
    for number, line in enumerate(markdown.splitlines(), 1):
        if block is not None:
            if line.strip() == "```":
                blocks[title].append("".join(block))
                block = None
            else:
                block.append(line + "\n")
            continue
        if line.startswith("## "):
            title = line[3:].strip()
        elif line.strip() == "```c":
            if title is None:
                sys.exit("line %d: a C example before any ## section" % number)
            if title not in blocks:
                blocks[title] = []
                order.append(title)
            block = ['#line %d "%s"\n' % (number + 1, path)]
    if block is not None:
        sys.exit("the last ```c block is not closed")
    for title in order:
        yield title, "\n".join(blocks[title])


def slug(title):
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: readme-examples.py OUTDIR FILE.md...")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    names = []
    for markdown_path in sys.argv[2:]:
        page = os.path.splitext(os.path.basename(markdown_path))[0]
        prefix = "readme-" if page == "README" else "docs-" + page + "-"
        with open(markdown_path, encoding="utf-8") as f:
            markdown = f.read()
        for title, source in programs(markdown, markdown_path):
            name = prefix + slug(title)
            if name in names:
                sys.exit("two sections are named %r" % title)
            names.append(name)
            path = os.path.join(outdir, name + ".c")
            # Rewrite only on change, so that the build redoes only what
            # changed.
            old = None
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    old = f.read()
            if old != source:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(source)
    for entry in os.listdir(outdir):
        if (entry.startswith(("readme-", "docs-")) and entry.endswith(".c")
                and entry[:-2] not in names):
            os.remove(os.path.join(outdir, entry))
    print("\n".join(names))


if __name__ == "__main__":
    main()
