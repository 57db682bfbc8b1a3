/* SPDX-License-Identifier: MIT */
/* Closing a wheel with cross-thread tasks in every state.
 *
 *   everywhere   The 4-thread pool is saturated by two one-shot and two
 *                repeating threadpool tasks whose first run blocks on a
 *                semaphore; threadpool tasks due behind them sit queued in
 *                the pool; others wait in the wheel (1 h, UINT64_MAX); a
 *                helper thread fills the submission queue while the loop
 *                thread is busy; then a repeating loop task closes the
 *                wheel from its own callback.  After close started: submit
 *                is UV_ECANCELED from both threads; a second close is
 *                UV_EINVAL; cancel of a running task is UV_EBUSY; cancel of
 *                any other is 0 (then no final call) or UV_ENOENT (then one
 *                final call).  Each task ends exactly once: the running
 *                one-shots by their run (no final call); the running
 *                repeating ones by their EBUSY cancel or by a final call
 *                made after their run returned; all others by exactly one
 *                final call, without running.  Every final call comes on the
 *                loop thread, before the wheel's close callback, which waits
 *                for the blocked runs.  uv_loop_close() returns 0.
 *                A pool run released after close submits (UV_ECANCELED).
 *                One final call (wh[2]) submits (UV_ECANCELED), closes
 *                (UV_EINVAL) and cancels another task whose final call may
 *                or may not have come yet (0: it never comes; UV_ENOENT:
 *                exactly one).
 *   in_one_shot  A loop one-shot closes the wheel from its callback: it
 *                ends by its run; a sibling due in the same pass does not
 *                run; a threadpool run in flight ends by its run.
 *   never_ran    Tasks submitted from a thread, then close before the loop
 *                ever ran: each gets its final call (or a cancel of 0).
 *   busy_close   A repeating threadpool task is cancelled (UV_EBUSY) while
 *                its run blocks, and the wheel closes at once: the close
 *                callback waits for that run, no final call is made, and
 *                uv_loop_close() returns 0 (the task is no longer live
 *                but its run still is).
 *   own_run_*    A loop task (one-shot or repeating) closes the wheel from
 *                its own run while another thread cancels it, before or
 *                after the close: UV_EBUSY, and no final call follows.
 *   two_wheels   Two wheels on one loop, tasks on both from a thread: one
 *                closes (its tasks get final calls before its close
 *                callback) while the other keeps running its tasks; then
 *                the other closes too.
 *   submit_inflight  A submit from another thread that has published its
 *                task but not yet sent its wake-up while the loop closes
 *                the wheel: close waits for the submit to leave the wheel
 *                (the task gets its final call, or the submit returns
 *                UV_ECANCELED), and only then runs the close callback and
 *                frees the wheel.  The window lies inside one call: the
 *                case checks the outcomes of a submit racing close, and
 *                the SPIN model (task-protocol.pml) every interleaving.
 *   waking_submit  A window of a submit that the program can hold open:
 *                the loop thread fills the node table's first chunk with
 *                tasks, which wait in the queue; another thread's submit
 *                enters, finds no free node and is held in the
 *                uv_mutex_lock of the table's growth until the loop has
 *                taken the queue in; its push then finds the queue empty,
 *                and it is held again in the uv_async_send that wakes the
 *                loop, while the loop closes the wheel.  Close does not
 *                finish meanwhile: through 100 of close's retries the
 *                close callback does not run.  Then the send goes on, the
 *                submit returns 0, its task gets its final call and close
 *                finishes.  (The program is linked with
 *                --wrap=uv_mutex_lock and --wrap=uv_async_send,
 *                test/CMakeLists.txt; the wraps forward every call.) */

#include "internal.h"
#include "task-harness.h"
#include "test-cases.h"


static uint64_t close_ns;


static void close_cb_timed(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wheel);
  close_ns = uv_hrtime();
  atomic_fetch_add(&close_cb_called, 1);
}


static void no_cb(void* arg, int status) {
  (void) arg;
  (void) status;
  ASSERT(0 && "a rejected task was called");
}


/* Checks that a task cancelled after close started ended the way the
 * cancel's result says, and never ran. */
