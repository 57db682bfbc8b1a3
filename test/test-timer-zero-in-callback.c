/* SPDX-License-Identifier: MIT */
/* A timer that a uvtw callback starts (or restarts) with a deadline that is
 * already reached, against a uv_timer_t twin started the same way from a
 * uv_timer_t callback on the same loop:
 *   - libuv 1.48 and later run the twin in the next timers phase, the next
 *     loop iteration: uvtw runs its timer in that same iteration;
 *   - libuv before 1.48 runs the twin again in the same pass (and spins if
 *     it keeps restarting itself with 0): there uvtw still waits for the
 *     next iteration.  A uvtw pass never spins.
 * So on every libuv the uvtw timer runs in the iteration after the pass
 * that started it, and the test checks which of the two the twin did
 * against uv_version(), the run-time check the driver makes (driver.c).
 * Order: a uvtw timer started in a pass never runs before the timers that
 * were already due in that pass.  (docs/timers.md: "Snapshot" and
 * "Which libuv".) */

#include "test-cases.h"
#include "timer-harness.h"

#define REPEATS 10

/* Per timer: the iterations of its runs. */
struct record {
  int runs;
  int64_t iter[2 * REPEATS];
};

static uvtw_timer_t a;
static uvtw_timer_t b;
static uvtw_timer_t c;
static uv_timer_t ua;
static uv_timer_t ub;
static uv_timer_t uc;
static struct record ra;
static struct record rb;
static struct record rc;
static struct record rua;
static struct record rub;
static struct record ruc;


static void note(struct record* r) {
  ASSERT_LT(r->runs, 2 * REPEATS);
  r->iter[r->runs++] = iteration;
}


/* A loop, the wheel, the timers a, b, c and their twins, no runs yet. */
static void reset(void) {
  setup();
  ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &c));
  add_uv_timer(&ua);
  add_uv_timer(&ub);
  add_uv_timer(&uc);
  ra.runs = rb.runs = rc.runs = 0;
  rua.runs = rub.runs = ruc.runs = 0;
}


/* This libuv runs a timer started with 0 from a timer callback in the next
 * timers phase, not in the same pass. */
static int libuv_runs_it_next(void) {
  return uv_version() >= 0x013000; /* 1.48.0 */
}


/* The twin, started from a callback in iteration uv_started, ran in
 * iteration uv_ran: check that against the libuv release.  The uvtw timer,
 * started in tw_started, ran in tw_ran: the next iteration. */
static void like_twin(int64_t uv_started,
                      int64_t uv_ran,
                      int64_t tw_started,
                      int64_t tw_ran) {
  if (libuv_runs_it_next())
    ASSERT_EQ(uv_started + 1, uv_ran);
  else
    ASSERT_EQ(uv_started, uv_ran);
  ASSERT_EQ(tw_started + 1, tw_ran);
}


/* Scenario 1: a (5 ms) starts b with timeout 0; c is due in the same pass
 * as a and runs after it, before b.  The twins ua, ub, uc do the same. */
static void b_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &b);
  ASSERT_EQ(1, rc.runs);
  note(&rb);
}


static void a_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &a);
  note(&ra);
  ASSERT_EQ(0, uvtw_timer_start(&b, b_cb, 0, 0));
  ASSERT_EQ(1, uvtw_timer_is_active(&b));
  ASSERT_UEQ(0, uvtw_timer_get_due_in(&b));
  ASSERT_EQ(0, rb.runs);
}


static void c_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(timer, &c);
  note(&rc);
  ASSERT_EQ(1, ra.runs);
  ASSERT_EQ(0, rb.runs); /* b was started in this pass with deadline now */
  ASSERT_EQ(ra.iter[0], iteration);
}


static void ub_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &ub);
  ASSERT_EQ(1, ruc.runs);
  note(&rub);
}


static void ua_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &ua);
  note(&rua);
  ASSERT_UV_OK(uv_timer_start(&ub, ub_cb, 0, 0));
}


static void uc_cb(uv_timer_t* handle) {
  ASSERT_PTR_EQ(handle, &uc);
  note(&ruc);
}


