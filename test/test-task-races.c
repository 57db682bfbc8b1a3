/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: races set up by construction, each with exactly one
 * allowed outcome.
 *
 *   same_pass        a loop task cancels a sibling due in the same pass
 *                    (0: it never runs), and one that already ran (ENOENT).
 *   at_deadline      another thread cancels tasks right around their
 *                    deadline: each ends exactly once (cancel 0 and no run,
 *                    or a run and EBUSY/ENOENT; ENOENT only after the run
 *                    returned).
 *   while_running    cancel from another thread while the callback blocks
 *                    on a semaphore: EBUSY, one run, no run after it, no
 *                    final call; loop and threadpool, one-shot and repeating.
 *                    A second cancel of the repeating one is ENOENT (it
 *                    ended by the first).
 *   many_cancellers  four threads cancel the same id at the same moment:
 *                    exactly one gets 0 (a waiting task) or UV_EBUSY (a
 *                    running repeating task), the others UV_ENOENT.
 *   arg_ownership    args are malloc()ed and freed by whoever ends the task:
 *                    the callback after its run or final call, the canceller
 *                    after a 0.  ASan sees any later use, LSan any task that
 *                    never ended.  Some ids are stored inside the arg that
 *                    the callback frees: stored before the task can run.
 *   before_drain     submit from a thread while the loop is not running,
 *                    cancel before the loop has seen it: 0, the place and
 *                    the pending count come back at once, it never runs.
 *   self_cancel      cancel from inside the task's own callback: a one-shot
 *                    gets ENOENT; a repeating task gets 0 and never runs
 *                    again; the id was stored before the task could run.
 *   id_zero          uvtw_cancel(wheel, 0) is UV_ENOENT.
 *   pool_queued      with the 4-thread pool full of blocked runs, tasks due
 *                    on the pool wait in its queue: a cancel from another
 *                    thread returns 0 (not running), frees the place at
 *                    once, and they never run once the pool frees up.
 *   chain            callbacks submit the next task from the loop thread
 *                    and from pool threads; every link runs once and the
 *                    id is stored before the task can run.
 *   stale_ids        with max_tasks = 1 the wheel reuses its place
 *                    thousands of times; every stale id, old or recent,
 *                    returns ENOENT and never cancels the live task.
 *   exactly_once_endings  every race at once: two producer threads submit
 *                    loop and threadpool tasks, one-shot and repeating
 *                    (some cancel themselves from their third run), two
 *                    other threads cancel them all over and over, and the
 *                    loop closes the wheel while the cancellers still run
 *                    (its close callback joins them).  Every task ends
 *                    exactly once: by its run, by exactly one cancel that
 *                    returned 0 or UV_EBUSY (its own included), or by its
 *                    final call.
 *
 * Every scenario ends with the wheel closed and uv_loop_close() == 0.
 * UVTW_TEST_SCALE (a percentage, default 100) scales the iteration counts;
 * under TSan they are divided by 4. */

#include "task-harness.h"
#include "test-cases.h"

#define MAX_DEADLINE_TASKS 4000


/* ---- same_pass ---------------------------------------------------------- */

static task_t sp[6];


static int same_pass_done(void) {
  int r;

  if (atomic_load(&sp[0].returned) != 1 || atomic_load(&sp[2].returned) != 1)
    return 0;
  if (atomic_load(&sp[3].returned) != 1)
    return 0;
  r = atomic_load(&sp[3].victim_result);
  /* The threadpool victim either never runs or has run. */
  return r == 0 || atomic_load(&sp[4].returned) == 1;
}


static void same_pass(void) {
  int i;
  int r;

  setup(0);
  for (i = 0; i < 6; i++)
    task_init(&sp[i]);
  /* sp[0] cancels sp[1], due at the same moment and received after it: it
   * runs later in the same pass (or in a later one), so the cancel wins.
   * sp[2] then cancels sp[0], which has already run. */
  sp[0].victim = &sp[1];
  sp[2].victim = &sp[0];
  sp[3].victim = &sp[4]; /* a threadpool task due with it */
  submit(&sp[0], 5, 0, 0);
  submit(&sp[1], 5, 0, 0);
  submit(&sp[2], 5, 0, 0);
  submit(&sp[3], 5, 0, 0);
  submit(&sp[4], 5, 0, UVTW_THREADPOOL);
  submit(&sp[5], 5, 7, 0); /* a repeating task due in the same pass */
  ASSERT_UEQ(6, uvtw_wheel_pending(wheel));
  uv_sleep(20); /* all of them are overdue when the loop first runs */
  run_until(same_pass_done, 0);

  ASSERT_EQ(1, atomic_load(&sp[0].runs));
  ASSERT_EQ(0, atomic_load(&sp[0].victim_result));
  ASSERT_EQ(0, atomic_load(&sp[1].runs));
  ASSERT_EQ(1, atomic_load(&sp[2].runs));
  ASSERT_EQ(UV_ENOENT, atomic_load(&sp[2].victim_result));
  r = atomic_load(&sp[3].victim_result);
  if (r == 0)
    ASSERT_EQ(0, atomic_load(&sp[4].runs));
  else if (r == UV_EBUSY || r == UV_ENOENT)
    ASSERT_EQ(1, atomic_load(&sp[4].runs));
  else
    ASSERT(0 && "unexpected cancel result for the threadpool victim");
  /* One place left: the repeating task.  The cancelled one is gone. */
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, sp[1].id));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, sp[0].id));
  ASSERT_EQ(0, cancel(&sp[5]));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
  ASSERT_EQ(0, atomic_load(&sp[1].finals));
  for (i = 0; i < 6; i++)
    ASSERT_EQ(0, atomic_load(&sp[i].finals));
}


