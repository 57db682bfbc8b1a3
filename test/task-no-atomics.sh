#!/bin/sh
# SPDX-License-Identifier: MIT
# lib/task.c, the loop's side of the tasks, has no atomic operation: every
# atomic step is a verb of lib/task-shared.c (its rule 3), so the state
# machine has one home.  Fails, naming the lines, if task.c uses C11
# atomics, the __atomic or __sync builtins, or declares an _Atomic.
#   usage: task-no-atomics.sh SOURCE_DIR
set -eu
src=$1/lib/task.c
[ -f "$src" ] || { echo "task-no-atomics: no $src" >&2; exit 1; }
# Comments out, so that prose may say "atomic".
found=$(sed 's,/\*.*\*/,,g' "$src" | awk '
  /\/\*/ { c = 1 } !c { print NR ": " $0 } /\*\// { c = 0 }' |
  grep -E '(^|[^A-Za-z0-9_])(atomic_[a-z_]+|_Atomic|__atomic_[a-z_]+|__sync_[a-z_]+|__c11_atomic_[a-z_]+)' || true)
if [ -n "$found" ]; then
  echo "$found"
  echo "task-no-atomics: lib/task.c makes atomic operations" >&2
  exit 1
fi
echo "task-no-atomics: lib/task.c has none"
