/* SPDX-License-Identifier: MIT */
/* Shared by the loop-thread timer tests (test-timer-*.c,
 * test-driver-rearm.c): the scaffolding every case repeats, so that each
 * case is one self-contained run of its own loop (test-cases.h).
 *
 *   setup()            a loop, `wheel` with the default options, and the
 *                      iteration counter
 *   setup_opts(o)      the same, `wheel` made with options o
 *   setup_loop()       a loop and the counter, no wheel: the case makes its
 *                      own, with add_wheel or by hand
 *   add_wheel(o)       another wheel on the loop (o NULL: the defaults),
 *                      closed by teardown
 *   add_uv_timer(u)    uv_timer_init(u) on the loop; teardown closes it
 *   close_at_teardown(h)  any other handle the case made, closed likewise
 *   teardown()         closes the handles of add_uv_timer and
 *                      close_at_teardown, the check handle and every wheel
 *                      of setup and add_wheel, runs the loop until they
 *                      are closed, checks that each wheel's close callback
 *                      ran exactly once, and that uv_loop_close() returns 0
 *
 * `iteration` counts the loop iterations that have ended: a check handle
 * (unref'd, so that it keeps nothing alive) increments it in every check
 * phase, right after calling `on_check` if the case set one; a case that
 * acts "at the end of iteration n" does so there.  setup sets it to 0.
 *
 * never_cb and never_uv_cb are callbacks for timers that must not run. */

#ifndef UVTW_TIMER_HARNESS_H
#define UVTW_TIMER_HARNESS_H

#include <stdint.h>
#include <stdlib.h>

#include <uv.h>

#include "test.h"
#include "uvtw.h"

#define HARNESS_UNUSED __attribute__((unused))
#define HARNESS_MAX_WHEELS 4

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uv_check_t check;
static int64_t iteration;
static void (*on_check)(void);
static int close_cb_called;

static uvtw_wheel_t* harness_wheels[HARNESS_MAX_WHEELS];
static int harness_nwheels;
static uv_handle_t** harness_handles;
static size_t harness_nhandles;
static size_t harness_handles_cap;


static void harness_check_cb(uv_check_t* handle) {
  (void) handle;
  if (on_check != NULL)
    on_check();
  iteration++;
}


HARNESS_UNUSED static void never_cb(uvtw_timer_t* timer) {
  (void) timer;
  ASSERT(0 && "must not run");
}


HARNESS_UNUSED static void never_uv_cb(uv_timer_t* handle) {
  (void) handle;
  ASSERT(0 && "must not run");
}


static void harness_wheel_close_cb(uvtw_wheel_t* w) {
  int i;

  for (i = 0; i < harness_nwheels; i++)
    if (harness_wheels[i] == w)
      break;
  ASSERT_LT(i, harness_nwheels); /* a wheel of this harness */
  close_cb_called++;
}


static uvtw_wheel_t* add_wheel(const uvtw_options_t* opts) {
  uvtw_wheel_t* w;

  ASSERT_LT(harness_nwheels, HARNESS_MAX_WHEELS);
  ASSERT_EQ(0, uvtw_wheel_new(&loop, opts, &w));
  harness_wheels[harness_nwheels++] = w;
  return w;
}


HARNESS_UNUSED static void close_at_teardown(uv_handle_t* h) {
  if (harness_nhandles == harness_handles_cap) {
    harness_handles_cap = harness_handles_cap * 2 + 16;
    harness_handles = realloc(harness_handles, harness_handles_cap * sizeof(h));
    ASSERT_PTR_NE(NULL, harness_handles);
  }
  harness_handles[harness_nhandles++] = h;
}


HARNESS_UNUSED static void add_uv_timer(uv_timer_t* u) {
  ASSERT_UV_OK(uv_timer_init(&loop, u));
  close_at_teardown((uv_handle_t*) u);
}


static void harness_start_check(void) {
  iteration = 0;
  on_check = NULL;
  ASSERT_UV_OK(uv_check_init(&loop, &check));
  ASSERT_UV_OK(uv_check_start(&check, harness_check_cb));
  uv_unref((uv_handle_t*) &check);
}


HARNESS_UNUSED static void setup_loop(void) {
  ASSERT_UV_OK(uv_loop_init(&loop));
  wheel = NULL;
  harness_nwheels = 0;
  harness_nhandles = 0;
  close_cb_called = 0;
  harness_start_check();
}


HARNESS_UNUSED static void setup_opts(const uvtw_options_t* opts) {
  ASSERT_UV_OK(uv_loop_init(&loop));
  harness_nwheels = 0;
  harness_nhandles = 0;
  close_cb_called = 0;
  wheel = add_wheel(opts);
  harness_start_check();
}


HARNESS_UNUSED static void setup(void) {
  setup_opts(NULL);
}


HARNESS_UNUSED static void teardown(void) {
  size_t i;
  int k;

  for (i = 0; i < harness_nhandles; i++)
    uv_close(harness_handles[i], NULL);
  uv_close((uv_handle_t*) &check, NULL);
  close_cb_called = 0;
  for (k = 0; k < harness_nwheels; k++)
    ASSERT_EQ(0, uvtw_wheel_close(harness_wheels[k], harness_wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(harness_nwheels, close_cb_called);
  ASSERT_EQ(0, uv_loop_close(&loop));
  free(harness_handles);
  harness_handles = NULL;
  harness_nhandles = 0;
  harness_handles_cap = 0;
  harness_nwheels = 0;
  wheel = NULL;
}

#endif /* UVTW_TIMER_HARNESS_H */
