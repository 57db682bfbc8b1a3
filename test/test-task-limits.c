/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: bad input, limits and the smaller rules.
 *
 *   bad_input      NULL callback, NULL wheel and unknown flags are
 *                  UV_EINVAL; a failed call changes nothing (id untouched,
 *                  pending unchanged).
 *   max_tasks      at max_tasks live tasks submit is UV_ENOSPC (from any
 *                  thread); the place comes back at once after a cancel
 *                  and when a one-shot runs (loop and threadpool); timers
 *                  count in pending but take no task place; pending and
 *                  tasks_live follow every step; close gives the live ones
 *                  their final call.
 *   huge_delay     delays of UINT64_MAX (and near it, and a repeat of
 *                  UINT64_MAX) saturate: they never fire, and close gives
 *                  each exactly one final call.
 *   zero_delay     delay 0 from another thread: each task runs exactly once.
 *   after_close    submit after close started is UV_ECANCELED from the loop
 *                  thread and from another one; cancel of 0 is UV_ENOENT.
 *   repeat_loop    a repeating loop task's next run is due at the loop time
 *                  of its dispatch + repeat: never earlier, and after a run
 *                  that overran, once (not once per missed period).
 *   repeat_pool    two repeating threadpool tasks that run longer than
 *                  their periods (runs of 12 ms, periods of 1 and 2 ms)
 *                  never overlap themselves: each run starts after the
 *                  previous one returned; after a cancel that returned 0 no
 *                  run starts, and after UV_EBUSY at most the one that was
 *                  executing.
 *   repeat_pool_overrun  a run that came due while the previous one was
 *                  running starts when that one ends, not a period later
 *                  (period 100 ms, runs of 130 ms: the median gap between a
 *                  run's end and the next start is < 60 ms).
 *   busy_place     a threadpool task whose cancel returned UV_EBUSY ends
 *                  when its run returns, on the pool thread: with
 *                  max_tasks 1, pending is 0 and a new submit is accepted
 *                  before the loop runs again.
 *   cancel_frees   500,000 submit + cancel pairs of 1 h tasks from the loop
 *                  thread, then 250,000 from another thread, which waits
 *                  every 1,000 pairs for a marker task to run: the heap
 *                  does not grow with them (a cancelled task's memory is
 *                  not kept until its deadline).
 *                  Measured with glibc's mallinfo2; not asserted under
 *                  sanitizers, whose allocators it cannot see.
 *   liveness       an empty wheel does not keep the loop alive; a drained
 *                  live task (loop or threadpool, one-shot or repeating)
 *                  keeps uv_run(UV_RUN_DEFAULT) running until it ends (by
 *                  its run, or by a cancel from another thread while the
 *                  loop sleeps in epoll for 1 h: uv_run returns soon); a
 *                  task submitted from another thread after uv_run
 *                  returned does not (nothing wakes the owner: the
 *                  liveness rule in docs/tasks.md, "Liveness"), and is
 *                  drained by a later run.  Submits from the loop thread:
 *                  test-task-liveness.c.
 *   early_cancel_stats  uvtw_stats_t: tasks cancelled before the loop
 *                  took them in count in tasks_accepted and tasks_cancelled
 *                  after one loop iteration: the loop's owner submits and
 *                  cancels before uv_run, each submit taking over the
 *                  node of the task cancelled before it; of 3 pairs and
 *                  one task left live, 4 accepted, 3 cancelled (pairs
 *                  from another thread: test-task-producers,
 *                  pending_churn).
 *   queue_memory   max_tasks 16; a worker makes 4 bursts of 100,000
 *                  submit + cancel pairs (never more than one task live,
 *                  so max_tasks never refuses one) while the loop does not
 *                  run, and the loop runs until it took them in between
 *                  bursts: each submit takes over the node its thread's
 *                  cancel just ended, so a burst leaves one queue entry,
 *                  and the table grows with the first burst and not with
 *                  the next ones; the quiescent check passes between
 *                  bursts.
 *   loop_pairs_memory  the same from the loop thread (the wheel's owner,
 *                  before uv_run, as a callback would).
 *   crossed_memory as queue_memory, but each burst submits two tasks and
 *                  then cancels both, the older first: every other submit
 *                  finds the newest entry live and pushes a node, so a
 *                  burst leaves 50,001 entries; take-in frees them, and
 *                  the table still grows with the first burst only.
 *   table_in_use   10,000 live tasks: the table has set up (given a
 *                  generation, so touched) at least 10,000 nodes and fewer than
 *                  10,000 + UVTW__GROW_STEP, and fewer than its chunks
 *                  hold (16,128).
 *   worn_index     a node whose generations are used up is retired, not an
 *                  error: with index 0 at its last generation, its task's
 *                  id works, and once it ended the next submits get other
 *                  indices, never index 0 again. */

#include "internal.h"
#include "task-harness.h"
#include "test-cases.h"

#if defined(__SANITIZE_ADDRESS__)
# define UNDER_ASAN 1
#elif defined(__has_feature)
# if __has_feature(address_sanitizer)
#  define UNDER_ASAN 1
# endif
#endif
#ifndef UNDER_ASAN
# define UNDER_ASAN 0
#endif

#if defined(__GLIBC__) && !UNDER_ASAN && !UNDER_TSAN
# include <malloc.h>
# define HAVE_MALLINFO 1
#else
# define HAVE_MALLINFO 0
#endif


static void no_cb(void* arg, int status) {
  (void) arg;
  (void) status;
  ASSERT(0 && "a rejected task ran");
}


/* ---- bad_input ---------------------------------------------------------- */

static void bad_input(void) {
  static const unsigned bad_flags[] = {2u, 4u, 0x80000000u, ~0u,
                                       UVTW_THREADPOOL | 2u};
  uvtw_id_t id;
  size_t i;
  int x;

  setup(0);
  id = 12345;
  ASSERT_EQ(UV_EINVAL, uvtw_submit(wheel, 0, 0, 0, NULL, &x, &id));
  ASSERT_EQ(UV_EINVAL,
            uvtw_submit(wheel, 10, 10, UVTW_THREADPOOL, NULL, &x, &id));
  ASSERT_EQ(UV_EINVAL, uvtw_submit(NULL, 0, 0, 0, no_cb, &x, &id));
  for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
    ASSERT_EQ(UV_EINVAL,
              uvtw_submit(wheel, 0, 0, bad_flags[i], no_cb, &x, &id));
    ASSERT_EQ(UV_EINVAL,
              uvtw_submit(wheel, 5, 5, bad_flags[i], no_cb, &x, NULL));
  }
  ASSERT_UEQ(12345, id);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));
  run_for(20);
  teardown();
}


