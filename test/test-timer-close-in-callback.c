/* SPDX-License-Identifier: MIT */
/* Closing the wheel from inside a callback: a uvtw timer's own callback (a
 * one-shot and a repeating one), a uv_timer_t callback that runs in the same
 * pass just before the wheel's timers, and with a NULL close callback.  The
 * other uvtw timers due in the same pass do not run; every timer is inactive
 * as soon as uvtw_wheel_close returns; start and again return UV_ECANCELED;
 * a second close returns UV_EINVAL; the close callback runs once; a 1 h
 * timer does not keep the loop alive; uv_loop_close returns 0. */

#include <stdint.h>

#include <uv.h>

#include "test-cases.h"
#include "test.h"
#include "uvtw.h"

#define NT 6

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uvtw_timer_t t[NT];
static uv_timer_t closer;
static int fired[NT];
static int closer_fired;
static int close_cb_called;
static int closing_from; /* index of the timer that closes, or -1 */
static int use_null_cb;


static void wheel_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wheel);
  close_cb_called++;
}


static void noop_cb(uvtw_timer_t* timer) {
  (void) timer;
}


static void close_now(void) {
  int i;

  ASSERT_EQ(0, uvtw_wheel_close(wheel, use_null_cb ? NULL : wheel_close_cb));
  for (i = 0; i < NT; i++) {
    ASSERT_EQ(0, uvtw_timer_is_active(&t[i]));
    ASSERT_UEQ(0, uvtw_timer_get_due_in(&t[i]));
  }
  ASSERT_EQ(UV_ECANCELED, uvtw_timer_start(&t[1], noop_cb, 10, 0));
  ASSERT_EQ(UV_ECANCELED, uvtw_timer_start(&t[2], noop_cb, 0, 0));
  ASSERT_EQ(0, uvtw_timer_is_active(&t[1]));
  ASSERT_EQ(UV_ECANCELED, uvtw_timer_again(&t[3])); /* repeat 20 */
  ASSERT_EQ(0, uvtw_timer_is_active(&t[3]));
  ASSERT_EQ(0, uvtw_timer_stop(&t[1]));
  ASSERT_EQ(0, uvtw_timer_stop(&t[3]));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, close_cb_called); /* not from inside uvtw_wheel_close */
  ASSERT_PTR_EQ(uvtw_wheel_loop(wheel), &loop);
}


static void timer_cb(uvtw_timer_t* timer) {
  int i;

  i = (int) (timer - t);
  fired[i]++;
  if (i == closing_from)
    close_now();
}


static void closer_cb(uv_timer_t* handle) {
  (void) handle;
  closer_fired++;
  close_now();
}


/* t[0], t[1], t[2] one-shots at 20 ms in that order; t[3] repeating 20 ms
 * started after them; t[4] 20 ms started last; t[5] 1 h. */
static void scenario(int from, int null_cb, int with_closer) {
  int i;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  closing_from = from;
  use_null_cb = null_cb;
  close_cb_called = 0;
  closer_fired = 0;
  for (i = 0; i < NT; i++) {
    fired[i] = 0;
    ASSERT_EQ(0, uvtw_timer_init(wheel, &t[i]));
  }
  if (with_closer) {
    /* Started before the wheel has anything: with the same timeout it runs
     * before the wheel's driver in the same uv__run_timers pass. */
    ASSERT_UV_OK(uv_timer_init(&loop, &closer));
    ASSERT_UV_OK(uv_timer_start(&closer, closer_cb, 20, 0));
  }
  ASSERT_EQ(0, uvtw_timer_start(&t[0], timer_cb, 20, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t[1], timer_cb, 20, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t[2], timer_cb, 20, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t[3], timer_cb, 20, 20));
  ASSERT_EQ(0, uvtw_timer_start(&t[4], timer_cb, 20, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t[5], timer_cb, 3600 * 1000, 0));
  /* Block so that all the 20 ms timers are due in the first pass. */
  uv_sleep(30);

  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  if (with_closer)
    uv_close((uv_handle_t*) &closer, NULL);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));

  ASSERT_EQ(null_cb ? 0 : 1, close_cb_called);
  for (i = 0; i < NT; i++) {
    if (i <= from)
      ASSERT_EQ(1, fired[i]); /* the ones before the closer, and it */
    else
      ASSERT_EQ(0, fired[i]);
  }
  ASSERT_EQ(with_closer, closer_fired);
  ASSERT_EQ(0, uv_loop_close(&loop));
}


/* The first due one-shot closes. */
static void first_one_shot_closes(void) {
  scenario(0, 0, 0);
}


/* The second: t[0] ran before it. */
static void second_one_shot_closes(void) {
  scenario(1, 0, 0);
}


/* The repeating one, in its own callback. */
static void repeating_closes(void) {
  scenario(3, 0, 0);
}


/* A NULL close callback. */
static void null_close_cb(void) {
  scenario(0, 1, 0);
}


/* A uv_timer_t in the same pass, before the driver. */
static void uv_timer_closes(void) {
  scenario(-1, 0, 1);
}


static void uv_timer_closes_null_cb(void) {
  scenario(-1, 1, 1);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(first_one_shot_closes),
  TEST_CASE(second_one_shot_closes),
  TEST_CASE(repeating_closes),
  TEST_CASE(null_close_cb),
  TEST_CASE(uv_timer_closes),
  TEST_CASE(uv_timer_closes_null_cb),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
