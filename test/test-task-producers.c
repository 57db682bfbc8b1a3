/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: many producer threads, threads that exit, wheels
 * that come and go, and the live count read from other threads.  Cases:
 *
 *   exited_threads   8 threads submit (due now, in 20 ms, in 1 h) and exit
 *                    before the loop runs; another thread cancels half of
 *                    the 1 h tasks.  Every task ends exactly once (run,
 *                    cancel or final call), the counts and the stats agree,
 *                    and threads started later submit and cancel as well.
 *   many_wheels      one thread submits to 6 wheels on one loop, round
 *                    robin, all due at the same moment: on each wheel they
 *                    run in submission order, and none runs on another
 *                    wheel.
 *   reused_address   a thread used wheel A, which closes and is freed;
 *                    wheels are created until one lands at A's address
 *                    (malloc reuses it at once here); the thread's submit
 *                    to it must run there (ASan: nothing of A is used).
 *   foreign_cancel   while the loop is blocked, a thread submits tasks and
 *                    another thread cancels them, before the loop took them
 *                    in (the loop frees the node when it takes it in) and
 *                    after (a notice through the queue).  None runs;
 *                    pending is 0.
 *   blocks           while the loop is blocked, one thread submits 2,000
 *                    tasks due at the same moment and cancels every third
 *                    one; the rest run once, in submission order, and the
 *                    cancelled never.
 *   cancel_vs_take   4 producers submit tasks due now and cancel each at
 *                    once, a moment later, or from the next producer, while
 *                    the loop takes them in: 0 means it never ran, UV_EBUSY
 *                    or UV_ENOENT that it ran exactly once; nothing lost,
 *                    pending 0, stats agree (ASan, TSan).
 *   fair_drain       a task submitted from another thread is taken in
 *                    in submission order however busy other threads are:
 *                    thread P2 submits X (delay 0) first and stays alive;
 *                    then, before each of 10 loop iterations, thread P1
 *                    queues 1,000 more far-off tasks than one poll phase
 *                    takes in (UVTW__DRAIN_BATCH).  X must have run after
 *                    the 10 iterations, 2 ms apart.
 *   detached_threads detached threads submit and exit; later detached
 *                    threads (which may reuse an exited thread's stack and
 *                    id) submit and cancel.  Everything runs once; under
 *                    TSan, no report.
 *   pending_snapshot uvtw_wheel_pending from another thread while a new
 *                    thread's first task is submitted and ends: task Z is
 *                    live throughout, so the count is never 0.
 *   pending_churn    one thread submits a never-due task and cancels it,
 *                    in a loop (at most one task live, no timer), while
 *                    another reads uvtw_wheel_pending for 300 ms: never
 *                    more than 1 (uvtw.h: exact), with max_tasks 0 and 1.
 *                    The loop takes the queue in meanwhile, so submits
 *                    that take a cancelled task's node over race its
 *                    take-in: once the queue is taken in, the stats count
 *                    every pair, and the quiescent check finds no node
 *                    left marked for the queue. */

#include <pthread.h>

#include "internal.h"
#include "task-harness.h"
#include "test-cases.h"

static int stats_agree(uint64_t accepted,
                       uint64_t runs,
                       uint64_t cancels,
                       uint64_t finals) {
  uvtw_stats_t st;

  uvtw_wheel_stats(wheel, &st);
  if (st.tasks_accepted != accepted || st.tasks_run != runs ||
      st.tasks_cancelled != cancels || st.tasks_closed != finals ||
      st.tasks_live != 0)
    fprintf(stderr,
            "stats: accepted %llu/%llu run %llu/%llu cancelled %llu/%llu "
            "closed %llu/%llu live %llu\n",
            (unsigned long long) st.tasks_accepted,
            (unsigned long long) accepted, (unsigned long long) st.tasks_run,
            (unsigned long long) runs, (unsigned long long) st.tasks_cancelled,
            (unsigned long long) cancels, (unsigned long long) st.tasks_closed,
            (unsigned long long) finals, (unsigned long long) st.tasks_live);
  return st.tasks_accepted == accepted && st.tasks_run == runs &&
         st.tasks_cancelled == cancels && st.tasks_closed == finals &&
         st.tasks_live == 0;
}


/* ---- exited-threads ---------------------------------------------------- */

