/* SPDX-License-Identifier: MIT */
/* Bad input and the defaults: uvtw_options_init; uvtw_wheel_new with a NULL
 * loop or out, or tick_ms 0 or above 1000 (UV_EINVAL; *out untouched and
 * nothing left on the loop), tick_ms 1 and 1000 accepted; a NULL callback
 * (UV_EINVAL, the timer unchanged); NULL timer or wheel; start and again on
 * a closing wheel (UV_ECANCELED); a second close (UV_EINVAL); accessors; a
 * never-initialised (zeroed) timer; leeway above its cap. */

#include <stdint.h>
#include <string.h>

#include <uv.h>

#include "test-cases.h"
#include "test.h"
#include "uvtw.h"

static uv_loop_t loop;
static int close_cb_called;
static int fired;


static void wheel_close_cb(uvtw_wheel_t* w) {
  (void) w;
  close_cb_called++;
}


static void count_cb(uvtw_timer_t* timer) {
  (void) timer;
  fired++;
}


static void never_cb(uvtw_timer_t* timer) {
  (void) timer;
  ASSERT(0 && "must not run");
}


static void count_handle(uv_handle_t* handle, void* arg) {
  (void) handle;
  (*(int*) arg)++;
}


static int handles_on_loop(void) {
  int n;

  n = 0;
  uv_walk(&loop, count_handle, &n);
  return n;
}


static void close_and_drain(uvtw_wheel_t* wheel) {
  close_cb_called = 0;
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, close_cb_called);
  ASSERT_EQ(0, handles_on_loop());
}


static void options(void) {
  uvtw_options_t opts;
  uvtw_wheel_t* wheel;
  uvtw_timer_t t;
  uvtw_wheel_t* const sentinel = (uvtw_wheel_t*) &opts;
  static const uint64_t bad_ticks[] = {0, 1001, 1002, 5000, UINT64_MAX};
  static const uint64_t good_ticks[] = {1, 2, 999, 1000};
  size_t i;

  ASSERT_UV_OK(uv_loop_init(&loop));
  memset(&opts, 0x5a, sizeof(opts));
  uvtw_options_init(&opts);
  ASSERT_UEQ(1, opts.tick_ms);
  ASSERT_UEQ(0, opts.max_tasks);

  wheel = sentinel;
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_new(NULL, NULL, &wheel));
  ASSERT_PTR_EQ(sentinel, wheel);
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_new(NULL, &opts, &wheel));
  ASSERT_PTR_EQ(sentinel, wheel);
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_new(&loop, NULL, NULL));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_new(&loop, &opts, NULL));
  ASSERT_EQ(0, handles_on_loop());

  for (i = 0; i < sizeof(bad_ticks) / sizeof(bad_ticks[0]); i++) {
    uvtw_options_init(&opts);
    opts.tick_ms = bad_ticks[i];
    wheel = sentinel;
    ASSERT_EQ(UV_EINVAL, uvtw_wheel_new(&loop, &opts, &wheel));
    ASSERT_PTR_EQ(sentinel, wheel);
    ASSERT_EQ(0, handles_on_loop());
  }
  ASSERT_EQ(0, uv_loop_alive(&loop));

  for (i = 0; i < sizeof(good_ticks) / sizeof(good_ticks[0]); i++) {
    uvtw_options_init(&opts);
    opts.tick_ms = good_ticks[i];
    wheel = NULL;
    ASSERT_EQ(0, uvtw_wheel_new(&loop, &opts, &wheel));
    ASSERT_PTR_NE(NULL, wheel);
    ASSERT_PTR_EQ(&loop, uvtw_wheel_loop(wheel));
    ASSERT_EQ(0, uv_loop_alive(&loop));
    close_and_drain(wheel);
  }

  /* NULL options: the defaults (tick 1: get_due_in is the timeout). */
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_EQ(0, uvtw_timer_start(&t, never_cb, 12345, 0));
  ASSERT_UEQ(12345, uvtw_timer_get_due_in(&t));
  ASSERT_EQ(0, uvtw_timer_stop(&t));
  close_and_drain(wheel);
  ASSERT_EQ(0, uv_loop_close(&loop));
}


