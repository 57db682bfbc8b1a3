/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: the delay counts from the uvtw_submit call.
 *
 *   blocked_until_due  While the loop thread is blocked for 200 ms,
 *                 another thread submits a task with a delay of 250 ms
 *                 (loop and threadpool): it runs about 250 ms after the
 *                 submit call, not 450 (asserted: >= 250 and < 420).
 *   blocked_past_due  A task with a delay of 250 ms submitted while the
 *                 loop is blocked for 400 ms is overdue when the loop sees
 *                 it and runs right after the block (< 200 ms after it),
 *                 not 250 ms later.
 *   stale_now     The loop thread has been blocked in a callback for 200 ms
 *                 (uv_now is 200 ms behind), and tasks with a delay of
 *                 100 ms are submitted at the end of the block, from another
 *                 thread and from that callback itself: none may run before
 *                 100 ms have passed since its submit call.
 *   many          100,000 tasks (UVTW_TEST_SCALE scales the count) with
 *                 delays of 0..99 ms, a quarter on the threadpool, submitted
 *                 from one non-loop thread while the loop runs: each runs
 *                 exactly once, never early in the contract's terms
 *                 (floor(uv_hrtime ms at the run) - floor(uv_hrtime ms just
 *                 before uvtw_submit) >= delay) and within a generous bound.
 *   order         one producer submits 2,000 loop tasks with the same delay
 *                 while the loop thread is blocked, so that many are due in
 *                 the same pass: they run in submission order.
 *   idle_loop     the loop sleeps in epoll with only a 1 h task armed; a
 *                 thread submits tasks with delays 0..5 ms at random
 *                 moments: never early, and not later than a generous bound.
 *   wide          2,000 tasks with delays spread from 0 to 3 s (so that they
 *                 start on the wheel's coarser levels and move down as time
 *                 passes), from another thread: never early, and not later
 *                 than a generous bound.
 *   coarse_tick   tick_ms = 7: tasks from another thread with delays of
 *                 0..49 ms are still never early, and not later than a tick
 *                 plus a generous bound.
 *
 * Timing bounds are generous for a loaded 2-core machine and sanitizers;
 * "never early" is exact. */

#include "task-harness.h"
#include "test-cases.h"


/* ---- blocked_loop ----------------------------------------------------- */

static uv_timer_t blocker;
static uv_sem_t bl_blocked;
static unsigned bl_block_ms;
static uint64_t bl_block_end_ns;
static task_t bl[2];
static uint64_t bl_submit_ns[2];
static uint64_t bl_delay;


static void blocker_cb(uv_timer_t* handle) {
  (void) handle;
  uv_sem_post(&bl_blocked);
  uv_sleep(bl_block_ms);
  bl_block_end_ns = uv_hrtime();
}


static void bl_thread(void* arg) {
  int i;

  (void) arg;
  uv_sem_wait(&bl_blocked);
  for (i = 0; i < 2; i++) {
    bl_submit_ns[i] = uv_hrtime();
    submit(&bl[i], bl_delay, 0, i == 1 ? UVTW_THREADPOOL : 0);
  }
}


static int bl_done(void) {
  return atomic_load(&bl[0].returned) == 1 && atomic_load(&bl[1].returned) == 1;
}


/* Returns nothing; checks both tasks ran no earlier than delay after their
 * submit call and no later than max_ms after it, and, if overdue_bound_ms
 * is non-zero, that they ran within it after the block ended. */
