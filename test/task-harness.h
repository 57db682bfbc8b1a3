/* SPDX-License-Identifier: MIT */
/* Shared by the test-task-*.c programs: one loop and one wheel per
 * scenario, a task record whose callback checks the per-task rules of the
 * contract as it runs, and helpers to run the loop until a condition holds.
 *
 * The callback (task_cb) checks, for every call:
 *   - runs happen on the loop thread, or with UVTW_THREADPOOL on another
 *     thread; final UV_ECANCELED calls on the loop thread;
 *   - a task never runs concurrently with itself, and its final call never
 *     comes while its run is executing;
 *   - no run starts after a cancel returned 0 (the canceller sets
 *     `cancelled` after the call returns, so a run that sees it started
 *     after that return); after a cancel returned UV_EBUSY, no run beyond
 *     the one that was executing (whose callback may be entered a moment
 *     after the cancel looked): the canceller reads `runs` before the call
 *     and, on UV_EBUSY, stores that + 1 as `busy_limit`;
 *   - a one-shot runs at most once; at most one final call, and a one-shot
 *     that ran gets none;
 *   - nothing is called after the wheel's close callback.
 * Counters are atomics, so the records may be read from any thread. */

#ifndef UVTW_TASK_HARNESS_H
#define UVTW_TASK_HARNESS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "test.h"
#include "uvtw.h"

#if defined(__SANITIZE_THREAD__)
# define UNDER_TSAN 1
#elif defined(__has_feature)
# if __has_feature(thread_sanitizer)
#  define UNDER_TSAN 1
# endif
#endif
#ifndef UNDER_TSAN
# define UNDER_TSAN 0
#endif

#define HARNESS_UNUSED __attribute__((unused))
#define TASK_MAX_TIMES 32

typedef struct task_s task_t;

struct task_s {
  uvtw_id_t id; /* stored by uvtw_submit before the task can run */
  unsigned flags;
  uint64_t repeat;
  atomic_int runs;     /* runs started (status 0) */
  atomic_int returned; /* runs returned */
  atomic_int finals;   /* final UV_ECANCELED calls */
  atomic_int running;
  atomic_int cancelled;  /* set once a cancel returned 0 */
  atomic_int busy;       /* set once a cancel returned UV_EBUSY */
  atomic_int busy_limit; /* if non-zero: the highest run number allowed */
  uv_sem_t* started;     /* posted when the first run starts */
  uv_sem_t* go;          /* the first run waits on it */
  int self_cancel_at;    /* the run that cancels its own task; 0: none */
  atomic_int self_cancel_result;
  task_t* victim; /* cancelled from this task's first run */
  atomic_int victim_result;
  atomic_int cancel_result; /* of the test's cancel, when it made one */
  int block_run;            /* the run that sleeps block_ms; 0: none */
  unsigned block_ms;
  unsigned sleep_ms;                /* every run sleeps this long */
  void (*hook)(task_t* t, int run); /* called inside every run */
  void (*final_hook)(task_t* t);    /* called inside the final call */
  /* Per run, up to TASK_MAX_TIMES: uv_hrtime() at entry and at return, and
   * uv_now(loop) at entry (loop tasks only). */
  uint64_t start_ns[TASK_MAX_TIMES];
  uint64_t end_ns[TASK_MAX_TIMES];
  uint64_t start_now[TASK_MAX_TIMES];
  uint64_t final_ns;
};

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uv_thread_t loop_tid;
static atomic_int close_cb_called;
static uv_timer_t poll_timer;
static uv_idle_t spin_idle;
static int (*until_fn)(void);
static uint64_t until_deadline;


/* n scaled by UVTW_TEST_SCALE (a percentage, default 100), and divided by
 * tsan_div under TSan; at least 10. */
HARNESS_UNUSED static int scale_n(int n, int tsan_div) {
  const char* s;
  long pct;

  pct = 100;
  s = getenv("UVTW_TEST_SCALE");
  if (s != NULL && atol(s) > 0)
    pct = atol(s);
  if (UNDER_TSAN)
    pct /= tsan_div;
  n = (int) ((long) n * pct / 100);
  return n < 10 ? 10 : n;
}


HARNESS_UNUSED static int scaled(int n) {
  return scale_n(n, 4);
}


