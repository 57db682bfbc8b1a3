/* SPDX-License-Identifier: MIT */
/* Stopping and (re)starting uvtw timers from a uv_check_t callback, i.e. from
 * outside any wheel callback, while the loop runs:
 *   - a stopped timer never runs, even one already overdue when stopped;
 *   - a restarted timer runs once, never before restart time + timeout;
 *   - a timer started there runs in the same iteration as a uv_timer_t
 *     started at the same moment with the same timeout (0, 1 and 5 ms): for
 *     0 ms, the very next iteration. */

#include "timer-harness.h"

static uvtw_timer_t a; /* 1 h, stopped from the check */
static uvtw_timer_t c; /* 1 h, restarted from the check with 60 ms */
static uvtw_timer_t d; /* started, made overdue and stopped in the check */
static uvtw_timer_t e; /* started and stopped in the check */
static uvtw_timer_t r; /* repeating 5 ms, restarted as a 20 ms one-shot */
static uvtw_timer_t w[3];
static uv_timer_t u[3];
static const uint64_t pair_timeouts[3] = {0, 1, 5};

static int c_fired;
static uint64_t c_restart_now;
static uint64_t c_fired_now;
static int r_fired;
static int r_restarted;
static uint64_t r_restart_now;
static uint64_t r_last_now;
static int64_t w_iter[3] = {-1, -1, -1};
static int64_t u_iter[3] = {-1, -1, -1};


static void c_cb(uvtw_timer_t* timer) {
  (void) timer;
  c_fired++;
  c_fired_now = uv_now(&loop);
}


static void r_cb(uvtw_timer_t* timer) {
  (void) timer;
  r_fired++;
  r_last_now = uv_now(&loop);
}


static void w_cb(uvtw_timer_t* timer) {
  int i;

  i = (int) (timer - w);
  ASSERT_EQ(-1, w_iter[i]);
  w_iter[i] = iteration;
}


static void u_cb(uv_timer_t* handle) {
  int i;

  i = (int) (handle - u);
  ASSERT_EQ(-1, u_iter[i]);
  u_iter[i] = iteration;
}


/* At the end of every iteration, before `iteration` moves on. */
static void in_check(void) {
  int i;

  if (iteration == 0) {
    ASSERT_EQ(0, uvtw_timer_stop(&a));
    ASSERT_EQ(0, uvtw_timer_is_active(&a));

    c_restart_now = uv_now(&loop);
    ASSERT_EQ(0, uvtw_timer_start(&c, c_cb, 60, 0));
    ASSERT_UEQ(60, uvtw_timer_get_due_in(&c));

    ASSERT_EQ(0, uvtw_timer_start(&d, never_cb, 1, 0));
    uv_sleep(5);
    uv_update_time(&loop);
    ASSERT_UEQ(0, uvtw_timer_get_due_in(&d)); /* overdue */
    ASSERT_EQ(0, uvtw_timer_stop(&d));

    ASSERT_EQ(0, uvtw_timer_start(&e, never_cb, 0, 0));
    ASSERT_EQ(0, uvtw_timer_stop(&e));

    for (i = 0; i < 3; i++) {
      ASSERT_UV_OK(uv_timer_start(&u[i], u_cb, pair_timeouts[i], 0));
      ASSERT_EQ(0, uvtw_timer_start(&w[i], w_cb, pair_timeouts[i], 0));
    }
  }
  if (r_fired == 3 && !r_restarted) {
    r_restarted = 1;
    r_restart_now = uv_now(&loop);
    ASSERT_EQ(0, uvtw_timer_start(&r, r_cb, 20, 0));
  }
}


int main(void) {
  int i;

  setup();
  on_check = in_check;
  ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &c));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &d));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &e));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &r));
  for (i = 0; i < 3; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &w[i]));
    add_uv_timer(&u[i]);
  }

  /* If a stop or restart from the check had no effect, the 1 h timers would
   * keep uv_run from returning and CTest's timeout would fail the test. */
  ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, 3600 * 1000, 0));
  ASSERT_EQ(0, uvtw_timer_start(&c, c_cb, 3600 * 1000, 0));
  ASSERT_EQ(0, uvtw_timer_start(&r, r_cb, 5, 5));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));

  ASSERT_EQ(1, c_fired);
  ASSERT_UGE(c_fired_now, c_restart_now + 60);
  ASSERT_EQ(1, r_restarted);
  ASSERT_EQ(4, r_fired);
  ASSERT_UGE(r_last_now, r_restart_now + 20);
  ASSERT_EQ(0, uvtw_timer_is_active(&r));
  for (i = 0; i < 3; i++) {
    ASSERT_NE(-1, w_iter[i]);
    ASSERT_EQ(u_iter[i], w_iter[i]);
  }
  ASSERT_EQ(1, w_iter[0]); /* 0 ms from the check of iteration 0 */

  teardown();
  return 0;
}