#define NEXIT 8
#define PER_EXIT 30 /* 10 due now, 10 in 20 ms, 10 in 1 h */

static task_t ex_tasks[2 * NEXIT][PER_EXIT];


static void exit_submitter(void* arg) {
  task_t* t;
  int i;

  t = arg;
  for (i = 0; i < PER_EXIT; i++) {
    task_init(&t[i]);
    submit(&t[i], i < 10 ? 0 : i < 20 ? 20 : 3600 * 1000, 0, 0);
  }
}


/* Cancels the 1 h tasks of the even-numbered threads of a round. */
static void exit_canceller(void* arg) {
  int round;
  int k;
  int i;

  round = *(int*) arg;
  for (k = round * NEXIT; k < (round + 1) * NEXIT; k += 2)
    for (i = 20; i < PER_EXIT; i++)
      ASSERT_EQ(0, cancel(&ex_tasks[k][i]));
}


static int ex_round_done;


static int ex_ran(void) {
  int k;
  int i;

  for (k = 0; k < (ex_round_done + 1) * NEXIT; k++)
    for (i = 0; i < 20; i++)
      if (atomic_load(&ex_tasks[k][i].returned) != 1)
        return 0;
  return 1;
}


static void exited_threads(void) {
  uv_thread_t tid[NEXIT];
  uv_thread_t canceller;
  uvtw_stats_t st;
  uint64_t live;
  int round;
  int finals;
  int k;
  int i;

  setup(0);
  for (round = 0; round < 2; round++) {
    /* The threads exit before the loop has seen any of their tasks. */
    for (k = 0; k < NEXIT; k++)
      ASSERT_UV_OK(uv_thread_create(&tid[k], exit_submitter,
                                    ex_tasks[round * NEXIT + k]));
    for (k = 0; k < NEXIT; k++)
      ASSERT_UV_OK(uv_thread_join(&tid[k]));
    /* This round's tasks, and the last round's odd threads' 1 h tasks. */
    ASSERT_UEQ((uint64_t) NEXIT * PER_EXIT + (uint64_t) round * NEXIT / 2 * 10,
               uvtw_wheel_pending(wheel));
    ASSERT_UV_OK(uv_thread_create(&canceller, exit_canceller, &round));
    ASSERT_UV_OK(uv_thread_join(&canceller));
    ex_round_done = round;
    run_until(ex_ran, 0);
    /* Left: the 1 h tasks of the odd-numbered threads of every round. */
    live = (uint64_t) (round + 1) * NEXIT / 2 * 10;
    ASSERT_UEQ(live, uvtw_wheel_pending(wheel));
    for (k = 0; k < (round + 1) * NEXIT; k++)
      for (i = 0; i < PER_EXIT; i++) {
        ASSERT_EQ(i < 20, atomic_load(&ex_tasks[k][i].runs));
        ASSERT_EQ(0, atomic_load(&ex_tasks[k][i].finals));
      }
  }
  run_for(5);
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(2 * NEXIT * PER_EXIT, st.tasks_accepted);
  ASSERT_UEQ(2 * NEXIT * 20, st.tasks_run);
  ASSERT_UEQ(NEXIT * 10, st.tasks_cancelled);
  ASSERT_UEQ(NEXIT * 10, st.tasks_live);
  teardown();
  finals = 0;
  for (k = 0; k < 2 * NEXIT; k++)
    for (i = 20; i < PER_EXIT; i++) {
      finals += atomic_load(&ex_tasks[k][i].finals);
      ASSERT_EQ(k % 2, atomic_load(&ex_tasks[k][i].finals));
    }
  ASSERT_EQ(NEXIT * 10, finals);
}


/* ---- many-wheels ------------------------------------------------------- */

#define NWHEELS 6
#define PER_WHEEL 300

typedef struct {
  int wheel;
  int seq;
} mw_arg_t;

static uvtw_wheel_t* mw[NWHEELS];
static mw_arg_t mw_args[NWHEELS][PER_WHEEL];
static int mw_next[NWHEELS];
static int mw_total;
static int mw_closed;


static void mw_cb(void* arg, int status) {
  mw_arg_t* a;

  a = arg;
  ASSERT_EQ(0, status);
  /* Due at the same moment, submitted by one thread: submission order. */
  ASSERT_EQ(mw_next[a->wheel], a->seq);
  mw_next[a->wheel]++;
  mw_total++;
}


