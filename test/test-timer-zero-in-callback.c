/* SPDX-License-Identifier: MIT */
/* A timer that a uvtw callback starts (or restarts) with a deadline that is
 * already reached does not run in the same pass: it runs in the next loop
 * iteration, and a pass never spins.  (libuv 1.44 differs here for a
 * uv_timer_t started with 0 inside a uv_timer_t callback: it runs in the
 * same pass.  README.md, Semantics: "Snapshot" and "Which libuv".) */

#include <stdint.h>

#include <uv.h>

#include "test.h"
#include "uvtw.h"

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uv_check_t check;
static int64_t iteration;  /* incremented at the end of every iteration */
static int close_cb_called;

static uvtw_timer_t a;
static uvtw_timer_t b;
static uvtw_timer_t c;
static int a_fired;
static int b_fired;
static int c_fired;
static int64_t a_iter;
static int64_t b_iter;


static void check_cb(uv_check_t* handle) {
  (void) handle;
  iteration++;
}


/* Scenario 1: a (5 ms) starts b with timeout 0; c is due in the same pass
 * as a and fires after it: b must not have run yet. */
static void b_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &b);
  b_fired++;
  b_iter = iteration;
}


static void a_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &a);
  a_fired++;
  a_iter = iteration;
  ASSERT_EQ(0, uvtw_timer_start(&b, b_cb, 0, 0));
  ASSERT_EQ(1, uvtw_timer_is_active(&b));
  ASSERT_UEQ(0, uvtw_timer_get_due_in(&b));
  ASSERT_EQ(0, b_fired);
}


static void c_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &c);
  c_fired++;
  ASSERT_EQ(1, a_fired);
  ASSERT_EQ(0, b_fired); /* b was started in this pass with deadline now */
  ASSERT_EQ(a_iter, iteration);
}


static void start_zero_from_callback(void) {
  a_fired = b_fired = c_fired = 0;
  ASSERT_EQ(0, uvtw_timer_start(&a, a_cb, 5, 0));
  ASSERT_EQ(0, uvtw_timer_start(&c, c_cb, 5, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, a_fired);
  ASSERT_EQ(1, b_fired);
  ASSERT_EQ(1, c_fired);
  ASSERT_EQ(a_iter + 1, b_iter);
}


/* Scenario 2: a timer that restarts itself with 0 from its own callback
 * fires once per iteration, in consecutive iterations. */
static int self_count;
static int64_t self_iters[10];

static void self_cb(uvtw_timer_t* timer) {
  self_iters[self_count++] = iteration;
  if (self_count < 10)
    ASSERT_EQ(0, uvtw_timer_start(timer, self_cb, 0, 0));
}


static void restart_self_with_zero(void) {
  int i;

  self_count = 0;
  ASSERT_EQ(0, uvtw_timer_start(&a, self_cb, 0, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(10, self_count);
  for (i = 1; i < 10; i++)
    ASSERT_EQ(self_iters[i - 1] + 1, self_iters[i]);
}


/* Scenario 3: a repeating timer with repeat 1 that is also restarted with 0
 * in its callback, and another timer already due in the same pass that the
 * first restarts with 0: neither runs twice in one pass. */
static int rep_count;
static int64_t rep_iters[20];
static int other_count;
static int64_t other_iters[20];

static void other_cb(uvtw_timer_t* timer) {
  (void) timer;
  ASSERT_LT(other_count, 20);
  other_iters[other_count++] = iteration;
}


static void rep_cb(uvtw_timer_t* timer) {
  ASSERT_LT(rep_count, 20);
  rep_iters[rep_count++] = iteration;
  if (rep_count == 1) {
    /* b is due in this pass too (started after a with the same timeout), so
     * it has not fired yet; restarting it with 0 moves it to the next
     * iteration. */
    ASSERT_EQ(0, other_count);
    ASSERT_EQ(0, uvtw_timer_start(&b, other_cb, 0, 0));
    ASSERT_EQ(0, uvtw_timer_start(timer, rep_cb, 0, 1));
  } else {
    ASSERT_EQ(0, uvtw_timer_stop(timer));
  }
}


static void restart_due_timer_with_zero(void) {
  rep_count = 0;
  other_count = 0;
  ASSERT_EQ(0, uvtw_timer_start(&a, rep_cb, 3, 1));
  ASSERT_EQ(0, uvtw_timer_start(&b, other_cb, 3, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(2, rep_count);
  ASSERT_EQ(1, other_count);
  ASSERT_EQ(rep_iters[0] + 1, rep_iters[1]);
  ASSERT_EQ(rep_iters[0] + 1, other_iters[0]);
}


/* Scenario 4: with UV_RUN_NOWAIT: the pass that runs a does not run b; the
 * next pass does. */
static void nowait_passes(void) {
  int i;

  a_fired = b_fired = c_fired = 0;
  ASSERT_EQ(0, uvtw_timer_start(&a, a_cb, 1, 0));
  for (i = 0; a_fired == 0; i++) {
    ASSERT_LT(i, 100000);
    uv_sleep(1);
    uv_run(&loop, UV_RUN_NOWAIT);
    if (a_fired == 0)
      ASSERT_EQ(0, b_fired);
  }
  ASSERT_EQ(1, a_fired);
  ASSERT_EQ(0, b_fired);
  ASSERT_EQ(1, uvtw_timer_is_active(&b));
  uv_run(&loop, UV_RUN_NOWAIT);
  ASSERT_EQ(1, b_fired);
  ASSERT_EQ(0, uvtw_timer_is_active(&b));
  ASSERT_EQ(0, uv_loop_alive(&loop));
}


static void wheel_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wheel);
  close_cb_called++;
}


static void close_cb(uv_handle_t* handle) {
  (void) handle;
}


int main(void) {
  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_UV_OK(uv_check_init(&loop, &check));
  ASSERT_UV_OK(uv_check_start(&check, check_cb));
  uv_unref((uv_handle_t*) &check);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &c));

  start_zero_from_callback();
  restart_self_with_zero();
  restart_due_timer_with_zero();
  nowait_passes();

  uv_close((uv_handle_t*) &check, close_cb);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, close_cb_called);
  ASSERT_EQ(0, uv_loop_close(&loop));
  return 0;
}
