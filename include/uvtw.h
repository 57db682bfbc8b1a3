/* uvtw: a hierarchical timing wheel for a libuv event loop.
 *
 * One wheel attaches to an existing uv_loop_t and keeps one uv_timer_t (the
 * "driver") armed for the next moment the wheel has work.  Loop-thread timers
 * (uvtw_timer_*) mirror uv_timer_* at O(1) cost and with no allocation.
 * Other threads submit and cancel tasks (uvtw_submit, uvtw_cancel) through a
 * lock-free queue and a uv_async_t; tasks run on the loop thread or on
 * libuv's threadpool.
 *
 * Conventions (the same as libuv's):
 *   - 0 on success, a negative UV_E* code on error, so uv_strerror() and
 *     uv_err_name() work.  A call that fails changes nothing, and its
 *     callback never runs.
 *   - Times are milliseconds on the loop's clock, uv_now(loop).  Deadlines
 *     saturate at UINT64_MAX instead of overflowing.
 *   - "Loop thread" functions must be called on the thread that runs the
 *     wheel's loop, or while that loop is not running, by its owner.
 *     "Any thread" functions are safe from every thread at once, including
 *     from inside callbacks.
 *
 * Requires libuv >= 1.44.
 */

#ifndef UVTW_H
#define UVTW_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
# if defined(UVTW_BUILDING_SHARED)
#  define UVTW_EXTERN __declspec(dllexport)
# elif defined(UVTW_USING_SHARED)
#  define UVTW_EXTERN __declspec(dllimport)
# else
#  define UVTW_EXTERN /* nothing */
# endif
#elif __GNUC__ >= 4
# define UVTW_EXTERN __attribute__((visibility("default")))
#else
# define UVTW_EXTERN /* nothing */
#endif

#define UVTW_VERSION_MAJOR 0
#define UVTW_VERSION_MINOR 1
#define UVTW_VERSION_PATCH 0

typedef struct uvtw_wheel_s uvtw_wheel_t;
typedef struct uvtw_timer_s uvtw_timer_t;

/* Names a cross-thread task.  0 is never a valid id.  An id carries a
 * generation, so a stale id never names a later task. */
typedef uint64_t uvtw_id_t;

typedef void (*uvtw_timer_cb)(uvtw_timer_t* timer);
/* status: 0 for a run, UV_ECANCELED for the final call at wheel close. */
typedef void (*uvtw_task_cb)(void* arg, int status);
typedef void (*uvtw_close_cb)(uvtw_wheel_t* wheel);

typedef struct uvtw_options_s {
  uint64_t tick_ms; /* resolution, 1..1000; default 1. Deadlines round UP. */
  size_t max_tasks; /* bound on live cross-thread tasks; 0 = no bound */
} uvtw_options_t;

typedef struct uvtw_stats_s {
  uint64_t timers_active;  /* loop-thread timers now active */
  uint64_t tasks_live;     /* cross-thread tasks accepted, not yet finished */
  uint64_t fired;          /* callbacks run, timers and tasks */
  uint64_t driver_wakeups; /* times the driver uv_timer_t fired */
  uint64_t cascades;       /* timers moved to a finer level or re-filed */
  uint64_t async_wakeups;  /* times the uv_async_t callback ran */
  uint64_t tasks_accepted; /* uvtw_submit calls that returned 0 */
  uint64_t tasks_run;      /* task callbacks run with status 0 */
  uint64_t tasks_cancelled;    /* uvtw_cancel calls that returned 0 or EBUSY */
  uint64_t tasks_closed;       /* final UV_ECANCELED calls made at close */
  uint64_t queue_high_water;   /* most submissions drained in one batch */
} uvtw_stats_t;


/* Private: a link in one of the wheel's intrusive lists. */
struct uvtw__link {
  struct uvtw__link* next;
  struct uvtw__link* prev;
};

/* A loop-thread timer.  The caller allocates it, usually embedded in its own
 * struct, and initialises it with uvtw_timer_init().  Unlike a uv_timer_t it
 * is not a handle and needs no close: an inactive timer may simply be freed.
 * An active timer must be stopped before its memory is reused.
 * 64 bytes on LP64. */
