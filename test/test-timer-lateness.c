/* SPDX-License-Identifier: MIT */
/* uvtw_stats_t.lateness, how late callbacks ran, and
 * uvtw_lateness_quantile.
 *
 *   blocked_loop     a timer due after 10 ms on a loop blocked for 50 ms
 *                    runs about 40 ms late: it counts in the bucket of 32
 *                    to 63 ms, and nowhere else.  The bucket is checked
 *                    against the lateness the callback saw (uv_now minus
 *                    the deadline), whatever it was; a run that a loaded
 *                    machine made later than 63 ms is run again.
 *   slots            the bucket of each lateness at every bucket's edges,
 *                    and the last bucket taking everything from 2^14 ms.
 *   sum_is_fired     timers (one-shots, repeats, 1 ms and 10 ms ticks),
 *                    loop-thread tasks (one cancelled by a timer that runs
 *                    before it in the same pass: the pass pops it, it
 *                    never runs and is not counted) and threadpool tasks:
 *                    the buckets add up to `fired` once everything is
 *                    done, and inside callbacks to `fired` plus the
 *                    threadpool runs in flight (and the running task).
 *   virtual_on_time  on a virtual wheel everything counts as on time,
 *                    also a task the loop took in after its deadline.
 *   quantiles        uvtw_lateness_quantile on made-up counts: empty,
 *                    median, 99th percentile, maximum, the clamps of q,
 *                    and the last bucket.
 *   quantiles_huge   counts whose total is 2^64 or more (the sum must not
 *                    wrap) or near it (no conversion out of range, which
 *                    UBSan reports): all in the last bucket, one more
 *                    beside them, two full buckets, every bucket full;
 *                    q at 0, 1, a tiny one and out of range. */

#include <math.h>
#include <string.h>

#include "internal.h"
#include "timer-harness.h"
#include "test-cases.h"


static uint64_t bucket_sum(const uvtw_stats_t* s) {
  uint64_t sum;
  int i;

  sum = 0;
  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    sum += s->lateness[i];
  return sum;
}


/* The bucket of `late` ms, as uvtw.h defines it. */
static int bucket_of(uint64_t late) {
  int i;

  if (late == 0)
    return 0;
  for (i = 1; i < UVTW_LATENESS_BUCKETS - 1; i++)
    if (late <= ((uint64_t) 1 << i) - 1)
      return i;
  return UVTW_LATENESS_BUCKETS - 1;
}


static uvtw_timer_t timer;
static uint64_t deadline;
static uint64_t seen_late;
static int runs;


static void late_cb(uvtw_timer_t* t) {
  ASSERT_PTR_EQ(&timer, t);
  ASSERT_UGE(uv_now(&loop), deadline);
  seen_late = uv_now(&loop) - deadline;
  runs++;
}


static void blocked_loop(void) {
  uvtw_stats_t s;
  int attempt;
  int i;

  for (attempt = 0;; attempt++) {
    setup();
    runs = 0;
    ASSERT_EQ(0, uvtw_timer_init(wheel, &timer));
    uv_update_time(&loop);
    deadline = uv_now(&loop) + 10;
    ASSERT_EQ(0, uvtw_timer_start(&timer, late_cb, 10, 0));
    uv_sleep(50); /* the loop is blocked */
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_EQ(1, runs);
    ASSERT_UGE(seen_late, 40);
    uvtw_wheel_stats(wheel, &s);
    ASSERT_UEQ(1, s.fired);
    ASSERT_UEQ(1, bucket_sum(&s));
    for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
      ASSERT_UEQ(i == bucket_of(seen_late), s.lateness[i]);
    teardown();
    if (seen_late <= 63) {
      ASSERT_EQ(6, bucket_of(seen_late)); /* 32 to 63 ms */
      break;
    }
    fprintf(stderr, "blocked_loop: %" PRIu64 " ms late, again\n", seen_late);
    ASSERT_LT(attempt, 8);
  }
}


static void slots(void) {
  uvtw_stats_t s;
  uint64_t late;
  int i;

  ASSERT_UEQ(0, uvtw__late_slot(0));
  for (i = 1; i < 64; i++) {
    late = (uint64_t) 1 << (i - 1);
    ASSERT_UEQ(i, uvtw__late_slot(late));
    ASSERT_UEQ(i, uvtw__late_slot(2 * late - 1));
    if (i < UVTW_LATENESS_BUCKETS) {
      ASSERT_EQ(i, bucket_of(late));
      ASSERT_EQ(i, bucket_of(2 * late - 1));
    }
  }
  /* Beyond 2^63, never reached, still inside the array. */
  ASSERT_ULT(uvtw__late_slot(UINT64_MAX), 64);

  /* The last bucket takes every slot from its own on. */
  setup();
  wheel->late_bits[14] = 2;
  wheel->late_bits[15] = 1;
  wheel->late_bits[20] = 3;
  wheel->late_bits[63] = 4;
  uvtw_wheel_stats(wheel, &s);
  ASSERT_UEQ(2, s.lateness[14]);
  ASSERT_UEQ(8, s.lateness[15]);
  ASSERT_UEQ(10, bucket_sum(&s));
  ASSERT_UEQ(10, s.fired);
  memset(wheel->late_bits, 0, sizeof(wheel->late_bits));
  teardown();
}