/* ---- max_tasks ---------------------------------------------------------- */

static task_t mt[8];
static uvtw_timer_t mt_timer;
static int mt_timer_fired;
static atomic_int mt_thread_step;


static void mt_timer_cb(uvtw_timer_t* timer) {
  (void) timer;
  mt_timer_fired++;
}


static void expect_live(uint64_t tasks, uint64_t timers) {
  uvtw_stats_t stats;

  ASSERT_UEQ(tasks + timers, uvtw_wheel_pending(wheel));
  uvtw_wheel_stats(wheel, &stats);
  ASSERT_UEQ(tasks, stats.tasks_live);
  ASSERT_UEQ(timers, stats.timers_active);
}


static void mt_thread(void* arg) {
  uvtw_id_t id;

  (void) arg;
  /* Three live: full from this thread too. */
  id = 777;
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_EQ(UV_ENOSPC,
            uvtw_submit(wheel, 0, 0, UVTW_THREADPOOL, no_cb, NULL, &id));
  ASSERT_UEQ(777, id);
  /* A cancel from here frees the place at once, for this thread.  The
   * main thread's timer counts in pending too. */
  ASSERT_EQ(0, cancel(&mt[2]));
  ASSERT_UEQ(3, uvtw_wheel_pending(wheel));
  submit(&mt[3], 3600 * 1000, 0, UVTW_THREADPOOL);
  ASSERT_UEQ(4, uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  atomic_store(&mt_thread_step, 1);
}


/* Two tasks and the timer are left once the one-shot has run. */
static int mt4_ran(void) {
  return atomic_load(&mt[4].returned) == 1 && uvtw_wheel_pending(wheel) == 3;
}


static int mt5_ran(void) {
  return atomic_load(&mt[5].returned) == 1 && uvtw_wheel_pending(wheel) == 3;
}


static void max_tasks(void) {
  uv_thread_t tid;
  uvtw_id_t id;
  int i;

  setup(3);
  for (i = 0; i < 8; i++)
    task_init(&mt[i]);
  mt_timer_fired = 0;
  atomic_store(&mt_thread_step, 0);
  expect_live(0, 0);

  submit(&mt[0], 3600 * 1000, 0, 0);
  expect_live(1, 0);
  submit(&mt[1], 3600 * 1000, 0, UVTW_THREADPOOL);
  submit(&mt[2], 3600 * 1000, 1000, 0); /* repeating */
  expect_live(3, 0);
  id = 99;
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_EQ(UV_ENOSPC,
            uvtw_submit(wheel, 1, 1, UVTW_THREADPOOL, no_cb, NULL, &id));
  ASSERT_UEQ(99, id);
  expect_live(3, 0);

  /* A timer counts in pending but takes no task place. */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &mt_timer));
  ASSERT_EQ(0, uvtw_timer_start(&mt_timer, mt_timer_cb, 3600 * 1000, 0));
  expect_live(3, 1);

  ASSERT_UV_OK(uv_thread_create(&tid, mt_thread, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(1, atomic_load(&mt_thread_step));
  one_pass(); /* the loop drains what the thread did */
  expect_live(3, 1);

  /* The loop-thread one-shot goes: its place comes back when it runs. */
  ASSERT_EQ(0, cancel(&mt[0]));
  expect_live(2, 1);
  submit(&mt[4], 10, 0, 0);
  expect_live(3, 1);
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, NULL));
  run_until(mt4_ran, 0);
  expect_live(2, 1);
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, mt[4].id));

  /* The same with a threadpool one-shot. */
  submit(&mt[5], 5, 0, UVTW_THREADPOOL);
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, NULL));
  run_until(mt5_ran, 0);
  expect_live(2, 1);

  submit(&mt[6], UINT64_MAX, 0, 0);
  expect_live(3, 1);
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, NULL));
  ASSERT_EQ(0, uvtw_timer_stop(&mt_timer));
  expect_live(3, 0);
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, NULL));

  /* Live at close: mt[1], mt[3], mt[6]: one final call each. */
  teardown();
  ASSERT_EQ(0, mt_timer_fired);
  for (i = 0; i < 8; i++) {
    if (i == 1 || i == 3 || i == 6) {
      ASSERT_EQ(1, atomic_load(&mt[i].finals));
      ASSERT_EQ(0, atomic_load(&mt[i].runs));
    } else {
      ASSERT_EQ(0, atomic_load(&mt[i].finals));
    }
  }
  ASSERT_EQ(0, atomic_load(&mt[0].runs) + atomic_load(&mt[2].runs));
  ASSERT_EQ(1, atomic_load(&mt[4].runs));
  ASSERT_EQ(1, atomic_load(&mt[5].runs));
}


