#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one scenario of the Relacy model (test/task-protocol-relacy.cpp)
# and checks Relacy's verdict.
#   usage: relacy-check.sh PROGRAM SCENARIO ITERATIONS pass|'KIND'
# "pass": Relacy reports SUCCESS and the program exits 0.  Otherwise KIND
# is the report the broken twin must give (say 'DATA RACE'): the program
# must fail with exactly that report, not another error, so the twin
# cannot pass by breaking in some unrelated way.
set -u
program=$1
scenario=$2
iterations=$3
expect=$4
out=$("$program" "$scenario" "$iterations")
status=$?
# The verdict line: "<scenario>: <REPORT> after N iterations ..."; the
# history Relacy prints before it explains a failure.
verdict=$(printf '%s\n' "$out" | grep "^$scenario: ")
if [ "$expect" = pass ]; then
  printf '%s\n' "$out" | grep -A 2 "^$scenario: "
  [ "$status" -eq 0 ] && exit 0
  printf '%s\n' "$out" | tail -n 80
  echo "relacy-check: $scenario failed, expected SUCCESS" >&2
  exit 1
fi
# Where Relacy saw it (the history's last line of that kind).
printf '%s\n' "$out" | grep -- "$expect.*, in " | tail -n 1
printf '%s\n' "$verdict"
case $verdict in
  "$scenario: $expect after "*)
    if [ "$status" -ne 0 ]; then
      echo "relacy-check: the broken twin reports $expect, as it must"
      exit 0
    fi
    ;;
esac
echo "relacy-check: expected Relacy to report $expect (exit status $status)" >&2
exit 1
