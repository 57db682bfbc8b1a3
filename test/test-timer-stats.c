/* SPDX-License-Identifier: MIT */
/* uvtw_wheel_stats and uvtw_wheel_pending for loop-thread timers:
 *   - timers_active is exact at every step (a restart does not count twice;
 *     a repeating timer is active inside its own callback, a one-shot not);
 *   - fired counts callbacks run, exactly;
 *   - driver_wakeups counts the passes in which the driver fired.  The
 *     driver is armed for exactly the next deadline and nothing ticks while
 *     nothing is due, so it equals the number of distinct loop iterations in
 *     which wheel callbacks ran, including when the earliest timer was
 *     stopped after the driver had been armed for it (the loop's prepare
 *     phase re-arms it before its time comes);
 *   - no tasks: tasks_live stays 0 and pending equals timers_active. */

#include <string.h>

#include "timer-harness.h"

static uvtw_timer_t t[4];
static uint64_t runs;
static uint64_t passes; /* distinct iterations with a wheel callback */
static int64_t last_pass = -1;
static int rep_count;


static void stats(uvtw_stats_t* s) {
  memset(s, 0xa5, sizeof(*s));
  uvtw_wheel_stats(wheel, s);
  ASSERT_UEQ(0, s->tasks_live);
  ASSERT_UEQ(s->timers_active, uvtw_wheel_pending(wheel));
}


static void expect(uint64_t active, uint64_t fired, uint64_t wakeups) {
  uvtw_stats_t s;

  stats(&s);
  ASSERT_UEQ(active, s.timers_active);
  ASSERT_UEQ(fired, s.fired);
  ASSERT_UEQ(wakeups, s.driver_wakeups);
}


static void note_run(void) {
  runs++;
  if (last_pass != iteration) {
    last_pass = iteration;
    passes++;
  }
}


static void one_shot_cb(uvtw_timer_t* timer) {
  uvtw_stats_t s;
  uint64_t active;
  int i;

  note_run();
  active = 0;
  for (i = 0; i < 4; i++)
    active += uvtw_timer_is_active(&t[i]) != 0;
  ASSERT_EQ(0, uvtw_timer_is_active(timer));
  stats(&s);
  ASSERT_UEQ(active, s.timers_active);
  /* fired counts this callback already, or from when it returns: either
   * way it is exact around it. */
  ASSERT(s.fired == runs || s.fired == runs - 1);
}


static void repeat_cb(uvtw_timer_t* timer) {
  uvtw_stats_t s;

  note_run();
  ASSERT_EQ(1, uvtw_timer_is_active(timer));
  stats(&s);
  ASSERT_UEQ(1, s.timers_active);
  if (++rep_count == 5) {
    ASSERT_EQ(0, uvtw_timer_stop(timer));
    stats(&s);
    ASSERT_UEQ(0, s.timers_active);
  }
}


static int t0_stopped;
static int t0_runs;

static void stoppable_cb(uvtw_timer_t* timer) {
  ASSERT_EQ(0, t0_stopped);
  t0_runs++;
  one_shot_cb(timer);
}


int main(void) {
  uvtw_stats_t s;
  int i;
  int k;

  setup();
  for (i = 0; i < 4; i++)
    ASSERT_EQ(0, uvtw_timer_init(wheel, &t[i]));

  /* A new wheel: all zero. */
  stats(&s);
  ASSERT_UEQ(0, s.timers_active);
  ASSERT_UEQ(0, s.fired);
  ASSERT_UEQ(0, s.driver_wakeups);
  ASSERT_UEQ(0, s.tasks_accepted);
  ASSERT_UEQ(0, s.tasks_run);
  ASSERT_UEQ(0, s.tasks_cancelled);
  ASSERT_UEQ(0, s.tasks_closed);
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));

  /* Starts, restarts and stops. */
  ASSERT_EQ(0, uvtw_timer_start(&t[0], one_shot_cb, 10, 0));
  expect(1, 0, 0);
  ASSERT_EQ(0, uvtw_timer_start(&t[1], one_shot_cb, 20, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t[2], never_cb, 3600 * 1000, 0));
  expect(3, 0, 0);
  ASSERT_EQ(0, uvtw_timer_start(&t[1], one_shot_cb, 20, 0)); /* restart */
  ASSERT_EQ(0, uvtw_timer_again(&t[1]));                     /* no-op */
  expect(3, 0, 0);
  ASSERT_EQ(0, uvtw_timer_stop(&t[2]));
  ASSERT_EQ(0, uvtw_timer_stop(&t[2]));
  ASSERT_EQ(0, uvtw_timer_stop(&t[3])); /* never started */
  expect(2, 0, 0);

  /* Two one-shots run. */
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_UEQ(2, runs);
  expect(0, 2, passes);
  ASSERT_UGE(passes, 1);

  /* A repeating timer runs five times and stops itself. */
  ASSERT_EQ(0, uvtw_timer_start(&t[3], repeat_cb, 5, 5));
  expect(1, 2, passes);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(5, rep_count);
  ASSERT_UEQ(7, runs);
  expect(0, 7, passes);

  /* The earliest timer is stopped after the driver was armed for it (and
   * the loop ran once with it armed), the loop runs once more (its prepare
   * phase re-arms the driver), then its time passes: the driver does not
   * wake up for nothing.  Likewise when it is restarted to a later
   * deadline.  Repeated at different loop times, since a wheel's slot
   * boundaries fall differently each time.  (Should the box stall before
   * the NOWAIT pass, t[0] runs there; the counts stay exact either way.) */
  for (k = 0; k < 16; k++) {
    uint64_t before;

    before = runs;
    t0_stopped = 0;
    t0_runs = 0;
    uv_sleep(1 + k % 4);
    uv_update_time(&loop);
    ASSERT_EQ(0, uvtw_timer_start(&t[0], stoppable_cb, 7 + k, 0));
    ASSERT_EQ(0, uvtw_timer_start(&t[1], one_shot_cb, 60, 0));
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
    if (k % 2 == 0)
      ASSERT_EQ(0, uvtw_timer_stop(&t[0]));
    else
      ASSERT_EQ(0, uvtw_timer_start(&t[0], one_shot_cb, 70, 0));
    t0_stopped = 1;
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
    uv_sleep(30);
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_UEQ(before + 1 + k % 2 + t0_runs, runs);
    expect(0, runs, passes);
  }

  teardown();
  return 0;
}
