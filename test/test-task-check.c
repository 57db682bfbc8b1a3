/* SPDX-License-Identifier: MIT */
/* uvtw__tasks_check (lib/task-check.c), the tasks' bookkeeping re-derived
 * from the nodes.  UVTW_CHECK_INVARIANTS builds (the ASan tree) run it after
 * every pass and every drain; here it is called by hand.
 *
 *   consistent    tasks on the loop and on the threadpool, one-shot and
 *                 repeating, submitted from the loop thread and from
 *                 another thread, some run, some cancelled before and
 *                 after the loop took them in: the check passes at each
 *                 step, the free nodes included (quiescent).
 *   corrupt_held  `held` one more than the nodes held: the check fails,
 *                 naming held; put back, it passes.
 *   corrupt_filed the count of task timers in the wheel one more: fails.
 *   corrupt_free  a free node dropped from the free stack: the
 *                 quiescent check fails on the free nodes (the concurrent
 *                 one cannot count them, and passes). */

#include <string.h>

#include "internal.h"
#include "task-harness.h"
#include "test-cases.h"


/* Runs the check into a temporary file; returns its result, and the
 * message in `msg`. */
static int check_into(int quiescent, char* msg, size_t size) {
  FILE* f;
  size_t n;
  int r;

  f = tmpfile();
  ASSERT_PTR_NE(NULL, f);
  r = uvtw__tasks_check(wheel, f, quiescent);
  rewind(f);
  n = fread(msg, 1, size - 1, f);
  msg[n] = '\0';
  fclose(f);
  return r;
}


static void expect_ok(int quiescent) {
  char msg[512];

  if (check_into(quiescent, msg, sizeof(msg)) != 0)
    fprintf(stderr, "%s", msg);
  ASSERT_EQ(0, check_into(quiescent, msg, sizeof(msg)));
}


static void expect_broken(int quiescent, const char* word) {
  char msg[512];

  ASSERT_EQ(-1, check_into(quiescent, msg, sizeof(msg)));
  fprintf(stderr, "as expected: %s", msg);
  ASSERT_PTR_NE(NULL, strstr(msg, word));
}


static task_t ct_far[8];
static task_t ct_soon[8];
static uvtw_timer_t ct_timer;


static void ct_timer_cb(uvtw_timer_t* timer) {
  (void) timer;
}


static void ct_other(void* arg) {
  int i;

  (void) arg;
  for (i = 4; i < 8; i++) {
    task_init(&ct_far[i]);
    submit(&ct_far[i], 3600 * 1000, 0, i % 2 ? UVTW_THREADPOOL : 0);
    task_init(&ct_soon[i]);
    submit(&ct_soon[i], 1, i == 5 ? 5 : 0, i % 2 ? UVTW_THREADPOOL : 0);
  }
  ASSERT_EQ(0, cancel(&ct_far[4])); /* likely before the loop took it in */
}


static int ct_soon_ran(void) {
  int i;

  for (i = 0; i < 8; i++)
    if (atomic_load(&ct_soon[i].runs) == 0)
      return 0;
  return 1;
}


/* A wheel with every kind of task, live and ended. */
/* The three cancels are counted: the notice was taken in. */
static int ct_cancels_seen(void) {
  uvtw_stats_t stats;

  uvtw_wheel_stats(wheel, &stats);
  return stats.tasks_cancelled == 3;
}


/* Only the user's timer is left. */
static int ct_only_timer(void) {
  return uvtw_wheel_pending(wheel) == 1;
}


static void populate(void) {
  uv_thread_t other;
  int i;

  setup(0);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &ct_timer));
  ASSERT_EQ(0, uvtw_timer_start(&ct_timer, ct_timer_cb, 3600 * 1000, 0));
  for (i = 0; i < 4; i++) {
    task_init(&ct_far[i]);
    submit(&ct_far[i], 3600 * 1000, 0, i % 2 ? UVTW_THREADPOOL : 0);
    task_init(&ct_soon[i]);
    submit(&ct_soon[i], 1, i == 1 ? 5 : 0, i % 2 ? UVTW_THREADPOOL : 0);
  }
  expect_ok(1);
  ASSERT_EQ(0, cancel(&ct_far[0])); /* taken back on the loop thread */
  expect_ok(1);
  ASSERT_UV_OK(uv_thread_create(&other, ct_other, NULL));
  ASSERT_UV_OK(uv_thread_join(&other));
  run_until(ct_soon_ran, 0);
  expect_ok(1);
  ASSERT_EQ(0, cancel(&ct_far[6])); /* taken in: a notice */
  run_until(ct_cancels_seen, 0);
  expect_ok(1);
}


static void finish(void) {
  int i;

  for (i = 0; i < 8; i++) {
    cancel(&ct_far[i]);
    cancel(&ct_soon[i]);
  }
  run_until(ct_only_timer, 0);
  expect_ok(1);
  uvtw_timer_stop(&ct_timer);
  teardown();
}


static void consistent(void) {
  populate();
  finish();
}


static void corrupt_held(void) {
  populate();
  wheel->tasks.held++;
  expect_broken(0, "held");
  wheel->tasks.held--;
  expect_ok(1);
  finish();
}


static void corrupt_filed(void) {
  populate();
  atomic_fetch_add(&wheel->tasks.filed, 1);
  expect_broken(0, "filed");
  atomic_fetch_sub(&wheel->tasks.filed, 1);
  expect_ok(1);
  finish();
}


static void corrupt_free(void) {
  uvtw__task_t* top;
  uint64_t saved;

  populate();
  uvtw__tasks_flush(wheel); /* the loop's freed nodes onto the stack */
  saved = atomic_load(&wheel->tasks.free_top);
  ASSERT_NE(0, (int) UVTW__FREE_LINK(saved));
  top = uvtw__node_at(&wheel->tasks, UVTW__FREE_LINK(saved) - 1);
  /* The top node dropped from the stack: lost, neither free nor used. */
  atomic_store(&wheel->tasks.free_top, atomic_load(&top->free_next));
  expect_ok(0);
  expect_broken(1, "free nodes");
  atomic_store(&wheel->tasks.free_top, saved);
  expect_ok(1);
  finish();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(consistent),
  TEST_CASE(corrupt_held),
  TEST_CASE(corrupt_filed),
  TEST_CASE(corrupt_free),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