/* ---- at_deadline -------------------------------------------------------- */

static task_t dl[MAX_DEADLINE_TASKS];
static int dl_n;
static atomic_int dl_producer_done;


static void dl_producer(void* arg) {
  int i;
  uint64_t delay;
  uint64_t t0;
  uint64_t target;
  int64_t jitter;
  int r;

  (void) arg;
  for (i = 0; i < dl_n; i++) {
    delay = 1 + i % 3;
    t0 = uv_hrtime();
    submit(&dl[i], delay, 0, (i & 1) ? UVTW_THREADPOOL : 0);
    /* Aim between 1.5 ms before and 1.5 ms after the deadline. */
    jitter = (int64_t) ((i * 7919) % 3001) - 1500;
    target = t0 + delay * 1000 * 1000 + jitter * 1000;
    while (uv_hrtime() < target)
      ;
    r = cancel(&dl[i]);
    if (r == UV_ENOENT) /* only a one-shot that has run */
      ASSERT_EQ(1, atomic_load(&dl[i].returned));
    else if (r == 0)
      ASSERT_EQ(0, atomic_load(&dl[i].runs));
    else
      ASSERT_EQ(UV_EBUSY, r);
  }
  atomic_store(&dl_producer_done, 1);
}


static int at_deadline_done(void) {
  int i;
  int r;

  if (!atomic_load(&dl_producer_done))
    return 0;
  for (i = 0; i < dl_n; i++) {
    r = atomic_load(&dl[i].cancel_result);
    if (r != 0 && atomic_load(&dl[i].returned) != 1)
      return 0;
  }
  return 1;
}


static void at_deadline(void) {
  uv_thread_t tid;
  int i;
  int r;
  int n_cancelled;
  int n_busy;
  int n_ran;

  setup(0);
  dl_n = scaled(400);
  if (dl_n > MAX_DEADLINE_TASKS)
    dl_n = MAX_DEADLINE_TASKS;
  for (i = 0; i < dl_n; i++)
    task_init(&dl[i]);
  atomic_store(&dl_producer_done, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, dl_producer, NULL));
  run_until(at_deadline_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_for(20); /* a run after a successful cancel would show here */
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();

  n_cancelled = n_busy = n_ran = 0;
  for (i = 0; i < dl_n; i++) {
    r = atomic_load(&dl[i].cancel_result);
    ASSERT_EQ(0, atomic_load(&dl[i].finals));
    if (r == 0) {
      ASSERT_EQ(0, atomic_load(&dl[i].runs));
      n_cancelled++;
    } else {
      ASSERT(r == UV_EBUSY || r == UV_ENOENT);
      ASSERT_EQ(1, atomic_load(&dl[i].runs));
      ASSERT_EQ(1, atomic_load(&dl[i].returned));
      if (r == UV_EBUSY)
        n_busy++;
      else
        n_ran++;
    }
  }
  printf("at_deadline: %d tasks: %d cancelled, %d busy, %d ran before\n", dl_n,
         n_cancelled, n_busy, n_ran);
}


/* ---- while_running ------------------------------------------------------ */

static task_t wr[4];
static uv_sem_t wr_started;
static uv_sem_t wr_go;
static atomic_int wr_done;


static void wr_thread(void* arg) {
  static const unsigned flags[4] = {UVTW_THREADPOOL, 0, UVTW_THREADPOOL, 0};
  int i;
  int r;

  (void) arg;
  for (i = 0; i < 4; i++) {
    task_init(&wr[i]);
    wr[i].started = &wr_started;
    wr[i].go = &wr_go;
    submit(&wr[i], 0, i < 2 ? 0 : 3, flags[i]);
    uv_sem_wait(&wr_started);
    ASSERT_EQ(1, atomic_load(&wr[i].runs));
    ASSERT_EQ(UV_EBUSY, cancel(&wr[i]));
    /* Still running.  A repeating task ended by that cancel (it ends
     * exactly once): the id is spent.  A one-shot ends by its run, which is
     * still executing: UV_EBUSY again, or UV_ENOENT. */
    r = uvtw_cancel(wheel, wr[i].id);
    if (i >= 2)
      ASSERT_EQ(UV_ENOENT, r);
    else
      ASSERT(r == UV_EBUSY || r == UV_ENOENT);
    uv_sem_post(&wr_go);
    /* A repeating task would run again after 3 ms: it must not. */
    uv_sleep(60);
    ASSERT_EQ(1, atomic_load(&wr[i].runs));
    ASSERT_EQ(1, atomic_load(&wr[i].returned));
  }
  atomic_store(&wr_done, 1);
}


