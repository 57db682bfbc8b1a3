/* SPDX-License-Identifier: MIT */
/* uv_run(UV_RUN_ONCE) runs a due uvtw timer, as it runs a uv_timer_t: a 0 ms
 * timer in the pass's first timer run, a 1 ms (or a few ms) timer after the
 * poll has waited for it; and then returns 0, the wheel holding nothing.
 * Each case runs a uv_timer_t control first.  (Nothing else is alive on
 * the loop: with another referenced handle, UV_RUN_ONCE would block in the
 * poll after a timer ran in its first timer run, for uv_timer_t too.) */

#include <stdint.h>

#include <uv.h>

#include "test.h"
#include "uvtw.h"

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uvtw_timer_t t0;
static uvtw_timer_t t1;
static uv_timer_t u0;
static uv_timer_t u1;
static int t0_fired;
static int t1_fired;
static int u0_fired;
static int u1_fired;
static int close_cb_called;


static void t0_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &t0);
  t0_fired++;
}


static void t1_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &t1);
  t1_fired++;
}


static void u0_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &u0);
  u0_fired++;
}


static void u1_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &u1);
  u1_fired++;
}


static void reset(void) {
  t0_fired = t1_fired = u0_fired = u1_fired = 0;
}


/* One uv_run(UV_RUN_ONCE) with only the given timeouts pending. */
static void once_uv(uint64_t timeout, int expect_alive) {
  reset();
  ASSERT_UV_OK(uv_timer_start(&u0, u0_cb, timeout, 0));
  ASSERT_EQ(expect_alive, uv_run(&loop, UV_RUN_ONCE));
  ASSERT_EQ(1, u0_fired);
}


static void once_tw(uint64_t timeout, int expect_alive) {
  reset();
  ASSERT_EQ(0, uvtw_timer_start(&t0, t0_cb, timeout, 0));
  ASSERT_EQ(expect_alive, uv_run(&loop, UV_RUN_ONCE));
  ASSERT_EQ(1, t0_fired);
  ASSERT_EQ(0, uvtw_timer_is_active(&t0));
}


static void once_tw_pair(uint64_t a, uint64_t b, int expect_alive) {
  reset();
  ASSERT_EQ(0, uvtw_timer_start(&t0, t0_cb, a, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t1, t1_cb, b, 0));
  ASSERT_EQ(expect_alive, uv_run(&loop, UV_RUN_ONCE));
  ASSERT_EQ(1, t0_fired);
  ASSERT_EQ(1, t1_fired);
}


static void once_mixed(uint64_t timeout) {
  reset();
  ASSERT_UV_OK(uv_timer_start(&u1, u1_cb, timeout, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t1, t1_cb, timeout, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_ONCE));
  ASSERT_EQ(1, u1_fired);
  ASSERT_EQ(1, t1_fired);
}


static void wheel_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wheel);
  close_cb_called++;
}


int main(void) {
  static const uint64_t timeouts[] = { 0, 1, 0, 1, 2, 5, 1, 0 };
  size_t i;
  int k;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t0));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t1));
  ASSERT_UV_OK(uv_timer_init(&loop, &u0));
  ASSERT_UV_OK(uv_timer_init(&loop, &u1));

  /* Before the loop has ever run, and then repeatedly.  When the timer was
   * the only thing alive, UV_RUN_ONCE returns 0. */
  for (k = 0; k < 10; k++) {
    for (i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++) {
      once_uv(timeouts[i], 0);
      once_tw(timeouts[i], 0);
    }
    once_tw_pair(0, 1, 0);
    once_tw_pair(1, 0, 0);
    once_tw_pair(1, 1, 0);
    once_mixed(0);
    once_mixed(1);
  }

  uv_close((uv_handle_t*) &u0, NULL);
  uv_close((uv_handle_t*) &u1, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, close_cb_called);
  ASSERT_EQ(0, uv_loop_close(&loop));
  return 0;
}