/* ---- huge_delay --------------------------------------------------------- */

#define NHUGE 10

static task_t hd[NHUGE];


static void hd_thread(void* arg) {
  (void) arg;
  submit(&hd[6], UINT64_MAX, 0, 0);
  submit(&hd[7], UINT64_MAX, 1, UVTW_THREADPOOL);
  submit(&hd[8], UINT64_MAX - 1, UINT64_MAX, 0);
}


static int hd_ran(void) {
  return atomic_load(&hd[4].runs) == 1 && atomic_load(&hd[5].returned) == 1;
}


static void huge_delay(void) {
  uv_thread_t tid;
  int i;

  setup(0);
  for (i = 0; i < NHUGE; i++)
    task_init(&hd[i]);
  submit(&hd[0], UINT64_MAX, 0, 0);
  submit(&hd[1], UINT64_MAX, 0, UVTW_THREADPOOL);
  submit(&hd[2], UINT64_MAX, 1, 0);
  submit(&hd[3], UINT64_MAX - 2, UINT64_MAX - 2, UVTW_THREADPOOL);
  /* These run once; their next run saturates and never comes. */
  submit(&hd[4], 1, UINT64_MAX, 0);
  submit(&hd[5], 1, UINT64_MAX - 1, UVTW_THREADPOOL);
  submit(&hd[9], UINT64_MAX / 2, 0, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, hd_thread, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_until(hd_ran, 0);
  run_for(100);
  ASSERT_UEQ(NHUGE, uvtw_wheel_pending(wheel));
  for (i = 0; i < NHUGE; i++)
    ASSERT_EQ(i == 4 || i == 5 ? 1 : 0, atomic_load(&hd[i].runs));
  teardown();
  for (i = 0; i < NHUGE; i++) {
    ASSERT_EQ(i == 4 || i == 5 ? 1 : 0, atomic_load(&hd[i].runs));
    ASSERT_EQ(1, atomic_load(&hd[i].finals));
  }
}


/* ---- zero_delay --------------------------------------------------------- */

#define NZERO 200

static task_t zd[NZERO];
static atomic_int zd_submitted;


static void zd_thread(void* arg) {
  int i;

  (void) arg;
  for (i = 0; i < NZERO; i++) {
    submit(&zd[i], 0, 0, (i % 3 == 0) ? UVTW_THREADPOOL : 0);
    if (i % 50 == 49)
      uv_sleep(2);
  }
  atomic_store(&zd_submitted, 1);
}


static int zd_done(void) {
  int i;

  if (!atomic_load(&zd_submitted))
    return 0;
  for (i = 0; i < NZERO; i++)
    if (atomic_load(&zd[i].returned) != 1)
      return 0;
  return uvtw_wheel_pending(wheel) == 0;
}


static void zero_delay(void) {
  uv_thread_t tid;
  uvtw_stats_t stats;
  int i;

  setup(0);
  for (i = 0; i < NZERO; i++)
    task_init(&zd[i]);
  atomic_store(&zd_submitted, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, zd_thread, NULL));
  run_until(zd_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_for(30);
  for (i = 0; i < NZERO; i++)
    ASSERT_EQ(1, atomic_load(&zd[i].runs));
  uvtw_wheel_stats(wheel, &stats);
  ASSERT_UEQ(0, stats.tasks_live);
  ASSERT_UEQ(NZERO, stats.tasks_accepted);
  ASSERT_UEQ(NZERO, stats.tasks_run);
  teardown();
  for (i = 0; i < NZERO; i++) {
    ASSERT_EQ(1, atomic_load(&zd[i].runs));
    ASSERT_EQ(0, atomic_load(&zd[i].finals));
  }
}


/* ---- after_close -------------------------------------------------------- */

static task_t ac[2];
static int ac_close_called;


static void ac_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wheel);
  ac_close_called++;
  atomic_store(&close_cb_called, 1);
}


