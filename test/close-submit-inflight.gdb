# SPDX-License-Identifier: MIT
# Manual test (README.md, "Manual tests") for test-task-close
# submit_inflight: holds the producer inside uvtw_submit for two seconds,
# after it published its task and before its fence (an inferior call to
# usleep; the other threads run meanwhile), while the loop closes the
# wheel.  The task must not be lost, and close must not free the wheel
# under the submit; if it did, ASan would report a use of the freed wheel.
# The breakpoint is found by the text of lib/task-submit.c, so keep the
# two patterns below in step with it.
set pagination off
set confirm off
python
import re
src = open("lib/task-submit.c").read().split("\n")
start = next(i for i, l in enumerate(src) if l.startswith("int uvtw_submit("))
line = next(i for i in range(start, len(src))
            if re.match(r"\s*UVTW__TEST_BEFORE_FENCE\(\);", src[i])) + 1
gdb.execute("break task-submit.c:%d if close_producer_armed == 1" % line)
end
commands
  silent
  set scheduler-locking off
  printf "producer held before its fence\n"
  call (int) usleep(2000000)
  continue
end
run
