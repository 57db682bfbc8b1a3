/* SPDX-License-Identifier: MIT */
/* Order of timers that fire in the same pass: by deadline, ties in the order
 * the timers were (re)started, exactly like uv_timer_t.  Every scenario runs
 * on uv_timer_t handles too, on the same loop, and both orders must equal
 * the expected one, so the test also proves it describes libuv. */

#include <stdlib.h>
#include <string.h>

#include "test-cases.h"
#include "timer-harness.h"

#define MAX_TIMERS 512

struct pair {
  uv_timer_t u;
  uvtw_timer_t w;
  int idx;
  int stop_in_cb;
};

static struct pair pairs[MAX_TIMERS];

static int uv_log[4 * MAX_TIMERS];
static int uv_n;
static int tw_log[4 * MAX_TIMERS];
static int64_t tw_iter[4 * MAX_TIMERS];
static int tw_n;


static void uv_cb(uv_timer_t* handle) {
  struct pair* p;

  p = handle->data;
  ASSERT_LT(uv_n, 4 * MAX_TIMERS);
  uv_log[uv_n++] = p->idx;
  if (p->stop_in_cb)
    ASSERT_EQ(0, uv_timer_stop(handle));
}


static void tw_cb(uvtw_timer_t* timer) {
  struct pair* p;

  p = timer->data;
  ASSERT_LT(tw_n, 4 * MAX_TIMERS);
  tw_iter[tw_n] = iteration;
  tw_log[tw_n++] = p->idx;
  if (p->stop_in_cb)
    ASSERT_EQ(0, uvtw_timer_stop(timer));
}


/* A loop and the wheel, with every pair initialised; empty logs, and the
 * first n pairs numbered. */
static void reset(int n) {
  int i;

  setup();
  for (i = 0; i < MAX_TIMERS; i++) {
    add_uv_timer(&pairs[i].u);
    ASSERT_EQ(0, uvtw_timer_init(wheel, &pairs[i].w));
    pairs[i].u.data = &pairs[i];
    pairs[i].w.data = &pairs[i];
  }
  uv_n = 0;
  tw_n = 0;
  for (i = 0; i < n; i++) {
    pairs[i].idx = i;
    pairs[i].stop_in_cb = 0;
  }
}


static void start_pair(int i, uint64_t timeout, uint64_t repeat) {
  ASSERT_EQ(0, uv_timer_start(&pairs[i].u, uv_cb, timeout, repeat));
  ASSERT_EQ(0, uvtw_timer_start(&pairs[i].w, tw_cb, timeout, repeat));
}


static void expect_logs(const int* expected, int n) {
  int i;

  ASSERT_EQ(uv_n, n);
  ASSERT_EQ(tw_n, n);
  for (i = 0; i < n; i++) {
    if (uv_log[i] != expected[i] || tw_log[i] != expected[i]) {
      fprintf(stderr, "position %d: expected %d, uv_timer_t %d, uvtw %d\n", i,
              expected[i], uv_log[i], tw_log[i]);
    }
    ASSERT_EQ(uv_log[i], expected[i]);
    ASSERT_EQ(tw_log[i], expected[i]);
  }
}


static void expect_same_pass(int first, int n) {
  int i;

  for (i = first + 1; i < first + n; i++)
    ASSERT_EQ(tw_iter[i], tw_iter[first]);
}


/* Ten timers with the same timeout, then two of them restarted with the same
 * timeout (uv_now does not move outside the loop): the restarted ones go to
 * the back, in restart order. */
static void equal_deadlines_and_restart(void) {
  static const int expected[] = {1, 2, 4, 5, 6, 7, 8, 9, 3, 0};
  int i;

  reset(10);
  for (i = 0; i < 10; i++)
    start_pair(i, 10, 0);
  start_pair(3, 10, 0);
  start_pair(0, 10, 0);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  expect_logs(expected, 10);
  expect_same_pass(0, 10);
  teardown();
}


/* The same, restarting with uv_timer_again / uvtw_timer_again. */
static void restart_by_again(void) {
  static const int expected[] = {1, 3, 4, 2, 0};
  int i;

  reset(5);
  for (i = 0; i < 5; i++) {
    pairs[i].stop_in_cb = 1;
    start_pair(i, 20, 20);
  }
  ASSERT_EQ(0, uv_timer_again(&pairs[2].u));
  ASSERT_EQ(0, uvtw_timer_again(&pairs[2].w));
  ASSERT_EQ(0, uv_timer_again(&pairs[0].u));
  ASSERT_EQ(0, uvtw_timer_again(&pairs[0].w));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  expect_logs(expected, 5);
  expect_same_pass(0, 5);
  teardown();
}


/* Timers started in one order with timeouts in another, across the sizes at
 * which a hierarchical wheel changes level, all overdue when the loop first
 * runs: one pass fires them all, by deadline, ties by start order. */
