/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks keep the loop alive, as uv_queue_work requests do.
 *
 *   before_run     the owner submits a loop task with delay 0, one with
 *                  delay 50 ms and a threadpool task, then calls
 *                  uv_run(UV_RUN_DEFAULT) on a loop with nothing else:
 *                  it returns only after all three ran.
 *   from_callback  the same, submitted from a uv_timer_t callback on the
 *                  loop thread (the timer ends before the tasks are due).
 *   from_worker    a worker thread submits the three while the loop runs on
 *                  a 100 ms repeating uv_timer_t, which stops (and joins
 *                  the worker) one callback after it saw the submits done;
 *                  the tasks are due 300 ms later, and uv_run returns only
 *                  after all three ran.
 *   from_worker_late  the same, but the worker submits from inside the
 *                  callback of a wheel timer that is the last thing keeping
 *                  the loop alive (the callback starts and joins it): the
 *                  end of that pass must hold the loop for the tasks before
 *                  they are taken in (libuv 1.48 ends an iteration with its
 *                  timers phase).
 *   run_once       `while (!done) uv_run(UV_RUN_ONCE)` around a 50 ms task
 *                  sleeps in the loop instead of spinning: it takes a few
 *                  iterations, not thousands.
 *   cancelled      a task submitted and cancelled before uv_run holds
 *                  nothing: uv_run returns at once, not in an hour; and a
 *                  1 h task cancelled from a callback lets it return too.
 *   cancel_race    1,000 rounds: the owner submits a 1 h task, a thread
 *                  cancels it while the loop spins with UV_RUN_NOWAIT; the
 *                  loop stops counting as alive within 10 s, in every
 *                  round.  The loop can take in the cancel's notice before
 *                  the cancelling thread has counted the task out, and
 *                  must then be woken to look again.
 *   from_worker_backlog  from_worker's rule behind a backlog: a worker submits
 *                  and at once cancels more tasks than one poll phase takes
 *                  in (UVTW__DRAIN_BATCH), then submits one task due now,
 *                  all from a uv_timer_t's callback; the callback stops the
 *                  timer and starts a uv_check_t, which stops itself in the
 *                  check phase right after the first poll phase (which
 *                  takes in only cancelled tasks).  The submit came before
 *                  the poll phase of the loop's last iteration, so
 *                  uv_run(UV_RUN_DEFAULT) must not return before the task
 *                  ran. */

#include "internal.h"
#include "task-harness.h"
#include "test-cases.h"

static task_t lt[3];


static int all_returned(void) {
  int i;

  for (i = 0; i < 3; i++)
    if (atomic_load(&lt[i].returned) != 1)
      return 0;
  return 1;
}


/* Submits the three tasks of a case, on whatever thread calls it. */
static void submit_three(uint64_t base_ms) {
  int i;

  for (i = 0; i < 3; i++)
    task_init(&lt[i]);
  submit(&lt[0], base_ms, 0, 0);
  submit(&lt[1], base_ms + 50, 0, 0);
  submit(&lt[2], base_ms, 0, UVTW_THREADPOOL);
}


/* uv_run(UV_RUN_DEFAULT) on a loop whose only work is the three tasks
 * (and what the case started): returns only after all three ran. */
static void run_and_check(void) {
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT(all_returned());
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
}


static void before_run(void) {
  setup(0);
  submit_three(0);
  ASSERT_UEQ(3, uvtw_wheel_pending(wheel));
  run_and_check();
  teardown();
}


static uv_timer_t cb_timer;


static void submit_cb(uv_timer_t* timer) {
  (void) timer;
  submit_three(0);
}


static void from_callback(void) {
  setup(0);
  ASSERT_UV_OK(uv_timer_init(&loop, &cb_timer));
  ASSERT_UV_OK(uv_timer_start(&cb_timer, submit_cb, 10, 0));
  run_and_check();
  uv_close((uv_handle_t*) &cb_timer, NULL);
  teardown();
}


static uv_thread_t worker;
static atomic_int worker_done;
static int worker_seen_done;


static void worker_main(void* arg) {
  (void) arg;
  submit_three(300);
  atomic_store(&worker_done, 1);
}


/* The timer's end is the last thing that keeps the loop alive but for the
 * tasks.  It ends one callback after the worker's submits were seen done:
 * an iteration (with its poll phase, which takes the tasks in) lies in
 * between, as the liveness rule asks of a plain uv_timer_t (docs/tasks.md,
 * "Liveness"; a loaded machine may start the worker after the first
 * callback). */
static void join_cb(uv_timer_t* timer) {
  if (!worker_seen_done) {
    worker_seen_done = atomic_load(&worker_done);
    return;
  }
  ASSERT_UV_OK(uv_thread_join(&worker));
  ASSERT_UV_OK(uv_timer_stop(timer));
}


static void from_worker(void) {
  setup(0);
  atomic_store(&worker_done, 0);
  worker_seen_done = 0;
  ASSERT_UV_OK(uv_timer_init(&loop, &cb_timer));
  ASSERT_UV_OK(uv_timer_start(&cb_timer, join_cb, 100, 100));
  ASSERT_UV_OK(uv_thread_create(&worker, worker_main, NULL));
  run_and_check();
  uv_close((uv_handle_t*) &cb_timer, NULL);
  teardown();
}


