/* SPDX-License-Identifier: MIT */
/* uvtw: a hierarchical timing wheel for a libuv event loop.
 *
 * One wheel attaches to an existing uv_loop_t and keeps one uv_timer_t (the
 * "driver") armed for the next moment the wheel has work.  Loop-thread timers
 * (uvtw_timer_*) mirror uv_timer_* at O(1) cost and with no allocation.
 * Other threads submit, cancel and reset tasks (uvtw_submit, uvtw_cancel,
 * uvtw_reset) through a lock-free queue and a uv_async_t; tasks run on the
 * loop thread or on libuv's threadpool.  A library built with the CMake
 * option UVTW_TASKS=OFF holds the timers only: there the task calls return
 * UV_ENOSYS and do nothing else.
 *
 * Conventions (the same as libuv's):
 *   - 0 on success, a negative UV_E* code on error, so uv_strerror() and
 *     uv_err_name() work.  A call that fails changes nothing, and its
 *     callback never runs.
 *   - Times are milliseconds on the wheel's clock: the loop's, uv_now(loop),
 *     or, on a wheel made with virtual_time, its own (uvtw_wheel_now).
 *     Deadlines saturate at UINT64_MAX instead of overflowing.
 *   - "Loop thread" functions must be called on the thread that runs the
 *     wheel's loop, or while that loop is not running, by its owner: the
 *     thread that created the wheel, which must be the one that runs the
 *     loop.  "Any thread" functions are safe from every thread at once,
 *     including from inside callbacks.
 *
 * Requires libuv >= 1.44, adapting to the release it runs with.  The full
 * semantics are in docs/: wheel.md, timers.md, tasks.md, virtual-time.md,
 * libuv-versions.md.
 */