static int wr_is_done(void) {
  return atomic_load(&wr_done);
}


static void while_running(void) {
  uv_thread_t tid;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&wr_started, 0));
  ASSERT_UV_OK(uv_sem_init(&wr_go, 0));
  atomic_store(&wr_done, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, wr_thread, NULL));
  run_until(wr_is_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_for(20);
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  for (i = 0; i < 4; i++) {
    ASSERT_EQ(1, atomic_load(&wr[i].runs));
    /* Ended: a one-shot by its run, a repeating one by the EBUSY cancel. */
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, wr[i].id));
  }
  teardown();
  for (i = 0; i < 4; i++)
    ASSERT_EQ(0, atomic_load(&wr[i].finals));
  uv_sem_destroy(&wr_started);
  uv_sem_destroy(&wr_go);
}


/* ---- many_cancellers ---------------------------------------------------- */

#define NCANCELLERS 4

static uv_barrier_t mc_barrier;
static task_t* mc_target;
static atomic_int mc_results[NCANCELLERS];
static atomic_int mc_stop;


static void mc_thread(void* arg) {
  int k;

  k = (int) (intptr_t) arg;
  for (;;) {
    uv_barrier_wait(&mc_barrier); /* a new target is ready, or stop */
    if (atomic_load(&mc_stop))
      break;
    atomic_store(&mc_results[k], uvtw_cancel(wheel, mc_target->id));
    uv_barrier_wait(&mc_barrier); /* all have cancelled */
  }
}


/* Runs one round against mc_target; returns how many got `winner`; the
 * others must have got UV_ENOENT. */
static int mc_round(int winner) {
  int n;
  int r;
  int k;

  uv_barrier_wait(&mc_barrier);
  uv_barrier_wait(&mc_barrier);
  n = 0;
  for (k = 0; k < NCANCELLERS; k++) {
    r = atomic_load(&mc_results[k]);
    if (r == winner)
      n++;
    else
      ASSERT_EQ(UV_ENOENT, r);
  }
  return n;
}


static task_t mc_run;
static uv_sem_t mc_started;
static uv_sem_t mc_go;


static int mc_run_started(void) {
  return atomic_load(&mc_run.runs) == 1;
}


static int mc_run_returned(void) {
  return atomic_load(&mc_run.returned) == 1 && uvtw_wheel_pending(wheel) == 0;
}


static void many_cancellers(void) {
  uv_thread_t tid[NCANCELLERS];
  task_t* tasks;
  int rounds;
  int i;
  int k;

  rounds = scaled(2000);
  tasks = calloc((size_t) rounds, sizeof(*tasks));
  ASSERT_PTR_NE(tasks, NULL);
  setup(0);
  ASSERT_UV_OK(uv_barrier_init(&mc_barrier, NCANCELLERS + 1));
  atomic_store(&mc_stop, 0);
  for (k = 0; k < NCANCELLERS; k++)
    ASSERT_UV_OK(uv_thread_create(&tid[k], mc_thread, (void*) (intptr_t) k));

  /* Waiting tasks (in the queue or in the wheel): exactly one 0. */
  for (i = 0; i < rounds; i++) {
    task_init(&tasks[i]);
    submit(&tasks[i], 3600 * 1000, (uint64_t) (i % 2) * 5,
           (i % 3 == 0) ? UVTW_THREADPOOL : 0);
    if (i % 2 == 0)
      one_pass(); /* half of them drained into the wheel first */
    mc_target = &tasks[i];
    ASSERT_EQ(1, mc_round(0));
    ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  }

  /* A running repeating threadpool task: exactly one UV_EBUSY. */
  ASSERT_UV_OK(uv_sem_init(&mc_started, 0));
  ASSERT_UV_OK(uv_sem_init(&mc_go, 0));
  for (i = 0; i < 20; i++) {
    task_init(&mc_run);
    mc_run.started = &mc_started;
    mc_run.go = &mc_go;
    submit(&mc_run, 0, 1, (i % 2) ? UVTW_THREADPOOL : 0);
    if (mc_run.flags & UVTW_THREADPOOL) {
      run_until(mc_run_started, 0);
      uv_sem_wait(&mc_started);
      mc_target = &mc_run;
      ASSERT_EQ(1, mc_round(UV_EBUSY));
      uv_sem_post(&mc_go);
      run_until(mc_run_returned, 0);
    } else {
      /* A loop task blocks the loop: cancel it from the threads while the
       * loop thread waits in its callback. */
      mc_run.started = NULL;
      mc_run.go = NULL;
      mc_run.hook = NULL;
      mc_target = &mc_run;
      ASSERT_EQ(1, mc_round(0));
      run_for(5);
    }
    ASSERT_EQ(mc_run.flags & UVTW_THREADPOOL ? 1 : 0,
              atomic_load(&mc_run.runs));
  }

  atomic_store(&mc_stop, 1);
  uv_barrier_wait(&mc_barrier);
  for (k = 0; k < NCANCELLERS; k++)
    ASSERT_UV_OK(uv_thread_join(&tid[k]));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
  for (i = 0; i < rounds; i++)
    ASSERT_EQ(0, atomic_load(&tasks[i].runs) + atomic_load(&tasks[i].finals));
  uv_barrier_destroy(&mc_barrier);
  uv_sem_destroy(&mc_started);
  uv_sem_destroy(&mc_go);
  free(tasks);
}


