/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: fairness of the drain across producer records, the
 * memory records, queue blocks and nodes keep, and exactly-once endings
 * (run one case with its name as argument).
 *
 *   starved_record   the header's liveness rule: a task submitted from
 *                    another thread is taken in "in the poll phase after
 *                    the submit's wake-up", however busy other records
 *                    are.  Thread P2 submits X (delay 0) first and stays
 *                    alive; then, before each of 10 loop iterations,
 *                    thread P1 (whose record is newer, so first in the
 *                    wheel's list) queues 1,000 more far-off tasks than
 *                    one async callback takes in (UVTW__DRAIN_BATCH).  X
 *                    must have run after the 10 iterations, 2 ms apart.
 *   thread_churn     records of exited threads are reused: 64 threads,
 *                    one after the other, each submits one task and exits.
 *                    They are made with default attributes, so glibc gives
 *                    each the stack (and thread-local block) of the one
 *                    before it, and each takes over the exited thread's
 *                    record: the wheel must hold no more than a few
 *                    records, since never more than one producer thread was
 *                    alive at once.  (A thread on a stack of its own lands
 *                    elsewhere and makes a new record, kept until the wheel
 *                    is freed: uvtw.h says so.)
 *   tombstone_memory max_tasks 16; a worker makes 200,000 submit + cancel
 *                    pairs (never more than one task live) while the loop
 *                    is busy elsewhere, so the worker's queue grows to
 *                    hundreds of 4 KiB blocks.  Once the loop caught up,
 *                    at most 4 blocks may stay allocated.
 *   loop_pairs_memory
 *                    max_tasks 16; the loop thread (the wheel's owner,
 *                    before uv_run, as a callback would) makes 100,000
 *                    submit + cancel pairs.  Pool growth must follow live
 *                    tasks, not pairs: at most 1,024 nodes taken from the
 *                    pool.
 *   ending_race      exactly-once endings under every race at once: two
 *                    producer threads submit loop and threadpool tasks,
 *                    one-shot and repeating (some cancel themselves from
 *                    their third run), two other threads cancel them all
 *                    over and over, and the loop closes the wheel while the
 *                    cancellers still run (its close callback joins them).
 *                    Every task ends exactly once: by its run, by exactly
 *                    one cancel that returned 0 or UV_EBUSY (its own
 *                    included), or by its final call.
 *   worn_index       ids never reused, and an index whose generations are
 *                    used up is retired, not an error: index 0's
 *                    generations are used up through uvtw__pool_next_gen
 *                    (what recycle calls) and then by scratch pools (each
 *                    a wheel that uses node 0 once); a new wheel's first
 *                    submit, with memory to spare, must succeed (with a
 *                    fresh index). */

#include <pthread.h>

#include "task-record.h"
#include "task-harness.h"
#include "test-cases.h"

/* ---- starved_record ----------------------------------------------------- */

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


/* Stays alive until the end, so that P1 cannot land on its thread-local
 * block and adopt its record. */
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
      ASSERT_EQ(0, uvtw_submit(wheel, 3600 * 1000, 0, 0, sr_far_cb, NULL,
                               NULL));
    uv_sem_post(&sr_done);
  }
}


static int sr_x_ran(void) {
  return atomic_load(&sr_x.returned) == 1;
}