static void mw_submitter(void* arg) {
  int i;
  int k;

  (void) arg;
  for (i = 0; i < PER_WHEEL; i++)
    for (k = 0; k < NWHEELS; k++) {
      mw_args[k][i].wheel = k;
      mw_args[k][i].seq = i;
      ASSERT_EQ(0, uvtw_submit(mw[k], 50, 0, 0, mw_cb, &mw_args[k][i], NULL));
    }
}


static int mw_all_ran(void) {
  return mw_total == NWHEELS * PER_WHEEL;
}


static void mw_close_cb(uvtw_wheel_t* w) {
  (void) w;
  mw_closed++;
}


static void many_wheels(void) {
  uv_thread_t tid;
  int k;

  setup(0);
  for (k = 0; k < NWHEELS; k++)
    ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &mw[k]));
  ASSERT_UV_OK(uv_thread_create(&tid, mw_submitter, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  for (k = 0; k < NWHEELS; k++)
    ASSERT_UEQ(PER_WHEEL, uvtw_wheel_pending(mw[k]));
  run_until(mw_all_ran, 0);
  for (k = 0; k < NWHEELS; k++) {
    ASSERT_EQ(PER_WHEEL, mw_next[k]);
    ASSERT_UEQ(0, uvtw_wheel_pending(mw[k]));
    ASSERT_EQ(0, uvtw_wheel_close(mw[k], mw_close_cb));
  }
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
  ASSERT_EQ(NWHEELS, mw_closed);
}


/* ---- reused-address ---------------------------------------------------- */

static uv_sem_t ra_go;
static uv_sem_t ra_done;
static uvtw_wheel_t* ra_target;
static task_t ra_task[2];
static int ra_step;
static int ra_closes;


static void ra_thread(void* arg) {
  (void) arg;
  /* Step 0: a task on wheel A.  Step 1: the wheel at A's address. */
  for (ra_step = 0; ra_step < 2; ra_step++) {
    uv_sem_wait(&ra_go);
    task_init(&ra_task[ra_step]);
    ASSERT_EQ(0, uvtw_submit(ra_target, 0, 0, 0, task_cb, &ra_task[ra_step],
                             &ra_task[ra_step].id));
    uv_sem_post(&ra_done);
  }
}


static int ra_ran(void) {
  return atomic_load(&ra_task[1].returned) == 1;
}


static void ra_closed(uvtw_wheel_t* w) {
  (void) w;
  ra_closes++;
}


static void reused_address(void) {
  uvtw_wheel_t* old;
  uvtw_wheel_t* spare[8];
  uv_thread_t tid;
  int nspare;
  int owned;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&ra_go, 0));
  ASSERT_UV_OK(uv_sem_init(&ra_done, 0));
  ASSERT_UV_OK(uv_thread_create(&tid, ra_thread, NULL));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &ra_target));
  old = ra_target;
  uv_sem_post(&ra_go);
  uv_sem_wait(&ra_done);
  /* A closes with the thread's task live (its final call comes) and is
   * freed. */
  ASSERT_EQ(0, uvtw_wheel_close(ra_target, ra_closed));
  while (ra_closes == 0)
    one_pass();
  ASSERT_EQ(1, atomic_load(&ra_task[0].finals));
  ASSERT_EQ(0, atomic_load(&ra_task[0].runs));
  /* New wheels until one lands where A was. */
  for (nspare = 0; nspare < 8; nspare++) {
    ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &ra_target));
    if (ra_target == old)
      break;
    spare[nspare] = ra_target;
  }
  printf(
      "reused-address: a new wheel at the freed wheel's address after "
      "%d other wheels\n",
      nspare);
  if (nspare == 8)
    ra_target = spare[--nspare]; /* still a fresh wheel for the thread */
  uv_sem_post(&ra_go);
  uv_sem_wait(&ra_done);
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_until(ra_ran, 0);
  ASSERT_EQ(1, atomic_load(&ra_task[1].runs));
  ra_closes = 0;
  ASSERT_EQ(0, uvtw_wheel_close(ra_target, ra_closed));
  owned = nspare + 1;
  while (nspare > 0)
    ASSERT_EQ(0, uvtw_wheel_close(spare[--nspare], ra_closed));
  while (ra_closes != owned)
    one_pass();
  teardown();
  uv_sem_destroy(&ra_go);
  uv_sem_destroy(&ra_done);
}