static void blocked_loop(unsigned block_ms,
                         uint64_t delay,
                         uint64_t max_ms,
                         uint64_t overdue_bound_ms) {
  uv_thread_t tid;
  uint64_t took;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&bl_blocked, 0));
  ASSERT_UV_OK(uv_timer_init(&loop, &blocker));
  bl_block_ms = block_ms;
  bl_delay = delay;
  for (i = 0; i < 2; i++)
    task_init(&bl[i]);
  /* Run the loop a little first, so that it is a steady, running loop. */
  run_for(20);
  ASSERT_UV_OK(uv_thread_create(&tid, bl_thread, NULL));
  ASSERT_UV_OK(uv_timer_start(&blocker, blocker_cb, 5, 0));
  run_until(bl_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  for (i = 0; i < 2; i++) {
    took = bl[i].start_ns[0] / 1000000 - bl_submit_ns[i] / 1000000;
    printf("blocked_loop: block %u ms, delay %" PRIu64
           " ms, %s task ran "
           "after %" PRIu64 " ms (%" PRIu64 " ms after the block)\n",
           block_ms, delay, i == 1 ? "threadpool" : "loop", took,
           (bl[i].start_ns[0] - bl_block_end_ns) / 1000000);
    ASSERT_UGE(took, delay);
    ASSERT_ULT(took, max_ms);
    if (overdue_bound_ms != 0) {
      ASSERT_UGE(bl[i].start_ns[0], bl_block_end_ns);
      ASSERT_ULT(bl[i].start_ns[0] - bl_block_end_ns,
                 overdue_bound_ms * 1000000);
    }
  }
  uv_close((uv_handle_t*) &blocker, NULL);
  teardown();
  for (i = 0; i < 2; i++)
    ASSERT_EQ(0, atomic_load(&bl[i].finals));
  uv_sem_destroy(&bl_blocked);
}


/* ---- stale_now -------------------------------------------------------- */

static uv_timer_t sn_blocker;
static uv_sem_t sn_go;
static uv_sem_t sn_done;
static task_t sn[4];
static uint64_t sn_submit_ns[4];


static void sn_blocker_cb(uv_timer_t* handle) {
  (void) handle;
  uv_sleep(200);
  /* uv_now(loop) still says the time this iteration began. */
  uv_sem_post(&sn_go);
  uv_sem_wait(&sn_done);
  sn_submit_ns[2] = uv_hrtime();
  submit(&sn[2], 100, 0, 0);
  sn_submit_ns[3] = uv_hrtime();
  submit(&sn[3], 100, 0, UVTW_THREADPOOL);
}


static void sn_thread(void* arg) {
  (void) arg;
  uv_sem_wait(&sn_go);
  sn_submit_ns[0] = uv_hrtime();
  submit(&sn[0], 100, 0, 0);
  sn_submit_ns[1] = uv_hrtime();
  submit(&sn[1], 100, 0, UVTW_THREADPOOL);
  uv_sem_post(&sn_done);
}


static int sn_ran(void) {
  int i;

  for (i = 0; i < 4; i++)
    if (atomic_load(&sn[i].returned) != 1)
      return 0;
  return 1;
}


static void stale_now(void) {
  uv_thread_t tid;
  uint64_t took;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&sn_go, 0));
  ASSERT_UV_OK(uv_sem_init(&sn_done, 0));
  ASSERT_UV_OK(uv_timer_init(&loop, &sn_blocker));
  for (i = 0; i < 4; i++)
    task_init(&sn[i]);
  run_for(20);
  ASSERT_UV_OK(uv_thread_create(&tid, sn_thread, NULL));
  ASSERT_UV_OK(uv_timer_start(&sn_blocker, sn_blocker_cb, 1, 0));
  run_until(sn_ran, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  for (i = 0; i < 4; i++) {
    took = sn[i].start_ns[0] / 1000000 - sn_submit_ns[i] / 1000000;
    printf("stale_now: %s task from %s ran %" PRIu64 " ms after submit\n",
           i % 2 ? "threadpool" : "loop", i < 2 ? "a thread" : "the loop",
           took);
    ASSERT_UGE(took, 100);
    ASSERT_ULT(took, 1000);
  }
  uv_close((uv_handle_t*) &sn_blocker, NULL);
  teardown();
  uv_sem_destroy(&sn_go);
  uv_sem_destroy(&sn_done);
}


/* ---- many ------------------------------------------------------------- */

