/* SPDX-License-Identifier: MIT */
/* uvtw_reset, checked against its contract alone (include/uvtw.h and
 * docs/tasks.md, docs/wheel.md, docs/virtual-time.md), as a caller who
 * has not read the library sees it:
 *   - a reset moves a live task's next run later or earlier, to delay_ms
 *     from the call: never early by uv_hrtime() on a real wheel, exactly
 *     at the new deadline (rounded up to a tick) on a virtual one; the
 *     last of several resets applies;
 *   - the task keeps its id (a cancel afterwards returns 0), its repeat,
 *     its flags and its place under max_tasks;
 *   - id 0, an unknown id, a foreign wheel's id, an ended one-shot and a
 *     cancelled task give UV_ENOENT and move nothing; a NULL wheel gives
 *     UV_EINVAL;
 *   - a reset during a run (from the task's own callback, or from another
 *     thread) gives UV_EBUSY: a repeating task runs next at the new
 *     deadline, a one-shot ends with that run;
 *   - once another thread's cancel got UV_EBUSY for a run, the task's own
 *     reset and cancel from that run give UV_ENOENT;
 *   - a run handed to the threadpool and not started waits for the new
 *     deadline;
 *   - after uvtw_wheel_close began, a reset never makes a task run: it
 *     gets exactly one final UV_ECANCELED call;
 *   - threads that reset and cancel the same tasks at once end every task
 *     exactly once.
 * task-harness.h's callback checks the per-call rules (thread, no overlap,
 * no run after a cancel, at most one final call) on every call. */

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <uv.h>

#include "task-harness.h"
#include "test-cases.h"
#include "test.h"
#include "uvtw.h"

#define HOUR_MS ((uint64_t) 3600 * 1000)

/* A task record with what the contract's checks need beyond the
 * harness's: the wheel's clock at each loop-thread run, and a reset the
 * task makes of itself from one of its runs. */
typedef struct {
  task_t t; /* first: the harness's hook gets &t */
  uint64_t now[TASK_MAX_TIMES];
  int reset_at_run; /* 0: none */
  uint64_t reset_delay;
  uint64_t reset_before_ms; /* hr_ms() just before that reset */
  atomic_int reset_result;
} vtask_t;


static void vhook(task_t* t, int run) {
  vtask_t* v;

  v = (vtask_t*) t;
  if (!(t->flags & UVTW_THREADPOOL) && run <= TASK_MAX_TIMES)
    v->now[run - 1] = uvtw_wheel_now(wheel);
  if (run == v->reset_at_run) {
    v->reset_before_ms = hr_ms();
    atomic_store(&v->reset_result, uvtw_reset(wheel, t->id, v->reset_delay));
  }
}


static void vtask_init(vtask_t* v) {
  memset(v, 0, sizeof(*v));
  task_init(&v->t);
  v->t.hook = vhook;
  atomic_store(&v->reset_result, 1); /* no reset made */
}


/* A loop and a virtual wheel with tick_ms. */
static void setup_virtual(uint64_t tick_ms) {
  uvtw_options_t opts;

  uvtw_options_init(&opts);
  opts.tick_ms = tick_ms;
  opts.virtual_time = 1;
  ASSERT_UV_OK(uv_loop_init(&loop));
  warm_threadpool();
  ASSERT_EQ(0, uvtw_wheel_new(&loop, &opts, &wheel));
  ASSERT_UV_OK(uv_timer_init(&loop, &poll_timer));
  ASSERT_UV_OK(uv_idle_init(&loop, &spin_idle));
  atomic_store(&close_cb_called, 0);
  loop_tid = uv_thread_self();
}


static void advance(uint64_t ms) {
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, ms));
}


static uint64_t ns_to_ms(uint64_t ns) {
  return ns / 1000000;
}


static task_t* wait_a;
static task_t* wait_b;


static int both_ran(void) {
  return atomic_load(&wait_a->returned) >= 1 &&
         atomic_load(&wait_b->returned) >= 1;
}


static int a_returned_2(void) {
  return atomic_load(&wait_a->returned) >= 2;
}


static int a_started(void) {
  return atomic_load(&wait_a->runs) >= 1;
}


/* Later: a loop task and a threadpool task, due in 10 ms, are moved to
 * 250 ms from the reset, and neither runs before that (floor ms, as
 * docs/tasks.md, "Never early", measures). */
static void reset_later(void) {
  vtask_t a;
  vtask_t b;
  uint64_t before;

  setup(0);
  vtask_init(&a);
  vtask_init(&b);
  submit(&a.t, 10, 0, 0);
  submit(&b.t, 10, 0, UVTW_THREADPOOL);
  one_pass(); /* the loop has taken them in */
  before = hr_ms();
  ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, 250));
  ASSERT_EQ(0, uvtw_reset(wheel, b.t.id, 250));
  wait_a = &a.t;
  wait_b = &b.t;
  run_until(both_ran, 0);
  run_until(pending_zero, 0);
  ASSERT_UGE(ns_to_ms(a.t.start_ns[0]) - before, 250);
  ASSERT_UGE(ns_to_ms(b.t.start_ns[0]) - before, 250);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_EQ(1, atomic_load(&b.t.runs));
  teardown();
  ASSERT_EQ(0, atomic_load(&a.t.finals));
  ASSERT_EQ(0, atomic_load(&b.t.finals));
}


/* Earlier: tasks due in an hour are moved to 20 ms from the reset; they
 * run then (within seconds), never before. */
