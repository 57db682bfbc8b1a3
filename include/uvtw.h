/* SPDX-License-Identifier: MIT */
/* uvtw: a hierarchical timing wheel for a libuv event loop.
 *
 * A wheel attaches to a uv_loop_t and keeps one uv_timer_t armed for the
 * next moment it has work.  Loop-thread timers (uvtw_timer_*) mirror
 * uv_timer_* at O(1) cost, with no allocation.  Any thread submits, cancels
 * and resets tasks, lock-free; they run on the loop thread or libuv's
 * threadpool (built with UVTW_TASKS=OFF, the task calls return UV_ENOSYS).
 *
 * As in libuv: 0 or a negative UV_E* code, and a call that fails changes
 * nothing and its callback never runs.  Times are ms on the wheel's clock
 * (uv_now(loop), or a virtual wheel's own), saturating at UINT64_MAX.
 * "Loop thread": the thread that runs the loop (libuv's rule: the wheel
 * may be created on one thread and its loop run on another; docs/tasks.md,
 * "Liveness", says how a submit tells).  "Any thread": safe from
 * every thread at once, also inside callbacks.  A build with
 * UVTW_CHECK_THREADS (Debug, ASan) aborts, naming the call, when a
 * loop-thread function runs on another thread.  Requires libuv >= 1.44.
 * Full semantics: docs/wheel.md, timers.md, tasks.md, virtual-time.md. */

