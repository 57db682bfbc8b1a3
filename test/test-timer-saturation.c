/* SPDX-License-Identifier: MIT */
/* Saturated deadlines, one rule at every tick: a deadline past UINT64_MAX
 * ms saturates to UINT64_MAX, which the wheel's clock never reaches; such a
 * timer never fires, stays active, and uvtw_timer_get_due_in and
 * uvtw_wheel_next_due say UINT64_MAX ("never") for it.  A repeat that
 * saturates likewise: the timer fires once and then never.  On virtual
 * wheels of ticks 1 to 20, 255, 257 (divisors of 2^64 - 1 among them) and
 * 1000, one-shot and repeating, without leeway and with leeway up to
 * UVTW_LEEWAY_MS_MAX: driving the wheel to idle (advance to next_due until
 * it says never) ends within a few steps, and so does
 * uvtw_wheel_advance(UINT64_MAX).  The steps are counted, not timed. */

#include <stdint.h>

#include "test-cases.h"
#include "timer-harness.h"

/* More advances than any case needs to reach idle: each advance runs every
 * timer due within it. */
#define MAX_STEPS 16

enum {
  NEVER,        /* timeout UINT64_MAX, one-shot */
  NEVER_REPEAT, /* timeout UINT64_MAX, repeat 1 */
  ONCE_THEN_NEVER /* timeout 1, repeat UINT64_MAX */,
  LAST_MS, /* due at UINT64_MAX - 1 ms, a reachable deadline */
  NTIMERS
};

static uvtw_timer_t timers[NTIMERS];
static int runs[NTIMERS];


static void run_cb(uvtw_timer_t* timer) {
  runs[timer - timers]++;
}


/* One wheel of tick `tick`, every timer with leeway `leeway`: start them,
 * drive to idle, then advance to the end of time. */
static void one_wheel(uint64_t tick, uint64_t leeway) {
  uvtw_options_t options;
  uint64_t due;
  int steps;
  int i;

  uvtw_options_init(&options);
  options.virtual_time = 1;
  options.tick_ms = tick;
  setup_opts(&options);
  for (i = 0; i < NTIMERS; i++) {
    runs[i] = 0;
    ASSERT_EQ(0, uvtw_timer_init(wheel, &timers[i]));
    ASSERT_EQ(0, uvtw_timer_set_leeway(&timers[i], leeway));
  }
  ASSERT_EQ(0, uvtw_timer_start(&timers[NEVER], run_cb, UINT64_MAX, 0));
  ASSERT_EQ(0, uvtw_timer_start(&timers[NEVER_REPEAT], run_cb, UINT64_MAX, 1));
  ASSERT_EQ(0,
            uvtw_timer_start(&timers[ONCE_THEN_NEVER], run_cb, 1, UINT64_MAX));
  ASSERT_EQ(0, uvtw_timer_start(&timers[LAST_MS], run_cb,
                                UINT64_MAX - 1 - uvtw_wheel_now(wheel), 0));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[NEVER]));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[NEVER_REPEAT]));

  /* The drive-to-idle loop of docs/virtual-time.md ends. */
  for (steps = 0; (due = uvtw_wheel_next_due(wheel)) != UINT64_MAX; steps++) {
    ASSERT_LT(steps, MAX_STEPS);
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, due));
  }
  ASSERT_EQ(0, runs[NEVER]);
  ASSERT_EQ(0, runs[NEVER_REPEAT]);
  ASSERT_EQ(1, runs[ONCE_THEN_NEVER]);
  for (i = 0; i < NTIMERS; i++)
    if (i != LAST_MS) {
      ASSERT_EQ(1, uvtw_timer_is_active(&timers[i]));
      ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[i]));
    }
  /* The last ms is reached or never, by its tick: once at most, and
   * then the wheel is idle either way. */
  ASSERT_LE(runs[LAST_MS], 1);
  ASSERT_EQ(!runs[LAST_MS], uvtw_timer_is_active(&timers[LAST_MS]));

  /* To the end of time: returns, and nothing more runs. */
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, UINT64_MAX));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, UINT64_MAX));
  ASSERT_UEQ(UINT64_MAX, uvtw_wheel_next_due(wheel));
  ASSERT_EQ(0, runs[NEVER]);
  ASSERT_EQ(0, runs[NEVER_REPEAT]);
  ASSERT_EQ(1, runs[ONCE_THEN_NEVER]);
  ASSERT_LE(runs[LAST_MS], 1);
  for (i = 0; i < NTIMERS; i++)
    ASSERT_EQ(0, uvtw_timer_stop(&timers[i]));
  teardown();
}


static void every_tick(uint64_t leeway) {
  static const uint64_t others[] = {255, 257, 1000};
  uint64_t tick;
  size_t i;

  for (tick = 1; tick <= 20; tick++)
    one_wheel(tick, leeway);
  for (i = 0; i < sizeof(others) / sizeof(others[0]); i++)
    one_wheel(others[i], leeway);
}


static void no_leeway(void) {
  every_tick(0);
}


static void small_leeway(void) {
  every_tick(1000);
}


static void max_leeway(void) {
  every_tick(UVTW_LEEWAY_MS_MAX);
}


/* The same through the loop's clock: a saturated timer holds the loop as
 * a uv_timer_t of timeout UINT64_MAX does, never fires, and "never" reads
 * the same in both calls. */
static void real_clock(void) {
  setup();
  runs[NEVER] = 0;
  ASSERT_EQ(0, uvtw_timer_init(wheel, &timers[NEVER]));
  ASSERT_EQ(0, uvtw_timer_start(&timers[NEVER], run_cb, UINT64_MAX, 0));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[NEVER]));
  ASSERT_UEQ(UINT64_MAX, uvtw_wheel_next_due(wheel));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ(0, runs[NEVER]);
  ASSERT_EQ(0, uvtw_timer_stop(&timers[NEVER]));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(no_leeway),
  TEST_CASE(small_leeway),
  TEST_CASE(max_leeway),
  TEST_CASE(real_clock),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