static void reset_earlier(void) {
  vtask_t a;
  vtask_t b;
  uint64_t before;

  setup(0);
  vtask_init(&a);
  vtask_init(&b);
  submit(&a.t, HOUR_MS, 0, 0);
  submit(&b.t, HOUR_MS, 0, UVTW_THREADPOOL);
  one_pass();
  before = hr_ms();
  ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, 20));
  ASSERT_EQ(0, uvtw_reset(wheel, b.t.id, 20));
  wait_a = &a.t;
  wait_b = &b.t;
  run_until(both_ran, 0);
  ASSERT_UGE(ns_to_ms(a.t.start_ns[0]) - before, 20);
  ASSERT_UGE(ns_to_ms(b.t.start_ns[0]) - before, 20);
  ASSERT_ULT(ns_to_ms(a.t.start_ns[0]) - before, 10000);
  ASSERT_ULT(ns_to_ms(b.t.start_ns[0]) - before, 10000);
  run_until(pending_zero, 0);
  teardown();
}


static vtask_t* other_a;
static vtask_t* other_b;
static uint64_t other_before;


static vtask_t* other_c;
static uint64_t other_before_c;


static void other_thread_resets(void* arg) {
  (void) arg;
  other_before = hr_ms();
  ASSERT_EQ(0, uvtw_reset(wheel, other_a->t.id, 150));
  ASSERT_EQ(0, uvtw_reset(wheel, other_b->t.id, 150));
  submit(&other_c->t, 5, 0, 0);
  other_before_c = hr_ms();
  ASSERT_EQ(0, uvtw_reset(wheel, other_c->t.id, 150));
}


/* A reset from a thread that is not the loop's counts from that call,
 * also of a task that thread submitted and the loop has not taken in
 * yet. */
static void reset_from_other_thread(void) {
  vtask_t a;
  vtask_t b;
  vtask_t c;
  uv_thread_t th;

  setup(0);
  vtask_init(&a);
  vtask_init(&b);
  vtask_init(&c);
  submit(&a.t, HOUR_MS, 0, 0);
  submit(&b.t, 5, 0, UVTW_THREADPOOL);
  other_a = &a;
  other_b = &b;
  other_c = &c;
  ASSERT_UV_OK(uv_thread_create(&th, other_thread_resets, NULL));
  ASSERT_UV_OK(uv_thread_join(&th));
  wait_a = &a.t;
  wait_b = &b.t;
  run_until(both_ran, 0);
  run_until(pending_zero, 0);
  ASSERT_UGE(ns_to_ms(a.t.start_ns[0]) - other_before, 150);
  ASSERT_UGE(ns_to_ms(b.t.start_ns[0]) - other_before, 150);
  ASSERT_EQ(1, atomic_load(&c.t.runs));
  ASSERT_UGE(ns_to_ms(c.t.start_ns[0]) - other_before_c, 150);
  teardown();
}


/* Virtual wheel, later: due at t0 + 10, reset at t0 + 5 to 100 ms, so due
 * at t0 + 105 exactly. */
static void virtual_later_exact(void) {
  vtask_t a;
  uint64_t t0;

  setup_virtual(1);
  t0 = uvtw_wheel_now(wheel);
  vtask_init(&a);
  submit(&a.t, 10, 0, 0);
  advance(5);
  ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, 100));
  advance(99);
  ASSERT_UEQ(t0 + 104, uvtw_wheel_now(wheel));
  ASSERT_EQ(0, atomic_load(&a.t.runs));
  advance(1);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 105, a.now[0]);
  advance(1000);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_EQ(0, (int) uvtw_wheel_pending(wheel));
  teardown();
}


static void other_thread_resets_40(void* arg) {
  (void) arg;
  ASSERT_EQ(0, uvtw_reset(wheel, other_a->t.id, 40));
  ASSERT_EQ(0, uvtw_reset(wheel, other_b->t.id, 40));
  submit(&other_c->t, 10, 0, 0);
  ASSERT_EQ(0, uvtw_reset(wheel, other_c->t.id, 40));
}


static int a_ran(void) {
  return atomic_load(&wait_a->returned) >= 1;
}


/* Virtual wheel, a reset from another thread counts from the wheel's
 * clock: due at t0 + 10, reset at t0 + 4 to 40 ms, so due at t0 + 44; the
 * threadpool task is not handed over before then.  So does a task that
 * thread submits and resets before the loop took it in. */
static void virtual_other_thread(void) {
  vtask_t a;
  vtask_t b;
  vtask_t c;
  uv_thread_t th;
  uint64_t t0;

  setup_virtual(1);
  t0 = uvtw_wheel_now(wheel);
  vtask_init(&a);
  vtask_init(&b);
  vtask_init(&c);
  other_c = &c;
  submit(&a.t, 10, 0, 0);
  submit(&b.t, 10, 0, UVTW_THREADPOOL);
  advance(4);
  other_a = &a;
  other_b = &b;
  ASSERT_UV_OK(uv_thread_create(&th, other_thread_resets_40, NULL));
  ASSERT_UV_OK(uv_thread_join(&th));
  advance(39);
  ASSERT_UEQ(t0 + 43, uvtw_wheel_now(wheel));
  run_for(30); /* time for a wrongly handed-over run to show */
  ASSERT_EQ(0, atomic_load(&a.t.runs));
  ASSERT_EQ(0, atomic_load(&b.t.runs));
  ASSERT_EQ(0, atomic_load(&c.t.runs));
  advance(1);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 44, a.now[0]);
  ASSERT_EQ(1, atomic_load(&c.t.runs));
  ASSERT_UEQ(t0 + 44, c.now[0]);
  wait_a = &b.t;
  run_until(a_ran, 0);
  run_until(pending_zero, 0);
  teardown();
}


