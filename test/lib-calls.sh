#!/bin/sh
# SPDX-License-Identifier: MIT
# The calls between the files of lib/, from their objects: an edge
# "a -> b" when a's object uses a symbol that b's defines (inline functions
# of a header count for the file that includes them).  Prints the graph and
# fails if the files call each other in a circle (tsort finds the loop).
#
#   test/lib-calls.sh NM OBJECT...
set -eu
nm=$1
shift
tmp=${TMPDIR:-/tmp}/uvtw-lib-calls.$$
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
for o in "$@"; do
  f=$(basename "$o" | sed 's/\.c\.o.*$//; s/\.o.*$//')
  "$nm" --defined-only "$o" | awk 'NF == 3 && $2 ~ /[TDBR]/ { print $3 }' \
    >"$tmp/$f.def"
  "$nm" -u "$o" | awk '{ print $NF }' >"$tmp/$f.use"
done
: >"$tmp/edges"
for use in "$tmp"/*.use; do
  a=$(basename "$use" .use)
  for def in "$tmp"/*.def; do
    b=$(basename "$def" .def)
    [ "$a" = "$b" ] && continue
    if grep -qxFf "$def" "$use"; then
      echo "$a $b" >>"$tmp/edges"
    fi
  done
done
sort -u "$tmp/edges" | awk '{ print $1 " -> " $2 }'
# tsort reports a loop on stderr and exits non-zero.
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/loop"; then
  cat "$tmp/loop"
  echo "lib-calls: the files of lib/ call each other in a circle" >&2
  exit 1
fi
echo "lib-calls: no circle"