#ifndef UVTW_H
#define UVTW_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* On Windows, as in uv.h: UVTW_BUILDING_SHARED builds the DLL,
 * UVTW_USING_SHARED (CMake's uvtw::uvtw defines it) links it. */
#if defined(_WIN32) && defined(UVTW_BUILDING_SHARED)
# define UVTW_EXTERN __declspec(dllexport)
#elif defined(_WIN32) && defined(UVTW_USING_SHARED)
# define UVTW_EXTERN __declspec(dllimport)
#elif defined(__GNUC__)
# define UVTW_EXTERN __attribute__((visibility("default")))
#else
# define UVTW_EXTERN /* nothing */
#endif

/* The version's only source: CMakeLists.txt reads these three lines. */
#define UVTW_VERSION_MAJOR 0
#define UVTW_VERSION_MINOR 1
#define UVTW_VERSION_PATCH 0

typedef struct uvtw_wheel_s uvtw_wheel_t;
typedef struct uvtw_timer_s uvtw_timer_t;

/* Names one task; opaque, never 0, never reused by its wheel.  It carries
 * a 12-bit serial of its wheel, so another wheel refuses it (UV_ENOENT)
 * unless 4,096 wheels were created in the process after its own. */
typedef uint64_t uvtw_id_t;

typedef void (*uvtw_timer_cb)(uvtw_timer_t* timer);
/* status: 0 for a run, UV_ECANCELED for the final call at wheel close. */
typedef void (*uvtw_task_cb)(void* arg, int status);
typedef void (*uvtw_close_cb)(uvtw_wheel_t* wheel);

/* The largest tick uvtw_wheel_new accepts, in ms. */
#define UVTW_TICK_MS_MAX 1000
/* The most leeway a timer or the wheel's tasks may have: 2^32 - 1 ms
 * (49.7 days); a larger request is an error, not a timer that never runs. */
#define UVTW_LEEWAY_MS_MAX 4294967295u

typedef struct uvtw_options_s {
  uint64_t tick_ms; /* 1..UVTW_TICK_MS_MAX; default 1. Deadlines round UP. */
  size_t max_tasks; /* bound on live cross-thread tasks; 0 = no bound */
  int virtual_time; /* non-zero: a clock of its own (uvtw_wheel_advance) */
  /* Non-zero: a start's or submit's deadline counts from uv_hrtime() at the
   * call, rounded up, so no callback runs before its timeout has truly
   * passed; a timer may then fire one iteration later than uv_timer_t's
   * (docs/timers.md, "Precise deadlines").  No effect on a virtual wheel. */
  int precise;
  uint64_t task_leeway_ms; /* every task's leeway, as uvtw_timer_set_leeway */
} uvtw_options_t;

/* The buckets of uvtw_stats_t.lateness. */
#define UVTW_LATENESS_BUCKETS 16

/* Counters of one wheel (docs/wheel.md, "Counters"); the task counters but
 * tasks_live trail other threads' calls by up to one loop iteration. */
typedef struct uvtw_stats_s {
  uint64_t timers_active;    /* loop-thread timers now active */
  uint64_t tasks_live;       /* cross-thread tasks accepted, not yet finished */
  uint64_t fired;            /* callbacks run, timers and tasks */
  uint64_t driver_wakeups;   /* times the driver uv_timer_t fired */
  uint64_t cascades;         /* timers re-filed from a slot (not expired) */
  uint64_t async_wakeups;    /* times the uv_async_t callback ran */
  uint64_t tasks_accepted;   /* submissions taken in, cancelled ones too */
  uint64_t tasks_run;        /* task callbacks run with status 0 */
  uint64_t tasks_cancelled;  /* tasks ended by a cancel (0 or UV_EBUSY) */
  uint64_t tasks_closed;     /* final UV_ECANCELED calls made at close */
  uint64_t queue_high_water; /* most queue entries one drain took in */
  /* Callbacks by lateness (the clock at the callback minus the deadline
   * rounded up to a tick, leeway included): [0] on time, [i] 2^(i-1) to
   * 2^i - 1 ms, [15] 2^14 ms or more (docs/virtual-time.md, "Lateness"). */
  uint64_t lateness[UVTW_LATENESS_BUCKETS];
} uvtw_stats_t;

struct uvtw__link { /* private */
  struct uvtw__link* next;
  struct uvtw__link* prev;
};

/* A loop-thread timer, caller-allocated, set up by uvtw_timer_init().  Not a
 * handle: an inactive one may be freed; stop an active one first. */
struct uvtw_timer_s {
  void* data;              /* public; the rest is private */
  struct uvtw__link link_; /* next == NULL iff inactive */
  uvtw_wheel_t* wheel_;
  uvtw_timer_cb cb_;  /* NULL until first started */
  uint64_t deadline_; /* loop ms, saturated */
  uint64_t repeat_;
  uint64_t order_; /* start order, which breaks ties, and flags */
};

/* ---- The wheel. ------------------------------------------------------- */

/* The defaults: every field 0 but tick_ms 1.  Any thread. */
UVTW_EXTERN void uvtw_options_init(uvtw_options_t* opts);

/* Creates a wheel on `loop` (which it may share) into *out; opts may be
 * NULL for the defaults.  Loop thread.
 * Errors: UV_EINVAL  loop or out is NULL, tick_ms is 0 or too large, or
 *                    task_leeway_ms > UVTW_LEEWAY_MS_MAX;
 *         UV_ENOMEM  out of memory;
 *         or an error from uv_async_init or uv_mutex_init.
 * On error *out is untouched and nothing is left open or allocated. */
UVTW_EXTERN int uvtw_wheel_new(uv_loop_t* loop,
                               const uvtw_options_t* opts,
                               uvtw_wheel_t** out);

/* Starts closing the wheel; may be called from inside any callback.  Every
 * active timer becomes inactive at once, without running.  Every waiting
 * task gets exactly one final cb(arg, UV_ECANCELED) on the loop thread,
 * after this returns; a run in progress (on the threadpool, or the one that
 * called close) ends first, and then only a repeating task not cancelled
 * gets its final call.  Then the handles close, cb(wheel) runs (cb may be
 * NULL) and the wheel is freed; the loop must run for that.  From now on
 * uvtw_timer_start and uvtw_submit return UV_ECANCELED.  Other threads'
 * calls must have returned before cb runs (docs/wheel.md, "Closing").  Loop
 * thread.  Errors: UV_EINVAL  wheel is NULL or already closing. */
UVTW_EXTERN int uvtw_wheel_close(uvtw_wheel_t* wheel, uvtw_close_cb cb);

/* The loop the wheel is attached to.  Any thread. */
UVTW_EXTERN uv_loop_t* uvtw_wheel_loop(const uvtw_wheel_t* wheel);
/* The wheel's clock: uv_now(loop), or a virtual wheel's own.  Loop thread. */
UVTW_EXTERN uint64_t uvtw_wheel_now(const uvtw_wheel_t* wheel);

/* Moves a virtual wheel's clock forward by `ms` (saturating) and, before
 * it returns, runs every timer and loop-thread task that comes due on the
 * way, also those that callbacks start inside the span, in real time's
 * order.  Each callback sees uvtw_wheel_now() at the tick its deadline (and
 * leeway) gives it: no lateness, so a repeating timer fires once a period.
 * ms = 0 runs what is due now.  A virtual wheel's timers never wake the
 * loop nor keep uv_run running.  If a callback closes the wheel, advance
 * returns 0 at once.  Loop thread.  docs/virtual-time.md has the rules.
 * Errors: UV_EINVAL     wheel is NULL or was made without virtual_time;
 *         UV_ECANCELED  the wheel is closing;
 *         UV_EBUSY      called from one of the wheel's own callbacks. */
UVTW_EXTERN int uvtw_wheel_advance(uvtw_wheel_t* wheel, uint64_t ms);

/* Calls fn(timer, arg) once for every timer active when the walk starts, in
 * no order.  fn may stop or restart its timer, not others.  Loop thread. */
UVTW_EXTERN void uvtw_wheel_walk(uvtw_wheel_t* wheel,
                                 void (*fn)(uvtw_timer_t* timer, void* arg),
                                 void* arg);

/* Copies the wheel's counters into *out.  Loop thread. */
UVTW_EXTERN void uvtw_wheel_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out);