/* Virtual wheel, earlier, and the last of several resets applies. */
static void virtual_earlier_exact(void) {
  vtask_t a;
  vtask_t b;
  uint64_t t0;

  setup_virtual(1);
  t0 = uvtw_wheel_now(wheel);
  vtask_init(&a);
  vtask_init(&b);
  submit(&a.t, 100000, 0, 0);
  submit(&b.t, 10, 0, 0);
  ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, 3));
  ASSERT_EQ(0, uvtw_reset(wheel, b.t.id, 1000));
  ASSERT_EQ(0, uvtw_reset(wheel, b.t.id, 3));
  ASSERT_EQ(0, uvtw_reset(wheel, b.t.id, 50));
  advance(2);
  ASSERT_EQ(0, atomic_load(&a.t.runs));
  advance(1);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 3, a.now[0]);
  ASSERT_EQ(0, atomic_load(&b.t.runs));
  advance(46);
  ASSERT_EQ(0, atomic_load(&b.t.runs));
  advance(1);
  ASSERT_EQ(1, atomic_load(&b.t.runs));
  ASSERT_UEQ(t0 + 50, b.now[0]);
  advance(200000);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_EQ(1, atomic_load(&b.t.runs));
  teardown();
}


static vtask_t* cb_later;
static uint64_t cb_delay;


static void resetting_hook(task_t* t, int run) {
  vhook(t, run);
  ASSERT_EQ(0, atomic_load(&cb_later->t.runs));
  ASSERT_EQ(0, uvtw_reset(wheel, cb_later->t.id, cb_delay));
}


/* From inside another task's callback, in one advance(30): x runs at
 * t0 + 5 and resets `later`, submitted for `delay`, to 5 + `new_delay`,
 * where it runs, in that advance (no lateness in virtual time). */
static void reset_in_callback(uint64_t delay, uint64_t new_delay) {
  vtask_t x;
  vtask_t later;
  uint64_t t0;

  setup_virtual(1);
  t0 = uvtw_wheel_now(wheel);
  vtask_init(&x);
  vtask_init(&later);
  x.t.hook = resetting_hook;
  cb_later = &later;
  cb_delay = new_delay;
  submit(&x.t, 5, 0, 0);
  submit(&later.t, delay, 0, 0);
  advance(30);
  ASSERT_EQ(1, atomic_load(&x.t.runs));
  ASSERT_UEQ(t0 + 5, x.now[0]);
  ASSERT_EQ(1, atomic_load(&later.t.runs));
  ASSERT_UEQ(t0 + 5 + new_delay, later.now[0]);
  ASSERT_EQ(0, (int) uvtw_wheel_pending(wheel));
  teardown();
}


/* Later: from t0 + 10 to t0 + 25. */
static void virtual_reset_in_callback(void) {
  reset_in_callback(10, 20);
}


/* Earlier: from t0 + 1000 to t0 + 8. */
static void virtual_reset_earlier_in_callback(void) {
  reset_in_callback(1000, 3);
}


/* Virtual wheel with a 10 ms tick: the new deadline rounds up to a tick,
 * never down. */
static void virtual_tick(void) {
  vtask_t a;
  uint64_t t0;
  uint64_t due;
  int i;

  setup_virtual(10);
  t0 = uvtw_wheel_now(wheel);
  vtask_init(&a);
  submit(&a.t, 1000, 0, 0);
  advance(3);
  ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, 25));
  due = t0 + 3 + 25;
  for (i = 0; i < 100 && atomic_load(&a.t.runs) == 0; i++)
    advance(1);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_UGE(a.now[0], due);
  ASSERT_ULT(a.now[0], due + 10);
  teardown();
}


/* A reset keeps the repeat: runs at t0 + 10; reset at t0 + 13 to 7 ms,
 * so the next run is at t0 + 20 and then every 50 ms from it. */
static void virtual_repeat_kept(void) {
  vtask_t a;
  uint64_t t0;

  setup_virtual(1);
  t0 = uvtw_wheel_now(wheel);
  vtask_init(&a);
  submit(&a.t, 10, 50, 0);
  advance(10);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 10, a.now[0]);
  advance(3);
  ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, 7));
  advance(6);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  advance(1);
  ASSERT_EQ(2, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 20, a.now[1]);
  advance(49);
  ASSERT_EQ(2, atomic_load(&a.t.runs));
  advance(1);
  ASSERT_EQ(3, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 70, a.now[2]);
  advance(50);
  ASSERT_EQ(4, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 120, a.now[3]);
  ASSERT_EQ(1, (int) uvtw_wheel_pending(wheel));
  ASSERT_EQ(0, cancel(&a.t));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.t.id, 0));
  ASSERT_EQ(0, (int) uvtw_wheel_pending(wheel));
  advance(1000);
  ASSERT_EQ(4, atomic_load(&a.t.runs));
  teardown();
}


/* The id survives any number of resets: a cancel afterwards returns 0,
 * and then reset and cancel both give UV_ENOENT. */
static void id_kept(void) {
  vtask_t a;
  vtask_t b;
  int i;

  setup(0);
  vtask_init(&a);
  vtask_init(&b);
  submit(&a.t, HOUR_MS, HOUR_MS, UVTW_THREADPOOL);
  submit(&b.t, HOUR_MS, 0, 0);
  for (i = 0; i < 10; i++) {
    ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, HOUR_MS + (uint64_t) i));
    ASSERT_EQ(0, uvtw_reset(wheel, b.t.id, HOUR_MS - (uint64_t) i));
    ASSERT_EQ(2, (int) uvtw_wheel_pending(wheel));
    if (i % 3 == 0)
      one_pass();
  }
  ASSERT_EQ(0, cancel(&a.t));
  ASSERT_EQ(0, cancel(&b.t));
  ASSERT_EQ(0, (int) uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.t.id, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, b.t.id, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, a.t.id));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, b.t.id));
  run_for(30);
  ASSERT_EQ(0, atomic_load(&a.t.runs));
  ASSERT_EQ(0, atomic_load(&b.t.runs));
  teardown();
  ASSERT_EQ(0, atomic_load(&a.t.finals));
  ASSERT_EQ(0, atomic_load(&b.t.finals));
}


