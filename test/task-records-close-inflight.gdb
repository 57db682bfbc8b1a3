# SPDX-License-Identifier: MIT
# Holds the producer of case close-inflight (test-task-review) inside
# uvtw_submit, after it looked for CLOSING and before wake_loop, for two
# seconds (an inferior call to usleep; the other threads run meanwhile).
#   gdb -q -batch -x test/review-close-inflight.gdb \
#       --args build-asan/test/test-task-review close-inflight
# The line number is lib/task.c at commit 7cfe13a.
set pagination off
set confirm off
break task.c:623 if review_producer_armed == 1
commands
  silent
  set scheduler-locking off
  printf "producer held before wake_loop\n"
  call (int) usleep(2000000)
  continue
end
run
