/* SPDX-License-Identifier: MIT */
/* tick_ms > 1: deadlines round UP to a tick.  Right after a start, timeout <=
 * get_due_in < timeout + tick; every rounded deadline (start time + due_in)
 * lies on one grid of tick-sized steps, whenever the timer was started; a
 * timer never runs before its rounded deadline; a repeating timer's next
 * deadline rounds up the same way.  Ticks 7, 10 and 1000. */

#include "test-cases.h"
#include "timer-harness.h"

#define NT 40

struct item {
  uvtw_timer_t t;
  uint64_t boundary; /* rounded deadline: uv_now at start + due_in */
  int runs;
};

static struct item items[NT];
static uint64_t tick;
static uint64_t phase;
static int have_phase;
static int repeats_left;


/* Records the rounded deadline of a timer just started with `timeout` and
 * checks it against the rules. */
static void note_start(struct item* it, uint64_t timeout) {
  uint64_t due;
  uint64_t now;

  now = uv_now(&loop);
  due = uvtw_timer_get_due_in(&it->t);
  ASSERT_EQ(1, uvtw_timer_is_active(&it->t));
  if (due < timeout || due >= timeout + tick)
    fprintf(stderr,
            "tick %" PRIu64 ", timeout %" PRIu64 ": due_in %" PRIu64 "\n", tick,
            timeout, due);
  ASSERT_UGE(due, timeout);
  ASSERT_ULT(due, timeout + tick);
  it->boundary = now + due;
  if (!have_phase) {
    have_phase = 1;
    phase = it->boundary % tick;
  }
  ASSERT_UEQ(phase, it->boundary % tick);
}


static void one_shot_cb(uvtw_timer_t* timer) {
  struct item* it;

  it = timer->data;
  it->runs++;
  ASSERT_UGE(uv_now(&loop), it->boundary);
}


/* The repeating timer is checked from a uv_check_t after its pass, so that
 * the test does not depend on when, around the callback, the wheel
 * re-arms it. */
static struct item* rep_item;
static uint64_t rep_fired_now;

static void repeat_cb(uvtw_timer_t* timer) {
  struct item* it;

  it = timer->data;
  it->runs++;
  rep_fired_now = uv_now(&loop);
  ASSERT_UGE(rep_fired_now, it->boundary);
  rep_item = it;
  if (--repeats_left == 0)
    ASSERT_EQ(0, uvtw_timer_stop(timer));
}


static void in_check(void) {
  uint64_t due;
  uint64_t now;

  if (rep_item == NULL || !uvtw_timer_is_active(&rep_item->t))
    return;
  /* Re-armed at dispatch time + 13, rounded up. */
  now = uv_now(&loop);
  due = uvtw_timer_get_due_in(&rep_item->t);
  if (due == 0)
    return; /* overdue already: the box stalled; nothing to measure */
  ASSERT_UGE(now + due, rep_fired_now + 13);
  ASSERT_ULT(now + due, rep_fired_now + 13 + tick);
  ASSERT_UEQ(phase, (now + due) % tick);
  rep_item->boundary = now + due;
  rep_item = NULL;
}


static void run_tick(uint64_t tick_ms, int fire) {
  static const uint64_t timeouts[] = {0,
                                      1,
                                      2,
                                      3,
                                      5,
                                      6,
                                      7,
                                      8,
                                      9,
                                      10,
                                      11,
                                      13,
                                      14,
                                      19,
                                      20,
                                      21,
                                      29,
                                      33,
                                      50,
                                      63,
                                      64,
                                      65,
                                      99,
                                      100,
                                      101,
                                      255,
                                      256,
                                      999,
                                      1000,
                                      1001,
                                      4096,
                                      12345,
                                      65536,
                                      1 << 20,
                                      (uint64_t) 1 << 33,
                                      ((uint64_t) 1 << 48) - 1};
  uvtw_options_t opts;
  int n;
  int i;
  int round;

  n = (int) (sizeof(timeouts) / sizeof(timeouts[0]));
  ASSERT_LE(n, NT);
  tick = tick_ms;
  have_phase = 0;
  uvtw_options_init(&opts);
  opts.tick_ms = tick_ms;
  setup_opts(&opts);
  on_check = in_check;
  for (i = 0; i < NT; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &items[i].t));
    items[i].t.data = &items[i];
  }

  /* Three rounds, started at different loop times. */
  for (round = 0; round < 3; round++) {
    uv_update_time(&loop);
    for (i = 0; i < n; i++) {
      items[i].runs = 0;
      ASSERT_EQ(0, uvtw_timer_start(&items[i].t, one_shot_cb, timeouts[i], 0));
      note_start(&items[i], timeouts[i]);
    }
    for (i = 0; i < n; i++)
      if (!fire || timeouts[i] > 101)
        ASSERT_EQ(0, uvtw_timer_stop(&items[i].t));
    if (fire) {
      ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
      for (i = 0; i < n; i++)
        ASSERT_EQ(timeouts[i] <= 101 ? 1 : 0, items[i].runs);
    }
    uv_sleep(3 + round);
  }

  if (fire) {
    /* A repeating timer: every re-arm rounds up onto the same grid. */
    rep_item = NULL;
    items[0].runs = 0;
    repeats_left = 6;
    uv_update_time(&loop);
    ASSERT_EQ(0, uvtw_timer_start(&items[0].t, repeat_cb, 4, 13));
    note_start(&items[0], 4);
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_EQ(6, items[0].runs);
  }

  teardown();
}


static void tick_10(void) {
  run_tick(10, 1);
}


static void tick_7(void) {
  run_tick(7, 1);
}


static void tick_2(void) {
  run_tick(2, 1);
}


/* Started and stopped only: a 1 s tick would make the runs slow. */
static void tick_1000(void) {
  run_tick(1000, 0);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(tick_10),
  TEST_CASE(tick_7),
  TEST_CASE(tick_2),
  TEST_CASE(tick_1000),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