/* ---- foreign-cancel ---------------------------------------------------- */

#define NFOREIGN 1500 /* about 3 blocks of the producer's queue */

static task_t fc_tasks[NFOREIGN];


static void fc_submitter(void* arg) {
  int i;

  (void) arg;
  for (i = 0; i < NFOREIGN; i++) {
    task_init(&fc_tasks[i]);
    submit(&fc_tasks[i], i % 2 ? 0 : 3600 * 1000, 0, 0);
  }
}


static void fc_canceller(void* arg) {
  int from;
  int i;

  from = *(int*) arg;
  for (i = from; i < NFOREIGN; i += 2)
    ASSERT_EQ(0, cancel(&fc_tasks[i]));
}


static void foreign_cancel(void) {
  uv_thread_t tid;
  uvtw_stats_t st;
  int from;
  int i;

  setup(0);
  /* The loop does not run: every task is still in the producer's queue
   * when the other thread cancels the ones due now. */
  ASSERT_UV_OK(uv_thread_create(&tid, fc_submitter, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(NFOREIGN, uvtw_wheel_pending(wheel));
  from = 1;
  ASSERT_UV_OK(uv_thread_create(&tid, fc_canceller, &from));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(NFOREIGN / 2, uvtw_wheel_pending(wheel));
  /* The loop takes in the 1 h tasks; then the other thread cancels them:
   * notices through the queue. */
  run_for(20);
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(NFOREIGN, st.tasks_accepted);
  ASSERT_UEQ(NFOREIGN / 2, st.tasks_cancelled);
  ASSERT_UEQ(NFOREIGN / 2, uvtw__tasks_filed(wheel));
  from = 0;
  ASSERT_UV_OK(uv_thread_create(&tid, fc_canceller, &from));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  run_for(20);
  ASSERT_UEQ(0, uvtw__tasks_filed(wheel));
  for (i = 0; i < NFOREIGN; i++) {
    ASSERT_EQ(0, atomic_load(&fc_tasks[i].runs));
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, fc_tasks[i].id));
  }
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(NFOREIGN, st.tasks_cancelled);
  ASSERT_UEQ(0, st.tasks_run);
  teardown();
  for (i = 0; i < NFOREIGN; i++)
    ASSERT_EQ(0, atomic_load(&fc_tasks[i].finals));
}


/* ---- blocks ------------------------------------------------------------- */

#define NBLOCKS 2000

static int bl_order[NBLOCKS];
static int bl_ran;
static int bl_seq[NBLOCKS];
static uvtw_id_t bl_ids[NBLOCKS];


static void bl_cb(void* arg, int status) {
  ASSERT_EQ(0, status);
  bl_order[bl_ran++] = *(int*) arg;
}


static void bl_thread(void* arg) {
  int i;

  (void) arg;
  for (i = 0; i < NBLOCKS; i++) {
    bl_seq[i] = i;
    ASSERT_EQ(0, uvtw_submit(wheel, 30, 0, 0, bl_cb, &bl_seq[i], &bl_ids[i]));
  }
  /* Every third, oldest first: in full blocks and in the one being filled. */
  for (i = 0; i < NBLOCKS; i += 3)
    ASSERT_EQ(0, uvtw_cancel(wheel, bl_ids[i]));
}


static int bl_done(void) {
  return uvtw_wheel_pending(wheel) == 0;
}


