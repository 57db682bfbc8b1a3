/* SPDX-License-Identifier: MIT */
/* uvtw-bench: cross-thread task scenarios.
 *
 * 1, 2 and 4 producer threads submit one-shot tasks (delays U[1 s, 60 s])
 * while the loop thread drains them.  uvtw: uvtw_submit (and uvtw_cancel).
 *   submit         every task stays live: memory grows with the run.
 *   submit-cancel  each submit is cancelled at once by its producer.
 *   submit-steady  each producer keeps STEADY_K tasks live: every op
 *                  submits one and cancels the producer's oldest, as
 *                  worker threads tracking RPC deadlines do.
 * Baseline: what a careful libuv user writes (see base_q_t below): a
 * mutex-protected list, uv_async_send, and uv_timer_start on the loop.
 *
 * Producers run until the span has passed or until they have submitted
 * their share of the cap on tasks per run (which bounds memory).  Then the
 * loop drains what is still queued.  The primary metric counts the tasks
 * over the time until the loop has taken every one of them in, so a side
 * whose producers outrun its loop is not credited for work left undone;
 * submit_per_s is the producers' rate alone. */

#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

#define MAX_PRODUCERS 64
#define DELAY_BITS 16
#define DELAY_MASK ((1u << DELAY_BITS) - 1)
#define CHECK_EVERY 256 /* ops between two looks at the clock */
#define BASE_CHUNK 4096 /* baseline nodes allocated at once */
#define STEADY_K 1000   /* live tasks per producer in submit-steady */
#define CLOCK_SAMPLES 100000 /* uv_hrtime() calls timed per run */

enum { MODE_SUBMIT, MODE_CANCEL, MODE_STEADY };
static const char* const mode_names[] = {"submit", "submit-cancel",
                                         "submit-steady"};


/* ---------------------------------------------------------------------- */
/* The baseline: a mutex-protected list plus uv_async_send, and one        */
/* uv_timer_t per task, started on the loop.                                */
/*                                                                          */
/* Nodes come from a pool (free list, refilled BASE_CHUNK nodes at a time)  */
/* and keep their uv_timer_t initialised across reuses, so the baseline     */
/* pays neither malloc nor uv_close per task.  A producer wakes the loop    */
/* only when the list goes from empty to non-empty.  The loop takes the     */
/* whole list at once (O(1) under the lock, by bumping `batch`), then       */
/* starts a uv_timer_t per node outside the lock.  Cancel under the lock:   */
/* a node still in the list is unlinked and freed at once; one the loop     */
/* already took goes on a cancel list, and the loop calls uv_timer_stop.   */

enum {
  B_FREE,
  B_PENDING,   /* submitted; in the list, or taken by the loop */
  B_CANCELLING /* cancelled after the loop took it; on the cancel list */
};

typedef struct base_node_s base_node_t;
typedef struct base_q_s base_q_t;

struct base_node_s {
  uv_timer_t timer;
  base_node_t* next;  /* pending list, the loop's batch, or free list */
  base_node_t* prev;  /* pending list */
  base_node_t* cnext; /* cancel list */
  base_q_t* q;
  uint64_t gen;    /* bumped on every free: stale handles fail */
  uint64_t batch;  /* the value of q->batch when it was listed */
  uint64_t due_ns; /* uv_hrtime at submit + delay */
  uvtw_task_cb cb;
  void* arg;
  int state;
  int inited;
};

struct base_q_s {
  uv_mutex_t mutex;
  base_node_t* head; /* pending: submitted, not yet taken by the loop */
  base_node_t* tail;
  base_node_t* cancel;
  base_node_t* free;
  uint64_t batch;
  base_node_t** chunks;
  size_t nchunks;
  base_node_t* bump; /* the newest chunk's unused part */
  base_node_t* bump_end;
  uv_async_t async;
  uv_loop_t* loop;
};

typedef struct base_id_s {
  base_node_t* node;
  uint64_t gen;
} base_id_t;


