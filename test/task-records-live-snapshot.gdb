# SPDX-License-Identifier: MIT
# Holds the reader of case live-snapshot (test-task-review) inside
# live_count, after it read the record list and before it reads the ends:
# an inferior call to usleep in the reader's frame, during which the other
# threads run (scheduler-locking off).
#   gdb -q -batch -x test/review-live-snapshot.gdb \
#       --args build/test/test-task-review live-snapshot
# The line number is lib/task.c at commit 7cfe13a.
set pagination off
set confirm off
break task.c:1311 if review_reader_armed == 1
commands
  silent
  set scheduler-locking off
  printf "reader held after reading the record list\n"
  call (int) usleep(1000000)
  continue
end
run