static void ac_thread(void* arg) {
  uvtw_id_t id;

  (void) arg;
  id = 5;
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_EQ(UV_ECANCELED,
            uvtw_submit(wheel, 10, 10, UVTW_THREADPOOL, no_cb, NULL, &id));
  ASSERT_UEQ(5, id);
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));
}


static void after_close(void) {
  uv_thread_t tid;
  uvtw_id_t id;

  setup(0);
  task_init(&ac[0]);
  task_init(&ac[1]);
  submit(&ac[0], 3600 * 1000, 0, 0);
  submit(&ac[1], 0, 0, UVTW_THREADPOOL);
  ac_close_called = 0;
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, ac_close_cb));
  id = 5;
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, 0, 0, 0, no_cb, NULL, &id));
  ASSERT_EQ(UV_ECANCELED, uvtw_submit(wheel, UINT64_MAX, 0, UVTW_THREADPOOL,
                                      no_cb, NULL, &id));
  ASSERT_UEQ(5, id);
  ASSERT_UV_OK(uv_thread_create(&tid, ac_thread, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(wheel, ac_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, ac_close_called);
  ASSERT_EQ(0, uv_loop_close(&loop));
  /* Neither had run; both get their final call. */
  ASSERT_EQ(1, atomic_load(&ac[0].finals));
  ASSERT_EQ(1, atomic_load(&ac[1].finals));
  ASSERT_EQ(0, atomic_load(&ac[0].runs) + atomic_load(&ac[1].runs));
}


/* ---- repeat_loop -------------------------------------------------------- */

#define RL_REPEAT 40
#define RL_RUNS 7

static task_t rl;


static int rl_done(void) {
  return atomic_load(&rl.returned) >= RL_RUNS;
}


static void repeat_loop(void) {
  int k;
  uint64_t gap;

  setup(0);
  task_init(&rl);
  rl.block_run = 2; /* overruns its period by far */
  rl.block_ms = 3 * RL_REPEAT + 10;
  rl.self_cancel_at = RL_RUNS;
  submit(&rl, 10, RL_REPEAT, 0);
  run_until(rl_done, 0);
  run_for(2 * RL_REPEAT);
  ASSERT_EQ(RL_RUNS, atomic_load(&rl.runs));
  ASSERT_EQ(0, atomic_load(&rl.self_cancel_result));
  for (k = 1; k < RL_RUNS; k++) {
    gap = rl.start_now[k] - rl.start_now[k - 1];
    /* Due at the dispatch time (uv_now in the callback) + repeat: never
     * earlier, even right after the overrun, when a fixed-rate schedule
     * would have caught up with back-to-back runs. */
    ASSERT_UGE(gap, RL_REPEAT);
    ASSERT_ULT(gap, 1000 + rl.block_ms); /* generous: it does come */
    printf("repeat_loop: run %d after %" PRIu64 " ms\n", k + 1, gap);
  }
  /* After the overrun, the missed periods are not made up. */
  ASSERT_UGE(rl.start_now[2] - rl.start_now[1], rl.block_ms);
  ASSERT_UGE(rl.start_now[3] - rl.start_now[2], RL_REPEAT);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
  ASSERT_EQ(0, atomic_load(&rl.finals));
}


/* ---- repeat_pool -------------------------------------------------------- */

#define RP_RUNS 8

static task_t rp[2];


static int rp_done(void) {
  return atomic_load(&rp[0].returned) >= RP_RUNS &&
         atomic_load(&rp[1].returned) >= RP_RUNS;
}


static void repeat_pool(void) {
  int i;
  int k;
  int r;
  int seen;

  setup(0);
  for (i = 0; i < 2; i++) {
    task_init(&rp[i]);
    rp[i].sleep_ms = 12; /* longer than the 2 ms period */
  }
  submit(&rp[0], 0, 2, UVTW_THREADPOOL);
  submit(&rp[1], 1, 1, UVTW_THREADPOOL);
  run_until(rp_done, 0);
  for (i = 0; i < 2; i++) {
    r = cancel(&rp[i]);
    seen = atomic_load(&rp[i].runs);
    ASSERT(r == 0 || r == UV_EBUSY);
    run_for(40);
    /* With EBUSY, the run that was executing may have entered task_cb just
     * after the cancel looked; nothing starts after that. */
    if (r == 0)
      ASSERT_EQ(seen, atomic_load(&rp[i].runs));
    else
      ASSERT_LE(atomic_load(&rp[i].runs), seen + 1);
    for (k = 1; k < RP_RUNS; k++)
      ASSERT_UGE(rp[i].start_ns[k], rp[i].end_ns[k - 1]);
  }
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
  for (i = 0; i < 2; i++)
    ASSERT_EQ(0, atomic_load(&rp[i].finals));
}


static task_t rpo;


static int rpo_done(void) {
  return atomic_load(&rpo.returned) >= 6;
}


static int cmp_u64(const void* a, const void* b) {
  uint64_t x;
  uint64_t y;

  x = *(const uint64_t*) a;
  y = *(const uint64_t*) b;
  return x < y ? -1 : x > y;
}


static void repeat_pool_overrun(void) {
  uint64_t gaps[5];
  int r;
  int k;

  setup(0);
  task_init(&rpo);
  rpo.sleep_ms = 130;
  submit(&rpo, 0, 100, UVTW_THREADPOOL);
  run_until(rpo_done, 0);
  r = cancel(&rpo);
  ASSERT(r == 0 || r == UV_EBUSY);
  for (k = 0; k < 5; k++) {
    ASSERT_UGE(rpo.start_ns[k + 1], rpo.end_ns[k]);
    gaps[k] = (rpo.start_ns[k + 1] - rpo.end_ns[k]) / 1000000;
  }
  qsort(gaps, 5, sizeof(gaps[0]), cmp_u64);
  printf(
      "repeat_pool_overrun: gaps from a run's end to the next start: "
      "%" PRIu64 " .. %" PRIu64 " ms, median %" PRIu64 "\n",
      gaps[0], gaps[4], gaps[2]);
  ASSERT_ULT(gaps[2], 60);
  run_until(pending_zero, 0);
  teardown();
  ASSERT_EQ(0, atomic_load(&rpo.finals));
}


/* ---- busy_place --------------------------------------------------------- */

static task_t bp_task;
static task_t bp_next;
static uv_sem_t bp_started;
static uv_sem_t bp_go;


static int bp_first_run_started(void) {
  return atomic_load(&bp_task.runs) == 1;
}


static void busy_place(void) {
  size_t pending;
  int r;

  setup(1);
  ASSERT_UV_OK(uv_sem_init(&bp_started, 0));
  ASSERT_UV_OK(uv_sem_init(&bp_go, 0));
  task_init(&bp_task);
  bp_task.started = &bp_started;
  bp_task.go = &bp_go;
  submit(&bp_task, 0, 0, UVTW_THREADPOOL);
  run_until(bp_first_run_started, 0);
  ASSERT_EQ(UV_EBUSY, cancel(&bp_task));
  uv_sem_post(&bp_go);
  while (atomic_load(&bp_task.returned) != 1)
    uv_sleep(1);
  uv_sleep(100); /* the pool thread is past the run's end by now */
  /* The loop does not run here: only the pool thread saw the run end. */
  pending = uvtw_wheel_pending(wheel);
  task_init(&bp_next);
  r = uvtw_submit(wheel, 3600 * 1000, 0, 0, task_cb, &bp_next, &bp_next.id);
  if (pending != 0 || r != 0)
    fprintf(stderr, "after the EBUSY run returned: pending %zu, submit %s\n",
            pending, r == 0 ? "0" : uv_err_name(r));
  if (r == 0)
    ASSERT_EQ(0, cancel(&bp_next));
  run_until(pending_zero, 0);
  teardown();
  uv_sem_destroy(&bp_started);
  uv_sem_destroy(&bp_go);
  ASSERT_EQ(0, pending);
  ASSERT_EQ(0, r);
  ASSERT_EQ(1, atomic_load(&bp_task.runs));
}


/* ---- cancel_frees ------------------------------------------------------- */

static atomic_int cf_done;
static int cf_n;


static size_t heap_in_use(void) {
#if HAVE_MALLINFO
  struct mallinfo2 mi;

  mi = mallinfo2();
  return mi.uordblks + mi.hblkhd; /* small chunks and mmap()ed ones */
#else
  return 0;
#endif
}


static uv_sem_t cf_caught_up;


static void cf_marker_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(0, status);
  uv_sem_post(&cf_caught_up);
}


