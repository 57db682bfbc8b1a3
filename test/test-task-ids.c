/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: an id names one task of one wheel, for the life of
 * the process.
 *
 * Wheels A and B share a loop, C has a loop of its own, and D is created on
 * A's loop after A was closed and freed (so it may well get A's memory).
 * Every wheel numbers its nodes from 0, so the tasks compared here sit at
 * the same node index in each wheel: exactly the case in which ids made of
 * (index, generation per node) collided.  In every state a task can be in
 * (in the submission stack, filed, QUEUED on the threadpool, RUNNING,
 * STOPPING after a UV_EBUSY cancel, CANCELLED with its notice not yet
 * drained, freed after a cancel, DONE, owed its final call at close, and
 * after its wheel was freed), uvtw_cancel of its id on every other wheel
 * returns UV_ENOENT and changes nothing: each task afterwards still runs,
 * is cancelled by its own wheel, or gets its final call, exactly as if the
 * foreign cancels had not happened.  Finally, ids issued over many reuses
 * of the same nodes in several wheels (past the first block of
 * generations) are all distinct. */

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "internal.h"
#include "test.h"
#include "uvtw.h"

#define NW 4 /* A, B, C, D */
#define NUNIQUE 300

typedef struct rec_s {
  uvtw_id_t id;
  atomic_int runs;
  atomic_int finals;
  atomic_int started;
  uv_sem_t go; /* a blocking run waits on it */
  int block;
} rec_t;

static uv_loop_t loops[2];
static uv_idle_t idles[2]; /* make every pass a full loop iteration */
static uvtw_wheel_t* w[NW];


static void rec_cb(void* arg, int status) {
  rec_t* r;

  r = arg;
  if (status == UV_ECANCELED) {
    atomic_fetch_add(&r->finals, 1);
    return;
  }
  ASSERT_EQ(0, status);
  atomic_store(&r->started, 1);
  if (r->block)
    uv_sem_wait(&r->go);
  atomic_fetch_add(&r->runs, 1);
}


static void idle_cb(uv_idle_t* idle) {
  (void) idle;
}


/* One iteration of each loop, whether or not anything keeps it alive. */
static void pass(void) {
  int i;

  for (i = 0; i < 2; i++) {
    ASSERT_UV_OK(uv_idle_start(&idles[i], idle_cb));
    uv_run(&loops[i], UV_RUN_NOWAIT);
    uv_idle_stop(&idles[i]);
  }
}


static void pump_until(atomic_int* v, int want) {
  uint64_t deadline;

  deadline = uv_hrtime() + (uint64_t) 30 * 1000 * 1000 * 1000;
  while (atomic_load(v) < want) {
    ASSERT(uv_hrtime() < deadline);
    pass();
    uv_sleep(1);
  }
}


static void pump_for(unsigned ms) {
  uint64_t end;

  end = uv_hrtime() + (uint64_t) ms * 1000 * 1000;
  while (uv_hrtime() < end) {
    pass();
    uv_sleep(1);
  }
}


/* A cancel of id on every wheel but `own` (and freed ones) is UV_ENOENT. */
static void foreign(uvtw_id_t id, int own) {
  int k;

  for (k = 0; k < NW; k++)
    if (k != own && w[k] != NULL)
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(w[k], id));
}


static void rec_init(rec_t* r, int block) {
  memset(r, 0, sizeof(*r));
  r->block = block;
  if (block)
    ASSERT_UV_OK(uv_sem_init(&r->go, 0));
}


static void submit_on(
    int k, rec_t* r, uint64_t delay, unsigned flags, int block) {
  rec_init(r, block);
  ASSERT_EQ(0, uvtw_submit(w[k], delay, 0, flags, rec_cb, r, &r->id));
  ASSERT_NE(0, r->id);
}


/* One task per wheel in `ks`, at the same node index on each. */
static void submit_same_index(rec_t* r, const int* ks, int n, uint64_t delay) {
  int i;
  int j;

  for (i = 0; i < n; i++)
    submit_on(ks[i], &r[i], delay, 0, 0);
  for (i = 0; i < n; i++)
    for (j = 0; j < i; j++) {
      ASSERT_UEQ(UVTW__ID_INDEX(r[i].id), UVTW__ID_INDEX(r[j].id));
      ASSERT(r[i].id != r[j].id);
    }
}


