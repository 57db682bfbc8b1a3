/* SPDX-License-Identifier: MIT */
/* An overdue repeating timer fires once per pass, not once per missed
 * period; its next deadline is the loop time at dispatch + repeat (libuv's
 * rule).  The loop thread is blocked with uv_sleep for many periods, outside
 * the loop and inside callbacks.  A uv_timer_t control runs beside it. */

#include "test-cases.h"
#include "timer-harness.h"

#define MAX_FIRES 4096

static uv_idle_t idle;

static uvtw_timer_t x;
static uv_timer_t ux;
static int x_count;
static int ux_count;
static uint64_t x_at;
static uint64_t ux_at;
static int64_t x_iters[MAX_FIRES];
static int64_t ux_iters[MAX_FIRES];


static void idle_cb(uv_idle_t* handle) {
  (void) handle;
}


static void x_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &x);
  ASSERT_LT(x_count, MAX_FIRES);
  x_iters[x_count++] = iteration;
  x_at = uv_now(&loop);
}


static void ux_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &ux);
  ASSERT_LT(ux_count, MAX_FIRES);
  ux_iters[ux_count++] = iteration;
  ux_at = uv_now(&loop);
}


static void expect_next_deadline(uint64_t repeat) {
  uint64_t now;

  now = uv_now(&loop);
  ASSERT_ULT(now, x_at + repeat); /* the pass took less than a period */
  ASSERT_UEQ(x_at + repeat - now, uvtw_timer_get_due_in(&x));
  ASSERT_UEQ(ux_at + repeat - now, uv_timer_get_due_in(&ux));
}


static uvtw_timer_t tw_blocker;
static uv_timer_t uv_blocker;


/* A loop with x, its twin ux, the two blockers and the idle handle. */
static void start(void) {
  setup();
  ASSERT_UV_OK(uv_idle_init(&loop, &idle));
  close_at_teardown((uv_handle_t*) &idle);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &x));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &tw_blocker));
  add_uv_timer(&ux);
  add_uv_timer(&uv_blocker);
}


/* Blocked outside the loop, then one UV_RUN_NOWAIT pass. */
static void nowait(uint64_t repeat, unsigned int block_ms) {
  int k;

  start();
  x_count = ux_count = 0;
  ASSERT_EQ(0, uvtw_timer_start(&x, x_cb, repeat, repeat));
  ASSERT_UV_OK(uv_timer_start(&ux, ux_cb, repeat, repeat));
  uv_run(&loop, UV_RUN_NOWAIT); /* may fire both if the clock moved */
  x_count = ux_count = 0;
  for (k = 1; k <= 4; k++) {
    uv_sleep(block_ms);
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(k, ux_count);
    ASSERT_EQ(k, x_count);
    if (repeat >= 100)
      expect_next_deadline(repeat);
  }
  ASSERT_EQ(0, uvtw_timer_stop(&x));
  ASSERT_UV_OK(uv_timer_stop(&ux));
  teardown();
}


/* Blocked outside the loop, then one UV_RUN_ONCE pass.  An active idle handle
 * keeps the poll from waiting, so the pass's second timer run (after the
 * poll) comes well before the next period. */
static void once(uint64_t repeat, unsigned int block_ms) {
  int k;

  start();
  x_count = ux_count = 0;
  ASSERT_UV_OK(uv_idle_start(&idle, idle_cb));
  ASSERT_EQ(0, uvtw_timer_start(&x, x_cb, repeat, repeat));
  ASSERT_UV_OK(uv_timer_start(&ux, ux_cb, repeat, repeat));
  uv_run(&loop, UV_RUN_NOWAIT);
  x_count = ux_count = 0;
  for (k = 1; k <= 4; k++) {
    uv_sleep(block_ms);
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_ONCE));
    ASSERT_EQ(k, ux_count);
    ASSERT_EQ(k, x_count);
    expect_next_deadline(repeat);
  }
  ASSERT_EQ(0, uvtw_timer_stop(&x));
  ASSERT_UV_OK(uv_timer_stop(&ux));
  ASSERT_UV_OK(uv_idle_stop(&idle));
  teardown();
}


/* Blocked inside callbacks, in UV_RUN_DEFAULT: x repeats every 5 ms, a
 * blocker sleeps 60 ms in its callback every 30 ms, so x is overdue by many
 * periods after each block; still it never fires twice in one iteration,
 * whether the blocker is a uv_timer_t or a uvtw timer dispatched in the same
 * pass as x. */
static int blocks;

static void stop_all(void) {
  ASSERT_EQ(0, uvtw_timer_stop(&x));
  ASSERT_UV_OK(uv_timer_stop(&ux));
  ASSERT_EQ(0, uvtw_timer_stop(&tw_blocker));
  ASSERT_UV_OK(uv_timer_stop(&uv_blocker));
}


static void tw_blocker_cb(uvtw_timer_t* timer) {
  (void) timer;
  uv_sleep(60);
  if (++blocks >= 12)
    stop_all();
}


static void uv_blocker_cb(uv_timer_t* handle) {
  (void) handle;
  uv_sleep(60);
  if (++blocks >= 12)
    stop_all();
}


static void blocked_in_callbacks(int use_tw_blocker) {
  int i;

  start();
  x_count = ux_count = 0;
  blocks = 0;
  ASSERT_EQ(0, uvtw_timer_start(&x, x_cb, 5, 5));
  ASSERT_UV_OK(uv_timer_start(&ux, ux_cb, 5, 5));
  if (use_tw_blocker)
    ASSERT_EQ(0, uvtw_timer_start(&tw_blocker, tw_blocker_cb, 30, 30));
  else
    ASSERT_UV_OK(uv_timer_start(&uv_blocker, uv_blocker_cb, 30, 30));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(12, blocks);
  ASSERT_GT(x_count, 0);
  ASSERT_GT(ux_count, 0);
  for (i = 1; i < x_count; i++)
    ASSERT_LT(x_iters[i - 1], x_iters[i]);
  for (i = 1; i < ux_count; i++)
    ASSERT_LT(ux_iters[i - 1], ux_iters[i]);
  teardown();
}


/* Every 1 ms, 50 periods missed per block. */
static void nowait_repeat_1(void) {
  nowait(1, 50);
}


static void nowait_repeat_10(void) {
  nowait(10, 80);
}


static void nowait_repeat_100(void) {
  nowait(100, 450);
}


static void once_repeat_100(void) {
  once(100, 450);
}


static void once_repeat_250(void) {
  once(250, 800);
}


static void blocked_by_uvtw_timer(void) {
  blocked_in_callbacks(1);
}


static void blocked_by_uv_timer(void) {
  blocked_in_callbacks(0);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(nowait_repeat_1),
  TEST_CASE(nowait_repeat_10),
  TEST_CASE(nowait_repeat_100),
  TEST_CASE(once_repeat_100),
  TEST_CASE(once_repeat_250),
  TEST_CASE(blocked_by_uvtw_timer),
  TEST_CASE(blocked_by_uv_timer),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