static void starved_record(void) {
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
  /* P2's record first: it is the older one, after P1's in the list. */
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


/* ---- thread_churn ------------------------------------------------------- */

#define TC_THREADS 64

static task_t tc_tasks[TC_THREADS];


static void* tc_thread(void* arg) {
  submit(arg, 0, 0, 0);
  return NULL;
}


static int tc_all_ran(void) {
  int i;

  for (i = 0; i < TC_THREADS; i++)
    if (atomic_load(&tc_tasks[i].returned) != 1)
      return 0;
  return 1;
}


static void count_records(size_t* records, size_t* blocks) {
  uvtw__producer_t* rec;

  *records = 0;
  *blocks = 0;
  for (rec = atomic_load(&wheel->tasks.producers); rec != NULL;
       rec = rec->next) {
    (*records)++;
    *blocks += atomic_load(&rec->nblocks);
  }
}


static void thread_churn(void) {
  pthread_t tid;
  size_t records;
  size_t blocks;
  int i;

  setup(0);
  for (i = 0; i < TC_THREADS; i++) {
    task_init(&tc_tasks[i]);
    ASSERT_EQ(0, pthread_create(&tid, NULL, tc_thread, &tc_tasks[i]));
    ASSERT_EQ(0, pthread_join(tid, NULL));
  }
  run_until(tc_all_ran, 0);
  count_records(&records, &blocks);
  fprintf(stderr,
          "%d threads ran one after the other, one task each: %zu records, "
          "%zu queue blocks (%zu KiB)\n",
          TC_THREADS, records, blocks,
          (records * sizeof(uvtw__producer_t) +
           blocks * sizeof(uvtw__block_t)) / 1024);
  teardown();
  /* Never more than one producer thread alive at once. */
  ASSERT_ULE(records, 8);
}


/* ---- tombstone_memory --------------------------------------------------- */

static int tm_pairs;


static void tm_noop(void* arg, int status) {
  (void) arg;
  (void) status;
  ASSERT(0); /* cancelled at once: never called */
}


static void tm_worker(void* arg) {
  uvtw_id_t id;
  int i;

  (void) arg;
  for (i = 0; i < tm_pairs; i++) {
    ASSERT_EQ(0, uvtw_submit(wheel, 3600 * 1000, 0, 0, tm_noop, NULL, &id));
    ASSERT_EQ(0, uvtw_cancel(wheel, id));
  }
}


static int tm_caught_up(void) {
  uvtw__producer_t* rec;

  for (rec = atomic_load(&wheel->tasks.producers); rec != NULL;
       rec = rec->next)
    if (rec->rblock != rec->wblock || rec->ridx != rec->widx)
      return 0;
  return 1;
}


static void tombstone_memory(void) {
  uv_thread_t tid;
  size_t records;
  size_t before;
  size_t after;
  int rounds;

  tm_pairs = scaled(200000);
  setup(16);
  /* The loop does not run while the worker works: it is busy elsewhere. */
  ASSERT_UV_OK(uv_thread_create(&tid, tm_worker, NULL));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
  count_records(&records, &before);
  for (rounds = 0; !tm_caught_up(); rounds++)
    one_pass();
  count_records(&records, &after);
  fprintf(stderr,
          "max_tasks 16, %d submit+cancel pairs: %zu queue blocks (%zu KiB) "
          "while the loop was away, %zu still allocated after the loop "
          "caught up (%d iterations)\n",
          tm_pairs, before, before * sizeof(uvtw__block_t) / 1024, after,
          rounds);
  teardown();
  ASSERT_ULE(after, 4);
}


/* ---- loop_pairs_memory -------------------------------------------------- */

static void loop_pairs_memory(void) {
  uvtw_id_t id;
  uint64_t nodes;
  int pairs;
  int i;

  pairs = scaled(100000);
  setup(16);
  for (i = 0; i < pairs; i++) {
    ASSERT_EQ(0, uvtw_submit(wheel, 3600 * 1000, 0, 0, tm_noop, NULL, &id));
    ASSERT_EQ(0, uvtw_cancel(wheel, id));
  }
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
  nodes = atomic_load(&wheel->tasks.pool.bump);
  fprintf(stderr,
          "max_tasks 16, %d submit+cancel pairs on the loop thread: %llu "
          "nodes (%llu KiB) taken from the pool\n",
          pairs, (unsigned long long) nodes,
          (unsigned long long) (nodes * sizeof(uvtw__task_t) / 1024));
  run_until(pending_zero, 0);
  teardown();
  ASSERT_ULE(nodes, 1024);
}


/* ---- ending_race -------------------------------------------------------- */

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
  uv_close((uv_handle_t*) handle, NULL);
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, er_close_cb));
}