static void blocks(void) {
  uv_thread_t tid;
  int expect;
  int n;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_thread_create(&tid, bl_thread, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_until(bl_done, 0);
  n = 0;
  for (i = 0; i < NBLOCKS; i++) {
    if (i % 3 == 0)
      continue;
    expect = i;
    ASSERT_EQ(expect, bl_order[n]);
    n++;
  }
  ASSERT_EQ(n, bl_ran);
  teardown();
}


/* ---- cancel-vs-take ---------------------------------------------------- */

#define NPROD 4

static task_t* cv_tasks[NPROD];
static _Atomic uvtw_id_t* cv_ids[NPROD]; /* published after each submit */
static int cv_n;
static atomic_int cv_finished;


/* Cancels task i of producer p from another thread. */
static void cv_cancel_other(int p, int i) {
  uvtw_id_t id;
  task_t* t;
  int runs_before;
  int r;

  t = &cv_tasks[p][i];
  while ((id = atomic_load(&cv_ids[p][i])) == 0)
    uv_sleep(0);
  runs_before = atomic_load(&t->runs);
  r = uvtw_cancel(wheel, id);
  note_cancel(t, runs_before, r);
  atomic_store(&t->cancel_result, r);
}


static void cv_producer(void* arg) {
  task_t* mine;
  int p;
  int i;
  int k;

  p = (int) (intptr_t) arg;
  mine = cv_tasks[p];
  for (i = 0; i < cv_n; i++) {
    task_init(&mine[i]);
    submit(&mine[i], 0, 0, 0);
    atomic_store(&cv_ids[p][i], mine[i].id);
    switch (i % 4) {
    case 1:
      cancel(&mine[i]); /* at once: usually taken back */
      break;
    case 2:
      for (k = 0; k < (i & 63); k++)
        __asm__ volatile("" ::: "memory");
      cancel(&mine[i]); /* a moment later: racing the loop's take */
      break;
    default:
      break; /* 0: the next producer cancels it; 3: runs */
    }
    /* Kind 0 of the previous producer, which submitted it before it got
     * to its own cancels of round i - 1. */
    if (i > 0 && (i - 1) % 4 == 0)
      cv_cancel_other((p + NPROD - 1) % NPROD, i - 1);
  }
  atomic_fetch_add(&cv_finished, 1);
}


static int cv_done(void) {
  return atomic_load(&cv_finished) == NPROD && uvtw_wheel_pending(wheel) == 0;
}


static void cancel_vs_take(void) {
  uv_thread_t tid[NPROD];
  uint64_t runs;
  uint64_t cancels;
  int p;
  int i;
  int r;

  cv_n = scale_n(20000, 8);
  cv_n -= cv_n % 4;
  setup(0);
  for (p = 0; p < NPROD; p++) {
    cv_tasks[p] = calloc((size_t) cv_n, sizeof(task_t));
    cv_ids[p] = calloc((size_t) cv_n, sizeof(cv_ids[p][0]));
    ASSERT(cv_tasks[p] != NULL && cv_ids[p] != NULL);
  }
  atomic_store(&cv_finished, 0);
  for (p = 0; p < NPROD; p++)
    ASSERT_UV_OK(uv_thread_create(&tid[p], cv_producer, (void*) (intptr_t) p));
  run_until(cv_done, 1);
  for (p = 0; p < NPROD; p++)
    ASSERT_UV_OK(uv_thread_join(&tid[p]));
  runs = 0;
  cancels = 0;
  for (p = 0; p < NPROD; p++)
    for (i = 0; i < cv_n; i++) {
      task_t* t = &cv_tasks[p][i];

      r = atomic_load(&t->cancel_result);
      ASSERT_EQ(0, atomic_load(&t->finals));
      if (i % 4 == 3) {
        ASSERT_EQ(1, atomic_load(&t->runs)); /* never cancelled */
      } else if (r == 0) {
        ASSERT_EQ(0, atomic_load(&t->runs));
        cancels++;
        continue;
      } else {
        ASSERT(r == UV_EBUSY || r == UV_ENOENT);
        ASSERT_EQ(1, atomic_load(&t->runs));
        if (r == UV_EBUSY)
          cancels++; /* "ended by a cancel (0 or UV_EBUSY)" */
      }
      runs++;
    }
  printf("cancel-vs-take: %d tasks, %llu ran, %llu cancelled\n", NPROD * cv_n,
         (unsigned long long) runs, (unsigned long long) cancels);
  ASSERT(stats_agree((uint64_t) NPROD * cv_n, runs, cancels, 0));
  teardown();
  for (p = 0; p < NPROD; p++) {
    free(cv_tasks[p]);
    free((void*) cv_ids[p]);
  }
}


/* ---- fair_drain --------------------------------------------------------- */

#define SR_ROUNDS 10
/* More than one async callback takes in. */
#define SR_PER_ROUND (UVTW__DRAIN_BATCH + 1000)

static task_t sr_x;
static uv_sem_t sr_go;
static uv_sem_t sr_done;
static atomic_int sr_stop;
static atomic_int sr_far_finals;


static void sr_far_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(UV_ECANCELED, status); /* an hour away: only the final call */
  atomic_fetch_add(&sr_far_finals, 1);
}


