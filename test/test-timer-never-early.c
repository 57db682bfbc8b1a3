/* SPDX-License-Identifier: MIT */
/* Never early, never missed: thousands of timers with random timeouts and
 * repeats, restarted from their callbacks (some after uv_update_time, some
 * after blocking the loop thread for a few ms).  In every callback
 * uv_now(loop) and floor(uv_hrtime() / 1e6) are at least the deadline
 * computed at start (uv_now at the start + timeout; for a repeat, the loop
 * time of the pass that ran it + repeat).  At the end every start has been
 * matched by exactly one run, and uv_run(UV_RUN_DEFAULT) returned only
 * then.  Runs on a tick-1 wheel and on a tick-7 wheel, whose deadlines
 * round up (never down).
 *
 * A twin population of uv_timer_t's runs the same kind of script (its own
 * random stream) on the same loop under the same checks: it shows that the
 * test's model of libuv (the deadlines, the repeat rule, what keeps the
 * loop alive) holds on the libuv this runs with, so a failure on the uvtw
 * side is uvtw's. */

#include <stdlib.h>

#include "test-cases.h"
#include "timer-harness.h"

#define NTIMERS 3000
#define RUN_MS 2000

enum { TW_SIDE = 0, UV_SIDE = 1 };

struct item {
  uvtw_timer_t t;
  uv_timer_t u;
  int side;
  uint64_t deadline; /* lower bound on the run's uv_now */
  uint64_t repeat;
  int starts; /* one-shot starts not yet matched by a run */
  int runs;
};

static int64_t pass_iteration = -1;
static uint64_t pass_now; /* uv_now seen by the first callback of a pass */
static uint64_t end_time;
static int stopping;
static uint64_t total_runs[2];
static struct item items[2][NTIMERS];
static uint64_t rngs[2] = {88172645463325252ull, 0x9e3779b97f4a7c15ull};


static uint64_t next_rand(int side) {
  return test_xorshift64(&rngs[side]);
}


static uint64_t pick_timeout(int side) {
  uint64_t r;

  r = next_rand(side) % 100;
  if (r < 10)
    return 0;
  if (r < 70)
    return 1 + next_rand(side) % 20;
  if (r < 95)
    return 21 + next_rand(side) % 300;
  return 321 + next_rand(side) % 1200;
}


static void timer_cb(uvtw_timer_t* timer);
static void uv_cb(uv_timer_t* handle);


static int item_active(struct item* it) {
  if (it->side == UV_SIDE)
    return uv_is_active((uv_handle_t*) &it->u);
  return uvtw_timer_is_active(&it->t);
}


static void item_stop(struct item* it) {
  if (it->side == UV_SIDE)
    ASSERT_UV_OK(uv_timer_stop(&it->u));
  else
    ASSERT_EQ(0, uvtw_timer_stop(&it->t));
}


static void start_item(struct item* it) {
  uint64_t timeout;
  uint64_t repeat;
  int side;

  side = it->side;
  timeout = pick_timeout(side);
  repeat = next_rand(side) % 4 == 0 ? 1 + next_rand(side) % 50 : 0;
  /* A pending one-shot run is cancelled by the restart.  (Not told by
   * uv_is_active: from libuv 1.48 on, a uv_timer_t due in the running
   * timers phase is inactive until it runs.  A uvtw timer stays active.) */
  if (it->starts > 0) {
    if (side == TW_SIDE)
      ASSERT_EQ(1, uvtw_timer_is_active(&it->t));
    it->starts--;
  }
  if (side == UV_SIDE)
    ASSERT_UV_OK(uv_timer_start(&it->u, uv_cb, timeout, repeat));
  else
    ASSERT_EQ(0, uvtw_timer_start(&it->t, timer_cb, timeout, repeat));
  it->deadline = uv_now(&loop) + timeout;
  it->repeat = repeat;
  if (repeat == 0)
    it->starts++;
}