static void ending_race(void) {
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
  ASSERT_UV_OK(uv_thread_create(&er_cancellers[0], er_canceller,
                                (void*) (intptr_t) 1));
  ASSERT_UV_OK(uv_thread_create(&er_cancellers[1], er_canceller,
                                (void*) (intptr_t) 2));
  ASSERT_UV_OK(uv_thread_create(&producers[0], er_producer,
                                (void*) (intptr_t) 0));
  ASSERT_UV_OK(uv_thread_create(&producers[1], er_producer,
                                (void*) (intptr_t) 1));
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
    ended = atomic_load(&er_ends[i]) + atomic_load(&t->finals) +
            (t->self_cancel_at != 0 &&
             atomic_load(&t->self_cancel_result) == 0 &&
             atomic_load(&t->runs) >= t->self_cancel_at);
    if (t->repeat == 0 && atomic_load(&er_ends[i]) == 0)
      ended += atomic_load(&t->runs); /* a one-shot's run is its end */
    if (ended != 1)
      fprintf(stderr, "task %d (repeat %llu, flags %u): %d endings: runs %d, "
              "cancels %d, finals %d, self %d\n", i,
              (unsigned long long) t->repeat, t->flags, ended,
              atomic_load(&t->runs), atomic_load(&er_ends[i]),
              atomic_load(&t->finals), atomic_load(&t->self_cancel_result));
    ASSERT_EQ(1, ended);
  }
}


/* ---- worn_index --------------------------------------------------------- */

static void worn_index(void) {
  _Alignas(64) uvtw__task_t fake;
  uvtw__task_t* nodes[1];
  uvtw__pool_t scratch;
  uvtw_wheel_t* second;
  uint64_t gens[1];
  unsigned n;
  int wheels;
  task_t t;
  task_t u;
  uint64_t blocks;
  int r;

  setup(0);
  /* Index 0 of this process's first pool: its generation counter exists. */
  task_init(&t);
  submit(&t, 3600 * 1000, 0, 0);
  ASSERT_EQ(0, (int) (t.id >> UVTW__GEN_BITS));
  ASSERT_EQ(0, cancel(&t));
  /* Use up index 0's generations, a block of 65,536 at a time, as a node
   * reused 2^36 times would. */
  memset(&fake, 0, sizeof(fake));
  fake.index = 0;
  fake.gen_end = 1;
  for (blocks = 0; uvtw__pool_next_gen(&fake, fake.gen_end - 1) != 0;)
    blocks++;
  /* What is left goes to new wheels, GEN_FIRST (64) at a time: each
   * scratch pool is a wheel whose node 0 is used once. */
  for (wheels = 0;; wheels++) {
    ASSERT_EQ(0, uvtw__pool_init(&scratch));
    n = uvtw__pool_alloc_new(&scratch, nodes, gens, 1);
    /* Worn out: UV_ENOMEM (n 0), or, once worn-out indices are retired,
     * the next index instead. */
    if (n == 1 && nodes[0]->index != 0)
      n = 0;
    uvtw__pool_destroy(&scratch);
    if (n == 0)
      break;
  }
  fprintf(stderr,
          "index 0 worn out after %llu blocks of 65,536 generations and "
          "%d wheels that used it once\n",
          (unsigned long long) blocks, wheels);
  /* A new wheel numbers its nodes from index 0 again. */
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &second));
  task_init(&u);
  r = uvtw_submit(second, 3600 * 1000, 0, 0, task_cb, &u, &u.id);
  fprintf(stderr, "the new wheel's first submit: %s\n",
          r == 0 ? "0" : uv_err_name(r));
  if (r == 0)
    ASSERT_EQ(0, uvtw_cancel(second, u.id));
  ASSERT_EQ(0, uvtw_wheel_close(second, NULL));
  teardown(); /* runs the loop until both wheels are gone */
  ASSERT_EQ(0, r);
}


static const test_case_t cases[] = {
  TEST_CASE(starved_record),
  TEST_CASE(thread_churn),
  TEST_CASE(tombstone_memory),
  TEST_CASE(loop_pairs_memory),
  TEST_CASE(ending_race),
  TEST_CASE(worn_index),
};


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