static void check_cancelled_after_close(task_t* t) {
  int r;

  r = atomic_load(&t->cancel_result);
  ASSERT_EQ(0, atomic_load(&t->runs));
  if (r == 0)
    ASSERT_EQ(0, atomic_load(&t->finals));
  else if (r == UV_ENOENT)
    ASSERT_EQ(1, atomic_load(&t->finals));
  else
    ASSERT(0 && "cancel after close: expected 0 or UV_ENOENT");
}


/* ---- everywhere --------------------------------------------------------- */

#define NQTP 5   /* due threadpool tasks queued behind the blockers */
#define NWHEEL 5 /* tasks waiting in the wheel */
#define NQUEUE 6 /* tasks left in the submission queue */

static task_t blk_one[2];
static task_t blk_rep[2];
static task_t qtp[NQTP];
static task_t wh[NWHEEL];
static task_t q[NQUEUE];
static task_t closer;
static uv_sem_t blk_started;
static uv_sem_t blk_release;
static uv_sem_t go_submit;
static uv_sem_t submitted;
static uv_sem_t closed;
static atomic_uint_fast64_t release_ns;


static void helper(void* arg) {
  uvtw_id_t id;
  int r;
  int i;

  (void) arg;
  uv_sem_wait(&go_submit);
  /* The loop thread is busy in the closer's callback: these stay in the
   * submission queue until close. */
  submit(&q[0], 0, 0, 0);
  submit(&q[1], 0, 3, 0);
  submit(&q[2], 0, 0, UVTW_THREADPOOL);
  submit(&q[3], 0, 2, UVTW_THREADPOOL);
  submit(&q[4], 3600 * 1000, 0, 0);
  submit(&q[5], 0, 0, 0);
  uv_sem_post(&submitted);

  uv_sem_wait(&closed);
  id = 42;
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_EQ(UV_ECANCELED,
            uvtw_submit(wheel, 1, 1, UVTW_THREADPOOL, no_cb, NULL, &id));
  ASSERT_UEQ(42, id);
  r = cancel(&q[1]);
  ASSERT(r == 0 || r == UV_ENOENT);
  r = cancel(&wh[1]);
  ASSERT(r == 0 || r == UV_ENOENT);
  /* Still blocked: the close must wait for these runs. */
  ASSERT_EQ(UV_EBUSY, cancel(&blk_one[1]));
  uv_sleep(300);
  for (i = 0; i < NQTP; i++)
    ASSERT_EQ(0, atomic_load(&qtp[i].runs));
  atomic_store(&release_ns, uv_hrtime());
  /* From here on this thread must not touch the wheel. */
  for (i = 0; i < 4; i++)
    uv_sem_post(&blk_release);
}


static atomic_int wh_final_hook_ran;
static atomic_int blk_hook_ran;


/* On a pool thread, in a run released after close started. */
static void blk_closing_hook(task_t* t, int run) {
  uvtw_id_t id;

  ASSERT_PTR_EQ(t, &blk_one[1]);
  ASSERT_EQ(1, run);
  id = 9;
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_EQ(UV_ECANCELED,
            uvtw_submit(wheel, 0, 0, UVTW_THREADPOOL, no_cb, NULL, &id));
  ASSERT_UEQ(9, id);
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));
  atomic_store(&blk_hook_ran, 1);
}


/* Inside wh[2]'s final call. */
static void wh_final_hook(task_t* t) {
  int r;

  ASSERT_PTR_EQ(t, &wh[2]);
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, NULL));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(wheel, close_cb_timed));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, t->id)); /* it is ending now */
  r = cancel(&wh[4]);
  ASSERT(r == 0 || r == UV_ENOENT);
  atomic_store(&wh_final_hook_ran, 1);
}