static base_node_t* base_alloc_locked(base_q_t* q) {
  base_node_t* n;

  n = q->free;
  if (n != NULL) {
    q->free = n->next;
    return n;
  }
  if (q->bump == q->bump_end) {
    n = calloc(BASE_CHUNK, sizeof(*n));
    q->chunks = realloc(q->chunks, (q->nchunks + 1) * sizeof(*q->chunks));
    if (n == NULL || q->chunks == NULL)
      abort();
    q->chunks[q->nchunks++] = n;
    q->bump = n;
    q->bump_end = n + BASE_CHUNK;
  }
  n = q->bump++;
  n->q = q;
  return n;
}


static void base_free_locked(base_q_t* q, base_node_t* n) {
  n->state = B_FREE;
  n->gen++;
  n->next = q->free;
  q->free = n;
}


static int base_submit(
    base_q_t* q, uint64_t delay_ms, uvtw_task_cb cb, void* arg, base_id_t* id) {
  base_node_t* n;
  uint64_t due;
  int wake;

  due = uv_hrtime() + delay_ms * 1000000u;
  uv_mutex_lock(&q->mutex);
  n = base_alloc_locked(q);
  n->state = B_PENDING;
  n->batch = q->batch;
  n->due_ns = due;
  n->cb = cb;
  n->arg = arg;
  n->next = NULL;
  n->prev = q->tail;
  if (q->tail != NULL)
    q->tail->next = n;
  else
    q->head = n;
  q->tail = n;
  wake = n->prev == NULL;
  if (id != NULL) {
    id->node = n;
    id->gen = n->gen;
  }
  uv_mutex_unlock(&q->mutex);
  if (wake)
    uv_async_send(&q->async);
  return 0;
}


static int base_cancel(base_q_t* q, base_id_t id) {
  base_node_t* n;
  int wake;

  n = id.node;
  wake = 0;
  uv_mutex_lock(&q->mutex);
  if (n->gen != id.gen || n->state != B_PENDING) {
    uv_mutex_unlock(&q->mutex);
    return UV_ENOENT;
  }
  if (n->batch == q->batch) {
    /* Still in the list: the loop never saw it. */
    if (n->prev != NULL)
      n->prev->next = n->next;
    else
      q->head = n->next;
    if (n->next != NULL)
      n->next->prev = n->prev;
    else
      q->tail = n->prev;
    base_free_locked(q, n);
  } else {
    n->state = B_CANCELLING;
    n->cnext = q->cancel;
    wake = q->cancel == NULL;
    q->cancel = n;
  }
  uv_mutex_unlock(&q->mutex);
  if (wake)
    uv_async_send(&q->async);
  return 0;
}


static void base_fire_cb(uv_timer_t* timer) {
  base_node_t* n;
  base_q_t* q;
  uvtw_task_cb cb;
  void* arg;

  n = (base_node_t*) timer;
  q = n->q;
  uv_mutex_lock(&q->mutex);
  if (n->state != B_PENDING) {
    /* Cancelled after the loop took it: the cancel list frees it. */
    uv_mutex_unlock(&q->mutex);
    return;
  }
  cb = n->cb;
  arg = n->arg;
  base_free_locked(q, n);
  uv_mutex_unlock(&q->mutex);
  cb(arg, 0);
}


static void base_async_cb(uv_async_t* async) {
  base_node_t* batch;
  base_node_t* cancel;
  base_node_t* n;
  base_node_t* next;
  base_q_t* q;
  uint64_t now_ms;
  uint64_t due_ms;

  q = async->data;
  uv_mutex_lock(&q->mutex);
  batch = q->head;
  q->head = q->tail = NULL;
  q->batch++;
  cancel = q->cancel;
  q->cancel = NULL;
  uv_mutex_unlock(&q->mutex);

  now_ms = uv_now(q->loop);
  for (n = batch; n != NULL; n = next) {
    /* Read the link first: a cancel may free the node (after its stop,
     * below, on a later pass) but never relinks `next` before that. */
    next = n->next;
    if (!n->inited) {
      uv_timer_init(q->loop, &n->timer);
      n->inited = 1;
    }
    due_ms = (n->due_ns + 999999) / 1000000;
    uv_timer_start(&n->timer, base_fire_cb,
                   due_ms > now_ms ? due_ms - now_ms : 0, 0);
  }
  if (cancel == NULL)
    return;
  for (n = cancel; n != NULL; n = n->cnext)
    uv_timer_stop(&n->timer);
  uv_mutex_lock(&q->mutex);
  for (n = cancel; n != NULL; n = next) {
    next = n->cnext;
    base_free_locked(q, n);
  }
  uv_mutex_unlock(&q->mutex);
}


