/* SPDX-License-Identifier: MIT */
/* uvtw_reset: moving a live task's next run, from any thread.
 *
 *   bad_input      NULL wheel is UV_EINVAL; id 0, an unknown index, an id
 *                  of another wheel, a cancelled task and a one-shot that
 *                  ran are UV_ENOENT.
 *   later          one-shots (loop and threadpool) due in 30 ms, moved to
 *                  300 ms by a worker thread (an RPC deadline extended):
 *                  each runs once, not before the reset's call + 300 ms.
 *   earlier        tasks due in 1 h moved to 0 by another thread, before
 *                  the loop took them in and after: each runs once, soon;
 *                  its id then answers UV_ENOENT.
 *   repeating      a repeating loop task (period 20 ms) moved to 300 ms:
 *                  its next run is not before the reset's call + 300 ms,
 *                  and it keeps running every period after; same id (a
 *                  cancel returns 0).
 *   while_running  a threadpool task held inside its run: a reset returns
 *                  UV_EBUSY; a one-shot ends with that run, a repeating
 *                  one's next run is not before the new deadline.
 *   self_reset     a repeating loop task resets itself from its callback:
 *                  UV_EBUSY, and its next run is at the new deadline.
 *   max_tasks      with max_tasks 1, a reset keeps the task's place:
 *                  pending stays 1, a second submit is UV_ENOSPC.
 *   stale_id       a one-shot runs; a new task takes its node (the same
 *                  index); a reset with the old id is UV_ENOENT and does
 *                  not move the new task (due in 1 h, it does not run).
 *   vs_cancel      after a cancel returned 0 a reset is UV_ENOENT; a reset
 *                  then a cancel: 0 and 0, no run.
 *   in_close       resets from a final call, of itself and of a task
 *                  still live: UV_ENOENT or 0, and every task gets exactly
 *                  one final call.
 *   many_resetters 64 tasks due in 1 h (loop and threadpool, one-shot and
 *                  repeating); 4 threads reset them at random to 2..5 ms
 *                  while 2 threads cancel some: the harness's rules hold
 *                  (no run after a cancel returned 0, exactly one end),
 *                  no run starts before the earliest reset's call + 2 ms,
 *                  and pending ends at 0 (ASan, TSan). */

#include "task-harness.h"
#include "test-cases.h"


static uint64_t start_ms(const task_t* t, int run) {
  return t->start_ns[run] / 1000000;
}


static int t_ran(task_t* t) {
  return atomic_load(&t->returned) > 0;
}


static task_t* waited;
static int waited_runs;


static int waited_ran(void) {
  return atomic_load(&waited->returned) >= waited_runs;
}


static void run_until_runs(task_t* t, int runs) {
  waited = t;
  waited_runs = runs;
  run_until(waited_ran, 0);
}


/* ---- bad_input ---------------------------------------------------------- */

static void bad_input(void) {
  uvtw_wheel_t* other;
  task_t a;
  task_t b;

  setup(0);
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &other));
  task_init(&a);
  task_init(&b);
  submit(&a, 3600 * 1000, 0, 0);
  ASSERT_EQ(UV_EINVAL, uvtw_reset(NULL, a.id, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, 0, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, (uint64_t) 200000 << 36 | 1, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(other, a.id, 0));
  ASSERT_EQ(0, cancel(&a));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.id, 0));
  submit(&b, 0, 0, 0);
  run_until_runs(&b, 1);
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, b.id, 0));
  ASSERT_EQ(0, uvtw_wheel_close(other, NULL));
  teardown();
}


/* ---- later -------------------------------------------------------------- */

static task_t la[2];
static uint64_t la_t0[2];


static void la_worker(void* arg) {
  int i;

  (void) arg;
  for (i = 0; i < 2; i++) {
    la_t0[i] = hr_ms();
    ASSERT_EQ(0, uvtw_reset(wheel, la[i].id, 300));
  }
}


static int la_done(void) {
  return t_ran(&la[0]) && t_ran(&la[1]);
}