static void cf_pairs(int n, int from_loop) {
  int pace;

  task_t t;
  int i;

  task_init(&t);
  for (i = 0; i < n; i++) {
    submit(&t, 3600 * 1000, (uint64_t) (i % 2) * 1000,
           (i % 3 == 0) ? UVTW_THREADPOOL : 0);
    ASSERT_EQ(0, cancel(&t));
    pace = i % 1000 == 999;
    if (from_loop && pace)
      one_pass(); /* the loop drains and frees what it must */
    else if (!from_loop && pace) {
      /* Wait until the loop has run a task submitted after these pairs:
       * it takes submissions in in order, so by then it has drained every
       * cancelled node before it.  The backlog stays below 1,000 nodes
       * however slowly the loop thread is scheduled. */
      ASSERT_EQ(0, uvtw_submit(wheel, 0, 0, 0, cf_marker_cb, NULL, NULL));
      uv_sem_wait(&cf_caught_up);
    }
  }
}


static void cf_thread(void* arg) {
  (void) arg;
  cf_pairs(cf_n / 2, 0);
  atomic_store(&cf_done, 1);
}


static int cf_is_done(void) {
  return atomic_load(&cf_done);
}


static void cancel_frees(void) {
  uv_thread_t tid;
  size_t base;
  size_t used;

  cf_n = scaled(500000);
  setup(0);
  atomic_store(&cf_done, 0);
  cf_pairs(20000, 1); /* warm up: caches and free lists */
  run_for(10);
  base = heap_in_use();

  cf_pairs(cf_n, 1);
  run_for(10);
  used = heap_in_use();
  printf(
      "cancel_frees: heap %zu -> %zu bytes after %d pairs on the loop "
      "thread\n",
      base, used, cf_n);
  /* Kept until their 1 h deadline, they would take >= 16 MB. */
  if (HAVE_MALLINFO)
    ASSERT_ULT(used, base + 4 * 1024 * 1024);

  /* From another thread a node is reclaimed by the next submit or once
   * the loop has drained its submission (queue_memory and crossed_memory
   * count the backlog of an unpaced burst).  Paced, the loop keeps up:
   * the heap must not grow with the number of cancelled tasks. */
  ASSERT_UV_OK(uv_sem_init(&cf_caught_up, 0));
  ASSERT_UV_OK(uv_thread_create(&tid, cf_thread, NULL));
  run_until(cf_is_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  uv_sem_destroy(&cf_caught_up);
  run_for(10);
  used = heap_in_use();
  printf(
      "cancel_frees: heap %zu -> %zu bytes after %d more pairs on "
      "another thread\n",
      base, used, cf_n / 2);
  if (HAVE_MALLINFO)
    ASSERT_ULT(used, base + 4 * 1024 * 1024);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
}


/* ---- liveness ----------------------------------------------------------- */

static task_t lv[7];
static uv_timer_t lv_timer;


static void lv_timer_cb(uv_timer_t* handle) {
  (void) handle;
}


static struct {
  task_t* t;
  uint64_t delay;
  uint64_t repeat;
  unsigned flags;
} lv_args;


static uint64_t lv_submit_ms;


static void lv_submit_thread(void* arg) {
  (void) arg;
  lv_submit_ms = hr_ms();
  submit(lv_args.t, lv_args.delay, lv_args.repeat, lv_args.flags);
}


/* Submits t from another thread; the loop is not running. */
static void lv_submit(task_t* t, uint64_t delay, uint64_t repeat, unsigned f) {
  uv_thread_t tid;

  lv_args.t = t;
  lv_args.delay = delay;
  lv_args.repeat = repeat;
  lv_args.flags = f;
  ASSERT_UV_OK(uv_thread_create(&tid, lv_submit_thread, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
}


/* Runs the loop with only a 5 ms uv_timer_t to keep it going while the
 * wheel drains its queue.  Returns the time from the last lv_submit to the
 * return of uv_run, in ms. */
static uint64_t lv_run(void) {
  ASSERT_UV_OK(uv_timer_start(&lv_timer, lv_timer_cb, 5, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  return hr_ms() - lv_submit_ms;
}


static uint64_t lv_cancel_at;


static void lv_canceller(void* arg) {
  task_t* t;
  int r;

  t = arg;
  uv_sleep(100);
  lv_cancel_at = uv_hrtime();
  r = cancel(t);
  ASSERT(r == 0 || r == UV_EBUSY);
}


static void liveness(void) {
  uv_thread_t tid;
  uint64_t t0;
  uint64_t took;
  uint64_t end;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_timer_init(&loop, &lv_timer));
  for (i = 0; i < 7; i++)
    task_init(&lv[i]);

  /* An empty wheel: uv_run returns at once. */
  t0 = hr_ms();
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_ULT(hr_ms() - t0, 10 * 1000); /* generous: else it blocks */

  /* Drained one-shots keep the loop running until they have run. */
  lv_submit(&lv[0], 150, 0, 0);
  took = lv_run();
  ASSERT_EQ(1, atomic_load(&lv[0].returned));
  ASSERT_UGE(took, 150);
  lv_submit(&lv[1], 150, 0, UVTW_THREADPOOL);
  took = lv_run();
  ASSERT_EQ(1, atomic_load(&lv[1].returned));
  ASSERT_UGE(took, 150);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));

  /* Drained repeating tasks keep it running until they are cancelled. */
  for (i = 2; i < 4; i++) {
    lv_submit(&lv[i], 0, 5, i == 3 ? UVTW_THREADPOOL : 0);
    ASSERT_UV_OK(uv_thread_create(&tid, lv_canceller, &lv[i]));
    lv_run();
    end = uv_hrtime();
    ASSERT_UV_OK(uv_thread_join(&tid));
    ASSERT_UGE(end, lv_cancel_at);
    ASSERT_GE(atomic_load(&lv[i].runs), 2);
    ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  }

  /* A drained 1 h task keeps the loop asleep in epoll; a cancel from
   * another thread ends it, and uv_run returns soon after, not in 1 h. */
  for (i = 5; i < 7; i++) {
    lv_submit(&lv[i], 3600 * 1000, 0, i == 6 ? UVTW_THREADPOOL : 0);
    ASSERT_UV_OK(uv_thread_create(&tid, lv_canceller, &lv[i]));
    lv_run();
    end = uv_hrtime();
    ASSERT_UV_OK(uv_thread_join(&tid));
    ASSERT_EQ(0, atomic_load(&lv[i].cancel_result));
    ASSERT_UGE(end, lv_cancel_at);
    ASSERT_ULT(end - lv_cancel_at, (uint64_t) 5000 * 1000 * 1000);
    ASSERT_EQ(0, atomic_load(&lv[i].runs));
    ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  }

  /* Submitted from another thread while the loop is not running, and
   * nothing else to do: uv_run does not wait for it.  A later run with
   * something to do drains it and runs it. */
  lv_submit(&lv[4], 0, 0, 0);
  ASSERT_UEQ(1, uvtw_wheel_pending(wheel));
  t0 = hr_ms();
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_ULT(hr_ms() - t0, 10 * 1000); /* generous: else it blocks */
  ASSERT_EQ(0, atomic_load(&lv[4].runs));
  lv_run();
  ASSERT_EQ(1, atomic_load(&lv[4].returned));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));

  uv_close((uv_handle_t*) &lv_timer, NULL);
  teardown();
  for (i = 0; i < 7; i++)
    ASSERT_EQ(0, atomic_load(&lv[i].finals));
}