/* sum_is_fired */
#define SF_TIMERS 8
static uvtw_timer_t sf_timers[SF_TIMERS];
static uvtw_timer_t sf_canceller;
static uvtw_id_t sf_victim;
static int sf_runs;
static int sf_victim_runs;
static atomic_int sf_pool_runs;


/* Inside a callback: the buckets hold `fired` plus the threadpool tasks
 * handed over whose completion has not come yet (at most the 6), plus,
 * in a task's callback, that task (it counts in tasks_run when it
 * returns). */
static void check_sum(void) {
  uvtw_stats_t s;

  uvtw_wheel_stats(wheel, &s);
  ASSERT_UGE(bucket_sum(&s), s.fired);
  ASSERT_ULE(bucket_sum(&s), s.fired + 6 + 1);
}


static void sf_timer_cb(uvtw_timer_t* t) {
  check_sum();
  if (++sf_runs > 40)
    uvtw_timer_stop(t);
}


static void sf_task_cb(void* arg, int status) {
  ASSERT_EQ(0, status);
  (void) arg;
  check_sum();
}


static void sf_victim_cb(void* arg, int status) {
  (void) arg;
  (void) status;
  sf_victim_runs++;
}


static void sf_pool_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(0, status);
  atomic_fetch_add(&sf_pool_runs, 1);
}


/* Due in the same pass as the victim task, and before it (started before
 * the loop took the task in): the cancel wins, the pass pops the task
 * and finds it cancelled. */
static void sf_cancel_cb(uvtw_timer_t* t) {
  (void) t;
  ASSERT_EQ(0, uvtw_cancel(wheel, sf_victim));
  check_sum();
}


static void sum_is_fired_tick(uint64_t tick_ms) {
  uvtw_options_t o;
  uvtw_stats_t s;
  uvtw_id_t id;
  int i;

  uvtw_options_init(&o);
  o.tick_ms = tick_ms;
  setup_opts(&o);
  sf_runs = 0;
  sf_victim_runs = 0;
  atomic_store(&sf_pool_runs, 0);
  for (i = 0; i < SF_TIMERS; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &sf_timers[i]));
    ASSERT_EQ(0, uvtw_timer_start(&sf_timers[i], sf_timer_cb,
                                  1 + (uint64_t) i * 3, i % 3 == 0 ? 7 : 0));
  }
  ASSERT_EQ(0, uvtw_timer_init(wheel, &sf_canceller));
  ASSERT_EQ(0, uvtw_timer_start(&sf_canceller, sf_cancel_cb, 30, 0));
  ASSERT_EQ(0, uvtw_submit(wheel, 30, 0, 0, sf_victim_cb, NULL, &sf_victim));
  ASSERT_EQ(0, uvtw_submit(wheel, 5, 0, 0, sf_task_cb, NULL, NULL));
  ASSERT_EQ(0, uvtw_submit(wheel, 2, 9, 0, sf_task_cb, NULL, &id));
  for (i = 0; i < 6; i++)
    ASSERT_EQ(0, uvtw_submit(wheel, (uint64_t) i * 4, 0, UVTW_THREADPOOL,
                             sf_pool_cb, NULL, NULL));
  ASSERT_EQ(0, uvtw_submit(wheel, 60, 0, 0, sf_task_cb, NULL, NULL));
  /* The loop takes the tasks in, then is blocked past the victim's
   * deadline: the canceller and the victim come due in one pass. */
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_sleep(35);
  while (sf_runs <= 40 || atomic_load(&sf_pool_runs) < 6)
    uv_run(&loop, UV_RUN_ONCE);
  ASSERT_EQ(0, uvtw_cancel(wheel, id));
  for (i = 0; i < SF_TIMERS; i++)
    uvtw_timer_stop(&sf_timers[i]);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, sf_victim_runs);
  uvtw_wheel_stats(wheel, &s);
  ASSERT_UEQ(s.fired, bucket_sum(&s));
  ASSERT_UEQ(2, s.tasks_cancelled);       /* the victim, the repeat */
  ASSERT_ULT(1 + 6 + 1 + 1, s.tasks_run); /* and the repeat's runs */
  teardown();
}


static void sum_is_fired(void) {
  sum_is_fired_tick(1);
  sum_is_fired_tick(10);
}