typedef struct {
  uint64_t submit_ms; /* floor(uv_hrtime() ms) just before uvtw_submit */
  uint64_t run_ms;    /* floor(uv_hrtime() ms) at the run */
  uint32_t delay;
  uint32_t flags;
  atomic_int runs;
} rec_t;

static rec_t* recs;
static int nrecs;
static atomic_int many_ran;
static atomic_int many_submitted;
static atomic_int many_bad_thread;


static void many_cb(void* arg, int status) {
  rec_t* r;
  int on_loop;

  r = arg;
  r->run_ms = hr_ms();
  ASSERT_EQ(0, status); /* all run before close: no final call */
  on_loop = on_loop_thread();
  if (on_loop == !!(r->flags & UVTW_THREADPOOL))
    atomic_fetch_add(&many_bad_thread, 1);
  ASSERT_EQ(1, atomic_fetch_add(&r->runs, 1) + 1);
  atomic_fetch_add(&many_ran, 1);
}


static uint64_t rng_state = 0x9E3779B97F4A7C15ull;


static uint64_t rng(void) {
  return test_xorshift64(&rng_state);
}


static void many_thread(void* arg) {
  rec_t* r;
  int i;

  (void) arg;
  for (i = 0; i < nrecs; i++) {
    r = &recs[i];
    r->delay = (uint32_t) (rng() % 100);
    r->flags = (rng() % 4 == 0) ? UVTW_THREADPOOL : 0;
    r->submit_ms = hr_ms();
    ASSERT_EQ(0, uvtw_submit(wheel, r->delay, 0, r->flags, many_cb, r, NULL));
    /* Bursts of 500, so that the loop drains while this thread submits. */
    if (i % 500 == 499)
      uv_sleep(1);
  }
  atomic_store(&many_submitted, 1);
}


static int many_done(void) {
  return atomic_load(&many_submitted) && atomic_load(&many_ran) == nrecs;
}


/* Runs `producer` on a thread of its own, submitting nrecs tasks to a
 * wheel with the given tick, while the loop runs; then checks that each
 * task ran exactly once, never before its delay had passed since its own
 * submit call (floor-ms rule), and no later than `bound` ms after that.
 * Prints the lateness under `name`. */