static void close_cb(uvtw_wheel_t* wheel) {
  int k;

  for (k = 0; k < NW; k++)
    if (w[k] == wheel)
      w[k] = NULL;
}


static int cmp_id(const void* a, const void* b) {
  uvtw_id_t x;
  uvtw_id_t y;

  x = *(const uvtw_id_t*) a;
  y = *(const uvtw_id_t*) b;
  return x < y ? -1 : x > y;
}


int main(void) {
  static const int abc[3] = {0, 1, 2};
  static uvtw_id_t ids[2 * 3 * NUNIQUE + 16];
  static rec_t waiting[3];   /* 1 h tasks, alive until the end (or close) */
  static rec_t cancelled[3]; /* cancelled by their own wheel */
  static rec_t done[3];      /* ran */
  static rec_t again[3];     /* the nodes of `done`, reused */
  static rec_t run[3];       /* a blocking threadpool run */
  static rec_t queued[3];    /* behind it on the one threadpool thread */
  static rec_t on_d;
  static rec_t churn;
  uvtw_id_t a_ids[8];
  size_t nids;
  int na;
  int i;
  int k;

  /* One threadpool thread, so that a task can be held QUEUED. */
  test_setenv("UV_THREADPOOL_SIZE", "1");
  ASSERT_UV_OK(uv_loop_init(&loops[0]));
  ASSERT_UV_OK(uv_loop_init(&loops[1]));
  ASSERT_UV_OK(uv_idle_init(&loops[0], &idles[0]));
  ASSERT_UV_OK(uv_idle_init(&loops[1], &idles[1]));
  ASSERT_EQ(0, uvtw_wheel_new(&loops[0], NULL, &w[0]));
  ASSERT_EQ(0, uvtw_wheel_new(&loops[0], NULL, &w[1]));
  ASSERT_EQ(0, uvtw_wheel_new(&loops[1], NULL, &w[2]));
  na = 0;

  /* In the submission stack, then filed in the wheel. */
  submit_same_index(waiting, abc, 3, 3600 * 1000);
  for (i = 0; i < 3; i++)
    foreign(waiting[i].id, i);
  pass();
  for (i = 0; i < 3; i++)
    foreign(waiting[i].id, i);
  a_ids[na++] = waiting[0].id;

  /* Cancelled: before its notice is drained, and after its node is free. */
  submit_same_index(cancelled, abc, 3, 3600 * 1000);
  pass();
  for (i = 0; i < 3; i++) {
    ASSERT_EQ(0, uvtw_cancel(w[i], cancelled[i].id));
    foreign(cancelled[i].id, i);
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(w[i], cancelled[i].id));
  }
  pass();
  for (i = 0; i < 3; i++) {
    foreign(cancelled[i].id, i);
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(w[i], cancelled[i].id));
  }
  a_ids[na++] = cancelled[0].id;

  /* DONE, and the same nodes reused for new tasks. */
  submit_same_index(done, abc, 3, 0);
  for (i = 0; i < 3; i++)
    pump_until(&done[i].runs, 1);
  pass();
  for (i = 0; i < 3; i++) {
    foreign(done[i].id, i);
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(w[i], done[i].id));
  }
  submit_same_index(again, abc, 3, 3600 * 1000);
  for (i = 0; i < 3; i++) {
    ASSERT_UEQ(UVTW__ID_INDEX(again[i].id), UVTW__ID_INDEX(done[i].id));
    ASSERT(again[i].id != done[i].id);
    foreign(done[i].id, i);
    foreign(again[i].id, i);
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(w[i], done[i].id));
    ASSERT_EQ(0, uvtw_cancel(w[i], again[i].id));
  }
  pass();
  a_ids[na++] = done[0].id;
  a_ids[na++] = again[0].id;

  /* Threadpool: RUNNING, QUEUED behind it, STOPPING after UV_EBUSY.  One
   * wheel at a time: the pool has one thread. */
  for (i = 0; i < 3; i++) {
    submit_on(i, &run[i], 0, UVTW_THREADPOOL, 1);
    pump_until(&run[i].started, 1);
    foreign(run[i].id, i);
    submit_on(i, &queued[i], 0, UVTW_THREADPOOL, 0);
    pump_for(20); /* handed to uv_queue_work, behind the blocked run */
    foreign(queued[i].id, i);
    ASSERT_EQ(UV_EBUSY, uvtw_cancel(w[i], run[i].id));
    foreign(run[i].id, i);
    uv_sem_post(&run[i].go);
    pump_until(&queued[i].runs, 1);
    ASSERT_EQ(1, atomic_load(&run[i].runs));
    foreign(run[i].id, i);
    foreign(queued[i].id, i);
    uv_sem_destroy(&run[i].go);
  }
  a_ids[na++] = run[0].id;
  a_ids[na++] = queued[0].id;

  /* A closing: waiting[0] is owed its final call; the others' cancels do
   * not take it.  Then A is freed, and D may get its memory. */
  ASSERT_EQ(0, uvtw_wheel_close(w[0], close_cb));
  for (i = 0; i < na; i++)
    foreign(a_ids[i], 0);
  while (w[0] != NULL)
    pass();
  ASSERT_EQ(1, atomic_load(&waiting[0].finals));
  ASSERT_EQ(0, atomic_load(&waiting[0].runs));
  ASSERT_EQ(0, uvtw_wheel_new(&loops[0], NULL, &w[3]));
  submit_on(3, &on_d, 3600 * 1000, 0, 0);
  ASSERT_UEQ(UVTW__ID_INDEX(on_d.id), UVTW__ID_INDEX(a_ids[0]));
  for (i = 0; i < na; i++) {
    ASSERT(on_d.id != a_ids[i]);
    foreign(a_ids[i], 0); /* B, C and D */
  }
  pass();
  for (i = 0; i < na; i++)
    foreign(a_ids[i], 0);
  foreign(on_d.id, 3);

  /* Many reuses of the same few nodes, in three wheels: all ids differ. */
  nids = 0;
  for (i = 0; i < NUNIQUE; i++)
    for (k = 1; k < NW; k++) {
      submit_on(k, &churn, 3600 * 1000, 0, 0);
      ids[nids++] = churn.id;
      ASSERT_EQ(0, uvtw_cancel(w[k], churn.id));
      pass();
    }
  for (i = 0; i < na; i++)
    ids[nids++] = a_ids[i];
  ids[nids++] = on_d.id;
  for (k = 1; k < 3; k++)
    ids[nids++] = waiting[k].id;
  qsort(ids, nids, sizeof(ids[0]), cmp_id);
  for (i = 1; i < (int) nids; i++)
    ASSERT(ids[i] != ids[i - 1]);

  /* Every foreign cancel above changed nothing: the waiting tasks are still
   * there for their own wheel to cancel. */
  for (k = 1; k < 3; k++) {
    ASSERT_EQ(0, uvtw_cancel(w[k], waiting[k].id));
    ASSERT_EQ(0, atomic_load(&waiting[k].runs));
  }
  ASSERT_EQ(0, uvtw_cancel(w[3], on_d.id));
  for (k = 1; k < NW; k++)
    ASSERT_EQ(0, uvtw_wheel_close(w[k], close_cb));
  while (w[1] != NULL || w[2] != NULL || w[3] != NULL)
    pass();
  for (k = 1; k < 3; k++)
    ASSERT_EQ(0, atomic_load(&waiting[k].finals));
  ASSERT_EQ(0, atomic_load(&on_d.finals));
  uv_close((uv_handle_t*) &idles[0], NULL);
  uv_close((uv_handle_t*) &idles[1], NULL);
  uv_run(&loops[0], UV_RUN_DEFAULT);
  uv_run(&loops[1], UV_RUN_DEFAULT);
  ASSERT_EQ(0, uv_loop_close(&loops[0]));
  ASSERT_EQ(0, uv_loop_close(&loops[1]));
  return 0;
}