/* virtual_on_time */
static uvtw_timer_t vt_timer;
static int vt_task_runs;
static int vt_timer_runs;

static void vt_task_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(0, status);
  vt_task_runs++;
}


static void vt_timer_cb(uvtw_timer_t* t) {
  (void) t;
  vt_timer_runs++;
  /* Due at once: taken in after this pass, it runs in the same advance,
   * with the clock at this timer's deadline, on time. */
  ASSERT_EQ(0, uvtw_submit(wheel, 0, 0, 0, vt_task_cb, NULL, NULL));
}


static void virtual_on_time(void) {
  uvtw_options_t o;
  uvtw_stats_t s;

  uvtw_options_init(&o);
  o.virtual_time = 1;
  o.tick_ms = 10;
  setup_opts(&o);
  vt_task_runs = 0;
  vt_timer_runs = 0;
  ASSERT_EQ(0, uvtw_timer_init(wheel, &vt_timer));
  ASSERT_EQ(0, uvtw_timer_start(&vt_timer, vt_timer_cb, 15, 15));
  ASSERT_EQ(0, uvtw_submit(wheel, 33, 0, 0, vt_task_cb, NULL, NULL));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 100));
  ASSERT_GE(vt_timer_runs, 4); /* every 15 ms rounded up to 20 */
  ASSERT_EQ(1 + vt_timer_runs, vt_task_runs);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 0));
  ASSERT_EQ(1 + vt_timer_runs, vt_task_runs);
  uvtw_timer_stop(&vt_timer);
  uvtw_wheel_stats(wheel, &s);
  ASSERT_UEQ(s.fired, bucket_sum(&s));
  ASSERT_UEQ(s.fired, s.lateness[0]);
  teardown();
}


static void quantiles(void) {
  uvtw_stats_t s;

  memset(&s, 0, sizeof(s));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 0.5));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 1));
  s.lateness[0] = 90;
  s.lateness[3] = 9; /* 4 to 7 ms */
  s.lateness[7] = 1; /* 64 to 127 ms */
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 0.5));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 0.9));
  ASSERT_UEQ(7, uvtw_lateness_quantile(&s, 0.91));
  ASSERT_UEQ(7, uvtw_lateness_quantile(&s, 0.99));
  ASSERT_UEQ(127, uvtw_lateness_quantile(&s, 0.995));
  ASSERT_UEQ(127, uvtw_lateness_quantile(&s, 1));
  ASSERT_UEQ(127, uvtw_lateness_quantile(&s, 2)); /* clamped to 1 */
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 0));   /* the least */
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, -1));  /* clamped to 0 */
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, NAN)); /* as 0 */
  s.lateness[0] = 0;
  ASSERT_UEQ(7, uvtw_lateness_quantile(&s, 0));
  s.lateness[UVTW_LATENESS_BUCKETS - 1] = 1;
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 1));
  ASSERT_UEQ(7, uvtw_lateness_quantile(&s, 0.5));
}


static void quantiles_huge(void) {
  uvtw_stats_t s;
  int i;

  memset(&s, 0, sizeof(s));
  s.lateness[UVTW_LATENESS_BUCKETS - 1] = UINT64_MAX;
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 1));
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 0.5));
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 0));
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 7)); /* clamped to 1 */
  /* A total of 2^64: the rank of q = 2^-64 is 1, in the first bucket. */
  s.lateness[0] = 1;
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 1));
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 0.5));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 0x1p-64));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 0));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, -1)); /* clamped to 0 */
  /* 2^65 - 2 in buckets 14 and 15: ranks past 2^64 are in the last. */
  s.lateness[0] = 0;
  s.lateness[UVTW_LATENESS_BUCKETS - 2] = UINT64_MAX;
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 0.75));
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 1));
  ASSERT_UEQ(16383, uvtw_lateness_quantile(&s, 0.25));
  ASSERT_UEQ(16383, uvtw_lateness_quantile(&s, 0));
  /* Every bucket full, 16 * (2^64 - 1): the product rounds to 2^68,
   * past the total, and the rank is the total. */
  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    s.lateness[i] = UINT64_MAX;
  ASSERT_UEQ(UINT64_MAX, uvtw_lateness_quantile(&s, 1));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 0));
  ASSERT_UEQ(0, uvtw_lateness_quantile(&s, 1.0 / 32));
  ASSERT_UEQ(1, uvtw_lateness_quantile(&s, 0.1));
  ASSERT_UEQ(16383, uvtw_lateness_quantile(&s, 0.9));
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(blocked_loop),
  TEST_CASE(slots),
  TEST_CASE(sum_is_fired),
  TEST_CASE(virtual_on_time),
  TEST_CASE(quantiles),
  TEST_CASE(quantiles_huge),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
