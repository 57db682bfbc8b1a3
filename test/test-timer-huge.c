/* SPDX-License-Identifier: MIT */
/* Huge timeouts and repeats.  get_due_in is exact up to 2^48 - 1 ms (and
 * across every size at which a hierarchical wheel changes level); deadlines
 * saturate at UINT64_MAX instead of overflowing, so a timeout of UINT64_MAX
 * never fires, with tick 1 and with a tick that would round it past the top;
 * a huge repeat re-arms to a huge, exact or saturated, deadline. */

#include "test-cases.h"
#include "timer-harness.h"

#define NT 24

static uvtw_wheel_t* wheel10;
static uvtw_timer_t timers[NT];
static int fired[NT];
static uint64_t fired_at[NT];


static void count_cb(uvtw_timer_t* timer) {
  int i;

  i = (int) (timer - timers);
  ASSERT_GE(i, 0);
  ASSERT_LT(i, NT);
  fired[i]++;
  fired_at[i] = uv_now(&loop);
  if (uvtw_timer_get_repeat(timer) != 0)
    ASSERT_EQ(1, uvtw_timer_is_active(timer));
}


static void reset(void) {
  int i;

  for (i = 0; i < NT; i++) {
    fired[i] = 0;
    ASSERT_EQ(0, uvtw_timer_stop(&timers[i]));
  }
}


/* A loop with two wheels, one with tick 1 and one with tick 10; the NT
 * timers on the first, but for timers[4..6], which go on the tick-10 wheel
 * if on_tick_10; and one run of the loop. */
static void start(int on_tick_10) {
  uvtw_options_t opts;
  int i;

  setup();
  uvtw_options_init(&opts);
  opts.tick_ms = 10;
  wheel10 = add_wheel(&opts);
  for (i = 0; i < NT; i++)
    ASSERT_EQ(0,
              uvtw_timer_init(on_tick_10 && i >= 4 && i <= 6 ? wheel10 : wheel,
                              &timers[i]));
  for (i = 4; on_tick_10 && i <= 6; i++)
    ASSERT_PTR_EQ(uvtw_timer_wheel(&timers[i]), wheel10);
  uv_run(&loop, UV_RUN_NOWAIT);
  reset();
}


/* 20 timers on the tick-1 wheel. */
static void exact_due_in(void) {
  static const uint64_t timeouts[] = {1,
                                      63,
                                      64,
                                      65,
                                      255,
                                      256,
                                      257,
                                      4095,
                                      4096,
                                      4097,
                                      65535,
                                      65536,
                                      65537,
                                      (uint64_t) 1 << 24,
                                      ((uint64_t) 1 << 32) - 1,
                                      (uint64_t) 1 << 32,
                                      ((uint64_t) 1 << 40) + 3,
                                      ((uint64_t) 1 << 47) + 1,
                                      ((uint64_t) 1 << 48) - 2,
                                      ((uint64_t) 1 << 48) - 1};
  uint64_t n0;
  uint64_t now;
  uint64_t prev;
  int n;
  int i;
  int k;

  start(0);
  n = (int) (sizeof(timeouts) / sizeof(timeouts[0]));
  ASSERT_LE(n, NT);
  n0 = uv_now(&loop);
  for (i = 0; i < n; i++) {
    ASSERT_EQ(0, uvtw_timer_start(&timers[i], count_cb, timeouts[i], 0));
    ASSERT_UEQ(timeouts[i], uvtw_timer_get_due_in(&timers[i]));
  }
  /* Exactly 2^48 - 1 once more, on its own, as the brief names it. */
  ASSERT_UEQ(((uint64_t) 1 << 48) - 1, uvtw_timer_get_due_in(&timers[n - 1]));

  /* Let time pass; the deadlines stay put.  The pass runs timers at a time
   * between prev and now (uv__io_poll updates the clock after the timers),
   * so a timer due by prev has fired, one due by now is fired or overdue. */
  prev = n0;
  for (k = 0; k < 3; k++) {
    uv_sleep(20);
    uv_run(&loop, UV_RUN_NOWAIT);
    now = uv_now(&loop);
    for (i = 0; i < n; i++) {
      if (n0 + timeouts[i] <= prev)
        ASSERT_EQ(1, fired[i]);
      if (fired[i] != 0) {
        ASSERT_EQ(1, fired[i]);
        ASSERT_UGE(fired_at[i], n0 + timeouts[i]);
        ASSERT_EQ(0, uvtw_timer_is_active(&timers[i]));
        ASSERT_UEQ(0, uvtw_timer_get_due_in(&timers[i]));
        continue;
      }
      ASSERT_EQ(1, uvtw_timer_is_active(&timers[i]));
      if (n0 + timeouts[i] <= now) {
        ASSERT_UEQ(0, uvtw_timer_get_due_in(&timers[i]));
        continue;
      }
      ASSERT_EQ(0, fired[i]);
      ASSERT_EQ(1, uvtw_timer_is_active(&timers[i]));
      ASSERT_UEQ(n0 + timeouts[i] - now, uvtw_timer_get_due_in(&timers[i]));
    }
    prev = now;
  }
  reset();
  teardown();
}


static void stop_cb(uv_timer_t* handle) {
  ASSERT_EQ(0, uv_timer_stop(handle));
}