static void later(void) {
  uv_thread_t tid;
  int i;

  setup(0);
  for (i = 0; i < 2; i++) {
    task_init(&la[i]);
    submit(&la[i], 30, 0, i ? UVTW_THREADPOOL : 0);
  }
  one_pass(); /* taken in and filed at 30 ms */
  ASSERT_UV_OK(uv_thread_create(&tid, la_worker, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_until(la_done, 0);
  for (i = 0; i < 2; i++) {
    ASSERT_EQ(1, atomic_load(&la[i].runs));
    ASSERT_UGE(start_ms(&la[i], 0), la_t0[i] + 300);
  }
  teardown();
}


/* ---- earlier ------------------------------------------------------------ */

static task_t ea[4];


static void ea_worker(void* arg) {
  int i;

  for (i = 0; i < 4; i++)
    if ((i < 2) == (arg == NULL))
      ASSERT_EQ(0, uvtw_reset(wheel, ea[i].id, 0));
}


static int ea_done(void) {
  int i;

  for (i = 0; i < 4; i++)
    if (!t_ran(&ea[i]))
      return 0;
  return 1;
}


static void earlier(void) {
  uv_thread_t tid;
  int i;

  setup(0);
  for (i = 0; i < 4; i++) {
    task_init(&ea[i]);
    submit(&ea[i], 3600 * 1000, 0, i % 2 ? UVTW_THREADPOOL : 0);
  }
  /* Tasks 0 and 1 before the loop took them in, 2 and 3 after. */
  ASSERT_UV_OK(uv_thread_create(&tid, ea_worker, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  one_pass();
  ASSERT_UV_OK(uv_thread_create(&tid, ea_worker, &tid));
  ASSERT_UV_OK(uv_thread_join(&tid));
  run_until(ea_done, 0);
  for (i = 0; i < 4; i++) {
    ASSERT_EQ(1, atomic_load(&ea[i].runs));
    ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, ea[i].id, 0));
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, ea[i].id));
  }
  teardown();
}


/* ---- repeating ---------------------------------------------------------- */

static void repeating(void) {
  uint64_t t0;
  task_t t;
  int n;

  setup(0);
  task_init(&t);
  submit(&t, 20, 20, 0);
  run_until_runs(&t, 2);
  t0 = hr_ms();
  ASSERT_EQ(0, uvtw_reset(wheel, t.id, 300));
  n = atomic_load(&t.runs);
  run_until_runs(&t, n + 3);
  ASSERT_UGE(start_ms(&t, n), t0 + 300);
  /* Then every period again, from the moved run's dispatch (loop time,
   * which may trail uv_hrtime() by a millisecond). */
  ASSERT_UGE(t.start_now[n + 1], t.start_now[n] + 20);
  ASSERT_ULT(t.start_now[n + 1], t.start_now[n] + 250);
  ASSERT_EQ(0, cancel(&t));
  teardown();
}


/* ---- while_running ------------------------------------------------------ */

static void while_running(void) {
  uv_sem_t started;
  uv_sem_t go;
  uint64_t t0;
  task_t one;
  task_t rep;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&started, 0));
  ASSERT_UV_OK(uv_sem_init(&go, 0));
  task_init(&one);
  one.started = &started;
  one.go = &go;
  submit(&one, 0, 0, UVTW_THREADPOOL);
  while (atomic_load(&one.runs) == 0)
    one_pass();
  uv_sem_wait(&started);
  ASSERT_EQ(UV_EBUSY, uvtw_reset(wheel, one.id, 0));
  uv_sem_post(&go);
  run_until_runs(&one, 1);
  run_for(50);
  ASSERT_EQ(1, atomic_load(&one.runs)); /* a one-shot ends with the run */
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, one.id, 0));

  task_init(&rep);
  rep.started = &started;
  rep.go = &go;
  submit(&rep, 0, 10, UVTW_THREADPOOL);
  while (atomic_load(&rep.runs) == 0)
    one_pass();
  uv_sem_wait(&started);
  t0 = hr_ms();
  ASSERT_EQ(UV_EBUSY, uvtw_reset(wheel, rep.id, 300));
  uv_sem_post(&go);
  run_until_runs(&rep, 2);
  ASSERT_UGE(start_ms(&rep, 1), t0 + 300);
  ASSERT_EQ(0, cancel(&rep));
  uv_sem_destroy(&started);
  uv_sem_destroy(&go);
  teardown();
}