static uv_sem_t sr_submitted;
static uv_sem_t sr_exit;


/* Stays alive until the end: X's producer is another thread than P1. */
static void sr_early(void* arg) {
  (void) arg;
  submit(&sr_x, 0, 0, 0);
  uv_sem_post(&sr_submitted);
  uv_sem_wait(&sr_exit);
}


static void sr_flooder(void* arg) {
  int i;

  (void) arg;
  for (;;) {
    uv_sem_wait(&sr_go);
    if (atomic_load(&sr_stop))
      return;
    for (i = 0; i < SR_PER_ROUND; i++)
      ASSERT_EQ(0,
                uvtw_submit(wheel, 3600 * 1000, 0, 0, sr_far_cb, NULL, NULL));
    uv_sem_post(&sr_done);
  }
}


static int sr_x_ran(void) {
  return atomic_load(&sr_x.returned) == 1;
}


static void fair_drain(void) {
  uv_thread_t p1;
  uv_thread_t p2;
  uvtw_stats_t st;
  int runs;
  int k;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&sr_go, 0));
  ASSERT_UV_OK(uv_sem_init(&sr_done, 0));
  ASSERT_UV_OK(uv_sem_init(&sr_submitted, 0));
  ASSERT_UV_OK(uv_sem_init(&sr_exit, 0));
  atomic_store(&sr_stop, 0);
  atomic_store(&sr_far_finals, 0);
  task_init(&sr_x);
  /* P2 submits X first. */
  ASSERT_UV_OK(uv_thread_create(&p2, sr_early, NULL));
  uv_sem_wait(&sr_submitted);
  ASSERT_UV_OK(uv_thread_create(&p1, sr_flooder, NULL));
  for (k = 0; k < SR_ROUNDS; k++) {
    uv_sem_post(&sr_go);
    uv_sem_wait(&sr_done);
    uv_sleep(2); /* X is due by the next iteration's timers phase */
    one_pass();
  }
  runs = atomic_load(&sr_x.runs);
  uvtw_wheel_stats(wheel, &st);
  fprintf(stderr,
          "after %d iterations: X runs %d; tasks taken in %llu, of P1's %d "
          "(all submitted after X)\n",
          SR_ROUNDS, runs, (unsigned long long) st.tasks_accepted,
          SR_ROUNDS * SR_PER_ROUND);
  atomic_store(&sr_stop, 1);
  uv_sem_post(&sr_go);
  ASSERT_UV_OK(uv_thread_join(&p1));
  uv_sem_post(&sr_exit);
  ASSERT_UV_OK(uv_thread_join(&p2));
  run_until(sr_x_ran, 0); /* P1 stopped: the backlog drains, X runs */
  teardown();
  ASSERT_EQ(SR_ROUNDS * SR_PER_ROUND, atomic_load(&sr_far_finals));
  uv_sem_destroy(&sr_go);
  uv_sem_destroy(&sr_done);
  uv_sem_destroy(&sr_submitted);
  uv_sem_destroy(&sr_exit);
  ASSERT_EQ(1, runs);
}


/* ---- detached_threads --------------------------------------------------- */

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


static void detached_threads(void) {
  pthread_attr_t attr;
  pthread_t tid;
  int k;

  setup(0);
  ASSERT_EQ(0, pthread_attr_init(&attr));
  ASSERT_EQ(0, pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED));
  for (de_round = 0; de_round < DE_ROUNDS; de_round++) {
    for (k = 0; k < DE_THREADS; k++)
      ASSERT_EQ(0,
                pthread_create(&tid, &attr, de_thread, de_tasks[de_round][k]));
    run_until(de_all_ran, 0);
    /* Give the detached threads time to exit before the next round, so
     * that the next round's threads may reuse their stacks. */
    uv_sleep(20);
  }
  ASSERT_EQ(0, pthread_attr_destroy(&attr));
  run_until(pending_zero, 0);
  teardown();
}


/* ---- pending_snapshot --------------------------------------------------- */

