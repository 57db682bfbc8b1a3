# SPDX-License-Identifier: MIT
# Holds the producer of test-task-records close_inflight inside
# uvtw_submit for two seconds, after it published its task and before its
# wake-up (an inferior call to usleep; the other threads run meanwhile),
# while the loop closes the wheel.  Run from the top of the source tree,
# on the ASan build:
#   gdb -q -batch -x test/task-records-close-inflight.gdb \
#       --args build-asan/test/test-task-records close_inflight
# It passes if the case prints "ok".  Before close waited for calls inside
# the wheel, close completed and freed the wheel meanwhile, and ASan
# reported a heap-use-after-free in wake_loop.
set pagination off
set confirm off
python
import re
src = open("lib/task.c").read().split("\n")
put = next(i for i, l in enumerate(src)
           if "queue_put(rec, id_of(node, gen));" in l)
line = next(i for i in range(put, len(src))
            if re.match(r"\s*wake_loop\(wheel\);", src[i])) + 1
gdb.execute("break task.c:%d if records_producer_armed == 1" % line)
end
commands
  silent
  set scheduler-locking off
  printf "producer held before wake_loop\n"
  call (int) usleep(2000000)
  continue
end
run