static atomic_int other_closed;


static void other_close_cb(uvtw_wheel_t* w) {
  (void) w;
  atomic_store(&other_closed, 1);
}


static int other_is_closed(void) {
  return atomic_load(&other_closed);
}


static void other_cb(void* arg, int status) {
  atomic_int* calls;

  calls = arg;
  atomic_fetch_add(&calls[status == 0 ? 0 : 1], 1);
}


/* UV_EINVAL for a NULL wheel; UV_ENOENT for id 0, unknown ids, another
 * wheel's ids (open, and after that wheel was freed), an ended one-shot
 * and a cancelled task; none of them moves the one live task, which runs
 * exactly at its own deadline. */
static void enoent_and_einval(void) {
  static const uint64_t offsets[] = {
      1, 2, 3, 0x100, (uint64_t) 1 << 20, (uint64_t) 1 << 40};
  uvtw_wheel_t* w2;
  vtask_t live;
  vtask_t ended;
  vtask_t cancelled;
  atomic_int f_calls[2];
  atomic_int g_calls[2];
  uvtw_id_t f_id;
  uvtw_id_t g_id;
  uvtw_id_t cand;
  uvtw_options_t opts;
  uint64_t t0;
  uint64_t w2_t0;
  size_t i;

  setup_virtual(1);
  uvtw_options_init(&opts);
  opts.virtual_time = 1;
  ASSERT_EQ(0, uvtw_wheel_new(&loop, &opts, &w2));
  atomic_store(&other_closed, 0);
  t0 = uvtw_wheel_now(wheel);
  w2_t0 = uvtw_wheel_now(w2);
  atomic_init(&f_calls[0], 0);
  atomic_init(&f_calls[1], 0);
  atomic_init(&g_calls[0], 0);
  atomic_init(&g_calls[1], 0);

  vtask_init(&live);
  vtask_init(&ended);
  vtask_init(&cancelled);
  submit(&live.t, 100, 0, 0);
  submit(&ended.t, 0, 0, 0);
  submit(&cancelled.t, 50, 0, 0);
  ASSERT_EQ(0, uvtw_submit(w2, 100, 0, 0, other_cb, f_calls, &f_id));
  ASSERT_EQ(0, uvtw_submit(w2, HOUR_MS, 0, 0, other_cb, g_calls, &g_id));

  ASSERT_EQ(UV_EINVAL, uvtw_reset(NULL, live.t.id, 0));
  ASSERT_EQ(UV_EINVAL, uvtw_reset(NULL, 0, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, 0, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, f_id, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(w2, live.t.id, 0));

  advance(0);
  ASSERT_EQ(1, atomic_load(&ended.t.runs));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, ended.t.id, 0));
  ASSERT_EQ(0, cancel(&cancelled.t));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, cancelled.t.id, 0));

  /* live is now the wheel's only live task: any other number is unknown
   * to it, or the id of an ended task, or another wheel's. */
  for (i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
    cand = live.t.id + offsets[i];
    if (cand != live.t.id)
      ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, cand, 0));
    cand = live.t.id - offsets[i];
    if (cand != live.t.id && cand != 0)
      ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, cand, 0));
    cand = live.t.id ^ offsets[i];
    if (cand != live.t.id && cand != 0)
      ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, cand, 0));
  }
  for (cand = 1; cand <= 4; cand++)
    if (cand != live.t.id)
      ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, cand, 0));
  if (live.t.id != UINT64_MAX)
    ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, UINT64_MAX, 0));
  ASSERT_EQ(1, (int) uvtw_wheel_pending(wheel));

  advance(99);
  ASSERT_UEQ(t0 + 99, uvtw_wheel_now(wheel));
  ASSERT_EQ(0, atomic_load(&live.t.runs));
  advance(1);
  ASSERT_EQ(1, atomic_load(&live.t.runs));
  ASSERT_UEQ(t0 + 100, live.now[0]);
  ASSERT_EQ(0, atomic_load(&cancelled.t.runs));

  /* w2's task was not moved either, and it still runs on w2. */
  ASSERT_EQ(0, uvtw_wheel_advance(w2, 99));
  ASSERT_EQ(0, atomic_load(&f_calls[0]));
  ASSERT_EQ(0, uvtw_wheel_advance(w2, 1));
  ASSERT_UEQ(w2_t0 + 100, uvtw_wheel_now(w2));
  ASSERT_EQ(1, atomic_load(&f_calls[0]));

  /* After w2 is freed, its ids are still foreign: f ran, g got its final
   * call. */
  ASSERT_EQ(0, uvtw_wheel_close(w2, other_close_cb));
  run_until(other_is_closed, 0);
  ASSERT_EQ(0, atomic_load(&g_calls[0]));
  ASSERT_EQ(1, atomic_load(&g_calls[1]));
  ASSERT_EQ(0, atomic_load(&f_calls[1]));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, f_id, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, g_id, 0));
  teardown();
}


/* From a one-shot's own callback: UV_EBUSY, the run goes on, and the
 * one-shot ends with it (virtual wheel, loop thread; real wheel,
 * threadpool). */