static void run_many(const char* name,
                     int n,
                     uint64_t tick_ms,
                     void (*producer)(void* arg),
                     uint64_t bound) {
  uv_thread_t tid;
  uint64_t late;
  uint64_t max_late;
  uint64_t sum_late;
  uint64_t max_kind[2];
  rec_t* r;
  int i;

  nrecs = n;
  recs = calloc((size_t) nrecs, sizeof(*recs));
  ASSERT_PTR_NE(recs, NULL);
  atomic_store(&many_ran, 0);
  atomic_store(&many_submitted, 0);
  atomic_store(&many_bad_thread, 0);
  setup_tick(0, tick_ms);
  ASSERT_UV_OK(uv_thread_create(&tid, producer, NULL));
  run_until(many_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  ASSERT_EQ(0, atomic_load(&many_bad_thread));

  max_late = 0;
  sum_late = 0;
  max_kind[0] = max_kind[1] = 0;
  for (i = 0; i < nrecs; i++) {
    r = &recs[i];
    ASSERT_EQ(1, atomic_load(&r->runs));
    if (r->run_ms - r->submit_ms < r->delay) {
      fprintf(stderr,
              "%s: task %d (delay %u, %s) ran early: submitted at %" PRIu64
              " ms, ran at %" PRIu64 " ms\n",
              name, i, r->delay, r->flags ? "threadpool" : "loop", r->submit_ms,
              r->run_ms);
      abort();
    }
    late = r->run_ms - r->submit_ms - r->delay;
    if (late > max_late)
      max_late = late;
    if (late > max_kind[!!r->flags])
      max_kind[!!r->flags] = late;
    sum_late += late;
    ASSERT_ULT(late, bound);
  }
  printf("%s: %d tasks, tick %" PRIu64 " ms, late by %" PRIu64
         " ms at most (loop %" PRIu64 ", threadpool %" PRIu64
         "), %.2f ms on average\n",
         name, nrecs, tick_ms, max_late, max_kind[0], max_kind[1],
         (double) sum_late / nrecs);
  teardown();
  free(recs);
}


static void many(void) {
  /* TSan copes with all of them.  Generous bound: a loaded 2-core
   * machine, maybe under a sanitizer; under TSan the loop runs these 5-10
   * times slower and falls behind. */
  run_many("many", scale_n(100000, 1), 1, many_thread,
           UNDER_TSAN ? 10000 : 3000);
}


/* ---- order ------------------------------------------------------------ */

#define NORDER 2000

static task_t* ord;
static int ord_next; /* loop thread only */
static int ord_bad = -1;
static uv_timer_t ord_blocker;
static uv_sem_t ord_blocked;
static atomic_int ord_submitted;


static void ord_hook(task_t* t, int run) {
  int i;

  (void) run;
  i = (int) (t - ord);
  if (i != ord_next && ord_bad < 0)
    ord_bad = ord_next;
  ord_next = i + 1;
}


static void ord_blocker_cb(uv_timer_t* handle) {
  (void) handle;
  uv_sem_post(&ord_blocked);
  uv_sleep(60);
}


static void ord_thread(void* arg) {
  int i;

  (void) arg;
  uv_sem_wait(&ord_blocked);
  for (i = 0; i < NORDER; i++)
    submit(&ord[i], 10, 0, 0);
  atomic_store(&ord_submitted, 1);
}


static int ord_done(void) {
  return atomic_load(&ord_submitted) &&
         atomic_load(&ord[NORDER - 1].returned) == 1 &&
         uvtw_wheel_pending(wheel) == 0;
}


static void order(void) {
  uv_thread_t tid;
  int i;

  ord = calloc(NORDER, sizeof(*ord));
  ASSERT_PTR_NE(ord, NULL);
  for (i = 0; i < NORDER; i++) {
    task_init(&ord[i]);
    ord[i].hook = ord_hook;
  }
  atomic_store(&ord_submitted, 0);
  ASSERT_UV_OK(uv_sem_init(&ord_blocked, 0));
  setup(0);
  ASSERT_UV_OK(uv_timer_init(&loop, &ord_blocker));
  ASSERT_UV_OK(uv_timer_start(&ord_blocker, ord_blocker_cb, 1, 0));
  ASSERT_UV_OK(uv_thread_create(&tid, ord_thread, NULL));
  run_until(ord_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  if (ord_bad >= 0) {
    fprintf(stderr, "order: task %d did not run next\n", ord_bad);
    abort();
  }
  ASSERT_EQ(NORDER, ord_next);
  for (i = 0; i < NORDER; i++)
    ASSERT_EQ(1, atomic_load(&ord[i].runs));
  uv_close((uv_handle_t*) &ord_blocker, NULL);
  teardown();
  uv_sem_destroy(&ord_blocked);
  free(ord);
}


/* ---- idle_loop -------------------------------------------------------- */

#define NIDLE 300


static void idle_thread(void* arg) {
  rec_t* r;
  int i;

  (void) arg;
  for (i = 0; i < nrecs; i++) {
    r = &recs[i];
    uv_sleep((unsigned) (rng() % 6)); /* the loop goes back to sleep */
    r->delay = (uint32_t) (rng() % 6);
    r->flags = (i % 4 == 0) ? UVTW_THREADPOOL : 0;
    r->submit_ms = hr_ms();
    ASSERT_EQ(0, uvtw_submit(wheel, r->delay, 0, r->flags, many_cb, r, NULL));
  }
  atomic_store(&many_submitted, 1);
}


static void idle_loop(void) {
  uv_thread_t tid;
  task_t sleeper;
  uint64_t late;
  uint64_t max_late;
  rec_t* r;
  int i;

  nrecs = NIDLE;
  recs = calloc((size_t) nrecs, sizeof(*recs));
  ASSERT_PTR_NE(recs, NULL);
  atomic_store(&many_ran, 0);
  atomic_store(&many_submitted, 0);
  atomic_store(&many_bad_thread, 0);
  setup(0);
  task_init(&sleeper);
  submit(&sleeper, 3600 * 1000, 0, 0); /* keeps the loop alive, asleep */
  run_for(5);                          /* once drained */
  ASSERT_UEQ(1, uvtw_wheel_pending(wheel));
  ASSERT_UV_OK(uv_thread_create(&tid, idle_thread, NULL));
  /* No polling timer: nothing but the wheel wakes the loop. */
  while (!many_done())
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_ONCE));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(0, atomic_load(&many_bad_thread));
  max_late = 0;
  for (i = 0; i < nrecs; i++) {
    r = &recs[i];
    ASSERT_EQ(1, atomic_load(&r->runs));
    ASSERT_UGE(r->run_ms - r->submit_ms, r->delay);
    late = r->run_ms - r->submit_ms - r->delay;
    if (late > max_late)
      max_late = late;
    ASSERT_ULT(late, 1000);
  }
  printf("idle_loop: %d tasks, late by %" PRIu64 " ms at most\n", nrecs,
         max_late);
  ASSERT_EQ(0, cancel(&sleeper));
  teardown();
  free(recs);
}