HARNESS_UNUSED static uint64_t hr_ms(void) {
  return uv_hrtime() / 1000000;
}


HARNESS_UNUSED static int on_loop_thread(void) {
  uv_thread_t self;

  self = uv_thread_self();
  return uv_thread_equal(&self, &loop_tid);
}


HARNESS_UNUSED static void task_init(task_t* t) {
  memset(t, 0, sizeof(*t));
  atomic_store(&t->cancel_result, 1); /* no cancel made */
}


/* Records a cancel's result in t: see the rules above. */
HARNESS_UNUSED static void note_cancel(task_t* t, int runs_before, int r) {
  int zero;

  if (r == 0) {
    atomic_store(&t->cancelled, 1);
  } else if (r == UV_EBUSY) {
    zero = 0;
    atomic_compare_exchange_strong(&t->busy_limit, &zero, runs_before + 1);
    atomic_store(&t->busy, 1);
  }
}


HARNESS_UNUSED static void task_cb(void* arg, int status) {
  task_t* t;
  uint64_t start;
  int runs_before;
  int n;
  int r;

  start = uv_hrtime();
  t = arg;
  ASSERT_EQ(0, atomic_load(&close_cb_called));
  if (status == UV_ECANCELED) {
    ASSERT(on_loop_thread());
    ASSERT_EQ(0, atomic_load(&t->running)); /* never inside its own run */
    ASSERT_EQ(0, atomic_load(&t->cancelled));
    ASSERT_EQ(0, atomic_load(&t->busy));
    t->final_ns = start;
    ASSERT_EQ(1, atomic_fetch_add(&t->finals, 1) + 1);
    if (t->repeat == 0)
      ASSERT_EQ(0, atomic_load(&t->runs));
    if (t->final_hook != NULL)
      t->final_hook(t);
    return;
  }
  ASSERT_EQ(0, status);
  if (t->flags & UVTW_THREADPOOL)
    ASSERT(!on_loop_thread());
  else
    ASSERT(on_loop_thread());
  ASSERT_EQ(0, atomic_fetch_add(&t->running, 1));
  ASSERT_EQ(0, atomic_load(&t->cancelled)); /* no run after cancel */
  ASSERT_EQ(0, atomic_load(&t->finals));
  n = atomic_fetch_add(&t->runs, 1) + 1;
  if (atomic_load(&t->busy_limit) != 0)
    ASSERT_LE(n, atomic_load(&t->busy_limit));
  if (t->repeat == 0)
    ASSERT_EQ(1, n);
  if (n <= TASK_MAX_TIMES) {
    t->start_ns[n - 1] = start;
    if (!(t->flags & UVTW_THREADPOOL))
      t->start_now[n - 1] = uv_now(&loop);
  }
  if (n == 1 && t->started != NULL)
    uv_sem_post(t->started);
  if (n == 1 && t->go != NULL)
    uv_sem_wait(t->go);
  if (n == t->block_run)
    uv_sleep(t->block_ms);
  if (t->sleep_ms != 0)
    uv_sleep(t->sleep_ms);
  if (t->hook != NULL)
    t->hook(t, n);
  if (n == 1 && t->victim != NULL) {
    runs_before = atomic_load(&t->victim->runs);
    r = uvtw_cancel(wheel, t->victim->id);
    note_cancel(t->victim, runs_before, r);
    atomic_store(&t->victim_result, r);
  }
  if (n == t->self_cancel_at) {
    r = uvtw_cancel(wheel, t->id);
    note_cancel(t, n, r);
    atomic_store(&t->self_cancel_result, r);
  }
  if (n <= TASK_MAX_TIMES)
    t->end_ns[n - 1] = uv_hrtime();
  atomic_fetch_sub(&t->running, 1);
  atomic_fetch_add(&t->returned, 1);
}


HARNESS_UNUSED static void submit(task_t* t,
                                  uint64_t delay,
                                  uint64_t repeat,
                                  unsigned f) {
  t->flags = f;
  t->repeat = repeat;
  t->id = 0;
  ASSERT_EQ(0, uvtw_submit(wheel, delay, repeat, f, task_cb, t, &t->id));
  ASSERT_NE(0, t->id);
}