static int base_open(base_q_t* q, uv_loop_t* loop) {
  memset(q, 0, sizeof(*q));
  q->loop = loop;
  if (uv_mutex_init(&q->mutex) != 0)
    return -1;
  if (uv_async_init(loop, &q->async, base_async_cb) != 0)
    return -1;
  q->async.data = q;
  uv_unref((uv_handle_t*) &q->async);
  return 0;
}


/* Non-zero while something submitted or cancelled waits for the loop. */
static int base_backlog(base_q_t* q) {
  int r;

  uv_mutex_lock(&q->mutex);
  r = q->head != NULL || q->cancel != NULL;
  uv_mutex_unlock(&q->mutex);
  return r;
}


/* Closes every timer the pool ever initialised and the async handle; the
 * caller runs the loop, then calls base_free. */
static void base_close(base_q_t* q) {
  base_node_t* n;
  size_t c;
  size_t i;

  for (c = 0; c < q->nchunks; c++) {
    for (i = 0; i < BASE_CHUNK; i++) {
      n = &q->chunks[c][i];
      if (n->inited)
        uv_close((uv_handle_t*) &n->timer, NULL);
    }
  }
  uv_close((uv_handle_t*) &q->async, NULL);
}


static void base_free(base_q_t* q) {
  size_t c;

  for (c = 0; c < q->nchunks; c++)
    free(q->chunks[c]);
  free(q->chunks);
  uv_mutex_destroy(&q->mutex);
}


/* ---------------------------------------------------------------------- */
/* Producers and runs.                                                      */

typedef struct kctx_s kctx_t;

typedef struct producer_s {
  alignas(64) uv_thread_t thread;
  kctx_t* c;
  const uint32_t* delay; /* 2^DELAY_BITS delays, ms */
  uint64_t count;
  uint64_t end_ns;
  int err;
  uvtw_id_t* ring;     /* submit-steady: the live tasks, oldest next */
  base_id_t* base_ring;
} producer_t;

struct kctx_s {
  uv_loop_t loop;
  int cancel; /* MODE_* */
  int side;
  int producers;
  uint64_t cap;    /* tasks per producer and run */
  uint64_t span;   /* ms */
  uint64_t end_ns; /* producers stop at this bench_now_ns() */
  uvtw_wheel_t* wheel;
  base_q_t base;
  uv_barrier_t barrier;
  alignas(64) atomic_int running;
  uv_async_t done; /* the last producer out stops the loop */
  uint32_t* delays[MAX_PRODUCERS];
  producer_t prod[MAX_PRODUCERS];
  uint64_t callbacks;
  int wheel_closed;
};


static void task_cb(void* arg, int status) {
  (void) status;
  ((kctx_t*) arg)->callbacks++;
}