static void closer_hook(task_t* t, int run) {
  size_t pending;
  uvtw_id_t id;
  int r;
  int i;

  ASSERT_PTR_EQ(t, &closer);
  ASSERT_EQ(1, run); /* no run after close */
  uv_sem_post(&go_submit);
  uv_sem_wait(&submitted);
  /* Live: everything but the running one-shots, which may or may not count
   * until their run returns ("a one-shot frees its place when it runs"). */
  pending = uvtw_wheel_pending(wheel);
  ASSERT(pending == 2 + NQTP + NWHEEL + NQUEUE + 1 ||
         pending == 2 + 2 + NQTP + NWHEEL + NQUEUE + 1);

  ASSERT_EQ(0, uvtw_wheel_close(wheel, close_cb_timed));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(wheel, close_cb_timed));
  id = 7;
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_EQ(UV_ECANCELED,
            uvtw_submit(wheel, 0, 0, UVTW_THREADPOOL, no_cb, NULL, &id));
  ASSERT_UEQ(7, id);
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));

  /* Running on the pool right now. */
  ASSERT_EQ(UV_EBUSY, cancel(&blk_one[0]));
  ASSERT_EQ(UV_EBUSY, cancel(&blk_rep[0]));
  /* Not running: 0 or UV_ENOENT, checked against the final call later. */
  r = cancel(&qtp[0]);
  ASSERT(r == 0 || r == UV_ENOENT);
  r = cancel(&qtp[3]);
  ASSERT(r == 0 || r == UV_ENOENT);
  r = cancel(&wh[0]);
  ASSERT(r == 0 || r == UV_ENOENT);
  r = cancel(&wh[3]);
  ASSERT(r == 0 || r == UV_ENOENT);
  r = cancel(&q[0]);
  ASSERT(r == 0 || r == UV_ENOENT);
  r = cancel(&q[3]);
  ASSERT(r == 0 || r == UV_ENOENT);
  for (i = 0; i < NQUEUE; i++)
    ASSERT_EQ(0, atomic_load(&q[i].runs));
  uv_sem_post(&closed);
}


static int blockers_started(void) {
  return atomic_load(&blk_one[0].runs) == 1 &&
         atomic_load(&blk_one[1].runs) == 1 &&
         atomic_load(&blk_rep[0].runs) == 1 &&
         atomic_load(&blk_rep[1].runs) == 1;
}