/* Cancels from the test and records the result. */
HARNESS_UNUSED static int cancel(task_t* t) {
  int runs_before;
  int r;

  runs_before = atomic_load(&t->runs);
  r = uvtw_cancel(wheel, t->id);
  note_cancel(t, runs_before, r);
  atomic_store(&t->cancel_result, r);
  return r;
}


static void until_check(void) {
  if (until_fn())
    uv_stop(&loop);
  else if (uv_hrtime() > until_deadline) {
    fprintf(stderr, "run_until: condition not reached in 30 s\n");
    abort();
  }
}


static void poll_timer_cb(uv_timer_t* handle) {
  (void) handle;
  until_check();
}


static void spin_idle_cb(uv_idle_t* handle) {
  (void) handle;
  until_check();
}


/* Runs the loop until fn() holds (at most 30 s).  spin: check on every loop
 * iteration, a busy loop; else every millisecond. */
HARNESS_UNUSED static void run_until(int (*fn)(void), int spin) {
  until_fn = fn;
  until_deadline = uv_hrtime() + (uint64_t) 30 * 1000 * 1000 * 1000;
  if (fn())
    return;
  if (spin)
    ASSERT_UV_OK(uv_idle_start(&spin_idle, spin_idle_cb));
  else
    ASSERT_UV_OK(uv_timer_start(&poll_timer, poll_timer_cb, 1, 1));
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_idle_stop(&spin_idle);
  uv_timer_stop(&poll_timer);
  ASSERT(fn());
}


HARNESS_UNUSED static int pending_zero(void) {
  return uvtw_wheel_pending(wheel) == 0;
}


static int always(void) {
  return 1;
}


/* One loop iteration, even when nothing keeps the loop alive. */
HARNESS_UNUSED static void one_pass(void) {
  until_fn = always;
  until_deadline = uv_hrtime() + (uint64_t) 30 * 1000 * 1000 * 1000;
  ASSERT_UV_OK(uv_idle_start(&spin_idle, spin_idle_cb));
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_idle_stop(&spin_idle);
}


static uint64_t wait_ns_end;


static int wait_done(void) {
  return uv_hrtime() >= wait_ns_end;
}


/* Runs the loop for about ms milliseconds. */
HARNESS_UNUSED static void run_for(unsigned ms) {
  wait_ns_end = uv_hrtime() + (uint64_t) ms * 1000 * 1000;
  run_until(wait_done, 0);
}


static void wheel_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(w, wheel);
  atomic_fetch_add(&close_cb_called, 1);
}


static void warm_work(uv_work_t* req) {
  (void) req;
}


static void warm_after_work(uv_work_t* req, int status) {
  (void) req;
  ASSERT_EQ(0, status);
}


/* libuv starts its threadpool on the first uv_queue_work of the process,
 * and that call waits until every thread runs: tens of milliseconds on a
 * loaded machine, hundreds under TSan.  No timing bound of a test should
 * include that, so the first setup starts the pool, on the fresh loop,
 * before any task is timed. */
static void warm_threadpool(void) {
  static int warm;
  uv_work_t req;

  if (warm)
    return;
  warm = 1;
  ASSERT_UV_OK(uv_queue_work(&loop, &req, warm_work, warm_after_work));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
}


/* A loop and a wheel with max_tasks (0: no bound) and tick_ms. */
HARNESS_UNUSED static void setup_tick(size_t max_tasks, uint64_t tick_ms) {
  uvtw_options_t opts;

  uvtw_options_init(&opts);
  opts.max_tasks = max_tasks;
  opts.tick_ms = tick_ms;
  ASSERT_UV_OK(uv_loop_init(&loop));
  warm_threadpool();
  ASSERT_EQ(0, uvtw_wheel_new(&loop, &opts, &wheel));
  ASSERT_UV_OK(uv_timer_init(&loop, &poll_timer));
  ASSERT_UV_OK(uv_idle_init(&loop, &spin_idle));
  atomic_store(&close_cb_called, 0);
  loop_tid = uv_thread_self();
}


/* A loop and a wheel with max_tasks (0: no bound) and a 1 ms tick. */
HARNESS_UNUSED static void setup(size_t max_tasks) {
  setup_tick(max_tasks, 1);
}


/* Closes the wheel (a second close is UV_EINVAL), runs the loop until the
 * close callback ran, and closes the loop. */
HARNESS_UNUSED static void teardown(void) {
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));
}

#endif /* UVTW_TASK_HARNESS_H */
