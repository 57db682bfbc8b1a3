#!/bin/sh
# SPDX-License-Identifier: MIT
# Model-checks one Promela model exhaustively with SPIN (safety: assertions
# and invalid end states): spin -a, cc pan.c, ./pan.
#   usage: spin-check.sh SPIN CC MODEL.pml WORKDIR pass|fail [-DNAME...]
# "pass": the search completes with no error; "fail": pan reports an error
# (the broken twin, which must not pass vacuously).  The -D options pick
# the model's configuration (its header lists them).
set -e
spin=$1
cc=$2
model=$3
dir=$4
expect=$5
shift 5
mkdir -p "$dir"
cd "$dir"
rm -f pan pan.* ./*.trail
cp "$model" model.pml
"$spin" "$@" -a model.pml
# -w: pan.c's generated code trips GCC's array-bounds warnings.
"$cc" -O2 -w -DSAFETY -DCOLLAPSE -o pan pan.c
./pan -m2000 >pan.out 2>&1 || true
grep -E "violated|errors:|depth|states, stored|elapsed|total actual" pan.out
echo "spin-check: $model $* ($expect)"
errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out)
if [ -z "$errors" ]; then
  echo "spin-check: no result from pan" >&2
  exit 1
fi
if grep -q "max search depth too small" pan.out; then
  echo "spin-check: search incomplete (depth)" >&2
  exit 1
fi
if [ "$expect" = pass ] && [ "$errors" -eq 0 ]; then
  exit 0
fi
if [ "$expect" = fail ] && [ "$errors" -gt 0 ]; then
  echo "spin-check: counterexample found, as the broken twin must"
  exit 0
fi
echo "spin-check: errors $errors, expected $expect" >&2
exit 1