static void everywhere(void) {
  uv_thread_t tid;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&blk_started, 0));
  ASSERT_UV_OK(uv_sem_init(&blk_release, 0));
  ASSERT_UV_OK(uv_sem_init(&go_submit, 0));
  ASSERT_UV_OK(uv_sem_init(&submitted, 0));
  ASSERT_UV_OK(uv_sem_init(&closed, 0));
  atomic_store(&release_ns, 0);
  close_ns = 0;
  for (i = 0; i < 2; i++) {
    task_init(&blk_one[i]);
    task_init(&blk_rep[i]);
    blk_one[i].started = blk_rep[i].started = &blk_started;
    blk_one[i].go = blk_rep[i].go = &blk_release;
  }
  for (i = 0; i < NQTP; i++)
    task_init(&qtp[i]);
  for (i = 0; i < NWHEEL; i++)
    task_init(&wh[i]);
  for (i = 0; i < NQUEUE; i++)
    task_init(&q[i]);
  task_init(&closer);
  closer.hook = closer_hook;
  blk_one[1].hook = blk_closing_hook;
  wh[2].final_hook = wh_final_hook;
  atomic_store(&wh_final_hook_ran, 0);
  atomic_store(&blk_hook_ran, 0);

  /* Four blocked runs fill the pool. */
  submit(&blk_one[0], 0, 0, UVTW_THREADPOOL);
  submit(&blk_one[1], 0, 0, UVTW_THREADPOOL);
  submit(&blk_rep[0], 0, 1000, UVTW_THREADPOOL);
  submit(&blk_rep[1], 0, 1000, UVTW_THREADPOOL);
  run_until(blockers_started, 0);

  /* Due now, queued in the pool behind them. */
  submit(&qtp[0], 0, 0, UVTW_THREADPOOL);
  submit(&qtp[1], 0, 0, UVTW_THREADPOOL);
  submit(&qtp[2], 1, 0, UVTW_THREADPOOL);
  submit(&qtp[3], 0, 5, UVTW_THREADPOOL);
  submit(&qtp[4], 0, 1, UVTW_THREADPOOL);
  run_for(50);
  for (i = 0; i < NQTP; i++)
    ASSERT_EQ(0, atomic_load(&qtp[i].runs));

  /* Waiting in the wheel. */
  submit(&wh[0], 3600 * 1000, 0, 0);
  submit(&wh[1], 3600 * 1000, 3600 * 1000, 0);
  submit(&wh[2], 3600 * 1000, 0, UVTW_THREADPOOL);
  submit(&wh[3], 3600 * 1000, 10, UVTW_THREADPOOL);
  submit(&wh[4], UINT64_MAX, 0, 0);
  run_for(10);

  submit(&closer, 10, 5, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, helper, NULL));
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(0, uv_loop_close(&loop));

  /* The close callback waited for the blocked runs. */
  ASSERT_UGE(close_ns, atomic_load(&release_ns));

  /* Running one-shots: ended by their run, with or without a cancel. */
  for (i = 0; i < 2; i++) {
    ASSERT_EQ(1, atomic_load(&blk_one[i].runs));
    ASSERT_EQ(1, atomic_load(&blk_one[i].returned));
    ASSERT_EQ(0, atomic_load(&blk_one[i].finals));
    ASSERT_EQ(UV_EBUSY, atomic_load(&blk_one[i].cancel_result));
  }
  /* Running repeating tasks: ended by the EBUSY cancel, or by a final call
   * after the run returned. */
  ASSERT_EQ(1, atomic_load(&blk_rep[0].runs));
  ASSERT_EQ(0, atomic_load(&blk_rep[0].finals));
  ASSERT_EQ(1, atomic_load(&blk_rep[1].runs));
  ASSERT_EQ(1, atomic_load(&blk_rep[1].finals));
  ASSERT_UGE(blk_rep[1].final_ns, blk_rep[1].end_ns[0]);
  ASSERT_UGE(blk_rep[1].final_ns, atomic_load(&release_ns));

  /* Everything else never ran and ended once. */
  check_cancelled_after_close(&qtp[0]);
  check_cancelled_after_close(&qtp[3]);
  check_cancelled_after_close(&wh[0]);
  check_cancelled_after_close(&wh[1]);
  check_cancelled_after_close(&wh[3]);
  ASSERT_EQ(1, atomic_load(&wh_final_hook_ran));
  ASSERT_EQ(1, atomic_load(&blk_hook_ran));
  check_cancelled_after_close(&wh[4]);
  check_cancelled_after_close(&q[0]);
  check_cancelled_after_close(&q[1]);
  check_cancelled_after_close(&q[3]);
  for (i = 0; i < NQTP; i++) {
    if (i == 0 || i == 3)
      continue;
    ASSERT_EQ(0, atomic_load(&qtp[i].runs));
    ASSERT_EQ(1, atomic_load(&qtp[i].finals));
  }
  for (i = 0; i < NWHEEL; i++) {
    if (i == 0 || i == 1 || i == 3 || i == 4)
      continue;
    ASSERT_EQ(0, atomic_load(&wh[i].runs));
    ASSERT_EQ(1, atomic_load(&wh[i].finals));
  }
  for (i = 0; i < NQUEUE; i++) {
    if (i == 0 || i == 1 || i == 3)
      continue;
    ASSERT_EQ(0, atomic_load(&q[i].runs));
    ASSERT_EQ(1, atomic_load(&q[i].finals));
  }
  /* The closer: in flight at close, repeating: one final call after its
   * run returned. */
  ASSERT_EQ(1, atomic_load(&closer.runs));
  ASSERT_EQ(1, atomic_load(&closer.finals));
  ASSERT_UGE(closer.final_ns, closer.end_ns[0]);

  uv_sem_destroy(&blk_started);
  uv_sem_destroy(&blk_release);
  uv_sem_destroy(&go_submit);
  uv_sem_destroy(&submitted);
  uv_sem_destroy(&closed);
}


/* ---- in_one_shot -------------------------------------------------------- */

static task_t os_closer;
static task_t os_sib[2];
static task_t os_rep;
static task_t os_far;
static task_t os_pool;
static uv_sem_t os_go;


static void os_hook(task_t* t, int run) {
  uvtw_id_t id;
  int r;

  ASSERT_PTR_EQ(t, &os_closer);
  ASSERT_EQ(1, run);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  id = 3;
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_UEQ(3, id);
  r = cancel(&os_sib[0]);
  ASSERT(r == 0 || r == UV_ENOENT);
  /* A one-shot cancelling itself from its own run, even while closing. */
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, os_closer.id));
  ASSERT_EQ(UV_EBUSY, cancel(&os_pool));
  uv_sem_post(&os_go);
}


static int os_pool_started(void) {
  return atomic_load(&os_pool.runs) == 1;
}