#ifndef UVTW_H
#define UVTW_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public functions: the library builds with hidden visibility, so
 * these are the only names libuvtw.so exports.  On Windows, as in libuv's
 * uv.h: the DLL is built with UVTW_BUILDING_SHARED and exports them, a
 * program that links the DLL defines UVTW_USING_SHARED and imports them
 * (CMake's uvtw::uvtw target defines it), and the static library needs
 * neither. */
#if defined(_WIN32) && defined(UVTW_BUILDING_SHARED)
# define UVTW_EXTERN __declspec(dllexport)
#elif defined(_WIN32) && defined(UVTW_USING_SHARED)
# define UVTW_EXTERN __declspec(dllimport)
#elif defined(__GNUC__)
# define UVTW_EXTERN __attribute__((visibility("default")))
#else
# define UVTW_EXTERN /* nothing */
#endif

/* The version, and its only source: CMakeLists.txt reads these three lines
 * (project version, SONAME, uvtw.pc, the Debian packages).  Keep the form
 * "#define UVTW_VERSION_<PART> <number>". */
#define UVTW_VERSION_MAJOR 0
#define UVTW_VERSION_MINOR 1
#define UVTW_VERSION_PATCH 0

typedef struct uvtw_wheel_s uvtw_wheel_t;
typedef struct uvtw_timer_s uvtw_timer_t;

/* Names one cross-thread task of one wheel.  0 is never a valid id.  Ids
 * are never reused, in any wheel, for the life of the process: an id names
 * exactly the task it was issued for, never a later task of the same wheel
 * and never a task of another wheel (uvtw_cancel on any other wheel returns
 * UV_ENOENT, also after the issuing wheel was closed and freed).  Treat it
 * as opaque. */
typedef uint64_t uvtw_id_t;

typedef void (*uvtw_timer_cb)(uvtw_timer_t* timer);
/* status: 0 for a run, UV_ECANCELED for the final call at wheel close. */
typedef void (*uvtw_task_cb)(void* arg, int status);
typedef void (*uvtw_close_cb)(uvtw_wheel_t* wheel);

/* The largest tick uvtw_wheel_new accepts, in ms. */
#define UVTW_TICK_MS_MAX 1000

typedef struct uvtw_options_s {
  uint64_t tick_ms; /* 1..UVTW_TICK_MS_MAX; default 1. Deadlines round UP. */
  size_t max_tasks; /* bound on live cross-thread tasks; 0 = no bound */
  /* Non-zero: the wheel has a clock of its own, for tests of timeout
   * logic that neither wait nor flake.  It starts at uv_now(loop) when
   * the wheel is made and moves only by uvtw_wheel_advance.  Default 0. */
  int virtual_time;
} uvtw_options_t;

/* The buckets of uvtw_stats_t.lateness. */
#define UVTW_LATENESS_BUCKETS 16

/* Counters of one wheel (docs/wheel.md, "Counters").  The task counters
 * trail other threads' calls by up to one loop iteration; tasks_live is
 * exact: the tasks live at one moment during the call. */
typedef struct uvtw_stats_s {
  uint64_t timers_active;    /* loop-thread timers now active */
  uint64_t tasks_live;       /* cross-thread tasks accepted, not yet finished */
  uint64_t fired;            /* callbacks run, timers and tasks */
  uint64_t driver_wakeups;   /* times the driver uv_timer_t fired */
  uint64_t cascades;         /* timers re-filed from a slot (not expired) */
  uint64_t async_wakeups;    /* times the uv_async_t callback ran */
  uint64_t tasks_accepted;   /* submissions taken in by the loop, or cancelled
                                before it took them in */
  uint64_t tasks_run;        /* task callbacks run with status 0 */
  uint64_t tasks_cancelled;  /* tasks ended by a cancel (0 or UV_EBUSY) */
  uint64_t tasks_closed;     /* final UV_ECANCELED calls made at close */
  uint64_t queue_high_water; /* most submissions taken in one batch */
  /* Callbacks by how late they ran: the wheel's clock when the callback
   * starts minus its deadline rounded up to a tick.  lateness[0]: on
   * time; lateness[i], i = 1..14: late by 2^(i-1) to 2^i - 1 ms;
   * lateness[15]: by 2^14 ms or more (docs/virtual-time.md, "Lateness"). */
  uint64_t lateness[UVTW_LATENESS_BUCKETS];
} uvtw_stats_t;


/* Private: a link in one of the wheel's intrusive lists. */
struct uvtw__link {
  struct uvtw__link* next;
  struct uvtw__link* prev;
};

/* A loop-thread timer, caller-allocated (usually embedded) and set up by
 * uvtw_timer_init().  Not a handle: an inactive timer may simply be freed;
 * an active one must be stopped before its memory is reused. */
struct uvtw_timer_s {
  void* data; /* public */
  /* private */
  struct uvtw__link link_; /* next == NULL iff inactive */
  uvtw_wheel_t* wheel_;
  uvtw_timer_cb cb_;  /* NULL until first started */
  uint64_t deadline_; /* loop ms, saturated */
  uint64_t repeat_;
  /* (Re)start order, which breaks deadline ties, above bit 1; bit 0 is
   * set while the timer is referenced (bit 1 is the library's own).  One
   * word, so a start writes the order and the flags with one store. */
  uint64_t order_;
};


/* ---------------------------------------------------------------------- */
/* The wheel.                                                               */

/* Fills *opts with the defaults: tick_ms = 1, max_tasks = 0,
 * virtual_time = 0.  Any thread. */
UVTW_EXTERN void uvtw_options_init(uvtw_options_t* opts);

/* Creates a wheel on `loop` and stores it in *out.  opts may be NULL for the
 * defaults.  Several wheels may share a loop.  Loop thread.
 * Errors: UV_EINVAL  loop or out is NULL, or tick_ms is 0 or above
 *                    UVTW_TICK_MS_MAX;
 *         UV_ENOMEM  out of memory;
 *         or an error from uv_timer_init/uv_async_init/uv_prepare_init.
 * On error *out is untouched and nothing is left behind: no handle is
 * open on the loop and no memory is held. */
UVTW_EXTERN int uvtw_wheel_new(uv_loop_t* loop,
                               const uvtw_options_t* opts,
                               uvtw_wheel_t** out);

/* Starts closing the wheel; may be called from inside any callback.  Every
 * active timer becomes inactive at once, without running.  Every live task
 * gets exactly one final cb(arg, UV_ECANCELED) on the loop thread, after
 * this returns.  Then the handles close, cb(wheel) runs (cb may be NULL)
 * and the wheel is freed; the loop must run for that.  From now on
 * uvtw_timer_start and uvtw_submit return UV_ECANCELED.  Close waits for
 * other threads' calls already inside the wheel, but other threads must
 * stop calling into it before cb runs (docs/wheel.md, "Closing").
 * Loop thread.
 * Errors: UV_EINVAL  wheel is NULL or already closing. */
UVTW_EXTERN int uvtw_wheel_close(uvtw_wheel_t* wheel, uvtw_close_cb cb);

/* The loop the wheel is attached to.  Any thread. */
UVTW_EXTERN uv_loop_t* uvtw_wheel_loop(const uvtw_wheel_t* wheel);

/* The wheel's clock in ms: the one its timers' deadlines and
 * uvtw_timer_get_due_in count from.  On an ordinary wheel it is
 * uv_now(loop); on a virtual wheel, its own clock.  Loop thread. */
UVTW_EXTERN uint64_t uvtw_wheel_now(const uvtw_wheel_t* wheel);

/* Moves a virtual wheel's clock forward by `ms` (saturating) and, before
 * it returns, runs every timer and loop-thread task that comes due on the
 * way, also those that callbacks start inside the span, in real time's
 * order.  Each callback sees uvtw_wheel_now() at its own deadline rounded
 * up to a tick: no lateness, so a repeating timer fires once per period.
 * ms = 0 runs what is due now.  A virtual wheel's timers never wake the
 * loop nor keep uv_run running.  If a callback closes the wheel, advance
 * returns 0 at once.  Loop thread.  docs/virtual-time.md has the rules.
 * Errors: UV_EINVAL     wheel is NULL or was made without virtual_time;
 *         UV_ECANCELED  the wheel is closing;
 *         UV_EBUSY      called from inside one of the wheel's own
 *                       callbacks (an advance is running). */
UVTW_EXTERN int uvtw_wheel_advance(uvtw_wheel_t* wheel, uint64_t ms);

/* Calls fn(timer, arg) once for every timer that is active when the walk
 * starts, in no particular order.  fn may stop or restart the timer it is
 * given (a restarted timer is not visited twice); it must not stop other
 * timers that the walk has not reached yet.  Loop thread. */
UVTW_EXTERN void uvtw_wheel_walk(uvtw_wheel_t* wheel,
                                 void (*fn)(uvtw_timer_t* timer, void* arg),
                                 void* arg);

/* Copies the wheel's counters into *out.  Loop thread. */
UVTW_EXTERN void uvtw_wheel_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out);

