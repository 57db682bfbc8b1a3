/* SPDX-License-Identifier: MIT */
/* The timer and work interface the echo server is written against.
 *
 * The server logic (server.c) never calls uvtw_* or uv_timer_* directly: it
 * calls the small interface below, which has two implementations.
 *
 *   wheel  one uvtw wheel on the loop; a timer is a 64-byte uvtw_timer_t;
 *          work goes through uvtw_submit(UVTW_THREADPOOL).
 *   uv     the libuv baseline: one uv_timer_t per timer and plain
 *          uv_queue_work.  It has a wheel too, with no timers and no work
 *          on it: the loop's door for tasks from other threads.
 *
 * Both live in backend.c.
 *
 * Both are loop-thread only, except that an xwork_t's fn runs on a
 * threadpool thread.  The rules every implementation follows, so that the
 * server can treat them alike:
 *
 *   - A timer is initialised once, started and stopped any number of times,
 *     then closed with xtimer_close().  close_cb runs once the timer's memory
 *     may be freed: at once (from inside xtimer_close) for the wheel, on a
 *     later loop iteration for uv, whose uv_timer_t is a handle.  So callers
 *     call xtimer_close() last and never touch the owner after it.
 *   - Timers are one-shot.  The server re-arms them by hand: that is what
 *     it would do with uv_timer_t too, and it keeps the comparison honest.
 *   - Every submitted work ends with exactly one done(w, status) call on the
 *     loop thread, never from inside xwork_submit() or xwork_cancel():
 *     status 0 if fn ran to its end, UV_ECANCELED if it never ran.
 *     xwork_cancel() is only a hint that frees a queued slot early.
 *   - xbackend_close() runs cb after every submitted work has had its done
 *     call.  No timer may be active then.
 */

#ifndef ECHO_BACKEND_H
#define ECHO_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>
#include <uvtw.h>

typedef struct xbackend_s xbackend_t;
typedef struct xtimer_s xtimer_t;
typedef struct xwork_s xwork_t;

typedef void (*xtimer_cb)(xtimer_t* timer);
typedef void (*xwork_fn)(xwork_t* work);
typedef void (*xwork_done)(xwork_t* work, int status);
typedef void (*xbackend_close_cb)(xbackend_t* backend);

typedef enum { XBACKEND_WHEEL, XBACKEND_UV } xbackend_kind_t;

/* What STATS reports about the timers and the work.  "wakeups" is the
 * number of times a libuv timer woke the loop for timer work: for the
 * wheel, its driver's wakeups; for uv, every uv_timer_t callback (each one
 * is a separate expiry out of libuv's heap).  "lateness" has the buckets
 * of uvtw_stats_t.lateness, so that one uvtw_lateness_quantile reads both
 * backends: the wheel's own histogram (its timers and its tasks), or for
 * uv the same buckets kept by hand for the uv_timer_t callbacks, which
 * libuv does not time. */
typedef struct xstats_s {
  uint64_t timers_active;
  uint64_t tasks_live;
  uint64_t wakeups;
  uint64_t fired;
  uint64_t lateness[UVTW_LATENESS_BUCKETS];
} xstats_t;

/* A union keeps the server's structs the same for both backends.  It makes
 * an xtimer_t as big as a uv_timer_t and its due time even for the wheel,
 * so this example compares CPU and lateness, not memory (the wheel's own
 * timers are 64 bytes). */
struct xtimer_s {
  void* data; /* public */
  /* private */
  xbackend_t* backend;
  xtimer_cb cb;
  xtimer_cb close_cb;
  union {
    uvtw_timer_t tw;
    struct {
      uv_timer_t handle;
      uint64_t due; /* uv_now() at start plus the timeout, for lateness */
    } uv;
  } u;
};

struct xwork_s {
  void* data; /* public */
  /* private */
  xbackend_t* backend;
  xwork_fn fn;
  xwork_done done;
  xwork_t* next; /* the backend's list of works without a done call yet */
  xwork_t* prev;
  int cancelled; /* wheel: uvtw_cancel returned 0, fn will never run */
  union {
    uvtw_id_t tw;
    uv_work_t uv;
  } u;
};

struct xbackend_s {
  xbackend_kind_t kind;
  uv_loop_t* loop;
  /* The wheel backend's timers and work; for both backends, the way
   * other threads reach the loop (uvtw_submit, any thread) until close. */
  uvtw_wheel_t* wheel;
  xwork_t works; /* list head: works without a done call yet */
  uint64_t works_live;
  uint64_t timers_active; /* uv backend: counted by hand */
  uint64_t fired;         /* uv backend: timer callbacks run */
  /* uv backend: timer callbacks by lateness, as uvtw_stats_t.lateness. */
  uint64_t lateness[UVTW_LATENESS_BUCKETS];
  int closing;
  xbackend_close_cb close_cb;
};

const char* xbackend_name(xbackend_kind_t kind);
int xbackend_init(xbackend_t* backend, xbackend_kind_t kind, uv_loop_t* loop);
void xbackend_stats(const xbackend_t* backend, xstats_t* out);
/* Closes the backend.  cb runs on the loop thread once every work has had
 * its done call and the backend holds nothing on the loop any more. */
void xbackend_close(xbackend_t* backend, xbackend_close_cb cb);

int xtimer_init(xbackend_t* backend, xtimer_t* timer);
/* (Re)starts a one-shot timer.  On an active timer this is the operation
 * the echo server does on every read: with the wheel and a later deadline
 * it is O(1) and touches only the timer; with uv it is a heap remove and
 * insert. */
int xtimer_start(xtimer_t* timer, xtimer_cb cb, uint64_t timeout);
void xtimer_stop(xtimer_t* timer);
void xtimer_close(xtimer_t* timer, xtimer_cb close_cb);

/* Runs fn(work) on the threadpool, then done(work, status) on the loop.
 * Returns 0 or a UV_E* error, in which case neither will run. */
int xwork_submit(xbackend_t* backend,
                 xwork_t* work,
                 xwork_fn fn,
                 xwork_done done);
/* Tries to keep a work that has not started yet from running at all.  The
 * done call still comes, later, with UV_ECANCELED if it worked and with 0
 * if fn had already started. */
void xwork_cancel(xwork_t* work);

#endif /* ECHO_BACKEND_H */