static void in_one_shot(void) {
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&os_go, 0));
  task_init(&os_closer);
  task_init(&os_rep);
  task_init(&os_far);
  task_init(&os_pool);
  for (i = 0; i < 2; i++)
    task_init(&os_sib[i]);
  os_closer.hook = os_hook;
  os_pool.go = &os_go;

  /* A threadpool run in flight at close: blocked until the closer posts. */
  submit(&os_pool, 0, 0, UVTW_THREADPOOL);
  run_until(os_pool_started, 0);
  submit(&os_rep, 1, 2, 0);
  submit(&os_closer, 5, 0, 0);
  submit(&os_sib[0], 5, 0, 0); /* same deadline, received after it */
  submit(&os_sib[1], 5, 0, 0);
  submit(&os_far, 3600 * 1000, 0, UVTW_THREADPOOL);
  uv_sleep(20); /* all due in the first pass */
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));

  ASSERT_EQ(1, atomic_load(&os_closer.runs));
  ASSERT_EQ(0, atomic_load(&os_closer.finals));
  ASSERT_EQ(1, atomic_load(&os_pool.runs));
  ASSERT_EQ(0, atomic_load(&os_pool.finals));
  check_cancelled_after_close(&os_sib[0]);
  ASSERT_EQ(0, atomic_load(&os_sib[1].runs));
  ASSERT_EQ(1, atomic_load(&os_sib[1].finals));
  ASSERT_GE(atomic_load(&os_rep.runs), 1);
  ASSERT_EQ(1, atomic_load(&os_rep.finals));
  ASSERT_EQ(0, atomic_load(&os_far.runs));
  ASSERT_EQ(1, atomic_load(&os_far.finals));
  uv_sem_destroy(&os_go);
}


/* ---- never_ran ---------------------------------------------------------- */

#define NNR 6

static task_t nr[NNR];


static void nr_thread(void* arg) {
  (void) arg;
  submit(&nr[0], 0, 0, 0);
  submit(&nr[1], 0, 0, UVTW_THREADPOOL);
  submit(&nr[2], 0, 1, 0);
  submit(&nr[3], 0, 1, UVTW_THREADPOOL);
  submit(&nr[4], 10, 0, 0);
  submit(&nr[5], UINT64_MAX, UINT64_MAX, UVTW_THREADPOOL);
}


static void never_ran(void) {
  uv_thread_t tid;
  int i;
  int r;

  setup(0);
  for (i = 0; i < NNR; i++)
    task_init(&nr[i]);
  ASSERT_UV_OK(uv_thread_create(&tid, nr_thread, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(NNR, uvtw_wheel_pending(wheel));
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, NULL));
  r = cancel(&nr[2]);
  ASSERT(r == 0 || r == UV_ENOENT);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));
  check_cancelled_after_close(&nr[2]);
  for (i = 0; i < NNR; i++) {
    ASSERT_EQ(0, atomic_load(&nr[i].runs));
    if (i != 2)
      ASSERT_EQ(1, atomic_load(&nr[i].finals));
  }
}


/* ---- busy_close --------------------------------------------------------- */

static task_t bc[2];
static uv_sem_t bc_started;
static uv_sem_t bc_go;
static atomic_uint_fast64_t bc_release_ns;


static void bc_releaser(void* arg) {
  (void) arg;
  uv_sleep(100);
  atomic_store(&bc_release_ns, uv_hrtime());
  uv_sem_post(&bc_go);
  uv_sem_post(&bc_go);
}


static int bc_started_both(void) {
  return atomic_load(&bc[0].runs) == 1 && atomic_load(&bc[1].runs) == 1;
}


static void busy_close(void) {
  uv_thread_t tid;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&bc_started, 0));
  ASSERT_UV_OK(uv_sem_init(&bc_go, 0));
  for (i = 0; i < 2; i++) {
    task_init(&bc[i]);
    bc[i].started = &bc_started;
    bc[i].go = &bc_go;
  }
  submit(&bc[0], 0, 5, UVTW_THREADPOOL); /* repeating */
  submit(&bc[1], 0, 0, UVTW_THREADPOOL); /* one-shot */
  run_until(bc_started_both, 0);
  ASSERT_EQ(UV_EBUSY, cancel(&bc[0]));
  ASSERT_EQ(UV_EBUSY, cancel(&bc[1]));
  ASSERT_UV_OK(uv_thread_create(&tid, bc_releaser, NULL));
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, close_cb_timed));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));
  ASSERT_UGE(close_ns, atomic_load(&bc_release_ns));
  for (i = 0; i < 2; i++) {
    ASSERT_EQ(1, atomic_load(&bc[i].runs));
    ASSERT_EQ(1, atomic_load(&bc[i].returned));
    ASSERT_EQ(0, atomic_load(&bc[i].finals));
    ASSERT_UGE(close_ns, bc[i].end_ns[0]);
  }
  uv_sem_destroy(&bc_started);
  uv_sem_destroy(&bc_go);
}