/* An upper bound in ms on the q-quantile (q clamped to 0..1) of
 * stats->lateness: the bound of the bucket holding rank ceil(q * total) (0,
 * 1, 3, ..., 2^14 - 1 or UINT64_MAX), 0 if none.  Any thread. */
UVTW_EXTERN uint64_t uvtw_lateness_quantile(const uvtw_stats_t* stats,
                                            double q);

/* Ms until the earliest active timer or filed task runs (0 if due now),
 * UINT64_MAX if none; a virtual wheel takes its queue in first, so that
 * uvtw_wheel_advance(w, uvtw_wheel_next_due(w)) runs its next event.  Loop
 * thread. */
UVTW_EXTERN uint64_t uvtw_wheel_next_due(uvtw_wheel_t* wheel);

/* Active timers plus live tasks (exact; a task counts until it ends).  Any
 * thread: from another, the timers may miss a start or stop meanwhile. */
UVTW_EXTERN size_t uvtw_wheel_pending(const uvtw_wheel_t* wheel);

/* ---- Timers: loop thread only, never allocate. ------------------------ */

/* Binds `timer` to `wheel`, inactive, referenced, no leeway; undefined on
 * an active timer.  Errors: UV_EINVAL  wheel or timer is NULL. */
UVTW_EXTERN int uvtw_timer_init(uvtw_wheel_t* wheel, uvtw_timer_t* timer);

/* Starts (or restarts, if active) the timer: cb runs once the wheel's
 * clock has reached now + timeout (saturating), rounded up to a tick; then
 * every `repeat` ms if repeat is non-zero, counted from the time it fired.
 * Same order, same iteration and never early, as uv_timer_start on the
 * same libuv; a timer started from a wheel callback with timeout 0 waits
 * for the next iteration (docs/timers.md).  While active and referenced it
 * keeps uv_run(UV_RUN_DEFAULT) running.  O(1).
 * Errors: UV_EINVAL     timer or cb is NULL, or the timer was never
 *                       initialised (a zeroed one);
 *         UV_ECANCELED  the wheel is closing. */
UVTW_EXTERN int uvtw_timer_start(uvtw_timer_t* timer,
                                 uvtw_timer_cb cb,
                                 uint64_t timeout,
                                 uint64_t repeat);

/* Stops the timer; its callback will not run.  Idempotent, also from any
 * callback or on a timer never started.  Always returns 0. */
UVTW_EXTERN int uvtw_timer_stop(uvtw_timer_t* timer);

/* Restarts the timer with timeout = repeat; does nothing if repeat is 0.
 * Errors: UV_EINVAL  never started (or never initialised);
 *         UV_ECANCELED  the wheel is closing. */
UVTW_EXTERN int uvtw_timer_again(uvtw_timer_t* timer);

/* The repeat, used from the next run or uvtw_timer_again; no restart. */
UVTW_EXTERN void uvtw_timer_set_repeat(uvtw_timer_t* timer, uint64_t repeat);
UVTW_EXTERN uint64_t uvtw_timer_get_repeat(const uvtw_timer_t* timer);

/* Lets the timer run up to `ms` late (0, the default: exact), so that timers
 * due close together share a wake-up; never early, a pass still runs by
 * (deadline, start).  The wheel uses 2^k - 1 ticks, the most that fits in
 * ms: get_leeway returns that.  With repeat, run k is due at the first
 * deadline + k * repeat (docs/timers.md, "Leeway").
 * Errors: UV_EINVAL  timer is NULL or ms > UVTW_LEEWAY_MS_MAX;
 *         UV_EBUSY   the timer is active.  On error nothing changes. */
UVTW_EXTERN int uvtw_timer_set_leeway(uvtw_timer_t* timer, uint64_t ms);
UVTW_EXTERN uint64_t uvtw_timer_get_leeway(const uvtw_timer_t* timer);