/* ---- arg_ownership ------------------------------------------------------ */

typedef struct {
  uint64_t repeat;
  atomic_int runs;
  uvtw_id_t id; /* where uvtw_submit stores the id, for some of them */
  int id_inside;
} owned_t;

static atomic_int own_ended;
static atomic_int own_submitted;
static int own_n;


static void owned_cb(void* arg, int status) {
  owned_t* o;

  o = arg;
  if (status == UV_ECANCELED) {
    free(o);
    atomic_fetch_add(&own_ended, 1);
    return;
  }
  ASSERT_EQ(0, status);
  if (o->id_inside)
    ASSERT_NE(0, o->id); /* stored before the task could run */
  atomic_fetch_add(&o->runs, 1);
  if (o->repeat == 0) {
    free(o); /* a one-shot's run is its end */
    atomic_fetch_add(&own_ended, 1);
  }
}


#define NOWNERS 2

static owned_t** own_deferred[NOWNERS]; /* EBUSY-cancelled repeating ones */
static int own_ndeferred[NOWNERS];


static void own_thread(void* arg) {
  uint64_t repeat;
  uint64_t seed;
  owned_t* o;
  uvtw_id_t id;
  int k;
  int r;
  int i;

  k = (int) (intptr_t) arg;
  seed = 0x1234567ull * (uint64_t) (k + 1);
  for (i = 0; i < own_n; i++) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    o = malloc(sizeof(*o));
    ASSERT_PTR_NE(o, NULL);
    /* Once submitted, o belongs to the task: use copies. */
    repeat = (seed % 5 == 0) ? 1 + seed % 3 : 0;
    o->repeat = repeat;
    atomic_init(&o->runs, 0);
    o->id = 0;
    /* Repeating ones are always cancelled (else they would get a final
     * call at close), one-shots half of the time, maybe after they ran.
     * The others get their id stored inside the arg, which their callback
     * frees: it must be stored before the task can run. */
    o->id_inside = repeat == 0 && (seed >> 16) % 2;
    if (o->id_inside) {
      ASSERT_EQ(0, uvtw_submit(wheel, seed % 7, 0,
                               (seed >> 8) % 2 ? UVTW_THREADPOOL : 0, owned_cb,
                               o, &o->id));
      continue;
    }
    ASSERT_EQ(0, uvtw_submit(wheel, seed % 7, repeat,
                             (seed >> 8) % 2 ? UVTW_THREADPOOL : 0, owned_cb, o,
                             &id));
    if ((seed >> 20) % 2)
      uv_sleep((unsigned) (seed >> 24) % 3);
    r = uvtw_cancel(wheel, id);
    if (r == 0) {
      free(o); /* arg is the caller's again */
      atomic_fetch_add(&own_ended, 1);
    } else if (repeat != 0) {
      /* Ended by this cancel, but its run is still executing: free it
       * once the loop is closed. */
      ASSERT_EQ(UV_EBUSY, r);
      own_deferred[k][own_ndeferred[k]++] = o;
      atomic_fetch_add(&own_ended, 1);
    } else {
      /* A one-shot that runs or ran: its callback frees it. */
      ASSERT(r == UV_EBUSY || r == UV_ENOENT);
    }
  }
  atomic_fetch_add(&own_submitted, 1);
}


static int own_done(void) {
  return atomic_load(&own_submitted) == NOWNERS &&
         atomic_load(&own_ended) == NOWNERS * own_n &&
         uvtw_wheel_pending(wheel) == 0;
}