/* The worker submits while a wheel timer's callback, the last thing that
 * keeps the loop alive, waits for it: its wake-up reaches a loop in its
 * timers phase, which is the last phase of an iteration from libuv 1.48
 * on, so the loop must hold itself for the submitted tasks at the end of
 * that pass, before it has taken them in. */
static uvtw_timer_t late_timer;


static void late_cb(uvtw_timer_t* timer) {
  (void) timer;
  ASSERT_UV_OK(uv_thread_create(&worker, worker_main, NULL));
  ASSERT_UV_OK(uv_thread_join(&worker));
}


static void from_worker_late(void) {
  setup(0);
  ASSERT_UV_OK(uvtw_timer_init(wheel, &late_timer));
  ASSERT_UV_OK(uvtw_timer_start(&late_timer, late_cb, 20, 0));
  run_and_check();
  teardown();
}


static void run_once(void) {
  int iterations;

  setup(0);
  task_init(&lt[0]);
  submit(&lt[0], 50, 0, 0);
  iterations = 0;
  while (atomic_load(&lt[0].returned) == 0) {
    ASSERT_LT(iterations, 1000);
    uv_run(&loop, UV_RUN_ONCE);
    iterations++;
  }
  teardown();
}


static uv_timer_t cancel_timer;


static void cancel_cb(uv_timer_t* timer) {
  (void) timer;
  ASSERT_EQ(0, cancel(&lt[1]));
}


static void cancelled(void) {
  uint64_t t0;

  setup(0);
  task_init(&lt[0]);
  task_init(&lt[1]);
  submit(&lt[0], 3600 * 1000, 0, 0);
  ASSERT_EQ(0, cancel(&lt[0]));
  t0 = hr_ms();
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_ULT(hr_ms() - t0, 10 * 1000);

  submit(&lt[1], 3600 * 1000, 0, 0);
  ASSERT_UV_OK(uv_timer_init(&loop, &cancel_timer));
  ASSERT_UV_OK(uv_timer_start(&cancel_timer, cancel_cb, 20, 0));
  t0 = hr_ms();
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_ULT(hr_ms() - t0, 10 * 1000);
  ASSERT_EQ(0, atomic_load(&lt[0].runs));
  ASSERT_EQ(0, atomic_load(&lt[1].runs));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  uv_close((uv_handle_t*) &cancel_timer, NULL);
  teardown();
}


#define RACE_ROUNDS 1000

static uv_sem_t race_go;


static void race_canceller(void* arg) {
  (void) arg;
  uv_sem_wait(&race_go);
  ASSERT_EQ(0, cancel(&lt[0]));
}


static void cancel_race(void) {
  uv_thread_t tid;
  uint64_t t0;
  int alive;
  int round;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&race_go, 0));
  for (round = 0; round < RACE_ROUNDS; round++) {
    task_init(&lt[0]);
    submit(&lt[0], 3600 * 1000, 0, 0);
    ASSERT_UV_OK(uv_thread_create(&tid, race_canceller, NULL));
    uv_sem_post(&race_go);
    t0 = hr_ms();
    do
      alive = uv_run(&loop, UV_RUN_NOWAIT);
    while (alive != 0 && hr_ms() - t0 < 10 * 1000);
    ASSERT_EQ(0, alive);
    ASSERT_UV_OK(uv_thread_join(&tid));
    ASSERT_EQ(0, atomic_load(&lt[0].runs));
  }
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  uv_sem_destroy(&race_go);
  teardown();
}


/* ---- from_worker_backlog ------------------------------------------------ */

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
 * batch, all of it cancelled tasks. */
static void db_check_cb(uv_check_t* handle) {
  ASSERT_UV_OK(uv_check_stop(handle));
}


static void db_hold_cb(uv_timer_t* handle) {
  uv_thread_t tid;

  /* The timer is active (and referenced) while the worker submits; the
   * check handle takes over, so that a poll phase follows the submits
   * before the last referenced handle ends (the liveness rule). */
  ASSERT_UV_OK(uv_thread_create(&tid, db_worker, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UV_OK(uv_timer_stop(handle));
  ASSERT_UV_OK(uv_check_start(&db_check, db_check_cb));
}


static int db_ran(void) {
  return atomic_load(&db_task.returned) == 1;
}


static void from_worker_backlog(void) {
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
            "uv_run returned before the task ran: runs %d, pending %zu\n", runs,
            pending);
  run_until(db_ran, 0); /* clean up either way */
  uv_close((uv_handle_t*) &db_hold, NULL);
  uv_close((uv_handle_t*) &db_check, NULL);
  teardown();
  ASSERT_EQ(1, runs);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(before_run),
  TEST_CASE(from_callback),
  TEST_CASE(from_worker),
  TEST_CASE(from_worker_late),
  TEST_CASE(run_once),
  TEST_CASE(cancelled),
  TEST_CASE(cancel_race),
  TEST_CASE(from_worker_backlog),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