static void producer_main(void* arg) {
  const uint32_t* delay;
  producer_t* p;
  base_id_t bid;
  uvtw_id_t id;
  kctx_t* c;
  uint64_t cap;
  uint64_t k;
  int stop;
  int i;
  int r;

  p = arg;
  c = p->c;
  delay = p->delay;
  cap = c->cap;
  k = 0;
  r = 0;
  uv_barrier_wait(&c->barrier);
  for (stop = 0; !stop && r == 0;) {
    if (c->cancel == MODE_STEADY && c->side == BENCH_SIDE_UVTW) {
      for (i = 0; i < CHECK_EVERY && r == 0; i++, k++) {
        if (k >= STEADY_K)
          r = uvtw_cancel(c->wheel, p->ring[k % STEADY_K]);
        if (r == 0)
          r = uvtw_submit(c->wheel, delay[k & DELAY_MASK], 0, 0, task_cb, c,
                          &p->ring[k % STEADY_K]);
      }
    } else if (c->cancel == MODE_STEADY) {
      for (i = 0; i < CHECK_EVERY && r == 0; i++, k++) {
        if (k >= STEADY_K)
          r = base_cancel(&c->base, p->base_ring[k % STEADY_K]);
        if (r == 0)
          r = base_submit(&c->base, delay[k & DELAY_MASK], task_cb, c,
                          &p->base_ring[k % STEADY_K]);
      }
    } else if (c->side == BENCH_SIDE_UVTW && !c->cancel) {
      for (i = 0; i < CHECK_EVERY && r == 0; i++, k++)
        r = uvtw_submit(c->wheel, delay[k & DELAY_MASK], 0, 0, task_cb, c,
                        NULL);
    } else if (c->side == BENCH_SIDE_UVTW) {
      for (i = 0; i < CHECK_EVERY && r == 0; i++, k++) {
        r = uvtw_submit(c->wheel, delay[k & DELAY_MASK], 0, 0, task_cb, c, &id);
        if (r == 0)
          r = uvtw_cancel(c->wheel, id);
      }
    } else if (!c->cancel) {
      for (i = 0; i < CHECK_EVERY && r == 0; i++, k++)
        r = base_submit(&c->base, delay[k & DELAY_MASK], task_cb, c, NULL);
    } else {
      for (i = 0; i < CHECK_EVERY && r == 0; i++, k++) {
        r = base_submit(&c->base, delay[k & DELAY_MASK], task_cb, c, &bid);
        if (r == 0)
          r = base_cancel(&c->base, bid);
      }
    }
    /* Each producer watches the clock itself, so a loop thread that falls
     * behind cannot make the producers run longer. */
    stop = k >= cap || bench_now_ns() >= c->end_ns;
  }
  if (r != 0)
    k--; /* the failed one */
  p->count = k;
  p->err = r;
  p->end_ns = bench_now_ns();
  if (atomic_fetch_sub(&c->running, 1) == 1)
    uv_async_send(&c->done);
}


static void done_cb(uv_async_t* async) {
  uv_stop(async->loop);
}


static void wheel_closed_cb(uvtw_wheel_t* wheel) {
  (void) wheel;
}


/* A fingerprint of the wheel's intake counters: it stops changing once
 * the loop has taken in everything the producers queued (uvtw drains in
 * bounded batches and signals itself between them).  Task runs are left
 * out: tasks keep coming due while the loop runs. */
static uint64_t uvtw_progress(uvtw_wheel_t* wheel) {
  uvtw_stats_t s;

  uvtw_wheel_stats(wheel, &s);
  return s.tasks_accepted + s.tasks_cancelled + s.async_wakeups +
         s.queue_high_water;
}


/* What one uv_hrtime() costs on this thread now, in ns: each submit of
 * either side reads the clock once (the delay counts from the submit), so
 * with one producer no side can take less than this per task.  Measured in
 * every run, beside the run, so that the bound is of the same moment.
 * With `raw`, one call of glibc's clock_gettime by its own address (what a
 * program without the interposer pays, conversion to ns included): the
 * difference is what the interposer's pass-through adds to each side. */
static double clock_ns(int raw) {
  volatile uint64_t sink;
  uint64_t t0;
  int i;

  t0 = bench_now_ns();
  for (i = 0; i < CLOCK_SAMPLES; i++)
    sink = raw ? bench_now_ns() : uv_hrtime();
  (void) sink;
  return (double) (bench_now_ns() - t0) / CLOCK_SAMPLES;
}