static void arg_ownership(void) {
  uv_thread_t tid[NOWNERS];
  int k;
  int i;

  own_n = scaled(5000);
  atomic_store(&own_ended, 0);
  atomic_store(&own_submitted, 0);
  setup(0);
  for (k = 0; k < NOWNERS; k++) {
    own_deferred[k] = calloc((size_t) own_n, sizeof(owned_t*));
    ASSERT_PTR_NE(own_deferred[k], NULL);
    own_ndeferred[k] = 0;
    ASSERT_UV_OK(uv_thread_create(&tid[k], own_thread, (void*) (intptr_t) k));
  }
  run_until(own_done, 0);
  for (k = 0; k < NOWNERS; k++)
    ASSERT_UV_OK(uv_thread_join(&tid[k]));
  teardown();
  ASSERT_EQ(NOWNERS * own_n, atomic_load(&own_ended)); /* no final call */
  for (k = 0; k < NOWNERS; k++) {
    for (i = 0; i < own_ndeferred[k]; i++)
      free(own_deferred[k][i]);
    free(own_deferred[k]);
  }
}


/* ---- before_drain ------------------------------------------------------- */

static task_t bd[6];


static void bd_submitter(void* arg) {
  (void) arg;
  /* This thread cancels its own two before the loop runs at all. */
  submit(&bd[4], 0, 0, UVTW_THREADPOOL);
  ASSERT_EQ(0, cancel(&bd[4]));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, bd[4].id));
  submit(&bd[5], 0, 2, 0);
  ASSERT_EQ(0, cancel(&bd[5]));
  submit(&bd[0], 0, 0, 0);
  submit(&bd[1], 0, 0, UVTW_THREADPOOL);
  submit(&bd[2], 0, 1, 0);
  submit(&bd[3], 0, 1, UVTW_THREADPOOL);
}


static void before_drain(void) {
  uv_thread_t tid;
  task_t extra;
  int i;

  setup(4);
  for (i = 0; i < 6; i++)
    task_init(&bd[i]);
  task_init(&extra);
  ASSERT_UV_OK(uv_thread_create(&tid, bd_submitter, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(4, uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, task_cb, &extra, &extra.id));
  /* The loop has never run: these are all still in the queue. */
  for (i = 0; i < 4; i++) {
    ASSERT_EQ(0, cancel(&bd[i]));
    ASSERT_UEQ(3 - i, uvtw_wheel_pending(wheel));
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, bd[i].id));
  }
  /* The places came back at once. */
  submit(&extra, 3600 * 1000, 0, 0);
  ASSERT_UEQ(1, uvtw_wheel_pending(wheel));
  ASSERT_EQ(0, cancel(&extra));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  run_for(50);
  for (i = 0; i < 6; i++) {
    ASSERT_EQ(0, atomic_load(&bd[i].runs));
    ASSERT_EQ(0, atomic_load(&bd[i].finals));
  }
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
  for (i = 0; i < 6; i++)
    ASSERT_EQ(0, atomic_load(&bd[i].finals));
  ASSERT_EQ(0, atomic_load(&extra.runs) + atomic_load(&extra.finals));
}


/* ---- self_cancel -------------------------------------------------------- */

static task_t sc[4];
static atomic_int sc_submitted;


static void sc_submitter(void* arg) {
  (void) arg;
  /* Threadpool tasks from another thread: the callback reads t->id, which
   * uvtw_submit stores before the task can run. */
  submit(&sc[1], 0, 0, UVTW_THREADPOOL);
  submit(&sc[3], 1, 2, UVTW_THREADPOOL);
  atomic_store(&sc_submitted, 1);
}


static int sc_done(void) {
  return atomic_load(&sc_submitted) && atomic_load(&sc[0].returned) >= 1 &&
         atomic_load(&sc[1].returned) >= 1 &&
         atomic_load(&sc[2].returned) >= 3 && atomic_load(&sc[3].returned) >= 3;
}


static void self_cancel(void) {
  uv_thread_t tid;
  int i;

  setup(0);
  for (i = 0; i < 4; i++) {
    task_init(&sc[i]);
    sc[i].self_cancel_at = i < 2 ? 1 : 3;
  }
  atomic_store(&sc_submitted, 0);
  submit(&sc[0], 0, 0, 0);
  submit(&sc[2], 1, 2, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, sc_submitter, NULL));
  run_until(sc_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_for(40); /* the repeating ones would run again every 2 ms */

  ASSERT_EQ(UV_ENOENT, atomic_load(&sc[0].self_cancel_result));
  ASSERT_EQ(UV_ENOENT, atomic_load(&sc[1].self_cancel_result));
  ASSERT_EQ(0, atomic_load(&sc[2].self_cancel_result));
  ASSERT_EQ(0, atomic_load(&sc[3].self_cancel_result));
  ASSERT_EQ(1, atomic_load(&sc[0].runs));
  ASSERT_EQ(1, atomic_load(&sc[1].runs));
  ASSERT_EQ(3, atomic_load(&sc[2].runs));
  ASSERT_EQ(3, atomic_load(&sc[3].runs));
  for (i = 0; i < 4; i++)
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, sc[i].id));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  teardown();
  for (i = 0; i < 4; i++)
    ASSERT_EQ(0, atomic_load(&sc[i].finals));
}