/* ---- own_run ------------------------------------------------------------ */

/* A loop task closes the wheel from its own run while another thread
 * cancels it; the cancel comes before the close (order 0) or after it
 * (order 1).  Either way the task is running: UV_EBUSY, and then it has
 * ended (a one-shot by its run, a repeating one by that cancel): no final
 * call.  A sibling in the wheel gets its final call. */
static task_t orun;
static task_t orun_sib;
static uv_sem_t orun_started;
static uv_sem_t orun_cancelled;
static uv_sem_t orun_closed;
static int orun_order;


static void orun_hook(task_t* t, int run) {
  ASSERT_PTR_EQ(t, &orun);
  ASSERT_EQ(1, run);
  uv_sem_post(&orun_started);
  if (orun_order == 0)
    uv_sem_wait(&orun_cancelled);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, close_cb_timed));
  if (orun_order == 1) {
    uv_sem_post(&orun_closed);
    uv_sem_wait(&orun_cancelled);
  }
}


static void orun_thread(void* arg) {
  (void) arg;
  uv_sem_wait(&orun_started);
  if (orun_order == 1)
    uv_sem_wait(&orun_closed);
  ASSERT_EQ(UV_EBUSY, cancel(&orun));
  uv_sem_post(&orun_cancelled);
}


static void own_run(int order, uint64_t repeat) {
  uv_thread_t tid;

  setup(0);
  orun_order = order;
  ASSERT_UV_OK(uv_sem_init(&orun_started, 0));
  ASSERT_UV_OK(uv_sem_init(&orun_cancelled, 0));
  ASSERT_UV_OK(uv_sem_init(&orun_closed, 0));
  task_init(&orun);
  task_init(&orun_sib);
  orun.hook = orun_hook;
  submit(&orun, 1, repeat, 0);
  submit(&orun_sib, 3600 * 1000, 0, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, orun_thread, NULL));
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));
  ASSERT_EQ(1, atomic_load(&orun.runs));
  ASSERT_EQ(0, atomic_load(&orun.finals));
  ASSERT_EQ(0, atomic_load(&orun_sib.runs));
  ASSERT_EQ(1, atomic_load(&orun_sib.finals));
  uv_sem_destroy(&orun_started);
  uv_sem_destroy(&orun_cancelled);
  uv_sem_destroy(&orun_closed);
}


/* ---- two_wheels --------------------------------------------------------- */

static uvtw_wheel_t* wa;
static uvtw_wheel_t* wb;
static task_t ta[3];
static task_t tb[3];
static uint64_t wa_close_ns;
static uint64_t wb_close_ns;
static int wa_closed;
static int wb_closed;


static void wa_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wa);
  wa_close_ns = uv_hrtime();
  wa_closed++;
}


static void wb_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wb);
  wb_close_ns = uv_hrtime();
  wb_closed++;
}


static void submit_on(
    uvtw_wheel_t* w, task_t* t, uint64_t delay, uint64_t repeat, unsigned f) {
  t->flags = f;
  t->repeat = repeat;
  ASSERT_EQ(0, uvtw_submit(w, delay, repeat, f, task_cb, t, &t->id));
  ASSERT_NE(0, t->id);
}


static void tw_thread(void* arg) {
  (void) arg;
  submit_on(wa, &ta[0], 0, 2, 0);
  submit_on(wa, &ta[1], 3600 * 1000, 0, UVTW_THREADPOOL);
  submit_on(wa, &ta[2], 1, 3, UVTW_THREADPOOL);
  submit_on(wb, &tb[0], 0, 3, 0);
  submit_on(wb, &tb[1], 100, 0, 0);
  submit_on(wb, &tb[2], 60, 0, UVTW_THREADPOOL);
}


static int tw_a_closed(void) {
  return wa_closed == 1;
}


/* tb[0]'s runs when wa had closed. */
static int tw_runs_b0;


/* wb's one-shots ran, and its repeating task ran again after wa closed:
 * a loaded machine may take longer than the one-shots' delays to close
 * wa, so their having run alone does not show that wb carried on. */