static void start_zero_from_callback(void) {
  reset();
  uv_update_time(&loop);
  ASSERT_UV_OK(uv_timer_start(&ua, ua_cb, 5, 0));
  ASSERT_UV_OK(uv_timer_start(&uc, uc_cb, 5, 0));
  ASSERT_EQ(0, uvtw_timer_start(&a, a_cb, 5, 0));
  ASSERT_EQ(0, uvtw_timer_start(&c, c_cb, 5, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, ra.runs);
  ASSERT_EQ(1, rb.runs);
  ASSERT_EQ(1, rc.runs);
  ASSERT_EQ(1, rub.runs);
  ASSERT_EQ(rua.iter[0], ra.iter[0]);
  like_twin(rua.iter[0], rub.iter[0], ra.iter[0], rb.iter[0]);
  teardown();
}


/* Scenario 2: a timer that restarts itself with 0 from its own callback,
 * REPEATS runs.  uvtw: one run per iteration, in consecutive iterations. */
static void self_cb(uvtw_timer_t* timer) {
  note(&ra);
  if (ra.runs < REPEATS)
    ASSERT_EQ(0, uvtw_timer_start(timer, self_cb, 0, 0));
}


static void uself_cb(uv_timer_t* handle) {
  note(&rua);
  if (rua.runs < REPEATS)
    ASSERT_UV_OK(uv_timer_start(handle, uself_cb, 0, 0));
}


static void restart_self_with_zero(void) {
  int i;

  reset();
  ASSERT_UV_OK(uv_timer_start(&ua, uself_cb, 0, 0));
  ASSERT_EQ(0, uvtw_timer_start(&a, self_cb, 0, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(REPEATS, ra.runs);
  ASSERT_EQ(REPEATS, rua.runs);
  ASSERT_EQ(rua.iter[0], ra.iter[0]);
  for (i = 1; i < REPEATS; i++)
    like_twin(rua.iter[i - 1], rua.iter[i], ra.iter[i - 1], ra.iter[i]);
  teardown();
}


/* Scenario 3: a repeating timer (repeat 1) that its callback restarts with
 * 0, and another timer already due in the same pass that the first one
 * restarts with 0: neither runs twice in one uvtw pass. */
static void other_cb(uvtw_timer_t* timer) {
  (void) timer;
  note(&rb);
}


static void rep_cb(uvtw_timer_t* timer) {
  note(&ra);
  if (ra.runs == 1) {
    /* b is due in this pass too (started after a with the same timeout), so
     * it has not run yet; restarting it with 0 moves it to the next
     * iteration. */
    ASSERT_EQ(0, rb.runs);
    ASSERT_EQ(0, uvtw_timer_start(&b, other_cb, 0, 0));
    ASSERT_EQ(0, uvtw_timer_start(timer, rep_cb, 0, 1));
  } else {
    ASSERT_EQ(0, uvtw_timer_stop(timer));
  }
}


static void uother_cb(uv_timer_t* handle) {
  (void) handle;
  note(&rub);
}


static void urep_cb(uv_timer_t* handle) {
  note(&rua);
  if (rua.runs == 1) {
    ASSERT_EQ(0, rub.runs);
    ASSERT_UV_OK(uv_timer_start(&ub, uother_cb, 0, 0));
    ASSERT_UV_OK(uv_timer_start(handle, urep_cb, 0, 1));
  } else {
    ASSERT_UV_OK(uv_timer_stop(handle));
  }
}


static void restart_due_timer_with_zero(void) {
  reset();
  uv_update_time(&loop);
  ASSERT_UV_OK(uv_timer_start(&ua, urep_cb, 3, 1));
  ASSERT_UV_OK(uv_timer_start(&ub, uother_cb, 3, 0));
  ASSERT_EQ(0, uvtw_timer_start(&a, rep_cb, 3, 1));
  ASSERT_EQ(0, uvtw_timer_start(&b, other_cb, 3, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(2, ra.runs);
  ASSERT_EQ(1, rb.runs);
  ASSERT_EQ(2, rua.runs);
  ASSERT_EQ(1, rub.runs);
  ASSERT_EQ(rua.iter[0], ra.iter[0]);
  like_twin(rua.iter[0], rua.iter[1], ra.iter[0], ra.iter[1]);
  like_twin(rua.iter[0], rub.iter[0], ra.iter[0], rb.iter[0]);
  teardown();
}


/* Scenario 4: with UV_RUN_NOWAIT, the call whose pass runs a does not run
 * b; the next call does.  Alone on the loop, then the twin alone. */
static void nowait_passes(void) {
  int i;

  reset();
  ASSERT_EQ(0, uvtw_timer_start(&a, a_cb, 1, 0));
  ASSERT_EQ(0, uvtw_timer_start(&c, c_cb, 1, 0));
  for (i = 0; ra.runs == 0; i++) {
    ASSERT_LT(i, 100000);
    uv_sleep(1);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  ASSERT_EQ(0, rb.runs);
  ASSERT_EQ(1, uvtw_timer_is_active(&b));
  uv_run(&loop, UV_RUN_NOWAIT);
  ASSERT_EQ(1, rb.runs);
  ASSERT_EQ(0, uvtw_timer_is_active(&b));
  ASSERT_EQ(0, uv_loop_alive(&loop));

  ASSERT_UV_OK(uv_timer_start(&ua, ua_cb, 1, 0));
  ASSERT_UV_OK(uv_timer_start(&uc, uc_cb, 1, 0));
  for (i = 0; rua.runs == 0; i++) {
    ASSERT_LT(i, 100000);
    uv_sleep(1);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  ASSERT_EQ(libuv_runs_it_next() ? 0 : 1, rub.runs);
  uv_run(&loop, UV_RUN_NOWAIT);
  ASSERT_EQ(1, rub.runs);
  ASSERT_EQ(0, uv_loop_alive(&loop));
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(start_zero_from_callback),
  TEST_CASE(restart_self_with_zero),
  TEST_CASE(restart_due_timer_with_zero),
  TEST_CASE(nowait_passes),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