static int run_tasks(void* arg, int side, bench_sample_t* out) {
  struct rusage ru0;
  struct rusage ru1;
  kctx_t* c;
  uint64_t total;
  uint64_t prod_end;
  uint64_t drained;
  uint64_t before;
  uint64_t t0;
  int spins;
  int err;
  int i;
  int r;

  c = arg;
  c->side = side;
  c->callbacks = 0;
  out->v[5] = clock_ns(0);
  out->v[6] = clock_ns(1);
  atomic_store(&c->running, c->producers);
  if (side == BENCH_SIDE_UVTW) {
    r = uvtw_wheel_new(&c->loop, NULL, &c->wheel);
    if (r != 0) {
      bench_log("uvtw_wheel_new: %s\n", uv_strerror(r));
      return -1;
    }
  } else if (base_open(&c->base, &c->loop) != 0) {
    return -1;
  }
  uv_run(&c->loop, UV_RUN_NOWAIT);
  if (uv_barrier_init(&c->barrier, (unsigned) c->producers + 1) != 0)
    return -1;
  for (i = 0; i < c->producers; i++) {
    c->prod[i].c = c;
    c->prod[i].delay = c->delays[i];
    c->prod[i].count = 0;
    c->prod[i].err = 0;
    if (uv_thread_create(&c->prod[i].thread, producer_main, &c->prod[i]))
      abort();
  }
  getrusage(RUSAGE_SELF, &ru0);
  /* Producers read end_ns only after the barrier. */
  t0 = bench_now_ns();
  c->end_ns = t0 + c->span * 1000000u;
  uv_barrier_wait(&c->barrier);
  /* The loop drains while the producers run; the last one out stops it.
   * `done` is referenced only meanwhile, so that it keeps the loop going
   * but does not hold up the teardown. */
  uv_ref((uv_handle_t*) &c->done);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  uv_unref((uv_handle_t*) &c->done);
  total = 0;
  prod_end = t0;
  err = 0;
  for (i = 0; i < c->producers; i++) {
    uv_thread_join(&c->prod[i].thread);
    total += c->prod[i].count;
    if (c->prod[i].end_ns > prod_end)
      prod_end = c->prod[i].end_ns;
    if (c->prod[i].err != 0)
      err = c->prod[i].err;
  }
  uv_barrier_destroy(&c->barrier);

  /* Drain: run the loop until it has taken in every submission. */
  spins = 0;
  if (side == BENCH_SIDE_UVTW) {
    do {
      before = uvtw_progress(c->wheel);
      uv_run(&c->loop, UV_RUN_NOWAIT);
    } while (uvtw_progress(c->wheel) != before && ++spins < 1000000);
  } else {
    while (base_backlog(&c->base) && ++spins < 1000000)
      uv_run(&c->loop, UV_RUN_NOWAIT);
  }
  drained = bench_now_ns();
  getrusage(RUSAGE_SELF, &ru1);

  /* Teardown, untimed. */
  if (side == BENCH_SIDE_UVTW) {
    uvtw_wheel_close(c->wheel, wheel_closed_cb);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    c->wheel = NULL;
  } else {
    base_close(&c->base);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    base_free(&c->base);
  }
  bench_log(
      "    %s: %llu tasks, producers %.0f ms, drain %.1f ms, "
      "%ld minor faults, teardown %.0f ms\n",
      side == BENCH_SIDE_UVTW ? "uvtw" : "base", (unsigned long long) total,
      (prod_end - t0) / 1e6, (drained - prod_end) / 1e6,
      ru1.ru_minflt - ru0.ru_minflt, (bench_now_ns() - drained) / 1e6);
  if (err != 0) {
    bench_log("%s failed: %s\n",
              side == BENCH_SIDE_UVTW
                  ? (c->cancel ? "uvtw_submit/cancel" : "uvtw_submit")
                  : "baseline",
              uv_strerror(err));
    return -1;
  }
  out->v[0] = total / ((drained - t0) / 1e9);
  out->v[1] = total / ((prod_end - t0) / 1e9);
  out->v[2] = (drained - prod_end) / 1e6;
  out->v[3] = (double) total;
  /* The whole process's minor faults (producers and loop) per task. */
  out->v[4] = total == 0 ? 0 : (double) (ru1.ru_minflt - ru0.ru_minflt) / total;
  return 0;
}


