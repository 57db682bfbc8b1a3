/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: where the per-(thread, wheel) producer records must
 * keep the contract and a second reading of issue 10 found gaps
 * (test-task-producers.c covers the records' normal life; a threadpool
 * task cancelled with UV_EBUSY, test-task-limits busy_place).
 *
 *   drain_batch      the header's liveness rule: a task submitted from
 *                    another thread while a referenced handle keeps the
 *                    loop running, before the poll phase of its last
 *                    iteration, holds the loop until it ends.  Here the
 *                    worker first submits and at once cancels more tasks
 *                    than one async callback takes in (UVTW__DRAIN_BATCH),
 *                    which leaves their queue slots taken back (tombstones),
 *                    then submits one task due now, from a uv_timer_t's
 *                    callback; the callback stops the timer and starts a
 *                    uv_check_t, which stops itself in the check phase
 *                    right after the first drain (all tombstones).
 *                    uv_run(UV_RUN_DEFAULT) must not return before the task
 *                    ran.
 *   loop_held_stats  uvtw_stats_t: "a task cancelled before the loop took it
 *                    in counts in tasks_accepted and tasks_cancelled as
 *                    soon as the cancel returns".  The loop's owner submits
 *                    a task before uv_run and cancels it at once; the stats
 *                    read right after must count it (they do for a task
 *                    submitted and cancelled by another thread).
 *   live_snapshot    uvtw_wheel_pending from another thread while a new
 *                    thread's first task is submitted and ends.  Task Z is
 *                    live throughout, so the count must never be 0.  The
 *                    window lies inside one call (live_count, between its
 *                    sums of the ends and of the submits), so the case
 *                    tests it only when a debugger holds the reader there
 *                    (test/task-records-live-snapshot.gdb, by hand: it
 *                    failed so before the fix); alone it checks the count
 *                    under a concurrent first submit.
 *   close_inflight   a submit from another thread that has published its
 *                    task but not yet sent its wake-up, while the loop
 *                    closes the wheel: close must wait for the submit to
 *                    leave the wheel before it finishes (the task gets its
 *                    final call, or the submit returns UV_ECANCELED), and
 *                    only then run the close callback and free the wheel.
 *                    The window lies inside one call, so the case tests it
 *                    only when a debugger holds the submit there
 *                    (test/task-records-close-inflight.gdb on the ASan
 *                    build, by hand: before the fix, a heap-use-after-free
 *                    in wake_loop); alone it checks the outcomes of a
 *                    submit racing close.
 *   detached_exit    detached threads submit and exit; later detached
 *                    threads (which may land on an exited thread's
 *                    thread-local block, and adopt its record) submit and
 *                    cancel.  Everything runs once; under TSan, no report. */

#include <pthread.h>

#include "internal.h"
#include "task-harness.h"
#include "test-cases.h"

/* ---- drain_batch -------------------------------------------------------- */

/* More than one async callback takes in. */
#define DB_TAKEN_BACK (UVTW__DRAIN_BATCH + 1000)

static uv_timer_t db_hold;
static uv_check_t db_check;
static task_t db_task;


static void db_worker(void* arg) {
  task_t t;
  int i;

  (void) arg;
  for (i = 0; i < DB_TAKEN_BACK; i++) {
    task_init(&t);
    submit(&t, 3600 * 1000, 0, 0);
    ASSERT_EQ(0, cancel(&t)); /* before the loop took it in: taken back */
  }
  task_init(&db_task);
  submit(&db_task, 0, 0, 0);
}


/* The last thing that keeps the loop alive: it ends in the check phase
 * right after the poll phase whose async callback took in the first
 * batch, all tombstones. */
static void db_check_cb(uv_check_t* handle) {
  ASSERT_UV_OK(uv_check_stop(handle));
}