static void busy_own_oneshot(void) {
  vtask_t a;
  vtask_t b;

  setup_virtual(1);
  vtask_init(&a);
  a.reset_at_run = 1;
  a.reset_delay = 0;
  submit(&a.t, 5, 0, 0);
  advance(5);
  ASSERT_EQ(1, atomic_load(&a.t.returned));
  ASSERT_EQ(UV_EBUSY, atomic_load(&a.reset_result));
  advance(0);
  advance(1000);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_EQ(0, (int) uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.t.id, 0));
  ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, a.t.id));
  teardown();
  ASSERT_EQ(0, atomic_load(&a.t.finals));

  setup(0);
  vtask_init(&b);
  b.reset_at_run = 1;
  b.reset_delay = 1;
  submit(&b.t, 0, 0, UVTW_THREADPOOL);
  run_until(pending_zero, 0);
  ASSERT_EQ(1, atomic_load(&b.t.returned));
  ASSERT_EQ(UV_EBUSY, atomic_load(&b.reset_result));
  run_for(50);
  ASSERT_EQ(1, atomic_load(&b.t.runs));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, b.t.id, 0));
  teardown();
  ASSERT_EQ(0, atomic_load(&b.t.finals));
}


/* From a repeating task's own callback: UV_EBUSY, and the next run is at
 * the new deadline, the repeat counting from that run.  Virtual: runs at
 * t0 + 10, reset there to 25 ms, so t0 + 35, then t0 + 135.  Real,
 * threadpool, repeat 20 ms: reset to 300 ms in run 1, so run 2 starts
 * 300 ms or more after that reset. */
static void busy_own_repeat(void) {
  vtask_t a;
  vtask_t b;
  uint64_t t0;
  int r;

  setup_virtual(1);
  t0 = uvtw_wheel_now(wheel);
  vtask_init(&a);
  a.reset_at_run = 1;
  a.reset_delay = 25;
  submit(&a.t, 10, 100, 0);
  advance(10);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_EQ(UV_EBUSY, atomic_load(&a.reset_result));
  advance(24);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  advance(1);
  ASSERT_EQ(2, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 35, a.now[1]);
  advance(99);
  ASSERT_EQ(2, atomic_load(&a.t.runs));
  advance(1);
  ASSERT_EQ(3, atomic_load(&a.t.runs));
  ASSERT_UEQ(t0 + 135, a.now[2]);
  ASSERT_EQ(0, cancel(&a.t));
  teardown();

  setup(0);
  vtask_init(&b);
  b.reset_at_run = 1;
  b.reset_delay = 300;
  submit(&b.t, 0, 20, UVTW_THREADPOOL);
  wait_a = &b.t;
  run_until(a_returned_2, 0);
  ASSERT_EQ(UV_EBUSY, atomic_load(&b.reset_result));
  ASSERT_UGE(ns_to_ms(b.t.start_ns[1]) - b.reset_before_ms, 300);
  r = cancel(&b.t);
  ASSERT(r == 0 || r == UV_EBUSY);
  run_until(pending_zero, 0);
  teardown();
  ASSERT_EQ(0, atomic_load(&b.t.finals));
}


/* While a threadpool run executes on another thread: UV_EBUSY.  A
 * one-shot ends with that run; a repeating task (repeat 20 ms) runs next
 * 300 ms or more after the reset. */
static void busy_from_other_thread(void) {
  vtask_t a;
  vtask_t b;
  uv_sem_t go_a;
  uv_sem_t go_b;
  uint64_t before;
  int r;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&go_a, 0));
  ASSERT_UV_OK(uv_sem_init(&go_b, 0));
  vtask_init(&a);
  vtask_init(&b);
  a.t.go = &go_a;
  b.t.go = &go_b;
  submit(&a.t, 0, 0, UVTW_THREADPOOL);
  submit(&b.t, 0, 20, UVTW_THREADPOOL);
  wait_a = &a.t;
  run_until(a_started, 0);
  wait_a = &b.t;
  run_until(a_started, 0);

  ASSERT_EQ(UV_EBUSY, uvtw_reset(wheel, a.t.id, 0));
  before = hr_ms();
  ASSERT_EQ(UV_EBUSY, uvtw_reset(wheel, b.t.id, 300));
  ASSERT_EQ(2, (int) uvtw_wheel_pending(wheel));
  uv_sem_post(&go_a);
  uv_sem_post(&go_b);
  wait_a = &b.t;
  run_until(a_returned_2, 0);
  ASSERT_UGE(ns_to_ms(b.t.start_ns[1]) - before, 300);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_EQ(1, atomic_load(&a.t.returned));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.t.id, 0));
  r = cancel(&b.t);
  ASSERT(r == 0 || r == UV_EBUSY);
  run_until(pending_zero, 0);
  teardown();
  ASSERT_EQ(0, atomic_load(&a.t.finals));
  ASSERT_EQ(0, atomic_load(&b.t.finals));
  uv_sem_destroy(&go_a);
  uv_sem_destroy(&go_b);
}


/* A repeating task whose run executes when a cancel returns UV_EBUSY has
 * no next run: a reset then gives UV_ENOENT (uvtw.h, uvtw_reset:
 * "whose last run began after a cancel returned UV_EBUSY") and makes
 * none. */
static void reset_after_busy_cancel(void) {
  vtask_t a;
  uv_sem_t go;
  int r;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&go, 0));
  vtask_init(&a);
  a.t.go = &go;
  submit(&a.t, 0, 5, UVTW_THREADPOOL);
  wait_a = &a.t;
  run_until(a_started, 0);
  ASSERT_EQ(UV_EBUSY, cancel(&a.t));
  r = uvtw_reset(wheel, a.t.id, 0);
  uv_sem_post(&go);
  run_until(pending_zero, 0);
  run_for(50);
  ASSERT_EQ(UV_ENOENT, r);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_EQ(UV_ENOENT, uvtw_reset(wheel, a.t.id, 0));
  teardown();
  ASSERT_EQ(0, atomic_load(&a.t.finals));
  uv_sem_destroy(&go);
}