struct uvtw_timer_s {
  void* data; /* public */
  /* private */
  struct uvtw__link link_;  /* next == NULL iff inactive */
  uvtw_wheel_t* wheel_;
  uvtw_timer_cb cb_;        /* NULL until first started */
  uint64_t deadline_;       /* loop ms, saturated */
  uint64_t repeat_;
  uint64_t start_id_ : 62;  /* (re)start order: breaks deadline ties */
  uint64_t unref_ : 1;
  uint64_t task_ : 1;       /* the timer of a cross-thread task */
};


/* ---------------------------------------------------------------------- */
/* The wheel.                                                               */

/* Fills *opts with the defaults: tick_ms = 1, max_tasks = 0.  Any thread. */
UVTW_EXTERN void uvtw_options_init(uvtw_options_t* opts);

/* Creates a wheel on `loop` and stores it in *out.  opts may be NULL for the
 * defaults.  Several wheels may share a loop.  Loop thread.
 * Errors: UV_EINVAL  loop or out is NULL, or tick_ms is 0 or above 1000;
 *         UV_ENOMEM  out of memory;
 *         or an error from uv_timer_init/uv_async_init/uv_prepare_init.
 * On error *out is untouched and nothing is left on the loop. */
UVTW_EXTERN int uvtw_wheel_new(uv_loop_t* loop,
                               const uvtw_options_t* opts,
                               uvtw_wheel_t** out);

/* Starts closing the wheel.  May be called from inside any callback.  Every
 * active timer becomes inactive at once, without its callback running.
 * Every live task gets exactly one final cb(arg, UV_ECANCELED) on the loop
 * thread (threadpool runs in flight are waited for; queued ones are
 * uv_cancel'ed).  Then the wheel's handles close, cb(wheel) runs (cb may be
 * NULL) and the wheel's memory is freed; the loop must run for that to
 * happen.  From the moment close starts, uvtw_timer_start and uvtw_submit
 * return UV_ECANCELED.  Using the wheel after cb has run is undefined, so
 * other threads must stop calling into it before then.  Loop thread.
 * Errors: UV_EINVAL  wheel is NULL or already closing. */
UVTW_EXTERN int uvtw_wheel_close(uvtw_wheel_t* wheel, uvtw_close_cb cb);

/* The loop the wheel is attached to.  Any thread. */
UVTW_EXTERN uv_loop_t* uvtw_wheel_loop(const uvtw_wheel_t* wheel);

/* Calls fn(timer, arg) once for every timer that is active when the walk
 * starts, in no particular order.  fn may stop or restart the timer it is
 * given (a restarted timer is not visited twice); it must not stop other
 * timers that the walk has not reached yet.  Loop thread. */
UVTW_EXTERN void uvtw_wheel_walk(uvtw_wheel_t* wheel,
                                 void (*fn)(uvtw_timer_t* timer, void* arg),
                                 void* arg);

/* Copies the wheel's counters into *out.  Loop thread. */
UVTW_EXTERN void uvtw_wheel_stats(const uvtw_wheel_t* wheel,
                                  uvtw_stats_t* out);

/* Active timers plus live tasks.  A task counts from the moment uvtw_submit
 * returns until it ends.  Any thread: the count is read with relaxed
 * atomics, so from another thread it is a snapshot that may be stale. */
UVTW_EXTERN size_t uvtw_wheel_pending(const uvtw_wheel_t* wheel);


/* ---------------------------------------------------------------------- */
/* Timers: loop thread only, never allocate.                                */

/* Binds `timer` to `wheel`; the timer is inactive and referenced.  Calling
 * it on an active timer is undefined (stop it first).
 * Errors: UV_EINVAL  wheel or timer is NULL. */
UVTW_EXTERN int uvtw_timer_init(uvtw_wheel_t* wheel, uvtw_timer_t* timer);

/* Starts (or restarts, if active) the timer: cb runs once uv_now(loop) has
 * reached uv_now(loop) + timeout (saturating at UINT64_MAX), rounded up to a
 * tick; then every `repeat` ms if repeat is non-zero, counted from the loop
 * time at which it fired.  Same order, same iteration and never early, as
 * uv_timer_start; a timer started from a wheel callback with a deadline that
 * is already reached waits for the next loop iteration.  Restarting an
 * active timer to a later deadline is O(1) and touches only the timer.
 * Errors: UV_EINVAL     timer or cb is NULL;
 *         UV_ECANCELED  the wheel is closing. */