static int run_cell(const bench_cfg_t* cfg, int cancel, int producers) {
  bench_cell_t cell;
  bench_rng_t rng;
  kctx_t* c;
  uint64_t cap;
  int failed;
  int i;
  int j;

  c = aligned_alloc(64, (sizeof(*c) + 63) & ~(size_t) 63);
  if (c == NULL)
    abort();
  memset(c, 0, sizeof(*c));
  c->cancel = cancel;
  c->producers = producers;
  c->span = cfg->quick ? 200 : 2000;
  /* Caps live tasks (memory) on fast sides; submit-cancel keeps none,
   * submit-steady STEADY_K per producer. */
  cap = cfg->ops ? cfg->ops : cfg->quick ? 2000000 : 10000000;
  if (cancel != MODE_SUBMIT)
    cap *= 4;
  c->cap = cap / (uint64_t) producers;
  /* The real clock, as a program has it: the idle scenarios' interposer
   * would charge both sides its own cost on every submit. */
  bench_clock_real(1);
  uv_loop_init(&c->loop);
  uv_async_init(&c->loop, &c->done, done_cb);
  uv_unref((uv_handle_t*) &c->done);
  for (i = 0; i < producers; i++) {
    c->delays[i] = bench_alloc(sizeof(uint32_t) << DELAY_BITS);
    bench_rng_seed(&rng, BENCH_SEED + 100 + (uint64_t) i);
    for (j = 0; j < (1 << DELAY_BITS); j++)
      c->delays[i][j] = (uint32_t) bench_rng_range(&rng, 1000, 60000);
    c->prod[i].ring = calloc(STEADY_K, sizeof(uvtw_id_t));
    c->prod[i].base_ring = calloc(STEADY_K, sizeof(base_id_t));
    if (c->prod[i].ring == NULL || c->prod[i].base_ring == NULL)
      abort();
  }

  memset(&cell, 0, sizeof(cell));
  cell.scenario = mode_names[cancel];
  cell.n = (uint64_t) producers;
  cell.ops = c->cap * (uint64_t) producers;
  cell.base_name = "mutex_list_async_uv_timer";
  cell.direction = BENCH_HIGHER_IS_BETTER;
  cell.nmetrics = 7;
  cell.metric[0] = "per_s";
  cell.metric[1] = "submit_per_s";
  cell.metric[2] = "drain_ms";
  cell.metric[3] = "tasks";
  cell.metric[4] = "faults_per_task";
  cell.metric[5] = "clock_ns";
  cell.metric[6] = "clock_raw_ns";
  cell.is_int[0] = cell.is_int[1] = cell.is_int[3] = 1;
  cell.runs = bench_runs(cfg, 5);
  cell.run = run_tasks;
  cell.ctx = c;
  failed = bench_cell_run(&cell) != 0;

  uv_close((uv_handle_t*) &c->done, NULL);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&c->loop) != 0) {
    bench_log("%s: uv_loop_close failed\n", cell.scenario);
    failed = 1;
  }
  bench_clock_real(0);
  for (i = 0; i < producers; i++) {
    bench_free(c->delays[i], sizeof(uint32_t) << DELAY_BITS);
    free(c->prod[i].ring);
    free(c->prod[i].base_ring);
  }
  free(c);
  return failed;
}


int bench_tasks_main(const bench_cfg_t* cfg) {
  static const int producers[] = {1, 2, 4};
  int failed;
  int cancel;
  int i;

  failed = 0;
  for (cancel = MODE_SUBMIT; cancel <= MODE_STEADY; cancel++) {
    if (!bench_selected(cfg, mode_names[cancel]))
      continue;
    if (cfg->n != 0) {
      if (cfg->n > MAX_PRODUCERS) {
        bench_log("--n: at most %d producers\n", MAX_PRODUCERS);
        failed++;
        continue;
      }
      failed += run_cell(cfg, cancel, (int) cfg->n);
      continue;
    }
    for (i = 0; i < 3; i++)
      failed += run_cell(cfg, cancel, producers[i]);
  }
  return failed;
}
