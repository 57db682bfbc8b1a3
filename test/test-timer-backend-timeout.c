/* SPDX-License-Identifier: MIT */
/* The driver is armed for exactly the next deadline: uv_backend_timeout(loop)
 * equals the time to the nearest uvtw deadline (1000 right after starting a
 * 1000 ms timer), exactly as it would for a uv_timer_t, right after a start
 * and, after a stop or a later restart of the earliest timer, from the
 * loop's prepare phase on (before it, the driver may be early, never late);
 * so nothing wakes the loop's poll earlier.  uv_loop_alive(loop) is 0 as soon
 * as the wheel has nothing referenced left.  (uv_backend_timeout is 0 until the
 * loop has run once, so the loop runs once with UV_RUN_NOWAIT first:
 * docs/timers.md, "Which libuv".) */

#include "test-cases.h"
#include "timer-harness.h"

static uvtw_timer_t a;
static uvtw_timer_t b;
static uvtw_timer_t c;
static uv_timer_t u;


/* After a stop or a later restart of the earliest timer: the driver may be
 * early, never later than `before` ms; one run of the loop that does not
 * block (its prepare phase) re-arms it for `t`'s deadline exactly. */
static void assert_rearms_for(const uvtw_timer_t* t, int64_t before) {
  int64_t now_timeout;

  now_timeout = uv_backend_timeout(&loop);
  ASSERT_LE(now_timeout, before);
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ((int64_t) uvtw_timer_get_due_in(t), uv_backend_timeout(&loop));
}


/* A loop, the wheel and the timers, and one run of the loop, with
 * something alive so that uv_run really runs. */
static void start(void) {
  setup();
  ASSERT_EQ(0, uv_loop_alive(&loop)); /* an empty wheel holds nothing */
  add_uv_timer(&u);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &c));
  ASSERT_EQ(0, uvtw_timer_start(&c, never_cb, 60000, 0));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ(0, uvtw_timer_stop(&c));
  ASSERT_EQ(0, uv_loop_alive(&loop));
}


/* Outside the loop: uv_now does not move, so the values are exact. */
static void right_after_start(void) {
  static const uint64_t timeouts[] = {
      1000, 1,   2,    37,   63,    64,     65,      255,     256,
      257,  999, 1001, 4096, 65536, 123456, 3600000, 86400000};
  size_t i;

  start();
  /* c, later than every timeout, keeps the loop alive, so that a run of
   * it re-arms the driver after each stop. */
  ASSERT_EQ(0, uvtw_timer_start(&c, never_cb, 100000000, 0));
  for (i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++) {
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, timeouts[i], 0));
    ASSERT_EQ((int64_t) timeouts[i], uv_backend_timeout(&loop));
    ASSERT_EQ(0, uvtw_timer_stop(&a));
    assert_rearms_for(&c, (int64_t) timeouts[i]);
    /* A uv_timer_t twin gives the same number. */
    ASSERT_UV_OK(uv_timer_start(&u, never_uv_cb, timeouts[i], 0));
    ASSERT_EQ((int64_t) timeouts[i], uv_backend_timeout(&loop));
    ASSERT_UV_OK(uv_timer_stop(&u));
  }
  /* Stopped, c leaves the driver early, unreferenced: a start earlier than
   * it is exact. */
  ASSERT_EQ(0, uvtw_timer_stop(&c));
  ASSERT_EQ(0, uv_loop_alive(&loop));

  /* The minimum over several timers, as they come and go. */
  ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, 1000, 0));
  ASSERT_EQ(1000, uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, 300, 0));
  ASSERT_EQ(300, uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_start(&c, never_cb, 5000, 0));
  ASSERT_EQ(300, uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_stop(&b));
  assert_rearms_for(&a, 1000);
  ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, 7000, 0)); /* later */
  assert_rearms_for(&c, 5000);
  ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, 20, 0)); /* earlier */
  ASSERT_EQ(20, uv_backend_timeout(&loop));
  /* An unreferenced timer still counts, as for uv_timer_t. */
  uvtw_timer_unref(&b);
  ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, 7, 0));
  ASSERT_EQ(7, uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_stop(&b));
  uvtw_timer_ref(&b);
  assert_rearms_for(&a, 20);
  /* A uv_timer_t later than the wheel's next deadline changes nothing. */
  ASSERT_UV_OK(uv_timer_start(&u, never_uv_cb, 25, 0));
  ASSERT_EQ((int64_t) uvtw_timer_get_due_in(&a), uv_backend_timeout(&loop));
  ASSERT_UV_OK(uv_timer_stop(&u));

  ASSERT_EQ(0, uvtw_timer_stop(&a));
  ASSERT_EQ(1, uv_loop_alive(&loop)); /* c */
  ASSERT_EQ(0, uvtw_timer_stop(&c));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  ASSERT_EQ(0, uv_backend_timeout(&loop)); /* nothing active */
  teardown();
}


