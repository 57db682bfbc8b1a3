/* SPDX-License-Identifier: MIT */
/* An inactive timer may simply be freed (include/uvtw.h; docs/mistakes.md,
 * "Freeing an active timer"): one never started, one stopped, and a
 * one-shot inside its own callback, also while others of the same pass are
 * still to run.  Each timer is embedded in its own malloc()ed struct, so
 * that the ASan tree reports any later access by the wheel as a use after
 * free; every tree checks that the timers left run, and run once.
 *
 *   one_shot_in_callback  200 one-shots at 20 deadlines (10 a pass), each
 *                         freeing its own struct in its callback: all run.
 *   stopped_then_freed    200 started, every other one stopped and freed
 *                         (and 10 never started, freed) before the loop
 *                         runs: the other 100 run, the freed never.
 *   repeating_stops_self  20 repeating timers, each stopping itself in its
 *                         third run and freeing its struct there: 60 runs. */

#include <stdlib.h>

#include "test-cases.h"
#include "timer-harness.h"

#define N 200
#define REPEATING 20

typedef struct {
  uvtw_timer_t timer;
  int index;
  int runs;
} conn_t;

static int ran[N];
static int total_runs;


static conn_t* conn_new(int index) {
  conn_t* c;

  c = malloc(sizeof(*c));
  ASSERT_PTR_NE(NULL, c);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &c->timer));
  c->timer.data = c;
  c->index = index;
  c->runs = 0;
  return c;
}


static void reset_counts(void) {
  int i;

  for (i = 0; i < N; i++)
    ran[i] = 0;
  total_runs = 0;
}


static void free_in_cb(uvtw_timer_t* t) {
  conn_t* c;

  c = t->data;
  ASSERT_EQ(0, uvtw_timer_is_active(t));
  ran[c->index]++;
  total_runs++;
  free(c);
}


static void one_shot_in_callback(void) {
  int i;

  setup();
  reset_counts();
  for (i = 0; i < N; i++)
    ASSERT_EQ(0, uvtw_timer_start(&conn_new(i)->timer, free_in_cb,
                                  1 + (uint64_t) (i % 20), 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  for (i = 0; i < N; i++)
    ASSERT_EQ(1, ran[i]);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
}


static void stopped_then_freed(void) {
  conn_t* c;
  int i;

  setup();
  reset_counts();
  for (i = 0; i < N; i++) {
    c = conn_new(i);
    ASSERT_EQ(0, uvtw_timer_start(&c->timer, free_in_cb, 1 + (uint64_t) i, 0));
    if (i % 2 == 1) {
      ASSERT_EQ(0, uvtw_timer_stop(&c->timer));
      free(c);
    }
  }
  for (i = 0; i < 10; i++)
    free(conn_new(N + i)); /* never started */
  ASSERT_UEQ(N / 2, uvtw_wheel_pending(wheel));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  for (i = 0; i < N; i++)
    ASSERT_EQ(i % 2 == 0 ? 1 : 0, ran[i]);
  teardown();
}


static void stop_third(uvtw_timer_t* t) {
  conn_t* c;

  c = t->data;
  ASSERT_EQ(1, uvtw_timer_is_active(t)); /* repeating: active in its cb */
  total_runs++;
  if (++c->runs == 3) {
    ASSERT_EQ(0, uvtw_timer_stop(t));
    ASSERT_EQ(0, uvtw_timer_is_active(t));
    free(c);
  }
}


static void repeating_stops_self(void) {
  int i;

  setup();
  reset_counts();
  for (i = 0; i < REPEATING; i++)
    ASSERT_EQ(0, uvtw_timer_start(&conn_new(i)->timer, stop_third,
                                  1 + (uint64_t) (i % 4), 2));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(3 * REPEATING, total_runs);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
}


static const test_case_t cases[] = {
    TEST_CASE(one_shot_in_callback),
    TEST_CASE(stopped_then_freed),
    TEST_CASE(repeating_stops_self),
};


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
