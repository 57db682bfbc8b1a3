/* SPDX-License-Identifier: MIT */
/* The two implementations of backend.h: the uvtw wheel and plain libuv. */

#include "backend.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
#define container_of(ptr, type, member)                                       \
  ((type*) ((char*) (ptr) - offsetof(type, member)))
/* clang-format on */


/* ---------------------------------------------------------------------- */
/* The list of works that have not had their done call yet.  The wheel    */
/* backend needs it to finish works whose hop back to the loop failed (see */
/* tw_pool_cb); the uv backend to cancel queued works at close.             */

static void works_insert(xbackend_t* b, xwork_t* w) {
  w->next = b->works.next;
  w->prev = &b->works;
  w->next->prev = w;
  b->works.next = w;
  b->works_live++;
}


static void works_remove(xbackend_t* b, xwork_t* w) {
  w->prev->next = w->next;
  w->next->prev = w->prev;
  w->next = w->prev = NULL;
  b->works_live--;
}


static void tw_close(xbackend_t* b);


/* The one place a work ends: exactly one done call per submitted work. */
static void work_finish(xwork_t* w, int status) {
  xbackend_t* b = w->backend;
  int was_closing = b->closing;

  works_remove(b, w);
  w->done(w, status);
  /* The uv backend closes its control wheel once its last work is done;
   * both finish closing in tw_wheel_closed, after the wheel has made its
   * final calls.  A done call may itself close the backend (the server
   * frees a connection there, which can be a stopped loop's last): then
   * xbackend_close, which found no work left, has closed the wheel. */
  if (b->kind == XBACKEND_UV && was_closing && b->works_live == 0)
    tw_close(b);
}


/* ---------------------------------------------------------------------- */
/* The wheel.                                                               */

static void tw_timer_cb(uvtw_timer_t* handle) {
  xtimer_t* t = container_of(handle, xtimer_t, u.tw);
  t->cb(t);
}


/* Loop thread: the hop back from the threadpool, or the stand-in for a run
 * that xwork_cancel prevented. */
static void tw_hop_cb(void* arg, int status) {
  xwork_t* w = arg;

  /* status is UV_ECANCELED only when the wheel is closing; the work itself
   * ran (or was cancelled) all the same, so it does not change the answer. */
  (void) status;
  work_finish(w, w->cancelled ? UV_ECANCELED : 0);
}


/* A uvtw task with UVTW_THREADPOOL runs on a threadpool thread and has no
 * "after work" callback on the loop, so the loop learns that the work is
 * over from a second, loop-thread task that the first one submits: uvtw's
 * task API is safe from any thread, and that is what it is for.
 *
 * If that submission fails (UV_ECANCELED: the wheel is closing; UV_ENOMEM)
 * the work stays on the backend's list and tw_wheel_closed finishes it,
 * which is safe because by then the wheel has waited for every run.  Until
 * then the request it belongs to is answered by its deadline, so a client
 * still gets exactly one reply. */
static void tw_pool_cb(void* arg, int status) {
  xwork_t* w = arg;

  if (status != 0) {
    /* The final call at wheel close, on the loop thread: fn never ran. */
    work_finish(w, status);
    return;
  }
  w->fn(w);
  uvtw_submit(w->backend->wheel, 0, 0, 0, tw_hop_cb, w, NULL);
}


/* uvtw_close_cb has no user pointer, and a thread closes one backend at a
 * time (each loop thread its own), so the backend that is closing is kept
 * here, per thread. */
static __thread xbackend_t* tw_closing;

static void tw_wheel_closed(uvtw_wheel_t* wheel) {
  xbackend_t* b = tw_closing;
  xbackend_close_cb cb;

  (void) wheel; /* only read by the assert */
  assert(b != NULL && b->wheel == wheel);
  tw_closing = NULL;
  b->wheel = NULL;
  /* Only works whose hop failed are left, and their runs are over. */
  while (b->works.next != &b->works)
    work_finish(b->works.next, UV_ECANCELED);
  cb = b->close_cb;
  b->close_cb = NULL;
  if (cb != NULL)
    cb(b);
}


static void tw_close(xbackend_t* b) {
  assert(tw_closing == NULL);
  tw_closing = b;
  if (uvtw_wheel_close(b->wheel, tw_wheel_closed) != 0)
    abort(); /* only fails for NULL or a second close: a bug here */
}


/* ---------------------------------------------------------------------- */
/* Plain libuv.                                                             */

/* The bucket of uvtw_stats_t.lateness for a callback `late` ms late: 0
 * on time, then one bucket per bit length, the last one open-ended. */
static unsigned late_bucket(uint64_t late) {
  unsigned bits = late == 0 ? 0 : 64 - (unsigned) __builtin_clzll(late);

  return bits < UVTW_LATENESS_BUCKETS ? bits : UVTW_LATENESS_BUCKETS - 1;
}


/* Lateness as the wheel measures it: the loop's clock when the callback
 * starts, minus the deadline.  libuv never runs a timer before its due
 * time by that clock, but the check keeps a wrap out of the last bucket. */
static void uv_timer_fire(uv_timer_t* handle) {
  xtimer_t* t = container_of(handle, xtimer_t, u.uv.handle);
  xbackend_t* b = t->backend;
  uint64_t now = uv_now(b->loop);

  b->timers_active--;
  b->fired++;
  b->lateness[late_bucket(now > t->u.uv.due ? now - t->u.uv.due : 0)]++;
  t->cb(t);
}


static void uv_timer_closed(uv_handle_t* handle) {
  xtimer_t* t = container_of(handle, xtimer_t, u.uv.handle);
  t->close_cb(t);
}


static void uv_work_run(uv_work_t* req) {
  xwork_t* w = container_of(req, xwork_t, u.uv);
  w->fn(w);
}


