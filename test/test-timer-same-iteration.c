/* SPDX-License-Identifier: MIT */
/* Same iteration as libuv (tick 1): a uvtw timer fires in the same loop
 * iteration as a uv_timer_t started at the same moment with the same
 * timeout.  Pairs are started before the loop runs (timeouts 0..299 and
 * sizes where a wheel changes level, up to 4097 ms), from a uv_check_t
 * and from a uv_timer_t callback (timeouts from 0), from a uvtw callback
 * (timeouts from 0 on libuv 1.48 and later; from 1 ms before 1.48, which
 * runs a 0 ms uv_timer_t started inside a timer callback in the same pass,
 * where uvtw waits for the next iteration: docs/timers.md, "Which
 * libuv"), and as repeating pairs whose first three runs are compared. */

#include "timer-harness.h"

#define NPAIRS 1200
#define RUNS 3

struct pair {
  uv_timer_t u;
  uvtw_timer_t w;
  uint64_t timeout;
  uint64_t repeat;
  int u_runs;
  int w_runs;
  int64_t u_iter[RUNS];
  int64_t w_iter[RUNS];
  int used;
};

static struct pair pairs[NPAIRS];
static int npairs;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static uv_timer_t uv_starter;
static uvtw_timer_t tw_starter;
static int uv_starter_runs;
static int tw_starter_runs;
static uint64_t min_in_tw_callback; /* the smallest timeout there */


static uint64_t next_rand(void) {
  return test_xorshift64(&rng);
}


static void u_cb(uv_timer_t* handle) {
  struct pair* p;

  p = handle->data;
  ASSERT_LT(p->u_runs, RUNS);
  p->u_iter[p->u_runs++] = iteration;
  if (p->u_runs == RUNS || p->repeat == 0)
    ASSERT_UV_OK(uv_timer_stop(handle));
}


static void w_cb(uvtw_timer_t* timer) {
  struct pair* p;

  p = timer->data;
  ASSERT_LT(p->w_runs, RUNS);
  p->w_iter[p->w_runs++] = iteration;
  if (p->w_runs == RUNS || p->repeat == 0)
    ASSERT_EQ(0, uvtw_timer_stop(timer));
}


/* Starts a new pair, uv_timer_t first (the order does not matter). */
static void start_pair(uint64_t timeout, uint64_t repeat) {
  struct pair* p;

  ASSERT_LT(npairs, NPAIRS);
  p = &pairs[npairs++];
  p->used = 1;
  p->timeout = timeout;
  p->repeat = repeat;
  ASSERT_UV_OK(uv_timer_start(&p->u, u_cb, timeout, repeat));
  ASSERT_EQ(0, uvtw_timer_start(&p->w, w_cb, timeout, repeat));
}


/* At the end of every iteration, before `iteration` moves on. */
static void in_check(void) {
  int i;

  /* At a few iterations, start a batch from here: outside any timer
   * callback, after the poll has updated the loop time. */
  if (iteration == 2 || iteration == 7 || iteration == 30 || iteration == 100) {
    for (i = 0; i < 40; i++)
      start_pair(next_rand() % 60, 0);
    start_pair(0, 0);
    start_pair(0, 3);
    start_pair(1, 1);
  }
}


static void uv_starter_cb(uv_timer_t* handle) {
  int i;

  (void) handle;
  uv_starter_runs++;
  for (i = 0; i < 40; i++)
    start_pair(next_rand() % 60, 0);
  start_pair(0, 0);
  start_pair(0, 1);
  start_pair(1, 0);
  start_pair(1, 1);
  start_pair(2, 5);
  if (uv_starter_runs == 4)
    ASSERT_UV_OK(uv_timer_stop(handle));
}


static void tw_starter_cb(uvtw_timer_t* timer) {
  int i;

  (void) timer;
  tw_starter_runs++;
  for (i = 0; i < 40; i++)
    start_pair(min_in_tw_callback + next_rand() % 60, 0);
  start_pair(min_in_tw_callback, 0);
  start_pair(min_in_tw_callback, 3);
  start_pair(1, 0);
  start_pair(1, 2);
  start_pair(3, 1);
  if (tw_starter_runs == 4)
    ASSERT_EQ(0, uvtw_timer_stop(timer));
}


int main(void) {
  static const uint64_t level_sizes[] = {511,  512,  513,  1023, 1024, 1025,
                                         2047, 2048, 2049, 4095, 4096, 4097};
  struct pair* p;
  int mismatches;
  int i;
  int k;

  min_in_tw_callback = uv_version() >= 0x013000 ? 0 : 1; /* 1.48.0 */
  setup();
  on_check = in_check;
  for (i = 0; i < NPAIRS; i++) {
    add_uv_timer(&pairs[i].u);
    ASSERT_EQ(0, uvtw_timer_init(wheel, &pairs[i].w));
    pairs[i].u.data = &pairs[i];
    pairs[i].w.data = &pairs[i];
  }
  add_uv_timer(&uv_starter);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &tw_starter));

  /* Before the loop runs. */
  for (i = 0; i < 300; i++)
    start_pair((uint64_t) i, 0);
  for (i = 0; i < (int) (sizeof(level_sizes) / sizeof(level_sizes[0])); i++)
    start_pair(level_sizes[i], 0);
  for (i = 0; i < 20; i++)
    start_pair((uint64_t) i, 1 + (uint64_t) i % 7);
  ASSERT_UV_OK(uv_timer_start(&uv_starter, uv_starter_cb, 5, 17));
  ASSERT_EQ(0, uvtw_timer_start(&tw_starter, tw_starter_cb, 9, 23));

  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(4, uv_starter_runs);
  ASSERT_EQ(4, tw_starter_runs);

  mismatches = 0;
  for (i = 0; i < npairs; i++) {
    p = &pairs[i];
    ASSERT_EQ(p->repeat == 0 ? 1 : RUNS, p->u_runs);
    ASSERT_EQ(p->u_runs, p->w_runs);
    for (k = 0; k < p->u_runs; k++) {
      if (p->u_iter[k] == p->w_iter[k])
        continue;
      fprintf(stderr,
              "pair %d (timeout %" PRIu64 ", repeat %" PRIu64
              "), run %d: uv_timer_t in iteration %" PRId64 ", uvtw in %" PRId64
              "\n",
              i, p->timeout, p->repeat, k, p->u_iter[k], p->w_iter[k]);
      mismatches++;
    }
  }
  ASSERT_EQ(0, mismatches);

  teardown();
  return 0;
}
