# SPDX-License-Identifier: MIT
# Holds the reader of test-task-records live_snapshot inside live_count
# (lib/task.c) for one second, between its sum of the ends and its sum of
# the submits: an inferior call to usleep in the reader's frame, while the
# other threads run (scheduler-locking off), so that a new thread's first
# task is submitted and ends inside that window.  Run from the top of the
# source tree, on any build:
#   gdb -q -batch -x test/task-records-live-snapshot.gdb \
#       --args build/test/test-task-records live_snapshot
# It passes if the case prints "ok".  Before the fix (live_count read the
# record list once, before the ends) the window to hold was between that
# read and the ends; the case then failed with "uvtw_wheel_pending saw 0".
set pagination off
set confirm off
python
import re
src = open("lib/task.c").read().split("\n")
start = next(i for i, l in enumerate(src)
             if l.startswith("static uint64_t live_count("))
line = next(i for i in range(start, len(src))
            if re.match(r"\s*submitted = 0;", src[i])) + 1
gdb.execute("break task.c:%d if records_reader_armed == 1" % line)
end
commands
  silent
  set scheduler-locking off
  printf "reader held between the ends and the submits\n"
  call (int) usleep(1000000)
  continue
end
run