/* ---- wide ------------------------------------------------------------- */

#define NWIDE 2000


static void wide_thread(void* arg) {
  uint64_t scale;
  rec_t* r;
  int i;

  (void) arg;
  for (i = 0; i < nrecs; i++) {
    r = &recs[i];
    /* Roughly log-uniform: 0..3, 0..30, 0..300 or 0..3000 ms. */
    scale = i % 4 == 0 ? 1 : i % 4 == 1 ? 10 : i % 4 == 2 ? 100 : 1000;
    r->delay = (uint32_t) (rng() % (3 * scale + 1));
    r->flags = (i % 5 == 0) ? UVTW_THREADPOOL : 0;
    r->submit_ms = hr_ms();
    ASSERT_EQ(0, uvtw_submit(wheel, r->delay, 0, r->flags, many_cb, r, NULL));
    if (i % 10 == 9)
      uv_sleep(1);
  }
  atomic_store(&many_submitted, 1);
}


static void wide(void) {
  run_many("wide", NWIDE, 1, wide_thread, 1000);
}


/* ---- coarse_tick ------------------------------------------------------ */

#define NCOARSE 2000
#define COARSE_TICK 7


static void coarse_thread(void* arg) {
  rec_t* r;
  int i;

  (void) arg;
  for (i = 0; i < nrecs; i++) {
    r = &recs[i];
    r->delay = (uint32_t) (rng() % 50);
    r->flags = (i % 3 == 0) ? UVTW_THREADPOOL : 0;
    r->submit_ms = hr_ms();
    ASSERT_EQ(0, uvtw_submit(wheel, r->delay, 0, r->flags, many_cb, r, NULL));
    if (i % 20 == 19)
      uv_sleep(1);
  }
  atomic_store(&many_submitted, 1);
}


static void coarse_tick(void) {
  run_many("coarse_tick", NCOARSE, COARSE_TICK, coarse_thread,
           COARSE_TICK + 1000);
}


/* The loop is blocked for 200 ms by a callback while the tasks, 250 ms
 * away, are submitted: they come due after the block. */
static void blocked_until_due(void) {
  blocked_loop(200, 250, 420, 0);
}


/* Blocked for 400 ms: the tasks are overdue when the block ends, and run
 * within 200 ms after it. */
static void blocked_past_due(void) {
  blocked_loop(400, 250, 1000, 200);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(blocked_until_due),
  TEST_CASE(blocked_past_due),
  TEST_CASE(stale_now),
  TEST_CASE(many),
  TEST_CASE(order),
  TEST_CASE(idle_loop),
  TEST_CASE(wide),
  TEST_CASE(coarse_tick),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