/* ---- id_zero ------------------------------------------------------------ */

static void id_zero(void) {
  task_t t;

  setup(0);
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));
  task_init(&t);
  submit(&t, 3600 * 1000, 0, 0);
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));
  ASSERT_UEQ(1, uvtw_wheel_pending(wheel));
  ASSERT_EQ(0, cancel(&t));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));
  teardown();
  ASSERT_EQ(0, atomic_load(&t.runs) + atomic_load(&t.finals));
}


/* ---- pool_queued -------------------------------------------------------- */

static task_t pq_blk[4];
static task_t pq[3];
static uv_sem_t pq_started;
static uv_sem_t pq_go;


static int pq_blockers_started(void) {
  int i;

  for (i = 0; i < 4; i++)
    if (atomic_load(&pq_blk[i].runs) != 1)
      return 0;
  return 1;
}


static int pq_blockers_done(void) {
  int i;

  for (i = 0; i < 4; i++)
    if (atomic_load(&pq_blk[i].returned) != 1)
      return 0;
  return uvtw_wheel_pending(wheel) == 0;
}


static void pq_canceller(void* arg) {
  int i;

  (void) arg;
  for (i = 0; i < 3; i++) {
    ASSERT_EQ(0, atomic_load(&pq[i].runs));
    ASSERT_EQ(0, cancel(&pq[i]));
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, pq[i].id));
  }
}


static void pool_queued(void) {
  uv_thread_t tid;
  size_t before;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&pq_started, 0));
  ASSERT_UV_OK(uv_sem_init(&pq_go, 0));
  for (i = 0; i < 4; i++) {
    task_init(&pq_blk[i]);
    pq_blk[i].started = &pq_started;
    pq_blk[i].go = &pq_go;
    submit(&pq_blk[i], 0, 0, UVTW_THREADPOOL);
  }
  run_until(pq_blockers_started, 0);
  for (i = 0; i < 3; i++)
    task_init(&pq[i]);
  submit(&pq[0], 0, 0, UVTW_THREADPOOL);
  submit(&pq[1], 0, 1, UVTW_THREADPOOL);
  submit(&pq[2], 1, 0, UVTW_THREADPOOL);
  run_for(30); /* due: handed to the pool, queued behind the blockers */
  before = uvtw_wheel_pending(wheel);
  ASSERT_UGE(before, 3);
  ASSERT_UV_OK(uv_thread_create(&tid, pq_canceller, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(before - 3, uvtw_wheel_pending(wheel));
  for (i = 0; i < 4; i++)
    uv_sem_post(&pq_go);
  run_until(pq_blockers_done, 0);
  run_for(30);
  for (i = 0; i < 3; i++)
    ASSERT_EQ(0, atomic_load(&pq[i].runs));
  teardown();
  for (i = 0; i < 3; i++)
    ASSERT_EQ(0, atomic_load(&pq[i].finals));
  for (i = 0; i < 4; i++) {
    ASSERT_EQ(1, atomic_load(&pq_blk[i].runs));
    ASSERT_EQ(0, atomic_load(&pq_blk[i].finals));
  }
  uv_sem_destroy(&pq_started);
  uv_sem_destroy(&pq_go);
}


/* ---- chain -------------------------------------------------------------- */

#define MAX_CHAIN 2000

static task_t* ch;
static int ch_n;


static void chain_hook(task_t* t, int run) {
  task_t* next;
  int i;

  ASSERT_EQ(1, run);
  i = (int) (t - ch);
  /* t->id was stored before this run could start. */
  ASSERT_NE(0, t->id);
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, t->id)); /* own run: its end */
  if (i + 1 == ch_n)
    return;
  next = &ch[i + 1];
  next->hook = chain_hook;
  /* Alternate loop / pool, and delays 0 / 1. */
  submit(next, (uint64_t) ((i / 2) % 2), 0, (i % 2) ? 0 : UVTW_THREADPOOL);
}


static int chain_done(void) {
  return atomic_load(&ch[ch_n - 1].returned) == 1 &&
         uvtw_wheel_pending(wheel) == 0;
}


static void chain(void) {
  int i;

  ch_n = scaled(MAX_CHAIN);
  if (ch_n > MAX_CHAIN)
    ch_n = MAX_CHAIN;
  ch = calloc((size_t) ch_n, sizeof(*ch));
  ASSERT_PTR_NE(ch, NULL);
  for (i = 0; i < ch_n; i++)
    task_init(&ch[i]);
  /* A one-shot may hold its place until its run has returned and the loop
   * has seen that, so a link and its two predecessors may overlap. */
  setup(4);
  ch[0].hook = chain_hook;
  submit(&ch[0], 0, 0, 0);
  run_until(chain_done, 1);
  for (i = 0; i < ch_n; i++)
    ASSERT_EQ(1, atomic_load(&ch[i].runs));
  teardown();
  for (i = 0; i < ch_n; i++)
    ASSERT_EQ(0, atomic_load(&ch[i].finals));
  free(ch);
}