/* ---- early_cancel_stats ------------------------------------------------- */

static void early_cancel_stats(void) {
  uvtw_stats_t st;
  task_t t;
  int i;

  setup(0);
  for (i = 0; i < 3; i++) {
    task_init(&t);
    submit(&t, 3600 * 1000, 0, 0);
    ASSERT_EQ(0, cancel(&t));
  }
  task_init(&t);
  submit(&t, 3600 * 1000, 0, 0);
  one_pass();
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(4, st.tasks_accepted);
  ASSERT_UEQ(3, st.tasks_cancelled);
  ASSERT_EQ(0, cancel(&t));
  run_until(pending_zero, 0);
  teardown();
}


/* ---- queue_memory, loop_pairs_memory ----------------------------------- */

/* Nodes in the wheel's table: it grows, and keeps its size. */
static uint64_t table_nodes(void) {
  uint64_t n;
  unsigned c;

  n = 0;
  for (c = 0; c < UVTW__CHUNKS; c++)
    if (atomic_load(&wheel->tasks.chunks[c]) != NULL)
      n += (uint64_t) UVTW__CHUNK0 << c;
  return n;
}


static int tm_pairs;
static int tm_crossed;


static void tm_noop(void* arg, int status) {
  (void) arg;
  (void) status;
  ASSERT(0); /* cancelled at once: never called */
}