/* Ms until the wheel runs the timer; 0 if inactive or overdue;
 * UINT64_MAX if never (its deadline saturated), as uvtw_wheel_next_due. */
UVTW_EXTERN uint64_t uvtw_timer_get_due_in(const uvtw_timer_t* timer);

/* Non-zero if active; a repeating timer is, inside its own callback. */
UVTW_EXTERN int uvtw_timer_is_active(const uvtw_timer_t* timer);

/* As uv_ref/uv_unref: an active referenced timer keeps uv_run running; an
 * unreferenced one still fires while the loop runs.  Timers start ref'd. */
UVTW_EXTERN void uvtw_timer_ref(uvtw_timer_t* timer);
UVTW_EXTERN void uvtw_timer_unref(uvtw_timer_t* timer);
UVTW_EXTERN int uvtw_timer_has_ref(const uvtw_timer_t* timer);

/* The wheel the timer was initialised on. */
UVTW_EXTERN uvtw_wheel_t* uvtw_timer_wheel(const uvtw_timer_t* timer);

/* ---- Tasks: any thread. ---------------------------------------------- */

/* Run the task's callback on libuv's threadpool (uv_queue_work) instead of
 * on the loop thread. */
#define UVTW_THREADPOOL 1u

/* Schedules cb(arg, 0) to run once delay_ms have passed since this call
 * (by uv_hrtime() in ms, or on a virtual wheel its clock; rounded up to a
 * tick, late by up to options.task_leeway_ms), then every repeat_ms after
 * each dispatch if repeat_ms is not 0, until cancelled or closed.  cb runs on
 * the loop thread in deadline order with the timers, or with
 * UVTW_THREADPOOL on the threadpool, never concurrently with itself.  *id
 * (if not NULL) is stored before the task can run.  Any thread; lock-free,
 * no allocation in steady state.  Memory order: the caller's writes
 * before the submit happen-before cb.  The task counts in pending and
 * max_tasks until it ends (docs/tasks.md, "Semantics").
 * Errors: UV_EINVAL     wheel or cb is NULL, or flags has unknown bits;
 *         UV_ENOSPC     max_tasks tasks are live already;
 *         UV_ENOMEM     out of memory;
 *         UV_ECANCELED  the wheel is closing.
 * On error nothing was scheduled and cb will never be called. */
UVTW_EXTERN int uvtw_submit(uvtw_wheel_t* wheel,
                            uint64_t delay_ms,
                            uint64_t repeat_ms,
                            unsigned flags,
                            uvtw_task_cb cb,
                            void* arg,
                            uvtw_id_t* id);

/* Cancels a task.  Any thread, also from any callback; lock-free.  Exact:
 * of a cancel, the task's expiry, its runs and close, exactly one wins.
 * Returns 0           cancelled: cb is not running and will never run again
 *                     (from its own callback: no further run); no final
 *                     call follows, and arg is the caller's again;
 *         UV_EBUSY    a run is executing now on another thread: no run
 *                     starts after it, and the task ends when it returns;
 *         UV_ENOENT   id 0, an unknown id, another wheel's id, or a task
 *                     that ended (a one-shot that ran or is running, one
 *                     cancelled, one owed or given its final call), also
 *                     from its own callback once another thread's cancel
 *                     got UV_EBUSY for this run;
 *         UV_EINVAL   wheel is NULL.
 * Memory order: after 0, no access to arg from the wheel follows. */
UVTW_EXTERN int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id);

/* Moves a live task's next run to delay_ms from this call, counted as
 * uvtw_submit counts, keeping its id, repeat, flags and place under
 * max_tasks.  Any thread, also from any callback; lock-free.  Exact, like
 * uvtw_cancel (docs/tasks.md, "Moving a deadline").
 * Returns 0           the task will not run before the new deadline (of
 *                     racing resets, the last to store it applies);
 *         UV_EBUSY    a run is executing now (also from the task's own
 *                     callback): it goes on; a repeating task's next run is
 *                     at the new deadline, a one-shot ends with this run;
 *         UV_ENOENT   as uvtw_cancel (also from its own callback after
 *                     another thread's UV_EBUSY cancel of this run); a
 *                     reset never moves another task;
 *         UV_EINVAL   wheel is NULL.
 * Memory order: writes before a reset that returns 0 or UV_EBUSY happen
 * before the task's next run, as a submit's. */
UVTW_EXTERN int uvtw_reset(uvtw_wheel_t* wheel,
                           uvtw_id_t id,
                           uint64_t delay_ms);

#ifdef __cplusplus
}
#endif

#endif /* UVTW_H */