UVTW_EXTERN int uvtw_timer_start(uvtw_timer_t* timer,
                                 uvtw_timer_cb cb,
                                 uint64_t timeout,
                                 uint64_t repeat);

/* Stops the timer; its callback will not run.  Idempotent, safe on a timer
 * that was never started and from any callback, the timer's own included.
 * Always returns 0. */
UVTW_EXTERN int uvtw_timer_stop(uvtw_timer_t* timer);

/* Restarts the timer with timeout = repeat if repeat is non-zero (stopping
 * it first if active); does nothing if repeat is 0.
 * Errors: UV_EINVAL     the timer was never started;
 *         UV_ECANCELED  the wheel is closing (and repeat is non-zero). */
UVTW_EXTERN int uvtw_timer_again(uvtw_timer_t* timer);

/* Sets the repeat interval, used from the next time the timer fires (or by
 * uvtw_timer_again).  Does not (re)start the timer. */
UVTW_EXTERN void uvtw_timer_set_repeat(uvtw_timer_t* timer, uint64_t repeat);
UVTW_EXTERN uint64_t uvtw_timer_get_repeat(const uvtw_timer_t* timer);

/* Milliseconds until the timer fires: its deadline rounded up to a tick,
 * minus uv_now(loop).  0 if inactive or overdue. */
UVTW_EXTERN uint64_t uvtw_timer_get_due_in(const uvtw_timer_t* timer);

/* Non-zero if the timer is active.  A repeating timer is active inside its
 * own callback; a one-shot is not. */
UVTW_EXTERN int uvtw_timer_is_active(const uvtw_timer_t* timer);

/* Like uv_ref/uv_unref on a uv_timer_t: an active referenced timer keeps
 * uv_run(UV_RUN_DEFAULT) running; an unreferenced one does not (but still
 * fires while the loop runs for other reasons).  Timers start referenced. */
UVTW_EXTERN void uvtw_timer_ref(uvtw_timer_t* timer);
UVTW_EXTERN void uvtw_timer_unref(uvtw_timer_t* timer);
UVTW_EXTERN int uvtw_timer_has_ref(const uvtw_timer_t* timer);

/* The wheel the timer was initialised on. */
UVTW_EXTERN uvtw_wheel_t* uvtw_timer_wheel(const uvtw_timer_t* timer);


/* ---------------------------------------------------------------------- */
/* Tasks: any thread.                                                       */

/* Run the task's callback on libuv's threadpool (uv_queue_work) instead of
 * on the loop thread. */
#define UVTW_THREADPOOL 1u

/* Schedules cb(arg, 0) to run delay_ms after this call (counted from the
 * call, on the clock uv_hrtime() reads, not from when the loop sees it), and
 * then every repeat_ms after each run starts on the loop, if repeat_ms is
 * non-zero.  It runs on the loop thread, or with UVTW_THREADPOOL on a
 * threadpool thread; a threadpool task never runs concurrently with itself.
 * If id is not NULL the task's id is stored there before the task can run.
 * Lock-free: no mutex, no allocation in steady state, at most one
 * uv_async_send per batch the loop has not yet drained.  Any thread.
 * Errors: UV_EINVAL     wheel or cb is NULL, or unknown flags;
 *         UV_ENOSPC     max_tasks tasks are live already;
 *         UV_ENOMEM     out of memory;
 *         UV_ECANCELED  the wheel is closing. */
UVTW_EXTERN int uvtw_submit(uvtw_wheel_t* wheel,
                            uint64_t delay_ms,
                            uint64_t repeat_ms,
                            unsigned flags,
                            uvtw_task_cb cb,
                            void* arg,
                            uvtw_id_t* id);

/* Cancels a task.  Any thread, lock-free.
 * Returns 0           cancelled: the callback is not running and will never
 *                     run again (from inside the task's own callback: no
 *                     further run after this one).  No final call follows;
 *                     arg is the caller's again.
 *         UV_EBUSY    a run is executing right now on another thread; no
 *                     further run will start after it.
 *         UV_ENOENT   unknown id, already cancelled or ended, or a one-shot
 *                     cancelling itself from its own callback. */
UVTW_EXTERN int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id);

#ifdef __cplusplus
}
#endif

#endif /* UVTW_H */