/* ---- self_reset --------------------------------------------------------- */

static uint64_t sr_t0;
static int sr_result = 1;


static void sr_hook(task_t* t, int run) {
  if (run != 2)
    return;
  sr_t0 = hr_ms();
  sr_result = uvtw_reset(wheel, t->id, 300);
}


static void self_reset(void) {
  task_t t;

  setup(0);
  task_init(&t);
  t.hook = sr_hook;
  submit(&t, 10, 10, 0);
  run_until_runs(&t, 3);
  ASSERT_EQ(UV_EBUSY, sr_result);
  ASSERT_UGE(start_ms(&t, 2), sr_t0 + 300);
  ASSERT_EQ(0, cancel(&t));
  teardown();
}


/* ---- max_tasks ---------------------------------------------------------- */

static void max_tasks(void) {
  task_t t;
  task_t u;

  setup(1);
  task_init(&t);
  task_init(&u);
  submit(&t, 3600 * 1000, 0, 0);
  ASSERT_EQ(0, uvtw_reset(wheel, t.id, 7200 * 1000));
  ASSERT_EQ(1, uvtw_wheel_pending(wheel));
  one_pass();
  ASSERT_EQ(0, uvtw_reset(wheel, t.id, 3600 * 1000));
  ASSERT_EQ(1, uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, task_cb, &u, &u.id));
  ASSERT_EQ(0, cancel(&t));
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
  teardown();
}


/* ---- stale_id ----------------------------------------------------------- */

static void stale_id(void) {
  task_t a;
  task_t b;

  setup(0);
  task_init(&a);
  task_init(&b);
  submit(&a, 0, 0, 0);
  run_until_runs(&a, 1);
  one_pass(); /* its node is free again */
  submit(&b, 3600 * 1000, 0, 0);
  ASSERT_UEQ(a.id >> 36, b.id >> 36); /* the same node, reused */
  ASSERT(a.id != b.id);
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.id, 0));
  one_pass();
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.id, 0));
  run_for(50);
  ASSERT_EQ(0, atomic_load(&b.runs));
  ASSERT_EQ(0, cancel(&b));
  teardown();
}


/* ---- vs_cancel ---------------------------------------------------------- */

static void vs_cancel(void) {
  task_t a;
  task_t b;

  setup(0);
  task_init(&a);
  task_init(&b);
  submit(&a, 3600 * 1000, 0, 0);
  submit(&b, 3600 * 1000, 0, UVTW_THREADPOOL);
  ASSERT_EQ(0, cancel(&a));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.id, 0));
  ASSERT_EQ(0, uvtw_reset(wheel, b.id, 0));
  ASSERT_EQ(0, cancel(&b));
  run_for(50);
  ASSERT_EQ(0, atomic_load(&a.runs));
  ASSERT_EQ(0, atomic_load(&b.runs));
  teardown();
}


/* ---- in_close ----------------------------------------------------------- */

static task_t ic[2];
static int ic_results[2] = {1, 1};


static void ic_final(task_t* t) {
  ic_results[t == &ic[1]] = uvtw_reset(wheel, ic[t == &ic[0]].id, 0);
}


static void in_close(void) {
  int i;

  setup(0);
  for (i = 0; i < 2; i++) {
    task_init(&ic[i]);
    ic[i].final_hook = ic_final;
    submit(&ic[i], 3600 * 1000, i, 0);
  }
  one_pass();
  teardown();
  for (i = 0; i < 2; i++) {
    ASSERT_EQ(1, atomic_load(&ic[i].finals));
    ASSERT(ic_results[i] == 0 || ic_results[i] == UV_ENOENT);
  }
}


/* ---- many_resetters ----------------------------------------------------- */

#define MR_TASKS 64
#define MR_RESETTERS 4