static void deadline_order_across_levels(void) {
  static const uint64_t timeouts[] = {
      300, 5, 256, 5,  255, 1,  64, 63, 65, 257, 1,  128, 300, 0,   129,
      4,   0, 2,   16, 15,  17, 32, 31, 33, 254, 64, 1,   300, 299, 7};
  int expected[sizeof(timeouts) / sizeof(timeouts[0])];
  int n;
  int i;
  int j;
  int k;

  n = (int) (sizeof(timeouts) / sizeof(timeouts[0]));
  reset(n);
  for (i = 0; i < n; i++)
    start_pair(i, timeouts[i], 0);

  /* Stable insertion sort by timeout: ties keep start order. */
  for (i = 0; i < n; i++) {
    for (j = 0; j < i && timeouts[expected[j]] <= timeouts[i]; j++)
      ;
    for (k = i; k > j; k--)
      expected[k] = expected[k - 1];
    expected[j] = i;
  }

  uv_sleep(350);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  expect_logs(expected, n);
  expect_same_pass(0, n);
  teardown();
}


struct rec {
  uint64_t timeout;
  uint64_t seq;
  int idx;
};


static int rec_cmp(const void* a, const void* b) {
  const struct rec* x = a;
  const struct rec* y = b;

  if (x->timeout != y->timeout)
    return x->timeout < y->timeout ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return 0;
}


/* Many timers with random timeouts (many ties), a fifth of them restarted
 * with new random timeouts, everything overdue when the loop first runs. */
static void random_order(void) {
  struct rec recs[MAX_TIMERS];
  int expected[MAX_TIMERS];
  uint64_t seq;
  int n;
  int i;
  int j;

  srand(12345);
  n = MAX_TIMERS;
  reset(n);
  seq = 0;
  for (i = 0; i < n; i++) {
    recs[i].idx = i;
    recs[i].timeout = (uint64_t) (rand() % 700);
    recs[i].seq = seq++;
    start_pair(i, recs[i].timeout, 0);
  }
  for (i = 0; i < n / 5; i++) {
    j = rand() % n;
    recs[j].timeout = (uint64_t) (rand() % 700);
    recs[j].seq = seq++;
    start_pair(j, recs[j].timeout, 0);
  }
  qsort(recs, n, sizeof(recs[0]), rec_cmp);
  for (i = 0; i < n; i++)
    expected[i] = recs[i].idx;

  uv_sleep(750);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  expect_logs(expected, n);
  expect_same_pass(0, n);
  teardown();
}


/* libuv re-arms a repeating timer before running its callback, so a timer
 * that the callback starts with the same timeout comes after it; a timer
 * that the callback restarts explicitly after starting the other comes
 * after that one. */
static int rearm_count;
static int rearm_variant;

static void rearm_uv_cb(uv_timer_t* handle) {
  struct pair* p;

  p = handle->data;
  uv_log[uv_n++] = p->idx;
  if (p->idx == 0) {
    if (++rearm_count == 1) {
      ASSERT_EQ(0, uv_timer_start(&pairs[1].u, uv_cb, 20, 0));
      if (rearm_variant == 2) /* restart self after starting 1 */
        ASSERT_EQ(0, uv_timer_start(handle, rearm_uv_cb, 20, 20));
    } else {
      ASSERT_EQ(0, uv_timer_stop(handle));
    }
  }
}


static int rearm_tw_count;

static void rearm_tw_cb(uvtw_timer_t* timer) {
  struct pair* p;

  p = timer->data;
  tw_iter[tw_n] = iteration;
  tw_log[tw_n++] = p->idx;
  if (p->idx == 0) {
    if (++rearm_tw_count == 1) {
      ASSERT_EQ(0, uvtw_timer_start(&pairs[1].w, tw_cb, 20, 0));
      if (rearm_variant == 2)
        ASSERT_EQ(0, uvtw_timer_start(timer, rearm_tw_cb, 20, 20));
    } else {
      ASSERT_EQ(0, uvtw_timer_stop(timer));
    }
  }
}


static void repeat_rearm_order(int variant) {
  static const int expected1[] = {0, 0, 1};
  static const int expected2[] = {0, 1, 0};

  reset(2);
  rearm_count = 0;
  rearm_tw_count = 0;
  rearm_variant = variant;
  ASSERT_EQ(0, uv_timer_start(&pairs[0].u, rearm_uv_cb, 20, 20));
  ASSERT_EQ(0, uvtw_timer_start(&pairs[0].w, rearm_tw_cb, 20, 20));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  expect_logs(variant == 1 ? expected1 : expected2, 3);
  expect_same_pass(1, 2);
  teardown();
}


/* Timer 0's callback starts timer 1: order 0, 0, 1. */
static void repeat_rearm_order_1(void) {
  repeat_rearm_order(1);
}


/* Timer 0's callback starts timer 1, then restarts itself: 0, 1, 0. */
static void repeat_rearm_order_2(void) {
  repeat_rearm_order(2);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(equal_deadlines_and_restart),
  TEST_CASE(restart_by_again),
  TEST_CASE(deadline_order_across_levels),
  TEST_CASE(random_order),
  TEST_CASE(repeat_rearm_order_1),
  TEST_CASE(repeat_rearm_order_2),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
