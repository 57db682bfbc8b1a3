/* SPDX-License-Identifier: MIT */
/* Work that a wheel pass leaves due now (a timer started with 0 from a
 * wheel callback, a task submitted from one) holds the loop until it has
 * run, on every libuv, with nothing else alive on the loop (on libuv 1.48
 * and 1.52, unless the driver holds the loop for it, uv_run returns with
 * such a timer still active, and such tasks never run):
 *   zero_from_callback  a (5 ms) starts b with 0; uv_run(UV_RUN_DEFAULT)
 *                   returns 0 once b has run, b inactive;
 *   chain           a timer restarts itself with 0, 100 times: one run per
 *                   iteration, and uv_run returns after the last;
 *   unref           an unreferenced b does not hold the loop, like an
 *                   unreferenced uv_timer_t twin started the same way;
 *   tasks           a wheel callback submits a loop task (delay 0 and
 *                   5 ms) and a threadpool task: uv_run returns after all
 *                   three ran;
 *   backend         after a pass that left work due now, the loop's
 *                   uv_backend_timeout() is 0, as with a uv_timer_t twin.
 * Each runs with the driver as this libuv needs it (case <name>_default),
 * and then with the path for libuv before 1.48 forced (the rearm prepare
 * handle: case <name>_prepare): on libuv 1.48 and later that path meets
 * the loop order of 1.45 to 1.47, where uv_run checks liveness right after
 * its timers phase. */

#include <stdatomic.h>

#include "internal.h"
#include "test-cases.h"
#include "timer-harness.h"

static int force_prepare;

static uvtw_timer_t a;
static uvtw_timer_t b;
static int a_fired;
static int b_fired;
static int64_t a_iter;
static int64_t b_iter;
static int b_unref;

static uv_timer_t ua;
static uv_timer_t ub;
static int ub_fired;
static int ub_unref;

/* Starts a case's first timer from inside uv_run's loop (a prepare
 * callback), so that it cannot be due at uv_run's entry however late the
 * process runs: libuv >= 1.48 runs due timers there, before the loop, and
 * work they start would then run in the loop's first iteration. */
static uv_prepare_t starter;
static void (*start_first)(void);


/* Runs one scenario on a loop and wheel of its own, with the driver as
 * this libuv needs it (prepare 0) or with the prepare path forced. */
static void run_scenario(void (*scenario)(void), int prepare) {
  force_prepare = prepare;
  setup();
  if (force_prepare)
    wheel->driver.rearm_in_cb = 0;
  ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
  add_uv_timer(&ua);
  add_uv_timer(&ub);
  ASSERT_UV_OK(uv_prepare_init(&loop, &starter));
  close_at_teardown((uv_handle_t*) &starter);
  scenario();
  teardown();
}


static void starter_cb(uv_prepare_t* handle) {
  uv_prepare_stop(handle);
  start_first();
}


/* uv_run(UV_RUN_DEFAULT), with `first` called in its first prepare phase. */
static int run_starting(void (*first)(void)) {
  start_first = first;
  ASSERT_UV_OK(uv_prepare_start(&starter, starter_cb));
  return uv_run(&loop, UV_RUN_DEFAULT);
}


static void b_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &b);
  b_fired++;
  b_iter = iteration;
}


static void a_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &a);
  a_fired++;
  a_iter = iteration;
  if (b_unref)
    uvtw_timer_unref(&b);
  ASSERT_EQ(0, uvtw_timer_start(&b, b_cb, 0, 0));
}


static void start_a(void) {
  ASSERT_EQ(0, uvtw_timer_start(&a, a_cb, 5, 0));
}


static void zero_from_callback(void) {
  a_fired = b_fired = 0;
  b_unref = 0;
  ASSERT_EQ(0, run_starting(start_a));
  ASSERT_EQ(1, a_fired);
  ASSERT_EQ(1, b_fired);
  ASSERT_EQ(0, uvtw_timer_is_active(&b));
  ASSERT_EQ(a_iter + 1, b_iter);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  ASSERT_EQ(0, uv_loop_alive(&loop));
}


#define CHAIN 100
static int chain_runs;
static int64_t chain_iter[CHAIN];


static void chain_cb(uvtw_timer_t* timer) {
  chain_iter[chain_runs++] = iteration;
  if (chain_runs < CHAIN)
    ASSERT_EQ(0, uvtw_timer_start(timer, chain_cb, 0, 0));
}


static void chain(void) {
  int i;

  chain_runs = 0;
  ASSERT_EQ(0, uvtw_timer_start(&a, chain_cb, 1, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(CHAIN, chain_runs);
  for (i = 1; i < CHAIN; i++)
    ASSERT_EQ(chain_iter[i - 1] + 1, chain_iter[i]);
  ASSERT_EQ(0, uvtw_timer_is_active(&a));
}


/* The twin: a uv_timer_t ua that starts ub with 0. */
static void ub_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &ub);
  ub_fired++;
}


static void ua_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &ua);
  if (ub_unref)
    uv_unref((uv_handle_t*) &ub);
  ASSERT_UV_OK(uv_timer_start(&ub, ub_cb, 0, 0));
}