static int tw_b_ran(void) {
  return atomic_load(&tb[1].returned) == 1 &&
         atomic_load(&tb[2].returned) == 1 &&
         atomic_load(&tb[0].runs) > tw_runs_b0;
}


static void two_wheels(void) {
  uv_thread_t tid;
  int r;
  int i;

  setup(0);
  wa = wheel; /* the harness's wheel; the harness's close is not used */
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wb));
  wa_closed = wb_closed = 0;
  for (i = 0; i < 3; i++) {
    task_init(&ta[i]);
    task_init(&tb[i]);
  }
  ASSERT_UV_OK(uv_thread_create(&tid, tw_thread, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(3, uvtw_wheel_pending(wa));
  ASSERT_UEQ(3, uvtw_wheel_pending(wb));
  run_for(20);
  ASSERT_GE(atomic_load(&ta[0].runs), 2);

  ASSERT_EQ(0, uvtw_wheel_close(wa, wa_close_cb));
  run_until(tw_a_closed, 0);
  for (i = 0; i < 3; i++) {
    ASSERT_EQ(1, atomic_load(&ta[i].finals));
    ASSERT_ULE(ta[i].final_ns, wa_close_ns);
  }
  /* The other wheel carries on. */
  tw_runs_b0 = atomic_load(&tb[0].runs);
  run_until(tw_b_ran, 0);
  ASSERT_GT(atomic_load(&tb[0].runs), tw_runs_b0);
  ASSERT_EQ(0, atomic_load(&tb[0].finals));
  r = uvtw_cancel(wb, tb[0].id);
  ASSERT(r == 0 || r == UV_EBUSY);
  ASSERT_UEQ(0, uvtw_wheel_pending(wb));

  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wb, wb_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, wa_closed);
  ASSERT_EQ(1, wb_closed);
  ASSERT_EQ(0, uv_loop_close(&loop));
  for (i = 0; i < 3; i++)
    ASSERT_EQ(0, atomic_load(&tb[i].finals));
  ASSERT_EQ(1, atomic_load(&tb[1].runs));
  ASSERT_EQ(1, atomic_load(&tb[2].runs));
}


static void own_run_cancel_first(void) {
  own_run(0, 0);
}


static void own_run_close_first(void) {
  own_run(1, 0);
}


static void own_run_repeating_cancel_first(void) {
  own_run(0, 5);
}


static void own_run_repeating_close_first(void) {
  own_run(1, 5);
}


/* ---- submit_inflight ---------------------------------------------------- */

static task_t ci_x;
static atomic_int ci_submit_result;


static void ci_producer(void* arg) {
  (void) arg;
  task_init(&ci_x);
  atomic_store(&ci_submit_result,
               uvtw_submit(wheel, 3600 * 1000, 0, 0, task_cb, &ci_x, &ci_x.id));
}