static void uint64_max_never_fires(void) {
  uv_timer_t keeper;
  uint64_t n0;
  uint64_t now;
  int i;
  int k;

  start(1);
  n0 = uv_now(&loop);
  /* A saturated deadline (UINT64_MAX) is never reached: due in
   * UINT64_MAX, "never", as uvtw_wheel_next_due says. */
  ASSERT_EQ(0, uvtw_timer_start(&timers[0], count_cb, UINT64_MAX, 0));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[0]));
  /* n0 + timeout overflows: saturates to UINT64_MAX. */
  ASSERT_EQ(0, uvtw_timer_start(&timers[1], count_cb, UINT64_MAX - n0 + 5, 0));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[1]));
  ASSERT_EQ(0, uvtw_timer_start(&timers[2], count_cb, UINT64_MAX - n0 - 1, 0));
  ASSERT_UEQ(UINT64_MAX - n0 - 1, uvtw_timer_get_due_in(&timers[2]));
  ASSERT_EQ(0, uvtw_timer_start(&timers[3], count_cb, UINT64_MAX - 1, 0));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[3]));
  /* The same on a wheel with tick 10: rounding up must not wrap. */
  ASSERT_EQ(0, uvtw_timer_start(&timers[4], count_cb, UINT64_MAX, 0));
  ASSERT_EQ(0, uvtw_timer_start(&timers[5], count_cb, UINT64_MAX - n0 - 3, 0));
  ASSERT_EQ(0, uvtw_timer_start(&timers[6], count_cb, UINT64_MAX - n0 - 11, 0));
  for (i = 4; i <= 6; i++)
    ASSERT_UGE(uvtw_timer_get_due_in(&timers[i]), UINT64_MAX - n0 - 21);
  ASSERT_EQ(1, uv_loop_alive(&loop));

  for (k = 0; k < 5; k++) {
    uv_sleep(3);
    uv_run(&loop, UV_RUN_NOWAIT);
    now = uv_now(&loop);
    for (i = 0; i <= 6; i++) {
      ASSERT_EQ(0, fired[i]);
      ASSERT_EQ(1, uvtw_timer_is_active(&timers[i]));
    }
    ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[0]));
    ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[1]));
    ASSERT_UEQ(UINT64_MAX - now - 1, uvtw_timer_get_due_in(&timers[2]));
    for (i = 4; i <= 6; i++)
      ASSERT_UGE(uvtw_timer_get_due_in(&timers[i]), UINT64_MAX - now - 21);
  }

  /* Let the loop run for a while with the huge timers unreferenced. */
  for (i = 0; i <= 6; i++)
    uvtw_timer_unref(&timers[i]);
  ASSERT_EQ(0, uv_loop_alive(&loop));
  ASSERT_UV_OK(uv_timer_init(&loop, &keeper));
  ASSERT_UV_OK(uv_timer_start(&keeper, stop_cb, 50, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  for (i = 0; i <= 6; i++) {
    ASSERT_EQ(0, fired[i]);
    ASSERT_EQ(1, uvtw_timer_is_active(&timers[i]));
    uvtw_timer_ref(&timers[i]);
  }
  uv_close((uv_handle_t*) &keeper, NULL);
  reset();
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  teardown();
}


static void huge_repeat(void) {
  const uint64_t r48 = ((uint64_t) 1 << 48) - 1;
  uint64_t now;
  int i;
  int k;

  start(1);
  ASSERT_EQ(0, uvtw_timer_start(&timers[0], count_cb, 1, r48));
  ASSERT_EQ(0, uvtw_timer_start(&timers[1], count_cb, 1, UINT64_MAX));
  ASSERT_EQ(0, uvtw_timer_start(&timers[2], count_cb, 1, UINT64_MAX - 1));
  ASSERT_UEQ(r48, uvtw_timer_get_repeat(&timers[0]));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_repeat(&timers[1]));
  for (i = 0; fired[0] == 0 || fired[1] == 0 || fired[2] == 0; i++) {
    ASSERT_LT(i, 100000);
    uv_sleep(1);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  for (k = 0; k < 5; k++) {
    now = uv_now(&loop);
    for (i = 0; i < 3; i++) {
      ASSERT_EQ(1, fired[i]);
      ASSERT_EQ(1, uvtw_timer_is_active(&timers[i]));
    }
    ASSERT_UEQ(fired_at[0] + r48, now + uvtw_timer_get_due_in(&timers[0]));
    ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[1]));
    ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[2]));
    ASSERT_UEQ(r48, uvtw_timer_get_repeat(&timers[0]));
    ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_repeat(&timers[1]));
    uv_sleep(2);
    uv_run(&loop, UV_RUN_NOWAIT);
  }

  /* again with a huge repeat restarts with timeout = repeat. */
  ASSERT_EQ(0, uvtw_timer_again(&timers[0]));
  ASSERT_UEQ(r48, uvtw_timer_get_due_in(&timers[0]));
  ASSERT_EQ(0, uvtw_timer_again(&timers[1]));
  ASSERT_UEQ(UINT64_MAX, uvtw_timer_get_due_in(&timers[1]));
  reset();
  ASSERT_EQ(0, uv_loop_alive(&loop));
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(uint64_max_never_fires),
  TEST_CASE(huge_repeat),
  TEST_CASE(exact_due_in),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