/* ---- stale_ids ---------------------------------------------------------- */

static task_t* st_cur;


static int st_ran(void) {
  return atomic_load(&st_cur->returned) == 1;
}


static uint64_t rng_state = 88172645463325252ull;


static uint64_t rng(void) {
  return test_xorshift64(&rng_state);
}


static void stale_ids(void) {
  task_t* tasks;
  task_t dummy;
  task_t* t;
  int n;
  int i;
  int k;
  int mode;
  int runs;

  n = scaled(20000);
  tasks = calloc((size_t) n, sizeof(*tasks));
  ASSERT_PTR_NE(tasks, NULL);
  setup(1);
  task_init(&dummy);
  runs = 0;
  for (i = 0; i < n; i++) {
    t = &tasks[i];
    task_init(t);
    mode = (int) (rng() % 4);
    submit(t, mode < 2 ? 3600 * 1000 : 0, 0, mode == 3 ? UVTW_THREADPOOL : 0);
    /* One place: it is taken. */
    ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, task_cb, &dummy, NULL));
    /* Stale ids: the previous few, the first, and random old ones. */
    for (k = 1; k <= 3 && k <= i; k++)
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, tasks[i - k].id));
    if (i > 0) {
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, tasks[0].id));
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, tasks[rng() % i].id));
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, tasks[rng() % i].id));
    }
    ASSERT_UEQ(1, uvtw_wheel_pending(wheel));
    if (mode < 2) {
      /* Still live after all those: cancel it for real. */
      ASSERT_EQ(0, cancel(t));
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, t->id));
      ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
      if (mode == 1)
        one_pass(); /* let the loop reclaim it */
    } else {
      runs++;
      st_cur = t;
      run_until(st_ran, 1);
      /* A one-shot frees its place when it runs; a threadpool run may
       * still be finishing on the loop thread, so wait for the count. */
      run_until(pending_zero, 1);
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, t->id));
    }
  }
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, tasks[n - 1].id));
  teardown();
  for (i = 0; i < n; i++) {
    t = &tasks[i];
    ASSERT_EQ(0, atomic_load(&t->finals));
    if (atomic_load(&t->cancel_result) == 0)
      ASSERT_EQ(0, atomic_load(&t->runs));
    else
      ASSERT_EQ(1, atomic_load(&t->runs));
  }
  ASSERT_EQ(0, atomic_load(&dummy.runs) + atomic_load(&dummy.finals));
  printf("stale_ids: %d submissions, %d runs\n", n, runs);
  free(tasks);
}


/* ---- exactly_once_endings ----------------------------------------------- */

#define ER_TASKS 400

static task_t er_tasks[ER_TASKS];
static atomic_int er_ends[ER_TASKS]; /* cancels that returned 0 or EBUSY */
static atomic_int er_published;      /* tasks whose id is stored */
static atomic_int er_stop;
static uv_thread_t er_cancellers[2];
static uv_timer_t er_close_timer;
static int er_n;


static void er_producer(void* arg) {
  task_t* t;
  unsigned flags;
  int first;
  int i;

  first = (int) (intptr_t) arg;
  for (i = first; i < er_n; i += 2) {
    t = &er_tasks[i];
    flags = i % 2 == 0 ? UVTW_THREADPOOL : 0;
    if (flags != 0 && i % 3 == 0)
      t->sleep_ms = 1; /* so that some cancels find it running */
    switch (i % 8 / 2) {
    case 0: /* repeating, cancels itself from its third run */
      t->self_cancel_at = 3;
      submit(t, (uint64_t) (i % 7), 1, flags);
      break;
    case 1: /* repeating, long period: live at close */
      submit(t, (uint64_t) (i % 5), 150, flags);
      break;
    case 2: /* one-shot, soon */
      submit(t, (uint64_t) (i % 9), 0, flags);
      break;
    default: /* one-shot, due after close */
      submit(t, 3600 * 1000, 0, flags);
      break;
    }
    /* Published: the cancellers read the id only after this. */
    while (atomic_load(&er_published) != i)
      uv_sleep(0);
    atomic_store(&er_published, i + 1);
  }
}