/* Pairs in turn; or crossed, two submits then their two cancels, the
 * older first, so that half the cancelled tasks are not the newest entry
 * when the next submit comes. */
static void tm_worker(void* arg) {
  uvtw_id_t id[2];
  int i;

  (void) arg;
  for (i = 0; i < tm_pairs; i += 1 + tm_crossed) {
    ASSERT_EQ(0, uvtw_submit(wheel, 3600 * 1000, 0, 0, tm_noop, NULL, &id[0]));
    if (tm_crossed)
      ASSERT_EQ(0,
                uvtw_submit(wheel, 3600 * 1000, 0, 0, tm_noop, NULL, &id[1]));
    ASSERT_EQ(0, uvtw_cancel(wheel, id[0]));
    if (tm_crossed)
      ASSERT_EQ(0, uvtw_cancel(wheel, id[1]));
  }
}


static void tm_pairs_from(int from_loop) {
  uv_thread_t tid;

  if (from_loop) {
    tm_worker(NULL);
  } else {
    ASSERT_UV_OK(uv_thread_create(&tid, tm_worker, NULL));
    ASSERT_UV_OK(uv_thread_join(&tid));
  }
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
}


/* Entries in the queue, not yet taken by the loop (loop thread). */
static uint64_t queue_entries(void) {
  uvtw__task_t* node;
  uint64_t n;

  n = 0;
  for (node = atomic_load(&wheel->tasks.head); node != NULL;
       node = atomic_load(&node->next))
    n++;
  return n;
}


/* Bursts of pairs while the loop does not run.  In turn, each submit
 * takes over the node of the task cancelled just before, the newest
 * entry, so a burst leaves one entry; crossed, every other submit does,
 * so a burst leaves one entry per two pairs, and take-in frees them.
 * Either way the table grows with the first burst only. */