static void submit_inflight(void) {
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


/* ---- waking_submit ------------------------------------------------------ */

/* Where the producer is: the wraps hold it at the two middle stages. */
enum { WS_OFF, WS_BEFORE_PUSH, WS_WAKING, WS_SENT };

static atomic_int ws_stage;
static uv_thread_t ws_producer_tid; /* written before ws_stage leaves OFF */
static uv_sem_t ws_held;            /* the producer is held, or returned */
static uv_sem_t ws_go;
static atomic_int ws_returned;
static atomic_int ws_result;
static atomic_int ws_loop_sends;       /* sends but the producer's held one */
static task_t ws_queued[UVTW__CHUNK0]; /* the table's first chunk */
static task_t ws_task;

void __real_uv_mutex_lock(uv_mutex_t* mutex);
void __wrap_uv_mutex_lock(uv_mutex_t* mutex);
int __real_uv_async_send(uv_async_t* handle);
int __wrap_uv_async_send(uv_async_t* handle);


static int ws_is_producer(void) {
  uv_thread_t self;

  self = uv_thread_self();
  return uv_thread_equal(&self, &ws_producer_tid);
}


/* The producer, at `stage`: moves on to the next and waits for the test. */
static void ws_hold(int stage) {
  atomic_store(&ws_stage, stage + 1);
  uv_sem_post(&ws_held);
  uv_sem_wait(&ws_go);
}


void __wrap_uv_mutex_lock(uv_mutex_t* mutex) {
  if (atomic_load(&ws_stage) == WS_BEFORE_PUSH && ws_is_producer())
    ws_hold(WS_BEFORE_PUSH);
  __real_uv_mutex_lock(mutex);
}


int __wrap_uv_async_send(uv_async_t* handle) {
  if (atomic_load(&ws_stage) == WS_WAKING && ws_is_producer())
    ws_hold(WS_WAKING);
  else
    atomic_fetch_add(&ws_loop_sends, 1);
  return __real_uv_async_send(handle);
}

#ifdef _WIN32
/* Against libuv's DLL the library calls through the import slots, which
 * the program is linked to wrap too (as test-task-wakeups.c). */
void (*__wrap___imp_uv_mutex_lock)(uv_mutex_t*) = __wrap_uv_mutex_lock;
int (*__wrap___imp_uv_async_send)(uv_async_t*) = __wrap_uv_async_send;
#endif


static void ws_producer(void* arg) {
  (void) arg;
  ws_producer_tid = uv_thread_self();
  atomic_store(&ws_stage, WS_BEFORE_PUSH);
  atomic_store(&ws_result,
               uvtw_submit(wheel, 0, 0, 0, task_cb, &ws_task, &ws_task.id));
  atomic_store(&ws_returned, 1);
  uv_sem_post(&ws_held);
}


static int ws_queue_taken(void) {
  uvtw_stats_t st;

  uvtw_wheel_stats(wheel, &st);
  return st.tasks_accepted != 0; /* one drain takes the whole queue */
}


static int ws_closed_or_retried(void) {
  return atomic_load(&close_cb_called) != 0 ||
         atomic_load(&ws_loop_sends) >= 100;
}


static void waking_submit(void) {
  uv_thread_t producer;
  uvtw_stats_t st;
  unsigned i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&ws_held, 0));
  ASSERT_UV_OK(uv_sem_init(&ws_go, 0));
  task_init(&ws_task);
  /* The queue holds them, and no node is free. */
  for (i = 0; i < UVTW__CHUNK0; i++) {
    task_init(&ws_queued[i]);
    submit(&ws_queued[i], 3600 * 1000, 0, 0);
  }
  ASSERT_UV_OK(uv_thread_create(&producer, ws_producer, NULL));
  uv_sem_wait(&ws_held);
  ASSERT_EQ(0, atomic_load(&ws_returned));
  ASSERT_EQ(WS_WAKING, atomic_load(&ws_stage));
  /* The loop takes the queue in: the producer's task is not in it yet, so
   * its push will find the queue empty. */
  run_until(ws_queue_taken, 1);
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(UVTW__CHUNK0, st.tasks_accepted);
  uv_sem_post(&ws_go);
  uv_sem_wait(&ws_held);
  ASSERT_EQ(0, atomic_load(&ws_returned));
  ASSERT_EQ(WS_SENT, atomic_load(&ws_stage));
  /* The producer is inside the send that wakes the loop. */
  atomic_store(&ws_loop_sends, 0);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  run_until(ws_closed_or_retried, 1);
  ASSERT_EQ(0, atomic_load(&close_cb_called));
  uv_sem_post(&ws_go);
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_UV_OK(uv_thread_join(&producer));
  ASSERT_EQ(0, uv_loop_close(&loop));
  ASSERT_EQ(0, atomic_load(&ws_result));
  ASSERT_EQ(0, atomic_load(&ws_task.runs));
  ASSERT_EQ(1, atomic_load(&ws_task.finals));
  for (i = 0; i < UVTW__CHUNK0; i++)
    ASSERT_EQ(1, atomic_load(&ws_queued[i].finals));
  atomic_store(&ws_stage, WS_OFF);
  uv_sem_destroy(&ws_held);
  uv_sem_destroy(&ws_go);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(in_one_shot),
  TEST_CASE(never_ran),
  TEST_CASE(everywhere),
  TEST_CASE(busy_close),
  TEST_CASE(own_run_cancel_first),
  TEST_CASE(own_run_close_first),
  TEST_CASE(own_run_repeating_cancel_first),
  TEST_CASE(own_run_repeating_close_first),
  TEST_CASE(two_wheels),
  TEST_CASE(submit_inflight),
  TEST_CASE(waking_submit),
};
/* clang-format on */


int main(int argc, char** argv) {
  /* The scenarios rely on a pool of exactly 4 threads; set it before the
   * first uv_queue_work. */
  test_setenv("UV_THREADPOOL_SIZE", "4");
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
