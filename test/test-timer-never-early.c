/* SPDX-License-Identifier: MIT */
/* Never early, never missed: thousands of timers with random timeouts and
 * repeats, restarted from their callbacks (some after uv_update_time, some
 * after blocking the loop thread for a few ms).  In every callback
 * uv_now(loop) and floor(uv_hrtime() / 1e6) are at least the deadline
 * computed at start (uv_now at the start + timeout; for a repeat, the loop
 * time of the pass that ran it + repeat).  At the end every start has been
 * matched by exactly one run.  Runs on a tick-1 wheel and on a tick-7
 * wheel, whose deadlines round up (never down). */

#include <stdint.h>
#include <stdlib.h>

#include <uv.h>

#include "test.h"
#include "uvtw.h"

#define NTIMERS 3000
#define RUN_MS 2000

struct item {
  uvtw_timer_t t;
  uint64_t deadline;    /* lower bound on the run's uv_now */
  uint64_t repeat;
  int starts;           /* one-shot starts not yet matched by a run */
  int runs;
};

static uv_loop_t loop;
static uv_check_t check;
static int64_t iteration;
static int64_t pass_iteration = -1;
static uint64_t pass_now;     /* uv_now seen by the first callback of a pass */
static uint64_t end_time;
static int stopping;
static uint64_t total_runs;
static int close_cb_called;
static struct item items[NTIMERS];
static uint64_t rng = 88172645463325252ull;


static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}


static uint64_t pick_timeout(void) {
  uint64_t r;

  r = next_rand() % 100;
  if (r < 10)
    return 0;
  if (r < 70)
    return 1 + next_rand() % 20;
  if (r < 95)
    return 21 + next_rand() % 300;
  return 321 + next_rand() % 1200;
}


static void timer_cb(uvtw_timer_t* timer);


static void start_item(struct item* it) {
  uint64_t timeout;
  uint64_t repeat;

  timeout = pick_timeout();
  repeat = next_rand() % 4 == 0 ? 1 + next_rand() % 50 : 0;
  if (uvtw_timer_is_active(&it->t) && it->repeat == 0)
    it->starts--; /* a pending one-shot run is cancelled by the restart */
  ASSERT_EQ(0, uvtw_timer_start(&it->t, timer_cb, timeout, repeat));
  it->deadline = uv_now(&loop) + timeout;
  it->repeat = repeat;
  if (repeat == 0)
    it->starts++;
}


static void timer_cb(uvtw_timer_t* timer) {
  struct item* it;
  uint64_t now;
  uint64_t hr_ms;
  uint64_t r;

  it = timer->data;
  now = uv_now(&loop);
  hr_ms = uv_hrtime() / 1000000;
  if (pass_iteration != iteration) {
    pass_iteration = iteration;
    pass_now = now;
  }
  if (now < it->deadline || hr_ms < it->deadline)
    fprintf(stderr, "timer %d early: uv_now %" PRIu64 ", hrtime ms %" PRIu64
            ", deadline %" PRIu64 "\n",
            (int) (it - items), now, hr_ms, it->deadline);
  ASSERT_UGE(now, it->deadline);
  ASSERT_UGE(hr_ms, it->deadline);
  it->runs++;
  total_runs++;
  if (it->repeat != 0) {
    /* libuv's rule: next deadline = loop time at dispatch + repeat.  The
     * loop time at dispatch is at least the pass's loop time. */
    it->deadline = pass_now + it->repeat;
  } else {
    ASSERT_GT(it->starts, 0);
    it->starts--;
  }

  if (stopping) {
    ASSERT_EQ(0, uvtw_timer_stop(timer));
    return;
  }
  r = next_rand() % 100;
  if (r < 3) {
    uv_sleep(1 + (unsigned int) (next_rand() % 3));
  } else if (r < 8) {
    uv_update_time(&loop);
  }
  r = next_rand() % 100;
  if (r < 50) {
    start_item(it);
  } else if (r < 60 && it->repeat != 0) {
    ASSERT_EQ(0, uvtw_timer_stop(timer));
  } else if (r < 70) {
    /* Restart another timer. */
    start_item(&items[next_rand() % NTIMERS]);
  }
}


static void check_cb(uv_check_t* handle) {
  int i;

  (void) handle;
  iteration++;
  if (stopping || uv_now(&loop) < end_time)
    return;
  /* Stop the repeating timers; let the one-shots run out. */
  stopping = 1;
  for (i = 0; i < NTIMERS; i++)
    if (items[i].repeat != 0)
      ASSERT_EQ(0, uvtw_timer_stop(&items[i].t));
}


static void wheel_close_cb(uvtw_wheel_t* w) {
  (void) w;
  close_cb_called++;
}


static void run(uint64_t tick_ms) {
  uvtw_options_t opts;
  uvtw_wheel_t* wheel;
  int i;

  uvtw_options_init(&opts);
  opts.tick_ms = tick_ms;
  ASSERT_EQ(0, uvtw_wheel_new(&loop, &opts, &wheel));
  stopping = 0;
  total_runs = 0;
  pass_iteration = -1;
  for (i = 0; i < NTIMERS; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &items[i].t));
    items[i].t.data = &items[i];
    items[i].starts = 0;
    items[i].runs = 0;
    items[i].repeat = 0;
  }
  uv_update_time(&loop);
  end_time = uv_now(&loop) + RUN_MS;
  for (i = 0; i < NTIMERS; i++)
    start_item(&items[i]);

  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, stopping);
  ASSERT_UGE(total_runs, NTIMERS);
  for (i = 0; i < NTIMERS; i++) {
    ASSERT_EQ(0, uvtw_timer_is_active(&items[i].t));
    ASSERT_EQ(0, items[i].starts); /* every one-shot start ran once */
  }
  close_cb_called = 0;
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, close_cb_called);
}


int main(void) {
  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_UV_OK(uv_check_init(&loop, &check));
  ASSERT_UV_OK(uv_check_start(&check, check_cb));
  uv_unref((uv_handle_t*) &check);

  run(1);
  run(7);

  uv_close((uv_handle_t*) &check, NULL);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, uv_loop_close(&loop));
  return 0;
}