/* A task's own uvtw_reset and uvtw_cancel, made after another thread's
 * cancel got UV_EBUSY for the same run, both return UV_ENOENT (uvtw.h):
 * that run is the task's last.  A repeating task, on the loop and on the
 * threadpool. */
static uv_sem_t ob_started;
static uv_sem_t ob_go;
static atomic_int ob_busy;
static atomic_int ob_reset;


static void ob_hook(task_t* t, int run) {
  if (run == 1)
    atomic_store(&ob_reset, uvtw_reset(wheel, t->id, 0));
}


static void ob_canceller(void* arg) {
  uv_sem_wait(&ob_started);
  atomic_store(&ob_busy, cancel(arg));
  uv_sem_post(&ob_go);
}


static void own_calls_after_busy_cancel(void) {
  uv_thread_t tid;
  task_t t;
  int pool;

  for (pool = 0; pool < 2; pool++) {
    setup(0);
    ASSERT_UV_OK(uv_sem_init(&ob_started, 0));
    ASSERT_UV_OK(uv_sem_init(&ob_go, 0));
    task_init(&t);
    t.started = &ob_started;
    t.go = &ob_go;
    t.hook = ob_hook;
    t.self_cancel_at = 1;
    submit(&t, 0, 5, pool ? UVTW_THREADPOOL : 0);
    ASSERT_UV_OK(uv_thread_create(&tid, ob_canceller, &t));
    run_until(pending_zero, 0);
    ASSERT_UV_OK(uv_thread_join(&tid));
    run_for(20);
    teardown();
    ASSERT_EQ(UV_EBUSY, atomic_load(&ob_busy));
    ASSERT_EQ(UV_ENOENT, atomic_load(&ob_reset));
    ASSERT_EQ(UV_ENOENT, atomic_load(&t.self_cancel_result));
    ASSERT_EQ(1, atomic_load(&t.runs));
    ASSERT_EQ(0, atomic_load(&t.finals));
    uv_sem_destroy(&ob_started);
    uv_sem_destroy(&ob_go);
  }
}


/* With both threadpool threads (UV_THREADPOOL_SIZE=2, set in main) held,
 * a due threadpool task waits in the pool's queue; a reset returns 0 and
 * its run waits for the new deadline, 300 ms from the reset, even once
 * the threads are free. */
static void queued_on_pool_waits(void) {
  vtask_t hold[2];
  vtask_t a;
  uv_sem_t go;
  uint64_t before;
  int i;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&go, 0));
  for (i = 0; i < 2; i++) {
    vtask_init(&hold[i]);
    hold[i].t.go = &go;
    submit(&hold[i].t, 0, 0, UVTW_THREADPOOL);
  }
  wait_a = &hold[0].t;
  run_until(a_started, 0);
  wait_a = &hold[1].t;
  run_until(a_started, 0);
  vtask_init(&a);
  submit(&a.t, 5, 0, UVTW_THREADPOOL);
  run_for(60); /* a is due, and handed to the pool, which is busy */
  ASSERT_EQ(0, atomic_load(&a.t.runs));
  before = hr_ms();
  ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, 300));
  uv_sem_post(&go);
  uv_sem_post(&go);
  run_until(pending_zero, 0);
  ASSERT_EQ(1, atomic_load(&a.t.runs));
  ASSERT_UGE(ns_to_ms(a.t.start_ns[0]) - before, 300);
  teardown();
  uv_sem_destroy(&go);
}


/* max_tasks = 2: resets keep both tasks' places (pending stays 2 and a
 * third submit is refused) until a cancel frees one. */
static void max_tasks_kept(void) {
  vtask_t a;
  vtask_t b;
  vtask_t c;
  uvtw_id_t id;
  int i;

  setup(2);
  vtask_init(&a);
  vtask_init(&b);
  vtask_init(&c);
  submit(&a.t, HOUR_MS, HOUR_MS, 0);
  submit(&b.t, HOUR_MS, 0, UVTW_THREADPOOL);
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, task_cb, &c, &id));
  for (i = 0; i < 20; i++) {
    ASSERT_EQ(0, uvtw_reset(wheel, a.t.id, HOUR_MS + (uint64_t) i));
    ASSERT_EQ(0, uvtw_reset(wheel, b.t.id, HOUR_MS + (uint64_t) i));
    ASSERT_EQ(2, (int) uvtw_wheel_pending(wheel));
    ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, task_cb, &c, &id));
    if (i % 4 == 0)
      one_pass();
  }
  one_pass();
  ASSERT_EQ(2, (int) uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, task_cb, &c, &id));
  ASSERT_EQ(0, cancel(&a.t));
  submit(&c.t, HOUR_MS, 0, 0);
  ASSERT_EQ(2, (int) uvtw_wheel_pending(wheel));
  ASSERT_EQ(UV_ENOSPC, uvtw_submit(wheel, 0, 0, 0, task_cb, &c, &id));
  teardown();
  ASSERT_EQ(0, atomic_load(&a.t.finals));
  ASSERT_EQ(1, atomic_load(&b.t.finals));
  ASSERT_EQ(1, atomic_load(&c.t.finals));
  ASSERT_EQ(0, atomic_load(&a.t.runs) + atomic_load(&b.t.runs) +
                   atomic_load(&c.t.runs));
}


#define NCLOSE 4

/* Close, then reset every live task to 0 ms: none runs, each gets exactly
 * one final UV_ECANCELED call; a repeating threadpool task whose run is in
 * flight at close finishes that run, then gets its final call. */