/* Between passes, as a program that embeds the loop sees it (uv_run with
 * UV_RUN_NOWAIT, then poll uv_backend_fd for uv_backend_timeout): once the
 * 20 ms timer has fired, the backend timeout is the time left until the
 * 1000 ms timer. */
static int short_fired;

static void short_cb(uvtw_timer_t* timer) {
  (void) timer;
  short_fired++;
}


static void between_passes(void) {
  uint64_t a_deadline;
  uint64_t now;
  int k;

  start();
  a_deadline = uv_now(&loop) + 1000;
  ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, 1000, 0));
  ASSERT_EQ(0, uvtw_timer_start(&b, short_cb, 20, 0));
  ASSERT_EQ(20, uv_backend_timeout(&loop));
  short_fired = 0;
  for (k = 0; short_fired == 0; k++) {
    ASSERT_LT(k, 100000);
    uv_sleep(1);
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  }
  for (k = 0; k < 3; k++) {
    now = uv_now(&loop);
    ASSERT_ULT(now, a_deadline);
    ASSERT_EQ((int64_t) (a_deadline - now), uv_backend_timeout(&loop));
    ASSERT_UEQ(a_deadline - now, uvtw_timer_get_due_in(&a));
    uv_sleep(2);
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  }

  /* Restarted to a later deadline, or the earliest stopped, between
   * passes: after the next pass the driver is armed for the new minimum,
   * not left to wake up for nothing. */
  a_deadline = uv_now(&loop) + 3000;
  ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, 3000, 0));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  now = uv_now(&loop);
  ASSERT_EQ((int64_t) (a_deadline - now), uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, 100, 0));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ(0, uvtw_timer_stop(&b));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  now = uv_now(&loop);
  ASSERT_EQ((int64_t) (a_deadline - now), uv_backend_timeout(&loop));

  ASSERT_EQ(0, uvtw_timer_stop(&a));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  ASSERT_EQ(0, uv_backend_timeout(&loop));
  teardown();
}


/* The same rules at many different loop times (a wheel's slot boundaries
 * fall differently relative to uv_now each time): after stopping the
 * earliest timer, or restarting it later, the driver is armed for the new
 * minimum by the loop's next prepare phase. */
static void sweep_alignments(void) {
  static const uint64_t pairs_ms[][2] = {{20, 7},    {300, 1},   {64, 63},
                                         {257, 255}, {5000, 64}, {70000, 4000}};
  uint64_t first;
  uint64_t second;
  size_t j;
  int k;

  start();
  for (k = 0; k < 150; k++) {
    uv_sleep(1 + k % 3);
    ASSERT_EQ(0, uvtw_timer_start(&c, never_cb, 60000, 0));
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
    ASSERT_EQ(0, uvtw_timer_stop(&c));
    j = (size_t) k % (sizeof(pairs_ms) / sizeof(pairs_ms[0]));
    first = pairs_ms[j][0];
    second = pairs_ms[j][1];

    /* Stop the earliest. */
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, first, 0));
    ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, second, 0));
    ASSERT_EQ((int64_t) second, uv_backend_timeout(&loop));
    ASSERT_EQ(0, uvtw_timer_stop(&b));
    assert_rearms_for(&a, (int64_t) second);

    /* Restart the earliest to later than the other.  a's restart moves it
     * later (the run above moved the loop's time on), and the driver may
     * still wait for its old deadline, which may come before b's when the
     * run took a few ms: never later than b's. */
    ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, second, 0));
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, first, 0));
    ASSERT_LE(uv_backend_timeout(&loop), (int64_t) second);
    ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, first + 1, 0));
    assert_rearms_for(&a, (int64_t) second);

    ASSERT_EQ(0, uvtw_timer_stop(&a));
    ASSERT_EQ(0, uvtw_timer_stop(&b));
    ASSERT_EQ(0, uv_loop_alive(&loop));
  }
  teardown();
}


/* A one-shot firing leaves nothing referenced, and a stopped timer leaves
 * no stale driver behind: uv_run(UV_RUN_DEFAULT) returns 0 after the one
 * run, and uv_loop_alive is 0. */
static void nothing_left(void) {
  start();
  ASSERT_EQ(0, uvtw_timer_start(&a, short_cb, 1, 0));
  ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, 2000, 0));
  ASSERT_EQ(0, uvtw_timer_stop(&b));
  ASSERT_EQ(1, uv_backend_timeout(&loop));
  short_fired = 0;
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, short_fired);
  ASSERT_EQ(0, uv_loop_alive(&loop));
  ASSERT_EQ(0, uv_backend_timeout(&loop));
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(right_after_start),
  TEST_CASE(between_passes),
  TEST_CASE(sweep_alignments),
  TEST_CASE(nothing_left),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