/* An upper bound, in ms, on the q-quantile of stats->lateness (q clamped
 * to 0..1): the bound of the bucket that holds the callback of rank
 * ceil(q * total), at least the first: 0, 1, 3, 7, ..., 2^14 - 1, or
 * UINT64_MAX for the last bucket.  0.5 bounds the median, 1 the latest.
 * 0 if nothing was counted; defined for any counts, also totals past
 * 2^64.  Any thread (it reads only *stats). */
UVTW_EXTERN uint64_t uvtw_lateness_quantile(const uvtw_stats_t* stats,
                                            double q);

/* Active timers plus live tasks.  A task counts from the moment uvtw_submit
 * returns until it ends.  Any thread: the tasks are exact, the timers
 * from another thread a snapshot that may miss a start or stop made during
 * the call. */
UVTW_EXTERN size_t uvtw_wheel_pending(const uvtw_wheel_t* wheel);


/* ---------------------------------------------------------------------- */
/* Timers: loop thread only, never allocate.                                */

/* Binds `timer` to `wheel`; the timer is inactive and referenced.  Calling
 * it on an active timer is undefined (stop it first).
 * Errors: UV_EINVAL  wheel or timer is NULL. */
UVTW_EXTERN int uvtw_timer_init(uvtw_wheel_t* wheel, uvtw_timer_t* timer);

/* Starts (or restarts, if active) the timer: cb runs once the wheel's
 * clock has reached now + timeout (saturating), rounded up to a tick; then
 * every `repeat` ms if repeat is non-zero, counted from the time it fired.
 * Same order, same iteration and never early, as uv_timer_start on the
 * same libuv; a timer started from a wheel callback with timeout 0 waits
 * for the next iteration (docs/timers.md).  While active and referenced it
 * keeps uv_run(UV_RUN_DEFAULT) running.  O(1).
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
 * minus the wheel's clock (uvtw_wheel_now).  0 if inactive or overdue. */
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