static void er_canceller(void* arg) {
  unsigned seed;
  int runs_before;
  int n;
  int i;
  int r;

  seed = (unsigned) (intptr_t) arg;
  while (!atomic_load(&er_stop)) {
    n = atomic_load(&er_published);
    for (i = 0; i < n && !atomic_load(&er_stop); i++) {
      seed = seed * 1103515245u + 12345u;
      if ((seed >> 16) % 512 != 0)
        continue;
      runs_before = atomic_load(&er_tasks[i].runs);
      r = uvtw_cancel(wheel, er_tasks[i].id);
      ASSERT(r == 0 || r == UV_EBUSY || r == UV_ENOENT);
      if (r != UV_ENOENT)
        ASSERT_EQ(0, atomic_fetch_add(&er_ends[i], 1));
      note_cancel(&er_tasks[i], runs_before, r);
    }
    uv_sleep(1);
  }
}


static void er_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wheel);
  /* Every call returns before this callback does. */
  atomic_store(&er_stop, 1);
  ASSERT_UV_OK(uv_thread_join(&er_cancellers[0]));
  ASSERT_UV_OK(uv_thread_join(&er_cancellers[1]));
  atomic_fetch_add(&close_cb_called, 1);
}


static void er_close_now(uv_timer_t* handle) {
  /* Every task is submitted first: a submit that close refused would end
   * nothing (a loaded machine may run the producers late). */
  if (atomic_load(&er_published) != er_n) {
    ASSERT_UV_OK(uv_timer_start(handle, er_close_now, 10, 0));
    return;
  }
  uv_close((uv_handle_t*) handle, NULL);
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, er_close_cb));
}


static void exactly_once_endings(void) {
  uv_thread_t producers[2];
  int outcomes[4];
  task_t* t;
  int ended;
  int i;

  er_n = scale_n(ER_TASKS, 2);
  if (er_n > ER_TASKS)
    er_n = ER_TASKS;
  setup(0);
  atomic_store(&er_published, 0);
  atomic_store(&er_stop, 0);
  for (i = 0; i < er_n; i++) {
    task_init(&er_tasks[i]);
    atomic_store(&er_ends[i], 0);
  }
  ASSERT_UV_OK(
      uv_thread_create(&er_cancellers[0], er_canceller, (void*) (intptr_t) 1));
  ASSERT_UV_OK(
      uv_thread_create(&er_cancellers[1], er_canceller, (void*) (intptr_t) 2));
  ASSERT_UV_OK(
      uv_thread_create(&producers[0], er_producer, (void*) (intptr_t) 0));
  ASSERT_UV_OK(
      uv_thread_create(&producers[1], er_producer, (void*) (intptr_t) 1));
  ASSERT_UV_OK(uv_timer_init(&loop, &er_close_timer));
  ASSERT_UV_OK(uv_timer_start(&er_close_timer, er_close_now, 200, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_UV_OK(uv_thread_join(&producers[0]));
  ASSERT_UV_OK(uv_thread_join(&producers[1]));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));
  memset(outcomes, 0, sizeof(outcomes));
  for (i = 0; i < er_n; i++) {
    t = &er_tasks[i];
    outcomes[0] += atomic_load(&t->cancelled);
    outcomes[1] += atomic_load(&t->busy);
    outcomes[2] += atomic_load(&t->finals);
    outcomes[3] += atomic_load(&t->runs) > 0;
  }
  fprintf(stderr, "%d tasks: cancelled %d, busy %d, final calls %d, ran %d\n",
          er_n, outcomes[0], outcomes[1], outcomes[2], outcomes[3]);
  for (i = 0; i < er_n; i++) {
    t = &er_tasks[i];
    ended =
        atomic_load(&er_ends[i]) + atomic_load(&t->finals) +
        (t->self_cancel_at != 0 && atomic_load(&t->self_cancel_result) == 0 &&
         atomic_load(&t->runs) >= t->self_cancel_at);
    if (t->repeat == 0 && atomic_load(&er_ends[i]) == 0)
      ended += atomic_load(&t->runs); /* a one-shot's run is its end */
    if (ended != 1)
      fprintf(stderr,
              "task %d (repeat %llu, flags %u): %d endings: runs %d, "
              "cancels %d, finals %d, self %d\n",
              i, (unsigned long long) t->repeat, t->flags, ended,
              atomic_load(&t->runs), atomic_load(&er_ends[i]),
              atomic_load(&t->finals), atomic_load(&t->self_cancel_result));
    ASSERT_EQ(1, ended);
  }
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(same_pass),
  TEST_CASE(id_zero),
  TEST_CASE(before_drain),
  TEST_CASE(self_cancel),
  TEST_CASE(while_running),
  TEST_CASE(many_cancellers),
  TEST_CASE(arg_ownership),
  TEST_CASE(at_deadline),
  TEST_CASE(pool_queued),
  TEST_CASE(chain),
  TEST_CASE(stale_ids),
  TEST_CASE(exactly_once_endings),
};
/* clang-format on */


int main(int argc, char** argv) {
  /* pool_queued needs a pool of exactly 4 threads; set it before the first
   * uv_queue_work. */
  test_setenv("UV_THREADPOOL_SIZE", "4");
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