static void timers(void) {
  uvtw_wheel_t* wheel;
  uvtw_timer_t t;
  uvtw_timer_t t2;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_init(NULL, &t));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_init(wheel, NULL));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_start(NULL, count_cb, 1, 0));

  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_PTR_EQ(wheel, uvtw_timer_wheel(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));
  ASSERT_UEQ(0, uvtw_timer_get_due_in(&t));
  ASSERT_UEQ(0, uvtw_timer_get_repeat(&t));
  ASSERT_NE(0, uvtw_timer_has_ref(&t));
  ASSERT_EQ(0, uvtw_timer_stop(&t)); /* never started */
  ASSERT_EQ(0, uvtw_timer_stop(&t));

  /* NULL callback: UV_EINVAL and nothing changes. */
  ASSERT_EQ(UV_EINVAL, uvtw_timer_start(&t, NULL, 10, 0));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  ASSERT_EQ(0, uvtw_timer_start(&t, count_cb, 500, 7));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_start(&t, NULL, 10, 0));
  ASSERT_EQ(1, uvtw_timer_is_active(&t));
  ASSERT_UEQ(500, uvtw_timer_get_due_in(&t));
  ASSERT_UEQ(7, uvtw_timer_get_repeat(&t));
  ASSERT_EQ(0, uvtw_timer_stop(&t));

  /* The callback of a failed start never runs; the one given before does. */
  fired = 0;
  ASSERT_EQ(0, uvtw_timer_start(&t, count_cb, 1, 0));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_start(&t, NULL, 1, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, fired);

  /* Close with a timer active; afterwards start and again fail. */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t2));
  ASSERT_EQ(0, uvtw_timer_start(&t2, never_cb, 10, 10));
  ASSERT_EQ(0, uvtw_timer_start(&t, never_cb, 0, 0));
  close_cb_called = 0;
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t2));
  ASSERT_EQ(UV_ECANCELED, uvtw_timer_start(&t, never_cb, 0, 0));
  ASSERT_EQ(UV_ECANCELED, uvtw_timer_start(&t2, never_cb, 1000, 5));
  ASSERT_UEQ(10,
             uvtw_timer_get_repeat(&t2)); /* the failed start changed nothing */
  ASSERT_EQ(UV_ECANCELED, uvtw_timer_again(&t2));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t2));
  ASSERT_EQ(0, uvtw_timer_stop(&t2));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(wheel, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, close_cb_called);
  ASSERT_EQ(0, handles_on_loop());

  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(NULL, wheel_close_cb));

  /* A NULL close callback. */
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(0, uvtw_wheel_close(wheel, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, handles_on_loop());
  ASSERT_EQ(0, uv_loop_close(&loop));
}


/* A zeroed timer that was never initialised: start and again fail with
 * UV_EINVAL (nothing to dereference), stop and the queries see an
 * inactive timer. */
static void never_initialised(void) {
  uvtw_timer_t t;

  memset(&t, 0, sizeof(t));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_start(&t, count_cb, 1, 0));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_again(&t));
  ASSERT_EQ(0, uvtw_timer_stop(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));
  ASSERT_UEQ(0, uvtw_timer_get_due_in(&t));
}


/* Leeway is capped at UVTW_LEEWAY_MS_MAX: more is UV_EINVAL and changes
 * nothing (a timer's or the wheel's tasks'); the cap itself is accepted,
 * and a 1 ms timer with it runs, at most that late (virtual time). */
static void leeway_cap(void) {
  uvtw_options_t opts;
  uvtw_wheel_t* wheel;
  uvtw_wheel_t* const sentinel = (uvtw_wheel_t*) &opts;
  uvtw_timer_t t;

  ASSERT_UV_OK(uv_loop_init(&loop));
  uvtw_options_init(&opts);
  opts.task_leeway_ms = (uint64_t) UVTW_LEEWAY_MS_MAX + 1;
  wheel = sentinel;
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_new(&loop, &opts, &wheel));
  ASSERT_PTR_EQ(sentinel, wheel);
  ASSERT_EQ(0, handles_on_loop());
  opts.task_leeway_ms = UVTW_LEEWAY_MS_MAX;
  opts.virtual_time = 1;
  ASSERT_EQ(0, uvtw_wheel_new(&loop, &opts, &wheel));

  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_EQ(0, uvtw_timer_set_leeway(&t, 100));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_set_leeway(&t, UINT64_MAX));
  ASSERT_EQ(UV_EINVAL,
            uvtw_timer_set_leeway(&t, (uint64_t) UVTW_LEEWAY_MS_MAX + 1));
  ASSERT_UEQ(63, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_timer_set_leeway(&t, UVTW_LEEWAY_MS_MAX));
  ASSERT_UEQ(UVTW_LEEWAY_MS_MAX, uvtw_timer_get_leeway(&t)); /* 2^32 - 1 */
  fired = 0;
  ASSERT_EQ(0, uvtw_timer_start(&t, count_cb, 1, 0));
  ASSERT_UGE(uvtw_timer_get_due_in(&t), 1);
  ASSERT_ULE(uvtw_timer_get_due_in(&t), (uint64_t) 1 << 32);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, (uint64_t) 1 << 32));
  ASSERT_EQ(1, fired);
  close_and_drain(wheel);
  ASSERT_EQ(0, uv_loop_close(&loop));
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(never_initialised),
  TEST_CASE(leeway_cap),
  TEST_CASE(options),
  TEST_CASE(timers),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