/* Schedules cb(arg, 0) to run once delay_ms have passed since this call
 * (counted from the call by uv_hrtime(), not from when the loop sees the
 * task; never early, rounded up to a tick; on a virtual wheel, counted
 * from its clock at the call, see uvtw_wheel_advance).  If repeat_ms is
 * non-zero it runs again repeat_ms after each dispatch (the loop time at
 * which the loop ran it, or handed it to the threadpool), until cancelled
 * or closed.  cb runs on the loop thread, in deadline order with the
 * timers, ties in the order the loop took the tasks in (for one producer,
 * submission order); or with UVTW_THREADPOOL on a threadpool thread, and
 * then never concurrently with itself (a run that comes due while the
 * previous one runs starts after it).  If id is not NULL the task's id
 * is stored there before the task can run or be cancelled by anyone
 * else.
 *
 * Any thread, also from inside any callback.  No mutex and no allocation
 * in steady state: the wheel's node table grows, under a mutex, only when
 * no node is free, and keeps its size until the wheel is freed.  Nothing
 * is kept per thread.  With max_tasks set, the bound is exact.  What a
 * call costs: README.md, "What a task costs".
 *
 * Memory order: everything the calling thread wrote before uvtw_submit
 * happens-before cb runs.  The task counts in uvtw_wheel_pending and under
 * max_tasks from the moment this returns 0 until it ends; a one-shot ends
 * when its run returns.  A submit from another thread that races with
 * uvtw_wheel_close returns UV_ECANCELED (nothing scheduled) or 0 (and the
 * task gets its final call).
 *
 * Liveness: a live task keeps uv_run(UV_RUN_DEFAULT) running, as a
 * uv_queue_work request does; one submitted from another thread does so
 * from when the loop sees it; on a virtual wheel, only until the loop has
 * filed it (uvtw_wheel_advance).  The full rule: README.md, "Liveness of
 * tasks".
 *
 * Errors: UV_EINVAL     wheel or cb is NULL, or flags has unknown bits;
 *         UV_ENOSPC     max_tasks tasks are live already;
 *         UV_ENOMEM     out of memory (or 2^28 task nodes in use);
 *         UV_ECANCELED  the wheel is closing.
 * On error nothing was scheduled and cb will never be called. */
UVTW_EXTERN int uvtw_submit(uvtw_wheel_t* wheel,
                            uint64_t delay_ms,
                            uint64_t repeat_ms,
                            unsigned flags,
                            uvtw_task_cb cb,
                            void* arg,
                            uvtw_id_t* id);

/* Cancels a task.  Any thread, also from inside any callback; lock-free.
 * Exact: of a cancel, the task's expiry, its runs and close, exactly one
 * wins.
 * Returns 0           cancelled: the callback is not running and will never
 *                     run again (from inside the task's own callback: no
 *                     further run after this one).  No final call follows;
 *                     arg is the caller's again.  The task's place under
 *                     max_tasks is free at once, and its memory is reused
 *                     when the loop next runs, not kept until its
 *                     deadline.
 *         UV_EBUSY    a run is executing right now on another thread; no
 *                     further run will start after it, and the task ends
 *                     when that run returns (no final call).
 *         UV_ENOENT   id 0, an unknown id, an id issued by another wheel
 *                     (whatever its state, open, closing or freed), or a
 *                     task already cancelled or ended (a one-shot that ran,
 *                     a task given its final call), or a one-shot
 *                     cancelling itself from its own callback (its run is
 *                     its end).  Ids are never reused, so a stale or
 *                     foreign id never cancels another task.
 *         UV_EINVAL   wheel is NULL.
 * Memory order: when it returns 0, the cancelling thread may free arg; no
 * access to it from the wheel follows.  After uvtw_wheel_close, a cancel
 * returns 0 (no final call follows) or UV_ENOENT (one does, or did). */
UVTW_EXTERN int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id);

/* Moves a live task's next run to delay_ms from this call, counted as
 * uvtw_submit counts (never early, rounded up to a tick; on a virtual
 * wheel from its clock).  The task keeps its id, repeat, flags and place
 * under max_tasks; a repeating task runs every repeat_ms after that run,
 * as before.  Any thread, also from inside any callback; lock-free.
 * Exact, like uvtw_cancel: of a reset, the task's expiry, its runs, a
 * cancel and close, each race ends in one of these outcomes.
 * Returns 0           the task will not run before the new deadline (a
 *                     run the expiry had not begun yet, also one handed
 *                     to the threadpool and not started, waits for it).
 *                     If several resets of one task race, the deadline of
 *                     the one that stores it last applies.  After
 *                     uvtw_wheel_close began, the task still gets its
 *                     final call instead of a run.
 *         UV_EBUSY    a run is executing right now (also when called from
 *                     the task's own callback): it goes on; a repeating
 *                     task's next run is at the new deadline, and a
 *                     one-shot ends with this run.
 *         UV_ENOENT   as uvtw_cancel: id 0, an unknown or foreign id, or a
 *                     task that ended (or whose last run began after a
 *                     cancel returned UV_EBUSY).  Never moves another task.
 *         UV_EINVAL   wheel is NULL. */
UVTW_EXTERN int uvtw_reset(uvtw_wheel_t* wheel,
                           uvtw_id_t id,
                           uint64_t delay_ms);

#ifdef __cplusplus
}
#endif

#endif /* UVTW_H */