/* Read by the debugger script: the reader is inside uvtw_wheel_pending. */
volatile int pending_reader_armed;
static size_t ls_seen;
static task_t ls_z;
static task_t ls_x;


static void ls_reader(void* arg) {
  (void) arg;
  pending_reader_armed = 1;
  ls_seen = uvtw_wheel_pending(wheel);
  pending_reader_armed = 0;
}


static void ls_producer(void* arg) {
  (void) arg;
  task_init(&ls_x);
  submit(&ls_x, 0, 0, 0);
}


static int ls_x_ran(void) {
  return atomic_load(&ls_x.returned) == 1;
}


static void pending_snapshot(void) {
  uv_thread_t reader;
  uv_thread_t producer;

  setup(0);
  task_init(&ls_z);
  submit(&ls_z, 3600 * 1000, 0, 0); /* live until the end */
  ASSERT_UV_OK(uv_thread_create(&reader, ls_reader, NULL));
  uv_sleep(300);
  /* A thread that never called into the wheel. */
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


/* ---- pending_churn ------------------------------------------------------ */

static void task_cb_ignore(void* arg, int status) {
  (void) arg;
  (void) status;
}


static atomic_int pc_stop;
static atomic_int pc_done;
static size_t pc_max;
static uint64_t pc_reads;
static uint64_t pc_pairs; /* the producer's; read after the join */


static void pc_producer(void* arg) {
  uvtw_id_t id;

  (void) arg;
  while (!atomic_load(&pc_stop))
    if (uvtw_submit(wheel, 3600 * 1000, 0, 0, task_cb_ignore, NULL, &id) == 0) {
      ASSERT_EQ(0, uvtw_cancel(wheel, id));
      pc_pairs++;
    }
}


static void pc_observer(void* arg) {
  uint64_t start;
  size_t p;

  (void) arg;
  start = uv_hrtime();
  while (uv_hrtime() - start < 300 * 1000000ull) {
    p = uvtw_wheel_pending(wheel);
    if (p > pc_max)
      pc_max = p;
    pc_reads++;
  }
  atomic_store(&pc_stop, 1);
  atomic_store(&pc_done, 1);
}


static int pc_finished(void) {
  return atomic_load(&pc_done);
}


static void churn_with(size_t max_tasks, size_t bound) {
  uv_thread_t producer;
  uv_thread_t observer;
  uvtw_stats_t stats;

  setup(max_tasks);
  atomic_store(&pc_stop, 0);
  atomic_store(&pc_done, 0);
  pc_max = 0;
  pc_reads = 0;
  pc_pairs = 0;
  ASSERT_UV_OK(uv_thread_create(&producer, pc_producer, NULL));
  ASSERT_UV_OK(uv_thread_create(&observer, pc_observer, NULL));
  run_until(pc_finished, 0);
  ASSERT_UV_OK(uv_thread_join(&observer));
  ASSERT_UV_OK(uv_thread_join(&producer));
  fprintf(stderr, "max_tasks %zu: pending read %llu times, max %zu\n",
          max_tasks, (unsigned long long) pc_reads, pc_max);
  run_until(pending_zero, 0);
  /* Each submit took over the node of the task cancelled before it, or
   * popped one, racing the loop's take-in: every task is counted once,
   * and nothing is left in, or marked for, the queue. */
  while (atomic_load(&wheel->tasks.head) != NULL || wheel->tasks.inbox)
    one_pass();
  uvtw_wheel_stats(wheel, &stats);
  ASSERT_EQ(0, uvtw__tasks_check(wheel, stderr, 1));
  teardown();
  ASSERT_LE((int64_t) pc_max, (int64_t) bound);
  ASSERT_UEQ(pc_pairs, stats.tasks_accepted);
  ASSERT_UEQ(pc_pairs, stats.tasks_cancelled);
}


static void pending_churn(void) {
  churn_with(0, 1);
  churn_with(1, 1);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(exited_threads),
  TEST_CASE(many_wheels),
  TEST_CASE(reused_address),
  TEST_CASE(foreign_cancel),
  TEST_CASE(blocks),
  TEST_CASE(cancel_vs_take),
  TEST_CASE(fair_drain),
  TEST_CASE(detached_threads),
  TEST_CASE(pending_snapshot),
  TEST_CASE(pending_churn),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