static void fire(struct item* it) {
  uint64_t now;
  uint64_t hr_ms;
  uint64_t r;
  int side;

  side = it->side;
  now = uv_now(&loop);
  hr_ms = uv_hrtime() / 1000000;
  if (pass_iteration != iteration) {
    pass_iteration = iteration;
    pass_now = now;
  }
  if (now < it->deadline || hr_ms < it->deadline)
    fprintf(stderr,
            "%s timer %d early: uv_now %" PRIu64 ", hrtime ms %" PRIu64
            ", deadline %" PRIu64 "\n",
            side == UV_SIDE ? "uv_timer_t (the test's model is wrong)" : "uvtw",
            (int) (it - items[side]), now, hr_ms, it->deadline);
  ASSERT_UGE(now, it->deadline);
  ASSERT_UGE(hr_ms, it->deadline);
  it->runs++;
  total_runs[side]++;
  if (it->repeat != 0) {
    /* libuv's rule: next deadline = loop time at dispatch + repeat.  The
     * loop time at dispatch is at least the pass's loop time. */
    it->deadline = pass_now + it->repeat;
  } else {
    ASSERT_GT(it->starts, 0);
    it->starts--;
  }

  if (stopping) {
    item_stop(it);
    return;
  }
  r = next_rand(side) % 100;
  if (r < 3) {
    uv_sleep(1 + (unsigned int) (next_rand(side) % 3));
  } else if (r < 8) {
    uv_update_time(&loop);
  }
  r = next_rand(side) % 100;
  if (r < 50) {
    start_item(it);
  } else if (r < 60 && it->repeat != 0) {
    item_stop(it);
  } else if (r < 70) {
    /* Restart another timer of the same side. */
    start_item(&items[side][next_rand(side) % NTIMERS]);
  }
}


static void timer_cb(uvtw_timer_t* timer) {
  fire(timer->data);
}


static void uv_cb(uv_timer_t* handle) {
  fire(handle->data);
}


static void in_check(void) {
  int side;
  int i;

  if (stopping || uv_now(&loop) < end_time)
    return;
  /* Stop the repeating timers; let the one-shots run out. */
  stopping = 1;
  for (side = 0; side < 2; side++)
    for (i = 0; i < NTIMERS; i++)
      if (items[side][i].repeat != 0)
        item_stop(&items[side][i]);
}


static void run(uint64_t tick_ms) {
  uvtw_options_t opts;
  struct item* it;
  int side;
  int i;

  uvtw_options_init(&opts);
  opts.tick_ms = tick_ms;
  setup_opts(&opts);
  on_check = in_check;
  stopping = 0;
  pass_iteration = -1;
  for (side = 0; side < 2; side++) {
    total_runs[side] = 0;
    for (i = 0; i < NTIMERS; i++) {
      it = &items[side][i];
      it->side = side;
      if (side == TW_SIDE) {
        ASSERT_EQ(0, uvtw_timer_init(wheel, &it->t));
        it->t.data = it;
      } else {
        add_uv_timer(&it->u);
        it->u.data = it;
      }
      it->starts = 0;
      it->runs = 0;
      it->repeat = 0;
    }
  }
  uv_update_time(&loop);
  end_time = uv_now(&loop) + RUN_MS;
  for (i = 0; i < NTIMERS; i++) {
    start_item(&items[UV_SIDE][i]);
    start_item(&items[TW_SIDE][i]);
  }

  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, stopping);
  for (side = 0; side < 2; side++) {
    ASSERT_UGE(total_runs[side], NTIMERS);
    for (i = 0; i < NTIMERS; i++) {
      ASSERT_EQ(0, item_active(&items[side][i]));
      ASSERT_EQ(0, items[side][i].starts); /* every one-shot start ran */
    }
  }
  teardown();
}


static void tick_1(void) {
  run(1);
}


static void tick_7(void) {
  run(7);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(tick_1),
  TEST_CASE(tick_7),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