static task_t mr[MR_TASKS];
static atomic_uint_fast64_t mr_first_t0;
static atomic_int mr_stop;
static atomic_int mr_resets_ok;


static void mr_resetter(void* arg) {
  uint64_t t0;
  uint64_t expect;
  unsigned seed;
  int i;
  int n;
  int r;

  seed = (unsigned) (uintptr_t) arg * 2654435761u;
  n = scale_n(20000, 10);
  for (i = 0; i < n && !atomic_load(&mr_stop); i++) {
    seed = seed * 1103515245u + 12345u;
    t0 = hr_ms();
    expect = atomic_load(&mr_first_t0);
    while (t0 < expect &&
           !atomic_compare_exchange_weak(&mr_first_t0, &expect, t0))
      ;
    r = uvtw_reset(wheel, mr[(seed >> 8) % MR_TASKS].id, 2 + (seed >> 20) % 4);
    ASSERT(r == 0 || r == UV_EBUSY || r == UV_ENOENT);
    if (r == 0)
      atomic_fetch_add(&mr_resets_ok, 1);
  }
}


static void mr_canceller(void* arg) {
  int i;

  for (i = (int) (uintptr_t) arg; i < MR_TASKS; i += 8) {
    uv_sleep(1);
    cancel(&mr[i]);
  }
}


static int mr_all_ended(void) {
  int i;

  for (i = 0; i < MR_TASKS; i++)
    if (mr[i].repeat != 0 && atomic_load(&mr[i].cancelled) == 0 &&
        atomic_load(&mr[i].busy) == 0)
      return 0;
  return pending_zero();
}


/* Ends what is left: repeating tasks, and one-shots never reset. */
static void mr_loop_cancel(void) {
  int i;

  for (i = 0; i < MR_TASKS; i++)
    if (!atomic_load(&mr[i].cancelled) && !atomic_load(&mr[i].busy) &&
        (mr[i].repeat != 0 || atomic_load(&mr[i].runs) == 0))
      cancel(&mr[i]);
}


static void many_resetters(void) {
  uv_thread_t tids[MR_RESETTERS + 2];
  uint64_t first;
  int i;
  int j;

  setup(0);
  atomic_store(&mr_first_t0, UINT64_MAX);
  for (i = 0; i < MR_TASKS; i++) {
    task_init(&mr[i]);
    submit(&mr[i], 3600 * 1000, i % 4 >= 2 ? 3 : 0,
           i % 2 ? UVTW_THREADPOOL : 0);
  }
  for (i = 0; i < MR_RESETTERS; i++)
    ASSERT_UV_OK(
        uv_thread_create(&tids[i], mr_resetter, (void*) (uintptr_t) i + 1));
  for (i = 0; i < 2; i++)
    ASSERT_UV_OK(uv_thread_create(&tids[MR_RESETTERS + i], mr_canceller,
                                  (void*) (uintptr_t) i));
  run_for(300);
  atomic_store(&mr_stop, 1);
  for (i = 0; i < MR_RESETTERS + 2; i++)
    ASSERT_UV_OK(uv_thread_join(&tids[i]));
  mr_loop_cancel();
  run_until(mr_all_ended, 0);
  first = atomic_load(&mr_first_t0);
  for (i = 0; i < MR_TASKS; i++) {
    if (mr[i].repeat == 0)
      ASSERT_EQ(atomic_load(&mr[i].cancelled) ? 0 : 1,
                atomic_load(&mr[i].runs));
    for (j = 0; j < atomic_load(&mr[i].runs) && j < TASK_MAX_TIMES; j++)
      ASSERT_UGE(start_ms(&mr[i], j), first + 2);
  }
  fprintf(stderr, "many_resetters: %d resets returned 0\n",
          atomic_load(&mr_resets_ok));
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(bad_input),
  TEST_CASE(later),
  TEST_CASE(earlier),
  TEST_CASE(repeating),
  TEST_CASE(while_running),
  TEST_CASE(self_reset),
  TEST_CASE(max_tasks),
  TEST_CASE(stale_id),
  TEST_CASE(vs_cancel),
  TEST_CASE(in_close),
  TEST_CASE(many_resetters),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