static void db_hold_cb(uv_timer_t* handle) {
  uv_thread_t tid;

  /* The timer is active (and referenced) while the worker submits; the
   * check handle takes over, so that a poll phase follows the submits
   * before the last referenced handle ends (uvtw.h's rule). */
  ASSERT_UV_OK(uv_thread_create(&tid, db_worker, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UV_OK(uv_timer_stop(handle));
  ASSERT_UV_OK(uv_check_start(&db_check, db_check_cb));
}


static int db_ran(void) {
  return atomic_load(&db_task.returned) == 1;
}


static void drain_batch(void) {
  size_t pending;
  int runs;

  setup(0);
  ASSERT_UV_OK(uv_timer_init(&loop, &db_hold));
  ASSERT_UV_OK(uv_check_init(&loop, &db_check));
  ASSERT_UV_OK(uv_timer_start(&db_hold, db_hold_cb, 1, 1000));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  runs = atomic_load(&db_task.runs);
  pending = uvtw_wheel_pending(wheel);
  if (runs != 1)
    fprintf(stderr,
            "uv_run returned before the task ran: runs %d, pending %zu\n",
            runs, pending);
  run_until(db_ran, 0); /* clean up either way */
  uv_close((uv_handle_t*) &db_hold, NULL);
  uv_close((uv_handle_t*) &db_check, NULL);
  teardown();
  ASSERT_EQ(1, runs);
}


/* ---- loop_held_stats ---------------------------------------------------- */

static void loop_held_stats(void) {
  uvtw_stats_t st;
  task_t t;

  setup(0);
  task_init(&t);
  submit(&t, 3600 * 1000, 0, 0);
  ASSERT_EQ(0, cancel(&t));
  uvtw_wheel_stats(wheel, &st);
  if (st.tasks_accepted != 1 || st.tasks_cancelled != 1)
    fprintf(stderr, "after the cancel returned: accepted %llu cancelled %llu\n",
            (unsigned long long) st.tasks_accepted,
            (unsigned long long) st.tasks_cancelled);
  run_until(pending_zero, 0);
  teardown();
  ASSERT_UEQ(1, st.tasks_accepted);
  ASSERT_UEQ(1, st.tasks_cancelled);
}


/* ---- live_snapshot ------------------------------------------------------ */

/* Read by the debugger script: the reader is inside uvtw_wheel_pending. */
volatile int records_reader_armed;
static size_t ls_seen;
static task_t ls_z;
static task_t ls_x;


static void ls_reader(void* arg) {
  (void) arg;
  records_reader_armed = 1;
  ls_seen = uvtw_wheel_pending(wheel);
  records_reader_armed = 0;
}


static void ls_producer(void* arg) {
  (void) arg;
  task_init(&ls_x);
  submit(&ls_x, 0, 0, 0);
}


static int ls_x_ran(void) {
  return atomic_load(&ls_x.returned) == 1;
}


static void live_snapshot(void) {
  uv_thread_t reader;
  uv_thread_t producer;

  setup(0);
  task_init(&ls_z);
  submit(&ls_z, 3600 * 1000, 0, 0); /* live until the end */
  ASSERT_UV_OK(uv_thread_create(&reader, ls_reader, NULL));
  uv_sleep(300);
  /* A thread that never called into the wheel: a new record. */
  ASSERT_UV_OK(uv_thread_create(&producer, ls_producer, NULL));
  ASSERT_UV_OK(uv_thread_join(&producer));
  run_until(ls_x_ran, 0);
  ASSERT_UV_OK(uv_thread_join(&reader));
  if (ls_seen == 0)
    fprintf(stderr, "uvtw_wheel_pending saw 0 while Z was live\n");
  ASSERT_EQ(0, cancel(&ls_z));
  run_until(pending_zero, 0);
  teardown();
  ASSERT_NE(0, ls_seen);
}


/* ---- close_inflight ----------------------------------------------------- */

/* Read by the debugger script: the producer is inside uvtw_submit. */
volatile int records_producer_armed;
static task_t ci_x;
static atomic_int ci_submit_result;


static void ci_producer(void* arg) {
  (void) arg;
  task_init(&ci_x);
  records_producer_armed = 1;
  atomic_store(&ci_submit_result, uvtw_submit(wheel, 3600 * 1000, 0, 0,
                                              task_cb, &ci_x, &ci_x.id));
  records_producer_armed = 0;
}


static void close_inflight(void) {
  uv_thread_t producer;

  setup(0);
  ASSERT_UV_OK(uv_thread_create(&producer, ci_producer, NULL));
  uv_sleep(300); /* the producer has published its task by now */
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  /* The shutdown rule as a user reads it: no call starts after cb. */
  ASSERT_UV_OK(uv_thread_join(&producer));
  ASSERT_EQ(0, uv_loop_close(&loop));
  /* Either outcome the header allows: 0 and a final call, or ECANCELED. */
  if (atomic_load(&ci_submit_result) == 0)
    ASSERT_EQ(1, atomic_load(&ci_x.finals));
  else
    ASSERT_EQ(UV_ECANCELED, atomic_load(&ci_submit_result));
}


/* ---- detached_exit ------------------------------------------------------ */

#define DE_ROUNDS 4
#define DE_THREADS 8
#define DE_PER 40

static task_t de_tasks[DE_ROUNDS][DE_THREADS][DE_PER];
static atomic_int de_exited;


static void* de_thread(void* arg) {
  task_t* t;
  int i;

  t = arg;
  for (i = 0; i < DE_PER; i++) {
    task_init(&t[i]);
    submit(&t[i], i % 2 ? 0 : 3600 * 1000, 0, 0);
  }
  for (i = 0; i < DE_PER; i += 2)
    ASSERT_EQ(0, cancel(&t[i]));
  atomic_fetch_add(&de_exited, 1);
  return NULL;
}


static int de_round;


static int de_all_ran(void) {
  int k;
  int i;

  if (atomic_load(&de_exited) != (de_round + 1) * DE_THREADS)
    return 0;
  for (k = 0; k < DE_THREADS; k++)
    for (i = 1; i < DE_PER; i += 2)
      if (atomic_load(&de_tasks[de_round][k][i].returned) != 1)
        return 0;
  return 1;
}


static void detached_exit(void) {
  pthread_attr_t attr;
  pthread_t tid;
  int k;

  setup(0);
  ASSERT_EQ(0, pthread_attr_init(&attr));
  ASSERT_EQ(0, pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED));
  for (de_round = 0; de_round < DE_ROUNDS; de_round++) {
    for (k = 0; k < DE_THREADS; k++)
      ASSERT_EQ(0, pthread_create(&tid, &attr, de_thread,
                                  de_tasks[de_round][k]));
    run_until(de_all_ran, 0);
    /* Give the detached threads time to exit before the next round, so
     * that the next round's threads may reuse their stacks. */
    uv_sleep(20);
  }
  ASSERT_EQ(0, pthread_attr_destroy(&attr));
  run_until(pending_zero, 0);
  teardown();
}


static const test_case_t cases[] = {
  TEST_CASE(drain_batch),
  TEST_CASE(loop_held_stats),
  TEST_CASE(live_snapshot),
  TEST_CASE(close_inflight),
  TEST_CASE(detached_exit),
};


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