static void reset_after_close(void) {
  static const unsigned flags[NCLOSE] = {0, 0, UVTW_THREADPOOL,
                                         UVTW_THREADPOOL};
  static const uint64_t repeats[NCLOSE] = {0, 5, 0, 5};
  vtask_t t[NCLOSE];
  vtask_t busy;
  uv_sem_t go;
  int i;
  int r;

  setup(0);
  ASSERT_UV_OK(uv_sem_init(&go, 0));
  for (i = 0; i < NCLOSE; i++) {
    vtask_init(&t[i]);
    submit(&t[i].t, HOUR_MS, repeats[i], flags[i]);
  }
  vtask_init(&busy);
  busy.t.go = &go;
  submit(&busy.t, 0, 5, UVTW_THREADPOOL);
  wait_a = &busy.t;
  run_until(a_started, 0);

  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  for (i = 0; i < NCLOSE; i++) {
    r = uvtw_reset(wheel, t[i].t.id, 0);
    ASSERT(r == 0 || r == UV_ENOENT);
  }
  r = uvtw_reset(wheel, busy.t.id, 0);
  ASSERT(r == 0 || r == UV_EBUSY || r == UV_ENOENT);
  uv_sem_post(&go);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));
  for (i = 0; i < NCLOSE; i++) {
    ASSERT_EQ(0, atomic_load(&t[i].t.runs));
    ASSERT_EQ(1, atomic_load(&t[i].t.finals));
  }
  ASSERT_EQ(1, atomic_load(&busy.t.runs));
  ASSERT_EQ(1, atomic_load(&busy.t.finals));
  uv_sem_destroy(&go);
}


/* Shared by the two many-thread cases: every task's ends, counted. */
#define NTASKS 32
#define NTHREADS 4

typedef struct {
  vtask_t v[NTASKS];
  atomic_int cancel_zero[NTASKS];
  atomic_int cancel_busy[NTASKS];
  atomic_int stop;
  atomic_int threads_done;
  int ops; /* per thread; 0: until stop */
  int cancel_one_in;
  int first; /* the threads pick tasks first..NTASKS-1 */
  uv_thread_t th[NTHREADS];
  uint64_t seed[NTHREADS];
  int joined;
} crowd_t;

static crowd_t crowd;


static int crowd_is_oneshot(int i) {
  return crowd.v[i].t.repeat == 0;
}


static void crowd_submit_all(uint64_t delay) {
  int i;

  memset(&crowd, 0, sizeof(crowd));
  for (i = 0; i < NTASKS; i++) {
    vtask_init(&crowd.v[i]);
    /* Threadpool runs last a millisecond, so that cancels and resets
     * from the threads find some of them executing. */
    if ((i / 2) % 2)
      crowd.v[i].t.sleep_ms = 1;
    submit(&crowd.v[i].t, delay, (uint64_t) (i % 2) * (1 + (i / 2) % 3),
           (i / 2) % 2 ? UVTW_THREADPOOL : 0);
  }
}


static void crowd_thread(void* arg) {
  uint64_t* seed;
  uint64_t x;
  task_t* t;
  int cancelled;
  int n;
  int i;
  int r;

  seed = arg;
  for (n = 0; crowd.ops == 0 ? !atomic_load(&crowd.stop) : n < crowd.ops; n++) {
    /* Bursts of 64 calls, a millisecond apart, so that the calls spread
     * over many of the loop's iterations and the tasks' runs. */
    if (n % 64 == 63)
      uv_sleep(1);
    x = test_xorshift64(seed);
    i = crowd.first + (int) (x % (uint64_t) (NTASKS - crowd.first));
    t = &crowd.v[i].t;
    /* Cancels in the second half only, so that resets first find every
     * task live. */
    if (crowd.cancel_one_in != 0 && n >= crowd.ops / 2 &&
        (x >> 8) % (uint64_t) crowd.cancel_one_in == 0) {
      r = cancel(t);
      ASSERT(r == 0 || r == UV_EBUSY || r == UV_ENOENT);
      if (r == 0)
        atomic_fetch_add(&crowd.cancel_zero[i], 1);
      else if (r == UV_EBUSY)
        atomic_fetch_add(&crowd.cancel_busy[i], 1);
      continue;
    }
    /* Read before the call: a cancel that returned 0 before it makes the
     * reset UV_ENOENT. */
    cancelled = atomic_load(&crowd.cancel_zero[i]);
    r = uvtw_reset(wheel, t->id, (x >> 16) % 64 == 0 ? HOUR_MS : (x >> 24) % 4);
    ASSERT(r == 0 || r == UV_EBUSY || r == UV_ENOENT);
    if (cancelled)
      ASSERT_EQ(UV_ENOENT, r);
  }
  atomic_fetch_add(&crowd.threads_done, 1);
}


static void crowd_start(int ops, int cancel_one_in) {
  int k;

  crowd.ops = ops;
  crowd.cancel_one_in = cancel_one_in;
  for (k = 0; k < NTHREADS; k++) {
    crowd.seed[k] = 0x9e3779b97f4a7c15ull * (uint64_t) (k + 1);
    ASSERT_UV_OK(uv_thread_create(&crowd.th[k], crowd_thread, &crowd.seed[k]));
  }
}


static void crowd_join(void) {
  int k;

  if (crowd.joined)
    return;
  crowd.joined = 1;
  atomic_store(&crowd.stop, 1);
  for (k = 0; k < NTHREADS; k++)
    ASSERT_UV_OK(uv_thread_join(&crowd.th[k]));
}


/* Every task ended exactly once: a one-shot by its run, a cancel that
 * returned 0, or its final call (a UV_EBUSY cancel only while its run
 * executed); a repeating task by a cancel that returned 0 or UV_EBUSY, or
 * its final call. */