static void start_ua(void) {
  ASSERT_UV_OK(uv_timer_start(&ua, ua_cb, 5, 0));
}


static void unref(void) {
  int ub_active;
  int ub_fired_then;

  ub_fired = 0;
  ub_unref = 1;
  /* ua comes due inside uv_run's loop, not in the timers run before it
   * (run_starting), as it would if the process were descheduled for 5 ms
   * before uv_run: then ub would run in the loop's first iteration. */
  ASSERT_EQ(0, run_starting(start_ua));
  ub_active = uv_is_active((uv_handle_t*) &ub);
  ub_fired_then = ub_fired;
  ASSERT_UV_OK(uv_timer_stop(&ub));
  uv_ref((uv_handle_t*) &ub);
  ub_unref = 0;

  a_fired = b_fired = 0;
  b_unref = 1;
  ASSERT_EQ(0, run_starting(start_a)); /* the same for a, and b */
  b_unref = 0;
  ASSERT_EQ(1, a_fired);
  if (uv_version() >= 0x013000) {
    /* libuv runs ub in the next iteration, which does not come. */
    ASSERT_EQ(1, ub_active);
    ASSERT_EQ(0, ub_fired_then);
  } else {
    /* Before 1.48 libuv runs ub in the same pass. */
    ASSERT_EQ(0, ub_active);
    ASSERT_EQ(1, ub_fired_then);
  }
  /* uvtw waits for the next iteration on every libuv, and an unreferenced
   * b does not make it come. */
  ASSERT_EQ(0, b_fired);
  ASSERT_EQ(1, uvtw_timer_is_active(&b));

  /* Referenced again, it runs. */
  uvtw_timer_ref(&b);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, b_fired);
}


static atomic_int task_runs[3];
static const uint64_t task_delays[3] = {0, 5, 0};
static const unsigned task_flags[3] = {0, 0, UVTW_THREADPOOL};


static void task_cb(void* arg, int status) {
  ASSERT_EQ(0, status);
  atomic_fetch_add((atomic_int*) arg, 1);
}


static void submit_cb(uvtw_timer_t* timer) {
  int i;

  (void) timer;
  for (i = 0; i < 3; i++)
    ASSERT_EQ(0, uvtw_submit(wheel, task_delays[i], 0, task_flags[i], task_cb,
                             &task_runs[i], NULL));
}


static void tasks(void) {
  int runs;
  int i;

  for (i = 0; i < 3; i++)
    atomic_store(&task_runs[i], 0);
  ASSERT_EQ(0, uvtw_timer_start(&a, submit_cb, 2, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  for (i = 0; i < 3; i++) {
    runs = atomic_load(&task_runs[i]);
    ASSERT_EQ(1, runs);
  }
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
}


static void backend(void) {
  int i;

  ub_fired = 0;
  a_fired = b_fired = 0;
  ASSERT_UV_OK(uv_timer_start(&ua, ua_cb, 0, 0));
  for (i = 0; uv_is_active((uv_handle_t*) &ua); i++) {
    ASSERT_LT(i, 1000);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  if (ub_fired == 0)
    ASSERT_EQ(0, uv_backend_timeout(&loop)); /* libuv >= 1.48 */
  ASSERT_UV_OK(uv_timer_stop(&ub));

  ASSERT_EQ(0, uvtw_timer_start(&a, a_cb, 0, 0));
  for (i = 0; a_fired == 0; i++) {
    ASSERT_LT(i, 1000);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  ASSERT_EQ(0, b_fired);
  ASSERT_EQ(1, uvtw_timer_is_active(&b));
  /* The driver is armed for now, so an embedder that polls the backend fd
   * with this timeout does not sleep.  (With the prepare path forced on
   * libuv >= 1.48, the driver is armed only when the prepare runs, at the
   * start of the next iteration.) */
  if (!force_prepare || uv_version() < 0x013000)
    ASSERT_EQ(0, uv_backend_timeout(&loop));
  uv_run(&loop, UV_RUN_NOWAIT);
  ASSERT_EQ(1, b_fired);
}


static void zero_from_callback_default(void) {
  run_scenario(zero_from_callback, 0);
}


static void chain_default(void) {
  run_scenario(chain, 0);
}


static void unref_default(void) {
  run_scenario(unref, 0);
}


static void tasks_default(void) {
  run_scenario(tasks, 0);
}


static void backend_default(void) {
  run_scenario(backend, 0);
}


static void zero_from_callback_prepare(void) {
  run_scenario(zero_from_callback, 1);
}


static void chain_prepare(void) {
  run_scenario(chain, 1);
}


static void unref_prepare(void) {
  run_scenario(unref, 1);
}


static void tasks_prepare(void) {
  run_scenario(tasks, 1);
}


static void backend_prepare(void) {
  run_scenario(backend, 1);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(zero_from_callback_default),
  TEST_CASE(chain_default),
  TEST_CASE(unref_default),
  TEST_CASE(tasks_default),
  TEST_CASE(backend_default),
  TEST_CASE(zero_from_callback_prepare),
  TEST_CASE(chain_prepare),
  TEST_CASE(unref_prepare),
  TEST_CASE(tasks_prepare),
  TEST_CASE(backend_prepare),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
