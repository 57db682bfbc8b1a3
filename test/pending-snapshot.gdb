# SPDX-License-Identifier: MIT
# Manual test (README.md, "Manual tests") for test-task-producers
# pending_snapshot: holds the reader inside uvtw__records_live (lib/task-record.c) for one
# second, between its sum of the ends and its sum of the submits (an
# inferior call to usleep in the reader's frame, with the other threads
# running), so that a new thread's first task is submitted and ends inside
# that window.  uvtw_wheel_pending must still count the task that is live
# throughout.  The breakpoint is found by the text of lib/task-record.c, so keep
# the two patterns below in step with it.
set pagination off
set confirm off
python
import re
src = open("lib/task-record.c").read().split("\n")
start = next(i for i, l in enumerate(src)
             if l.startswith("uint64_t uvtw__records_live("))
line = next(i for i in range(start, len(src))
            if re.match(r"\s*submitted = 0;", src[i])) + 1
gdb.execute("break task-record.c:%d if pending_reader_armed == 1" % line)
end
commands
  silent
  set scheduler-locking off
  printf "reader held between the ends and the submits\n"
  call (int) usleep(1000000)
  continue
end
run