static void uv_work_after(uv_work_t* req, int status) {
  work_finish(container_of(req, xwork_t, u.uv), status);
}


/* ---------------------------------------------------------------------- */
/* The interface.                                                           */

const char* xbackend_name(xbackend_kind_t kind) {
  return kind == XBACKEND_WHEEL ? "wheel" : "uv";
}


int xbackend_init(xbackend_t* b, xbackend_kind_t kind, uv_loop_t* loop) {
  int err;

  b->kind = kind;
  b->loop = loop;
  b->wheel = NULL;
  b->works.next = b->works.prev = &b->works;
  b->works_live = 0;
  b->timers_active = 0;
  b->fired = 0;
  memset(b->lateness, 0, sizeof(b->lateness));
  b->closing = 0;
  b->close_cb = NULL;
  /* The uv backend has a wheel too, which holds no timers and runs no
   * work: it carries the control tasks other threads send to the loop
   * (xbackend.h, "wheel"). */
  err = uvtw_wheel_new(loop, NULL, &b->wheel);
  if (err != 0)
    return err;
  return 0;
}


void xbackend_stats(const xbackend_t* b, xstats_t* out) {
  uvtw_stats_t s;

  if (b->kind == XBACKEND_WHEEL && b->wheel != NULL) {
    uvtw_wheel_stats(b->wheel, &s);
    out->timers_active = s.timers_active;
    out->tasks_live = s.tasks_live;
    out->wakeups = s.driver_wakeups;
    out->fired = s.fired;
    memcpy(out->lateness, s.lateness, sizeof(out->lateness));
  } else {
    out->timers_active = b->timers_active;
    out->tasks_live = b->works_live;
    out->wakeups = b->fired;
    out->fired = b->fired;
    memcpy(out->lateness, b->lateness, sizeof(out->lateness));
  }
}


void xbackend_close(xbackend_t* b, xbackend_close_cb cb) {
  xwork_t* w;

  assert(!b->closing);
  b->closing = 1;
  b->close_cb = cb;
  if (b->kind == XBACKEND_WHEEL) {
    tw_close(b);
    return;
  }
  /* uv: keep queued works from starting; running ones are waited for. */
  for (w = b->works.next; w != &b->works; w = w->next)
    uv_cancel((uv_req_t*) &w->u.uv);
  if (b->works_live == 0)
    tw_close(b);
}


int xtimer_init(xbackend_t* b, xtimer_t* t) {
  t->backend = b;
  t->cb = NULL;
  t->close_cb = NULL;
  if (b->kind == XBACKEND_WHEEL)
    return uvtw_timer_init(b->wheel, &t->u.tw);
  return uv_timer_init(b->loop, &t->u.uv.handle);
}


int xtimer_start(xtimer_t* t, xtimer_cb cb, uint64_t timeout) {
  int err;

  t->cb = cb;
  if (t->backend->kind == XBACKEND_WHEEL)
    return uvtw_timer_start(&t->u.tw, tw_timer_cb, timeout, 0);
  /* uv_timer_start counts from the same uv_now(). */
  t->u.uv.due = uv_now(t->backend->loop) + timeout;
  if (uv_is_active((uv_handle_t*) &t->u.uv.handle))
    return uv_timer_start(&t->u.uv.handle, uv_timer_fire, timeout, 0);
  err = uv_timer_start(&t->u.uv.handle, uv_timer_fire, timeout, 0);
  if (err == 0)
    t->backend->timers_active++;
  return err;
}


void xtimer_stop(xtimer_t* t) {
  if (t->backend->kind == XBACKEND_WHEEL) {
    uvtw_timer_stop(&t->u.tw);
  } else if (uv_is_active((uv_handle_t*) &t->u.uv.handle)) {
    uv_timer_stop(&t->u.uv.handle);
    t->backend->timers_active--;
  }
}


void xtimer_close(xtimer_t* t, xtimer_cb close_cb) {
  xtimer_stop(t);
  if (t->backend->kind == XBACKEND_WHEEL) {
    /* A uvtw timer is not a handle: once stopped, its memory is free. */
    close_cb(t);
    return;
  }
  t->close_cb = close_cb;
  uv_close((uv_handle_t*) &t->u.uv.handle, uv_timer_closed);
}


int xwork_submit(xbackend_t* b, xwork_t* w, xwork_fn fn, xwork_done done) {
  int err;

  w->backend = b;
  w->fn = fn;
  w->done = done;
  w->cancelled = 0;
  /* On the list before it can run, so nothing can finish it off-list. */
  works_insert(b, w);
  if (b->kind == XBACKEND_WHEEL)
    err = uvtw_submit(b->wheel, 0, 0, UVTW_THREADPOOL, tw_pool_cb, w, &w->u.tw);
  else
    err = uv_queue_work(b->loop, &w->u.uv, uv_work_run, uv_work_after);
  if (err != 0)
    works_remove(b, w);
  return err;
}


void xwork_cancel(xwork_t* w) {
  xbackend_t* b = w->backend;

  if (b->kind == XBACKEND_UV) {
    /* 0: uv_work_after follows with UV_ECANCELED.  UV_EBUSY: running. */
    uv_cancel((uv_req_t*) &w->u.uv);
    return;
  }
  if (w->cancelled || uvtw_cancel(b->wheel, w->u.tw) != 0)
    return; /* UV_EBUSY or UV_ENOENT: the run happens, its hop follows */
  /* The task will never run and makes no final call, so a loop task stands
   * in for its hop: done must not run from inside this function.  If even
   * that fails, the wheel is closing and tw_wheel_closed finishes it. */
  w->cancelled = 1;
  uvtw_submit(b->wheel, 0, 0, 0, tw_hop_cb, w, NULL);
}