static void pairs_memory(int from_loop, int crossed) {
  uint64_t first;
  uint64_t later;
  int round;

  tm_pairs = scaled(100000);
  tm_crossed = crossed;
  setup(16);
  tm_pairs_from(from_loop);
  ASSERT_UEQ(crossed ? (uint64_t) tm_pairs / 2 + 1 : 1, queue_entries());
  first = table_nodes();
  for (round = 0; round < 3; round++) {
    /* Until the loop took in every entry (a batch per iteration). */
    while (atomic_load(&wheel->tasks.head) != NULL || wheel->tasks.inbox)
      one_pass();
    ASSERT_EQ(0, uvtw__tasks_check(wheel, stderr, 1));
    tm_pairs_from(from_loop);
  }
  later = table_nodes();
  fprintf(stderr,
          "max_tasks 16, 4 bursts of %d submit+cancel pairs%s from the %s "
          "thread: %llu nodes (%llu KiB) after the first, %llu after all\n",
          tm_pairs, crossed ? " (crossed)" : "", from_loop ? "loop" : "another",
          (unsigned long long) first,
          (unsigned long long) (first * sizeof(uvtw__task_t) / 1024),
          (unsigned long long) later);
  teardown();
  ASSERT_UEQ(first, later);
}


static void queue_memory(void) {
  pairs_memory(0, 0);
}


static void loop_pairs_memory(void) {
  pairs_memory(1, 0);
}


static void crossed_memory(void) {
  pairs_memory(0, 1);
}


/* ---- table_in_use ------------------------------------------------------- */

/* Nodes the table has set up (given a generation), so touched. */
static uint64_t table_set_up(void) {
  uvtw__task_t* node;
  uint64_t total;
  uint64_t n;
  uint64_t i;

  n = 0;
  total = table_nodes();
  for (i = 0; i < total; i++) {
    node = uvtw__node_at(&wheel->tasks, i);
    n += UVTW__GEN(atomic_load(&node->state)) != 0;
  }
  return n;
}


static void late_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(UV_ECANCELED, status); /* 1 h away: only close ends them */
}


static void table_in_use(void) {
  uvtw_id_t id;
  uint64_t set_up;
  uint64_t total;
  uint64_t n;
  uint64_t i;

  n = 10000; /* chunks 0 to 4 hold 7,936: 2,064 in chunk 5's first step */
  setup(0);
  for (i = 0; i < n; i++)
    ASSERT_EQ(0, uvtw_submit(wheel, 3600 * 1000, 0, 0, late_cb, NULL, &id));
  set_up = table_set_up();
  total = table_nodes();
  fprintf(stderr, "%llu live tasks: %llu nodes in use, %llu in the table\n",
          (unsigned long long) n, (unsigned long long) set_up,
          (unsigned long long) total);
  teardown();
  ASSERT(set_up >= n);
  ASSERT(set_up < n + UVTW__GROW_STEP);
  ASSERT(set_up < total); /* the newest chunk is not all touched */
}


/* ---- worn_index --------------------------------------------------------- */

static void worn_index(void) {
  uvtw__task_t* node;
  task_t t;
  task_t u;
  int i;

  setup(0);
  /* Index 0 is the first popped; it ends and is freed by the loop. */
  task_init(&t);
  submit(&t, 3600 * 1000, 0, 0);
  ASSERT_UEQ(0, UVTW__ID_INDEX(t.id));
  ASSERT_EQ(0, cancel(&t));
  node = uvtw__node_at(&wheel->tasks, 0);
  while (UVTW__STATE(uvtw__task_word(node)) != UVTW__T_FREE)
    one_pass();
  /* As UVTW__GEN_MASK - 1 uses of it would: its last generation. */
  atomic_store(&node->state,
               UVTW__GEN_MASK << UVTW__W_GEN_SHIFT | UVTW__T_FREE);
  task_init(&t);
  submit(&t, 3600 * 1000, 0, 0);
  ASSERT_UEQ(0, UVTW__ID_INDEX(t.id));
  ASSERT_UEQ(UVTW__GEN_MASK, t.id & UVTW__GEN_MASK);
  ASSERT_EQ(0, cancel(&t));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, t.id));
  one_pass();
  one_pass();
  for (i = 0; i < 1000; i++) {
    task_init(&u);
    submit(&u, 3600 * 1000, 0, 0);
    ASSERT(UVTW__ID_INDEX(u.id) != 0);
    ASSERT_EQ(0, cancel(&u));
    if (i % 100 == 0)
      one_pass();
  }
  /* The retired node keeps its ended word: its last id names nothing. */
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, t.id));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, t.id, 1));
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(bad_input),
  TEST_CASE(max_tasks),
  TEST_CASE(huge_delay),
  TEST_CASE(zero_delay),
  TEST_CASE(after_close),
  TEST_CASE(repeat_loop),
  TEST_CASE(repeat_pool),
  TEST_CASE(repeat_pool_overrun),
  TEST_CASE(busy_place),
  TEST_CASE(cancel_frees),
  TEST_CASE(liveness),
  TEST_CASE(early_cancel_stats),
  TEST_CASE(queue_memory),
  TEST_CASE(loop_pairs_memory),
  TEST_CASE(crossed_memory),
  TEST_CASE(table_in_use),
  TEST_CASE(worn_index),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