static void crowd_check_ends(void) {
  int zero;
  int busy;
  int runs;
  int finals;
  int i;

  for (i = 0; i < NTASKS; i++) {
    zero = atomic_load(&crowd.cancel_zero[i]);
    busy = atomic_load(&crowd.cancel_busy[i]);
    runs = atomic_load(&crowd.v[i].t.returned);
    finals = atomic_load(&crowd.v[i].t.finals);
    ASSERT_EQ(runs, atomic_load(&crowd.v[i].t.runs));
    if (crowd_is_oneshot(i)) {
      ASSERT_EQ(1, runs + zero + finals);
      ASSERT_LE(busy, runs);
      ASSERT_LE(busy, 1);
    } else {
      ASSERT_EQ(1, zero + busy + finals);
    }
  }
}


static int crowd_threads_done(void) {
  return atomic_load(&crowd.threads_done) == NTHREADS;
}


static size_t crowd_expected_live;


static int crowd_settled(void) {
  int i;

  for (i = 0; i < NTASKS; i++)
    if (crowd_is_oneshot(i) && atomic_load(&crowd.cancel_zero[i]) == 0 &&
        atomic_load(&crowd.v[i].t.returned) == 0)
      return 0;
  return uvtw_wheel_pending(wheel) == crowd_expected_live;
}


/* The cancels that ended a task: every one that returned 0, and every
 * UV_EBUSY one of a repeating task.  Whether a one-shot's UV_EBUSY cancel
 * counts in tasks_cancelled (its run ends it, too) the contract leaves
 * open: it may. */
static uint64_t crowd_cancels_min;
static uint64_t crowd_cancels_max;


static int crowd_cancels_counted(void) {
  uvtw_stats_t st;

  uvtw_wheel_stats(wheel, &st);
  return st.tasks_cancelled >= crowd_cancels_min;
}


/* Four threads reset (to 0..3 ms, sometimes an hour) and now and then
 * cancel the same 32 tasks (one-shot and repeating, loop and threadpool)
 * while the loop runs them.  Then every one-shot not yet ended is reset
 * to 0 ms, and the wheel settles: live tasks are exactly the repeating
 * ones no cancel ended; close gives those their final call; every task
 * ends exactly once. */
static void many_threads_reset_cancel(void) {
  uvtw_stats_t st;
  size_t live;
  int zero;
  int busy;
  int i;
  int r;

  setup(0);
  crowd_submit_all(HOUR_MS);
  crowd_start(scale_n(64 * 150, 4), 400);
  run_until(crowd_threads_done, 0);
  crowd_join();
  for (i = 0; i < NTASKS; i++) {
    if (!crowd_is_oneshot(i))
      continue;
    r = uvtw_reset(wheel, crowd.v[i].t.id, 0);
    ASSERT(r == 0 || r == UV_EBUSY || r == UV_ENOENT);
    if (atomic_load(&crowd.cancel_zero[i]) != 0)
      ASSERT_EQ(UV_ENOENT, r);
  }
  live = 0;
  crowd_cancels_min = 0;
  crowd_cancels_max = 0;
  for (i = 0; i < NTASKS; i++) {
    zero = atomic_load(&crowd.cancel_zero[i]);
    busy = atomic_load(&crowd.cancel_busy[i]);
    crowd_cancels_min += (uint64_t) (zero + (crowd_is_oneshot(i) ? 0 : busy));
    crowd_cancels_max += (uint64_t) (zero + busy);
    if (!crowd_is_oneshot(i) && zero == 0 && busy == 0)
      live++;
  }
  crowd_expected_live = live;
  run_until(crowd_settled, 0);
  run_until(crowd_cancels_counted, 0);
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(live, st.tasks_live);
  ASSERT_UEQ(NTASKS, st.tasks_accepted);
  ASSERT_UEQ(0, st.tasks_closed);
  ASSERT_ULE(st.tasks_cancelled, crowd_cancels_max);
  teardown();
  crowd_check_ends();
}


/* The stopper's final call comes before the close callback: the threads
 * stop there, as the shutdown rule asks. */
static void crowd_final_hook(task_t* t) {
  if (t == &crowd.v[0].t)
    crowd_join();
}


/* Threads reset the tasks (never the stopper, an hour-long one-shot) while
 * the loop thread closes the wheel: no run after close, and each task
 * ends exactly once, the live ones by their final call. */
static void reset_races_close(void) {
  int i;

  setup(0);
  crowd_submit_all(HOUR_MS);
  for (i = 0; i < NTASKS; i++)
    crowd.v[i].t.final_hook = crowd_final_hook;
  crowd.first = 1; /* the stopper, crowd.v[0], is never picked */
  crowd_start(0, 0);
  run_for(50);
  teardown();
  ASSERT(crowd.joined);
  crowd_check_ends();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(reset_later),
  TEST_CASE(reset_earlier),
  TEST_CASE(reset_from_other_thread),
  TEST_CASE(virtual_later_exact),
  TEST_CASE(virtual_earlier_exact),
  TEST_CASE(virtual_other_thread),
  TEST_CASE(virtual_reset_in_callback),
  TEST_CASE(virtual_reset_earlier_in_callback),
  TEST_CASE(virtual_tick),
  TEST_CASE(virtual_repeat_kept),
  TEST_CASE(id_kept),
  TEST_CASE(enoent_and_einval),
  TEST_CASE(busy_own_oneshot),
  TEST_CASE(busy_own_repeat),
  TEST_CASE(busy_from_other_thread),
  TEST_CASE(reset_after_busy_cancel),
  TEST_CASE(own_calls_after_busy_cancel),
  TEST_CASE(queued_on_pool_waits),
  TEST_CASE(max_tasks_kept),
  TEST_CASE(reset_after_close),
  TEST_CASE(many_threads_reset_cancel),
  TEST_CASE(reset_races_close),
};
/* clang-format on */


int main(int argc, char** argv) {
  /* Two threadpool threads, so that queued_on_pool_waits can hold both. */
  test_setenv("UV_THREADPOOL_SIZE", "2");
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
