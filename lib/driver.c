/* SPDX-License-Identifier: MIT */
/* The driver: the one uv_timer_t that runs the core on a libuv loop, and
 * the pass.
 *
 * The driver is armed for uvtw__core_next_tick(), never on a fixed tick,
 * and never later than the wheel's earliest work:
 *   - a start earlier than the armed tick arms the driver for the timer's
 *     own tick at once (no scan), so uv_backend_timeout() tells the next
 *     wake-up exactly after starts;
 *   - a stop or a restart of the timer the driver waits for leaves it
 *     early; the `rearm` prepare handle then re-arms it for the wheel's
 *     next work (uvtw__core_tighten) in the loop's prepare phase, before
 *     the poll's timeout is taken, once however many such calls came;
 *   - a pass re-arms it at its end.
 * The wake-up may still be early (never late) when a slot's minimum went
 * stale or a slot was too crowded to tighten: then the pass just re-files
 * (cascades) and re-arms.  Work that a pass leaves due now runs in the
 * next loop iteration, on every libuv.
 *
 * This is the one file that depends on the libuv release that runs.  What
 * a timer re-armed with 0 inside its own callback does depends on the
 * libuv that runs, not on the one uvtw was compiled against:
 *   - libuv 1.44 to 1.47 run it again in the same pass of uv__run_timers
 *     (and spin if it keeps doing so), and 1.45 to 1.47 check whether the
 *     loop is alive right after that phase;
 *   - libuv 1.48.0 and later (libuv pull request 4250) collect the due
 *     timers before running any, so it runs in the next timers phase: the
 *     next loop iteration, as any uv_timer_t started with 0 from a timer
 *     callback does.
 * So from 1.48 on, a pass that leaves work due now re-arms the driver with
 * 0 from its own callback: the driver stays active and referenced, and the
 * work runs in the same iteration as a uv_timer_t's would; and a start with
 * timeout 0 made while the driver is collected but not yet run waits for
 * the pass after (uvtw__driver_due_start).  Before 1.48 the pass hands the
 * re-arm to the `rearm` prepare handle, referenced meanwhile: the work runs
 * in the next iteration (uvtw never spins), where a uv_timer_t would run in
 * the same pass.  Raising the floor to 1.48 deletes that use of the prepare
 * handle and rearm_in_cb. */

#include "internal.h"
#include "uvtw-assert.h"

/* uv_version() of 1.48.0. */
#define LIBUV_COLLECTS_DUE_TIMERS 0x013000

static void timer_cb(uv_timer_t* handle);


static const uint64_t* loop_clock(uv_loop_t* loop) {
  /* uv_now returns loop->time, and libuv keeps uv_loop_t's layout stable
   * within 1.x; a pointer to it spares every start a call into the shared
   * library. */
  if (loop->time != uv_now(loop))
    uvtw__abort_at(__FILE__, __LINE__, "loop->time differs from uv_now()");
  return &loop->time;
}


/* Non-zero if the driver is armed for expiry tick e, so that stopping or
 * moving a timer of that tick may move the next wake-up later.  Never
 * inside a pass, which disarms the driver first.  The DISARMED test comes
 * last: a tick equal to it (a saturated deadline) is rare. */
static int waits_for(const uvtw__driver_t* driver, uint64_t e) {
  return e == driver->armed_tick && e != UVTW__DRIVER_DISARMED;
}


static void arm(uvtw_wheel_t* wheel, uint64_t tick) {
  uvtw__driver_t* driver;
  uint64_t due_ms;
  uint64_t now;

  driver = &wheel->driver;
  due_ms = uvtw__core_ms_of(&wheel->core, tick);
  now = *driver->now;
  /* Cannot fail: the driver is initialised and cb is not NULL. */
  uv_timer_start(&driver->timer, timer_cb, due_ms > now ? due_ms - now : 0, 0);
  driver->armed_tick = tick;
  /* A tick past the wheel's reach (a saturated deadline's stand-in) has no
   * first ms: UINT64_MAX, as while disarmed. */
  driver->armed_first_ms = tick > wheel->core.max_tick
                               ? UINT64_MAX
                               : (tick - 1) * wheel->core.tick_ms + 1;
  /* libuv no longer holds the driver. */
  driver->defer_from_id = UVTW__NO_DEFER;
}


static void disarm(uvtw_wheel_t* wheel) {
  uvtw__driver_t* driver;

  driver = &wheel->driver;
  if (driver->armed_tick == UVTW__DRIVER_DISARMED)
    return;
  uv_timer_stop(&driver->timer);
  driver->armed_tick = UVTW__DRIVER_DISARMED;
  driver->armed_first_ms = UINT64_MAX;
  driver->defer_from_id = UVTW__NO_DEFER;
}


void uvtw__driver_sync_ref(uvtw_wheel_t* wheel) {
  uvtw__driver_t* driver;
  int want;

  driver = &wheel->driver;
  want = wheel->core.active_ref != 0;
  if (want == driver->ref)
    return;
  driver->ref = want;
  /* The rearm handle follows, so that it holds the loop while it stands in
   * for the driver; either handle counts for liveness only while it is
   * active. */
  if (want) {
    uv_ref((uv_handle_t*) &driver->timer);
    uv_ref((uv_handle_t*) &driver->rearm);
  } else {
    uv_unref((uv_handle_t*) &driver->timer);
    uv_unref((uv_handle_t*) &driver->rearm);
  }
}


/* Arms the driver for tick `next` (UVTW__NO_TICK: stops it). */
static void arm_for(uvtw_wheel_t* wheel, uint64_t next) {
  if (next == UVTW__NO_TICK)
    disarm(wheel);
  else if (next != wheel->driver.armed_tick)
    arm(wheel, next);
  uvtw__driver_sync_ref(wheel);
}


void uvtw__driver_update(uvtw_wheel_t* wheel) {
  /* A virtual wheel's time moves only in uvtw_wheel_advance: its driver is
   * never armed (so its timers neither wake nor hold the loop), and
   * armed_tick stays DISARMED, so no pass is ever deferred for it. */
  if (wheel->virtual_time)
    return;
  arm_for(wheel, uvtw__core_tighten(&wheel->core));
}


void uvtw__driver_earlier(uvtw_wheel_t* wheel, uint64_t e) {
  /* A saturated deadline's tick is UVTW__NO_TICK itself, which no armed
   * tick is above: the tick before it stands in, so that the timer holds
   * the loop as a uv_timer_t of timeout UINT64_MAX does. */
  if (e == UVTW__NO_TICK)
    e = UVTW__NO_TICK - 1;
  if (uvtw__driver_moves_for(&wheel->driver, e))
    arm(wheel, e);
  uvtw__driver_sync_ref(wheel);
}


#ifdef UVTW_CHECK_THREADS
/* The loop runs on this thread: a driver callback runs on it. */
static void seen_loop_thread(uvtw_wheel_t* wheel) {
  atomic_store_explicit(&wheel->driver.loop_thread, uv_thread_self(),
                        memory_order_relaxed);
  atomic_store_explicit(&wheel->driver.loop_thread_known, 1,
                        memory_order_release);
}


void uvtw__driver_check_thread(const uvtw_wheel_t* wheel, const char* call) {
  uv_thread_t self;
  uv_thread_t loop;

  if (!atomic_load_explicit(&wheel->driver.loop_thread_known,
                            memory_order_acquire))
    return;
  self = uv_thread_self();
  loop = atomic_load_explicit(&wheel->driver.loop_thread, memory_order_relaxed);
  if (uv_thread_equal(&self, &loop))
    return;
  /* While the wheel holds the loop (an active referenced timer), the loop
   * cannot have stopped on its thread in UV_RUN_DEFAULT; otherwise it may
   * have been handed to this thread (after a join, as libuv allows), which
   * then runs it. */
  if (!wheel->driver.ref) {
    atomic_store_explicit(&((uvtw_wheel_t*) wheel)->driver.loop_thread, self,
                          memory_order_relaxed);
    return;
  }
  fprintf(stderr,
          "uvtw: %s called on a thread that does not run the wheel's loop "
          "(loop-thread functions belong to the loop's thread; this build "
          "checks it: UVTW_CHECK_THREADS)\n",
          call);
  fflush(stderr);
  abort();
}
#else
# define seen_loop_thread(wheel) ((void) 0)
#endif


static void rearm_cb(uv_prepare_t* prepare) {
  uvtw_wheel_t* wheel;

  wheel = prepare->data;
  seen_loop_thread(wheel);
  uv_prepare_stop(prepare);
  wheel->driver.rearm_pending = 0;
  uvtw__driver_update(wheel);
}


/* Re-arms the driver before the loop next polls: the prepare phase comes
 * after the timers phase and before the poll's timeout is taken. */
static void rearm_before_poll(uvtw_wheel_t* wheel) {
  if (wheel->driver.rearm_pending)
    return;
  wheel->driver.rearm_pending = 1;
  uv_prepare_start(&wheel->driver.rearm, rearm_cb);
}


void uvtw__driver_left(uvtw_wheel_t* wheel, uint64_t e) {
  if (waits_for(&wheel->driver, e))
    rearm_before_poll(wheel);
  uvtw__driver_sync_ref(wheel);
}


void uvtw__driver_stopped(uvtw_wheel_t* wheel, const uvtw_timer_t* t) {
  uvtw__driver_left(wheel, uvtw__core_expiry(&wheel->core, t));
}


/* After the driver's pass, if the wheel is still open: re-arms the driver
 * for what is left. */
static void pass_end(uvtw_wheel_t* wheel) {
  uint64_t next;

  next = uvtw__core_tighten(&wheel->core);
  if (!wheel->driver.rearm_in_cb && next <= wheel->core.now_tick) {
    /* Work is due already, and this libuv would run a driver re-armed with
     * 0 again in this same pass: the prepare handle arms it for the next
     * iteration, and holds the loop until then if the work is referenced. */
    rearm_before_poll(wheel);
    uvtw__driver_sync_ref(wheel);
  } else {
    arm_for(wheel, next);
  }
}


void uvtw__driver_due_start(uvtw_wheel_t* wheel) {
  uvtw__driver_t* driver;

  /* From libuv 1.48 on, uv__run_timers stops every due timer, the driver
   * among them, before it runs any: an armed but inactive driver is held
   * for the timers phase now running, and a uv_timer_t started now would
   * wait for the next phase.  So do this timer and every timer started
   * after it: the driver's coming pass leaves them for the next one.
   * (Before 1.48 the driver is never seen in that state.) */
  driver = &wheel->driver;
  if (driver->defer_from_id == UVTW__NO_DEFER &&
      driver->armed_tick != UVTW__DRIVER_DISARMED && !driver->in_pass &&
      !uv_is_active((const uv_handle_t*) &driver->timer))
    driver->defer_from_id = wheel->core.next_order;
}


void uvtw__driver_count_late(uvtw_wheel_t* wheel, int delta) {
  uint64_t late;
  size_t slot;

  late = 0; /* virtual time has no lateness */
  if (!wheel->virtual_time)
    late = uvtw__core_popped_lateness(&wheel->core, *wheel->driver.now);
  slot = uvtw__late_slot(late);
  UVTW__ASSERT(delta > 0 || wheel->late_bits[slot] > 0);
  wheel->late_bits[slot] += (uint64_t) (int64_t) delta;
}


void uvtw__pass(uvtw_wheel_t* wheel) {
  uvtw__driver_t* driver;
  uvtw_timer_t* timer;

  driver = &wheel->driver;
  driver->in_pass = 1;
  uvtw__core_expire(&wheel->core, *driver->now);
  if (driver->defer_from_id != UVTW__NO_DEFER) {
    /* Started in this timers phase, before this callback: the next phase. */
    uvtw__core_defer(&wheel->core, driver->defer_from_id);
    driver->defer_from_id = UVTW__NO_DEFER;
  }
  /* The clock is read for each repeating timer (a callback may update
   * it).  Every timer counts as run here, by its lateness; a task that does
   * not run after all is taken off again (uvtw__task_fire).  A callback
   * that closes the wheel ends the pass: close empties the core, and files
   * nothing after (no start succeeds, no task is filed), so the next pop
   * finds nothing.  The same holds for a pass that begins on a closed
   * wheel (libuv >= 1.48 may run a driver that close stopped after the
   * timers phase had collected it). */
  while ((timer = uvtw__core_pop_due(&wheel->core, driver->now))) {
    uvtw__driver_count_late(wheel, 1);
    timer->cb_(timer);
  }
  driver->in_pass = 0;
  driver->after_pass(wheel); /* files nothing: frees nodes, holds the loop */
  uvtw__core_validate(&wheel->core);
}


/* The driver fired: a pass, then the re-arm for what it left. */
static void timer_cb(uv_timer_t* handle) {
  uvtw_wheel_t* wheel;
  uvtw__driver_t* driver;

  wheel = handle->data;
  seen_loop_thread(wheel);
  driver = &wheel->driver;
  /* The one-shot uv_timer_t is inactive now. */
  driver->armed_tick = UVTW__DRIVER_DISARMED;
  driver->armed_first_ms = UINT64_MAX;
  driver->wakeups++;
  uvtw__pass(wheel);
  if (!wheel->closing)
    pass_end(wheel);
}


void uvtw__driver_stop(uvtw_wheel_t* wheel) {
  disarm(wheel);
  uv_prepare_stop(&wheel->driver.rearm);
  wheel->driver.rearm_pending = 0;
}


int uvtw__driver_close(uvtw_wheel_t* wheel, uv_close_cb cb) {
  uv_close((uv_handle_t*) &wheel->driver.timer, cb);
  uv_close((uv_handle_t*) &wheel->driver.rearm, cb);
  return 2;
}


void uvtw__driver_init(uvtw_wheel_t* wheel,
                       void (*after_pass)(uvtw_wheel_t* wheel)) {
  uvtw__driver_t* driver;
  int err;

  driver = &wheel->driver;
  *driver = (uvtw__driver_t) UVTW__DRIVER_IDLE;
  driver->rearm_in_cb = uv_version() >= LIBUV_COLLECTS_DUE_TIMERS;
  driver->after_pass = after_pass;
  driver->now =
      wheel->virtual_time ? &wheel->virtual_now : loop_clock(wheel->loop);
  atomic_init(&driver->loop_thread_known, 0);
  if (wheel->virtual_time)
    driver->never_arms = 1;
  /* Neither can fail on unix. */
  err = uv_timer_init(wheel->loop, &driver->timer);
  UVTW__ASSERT(err == 0);
  err = uv_prepare_init(wheel->loop, &driver->rearm);
  UVTW__ASSERT(err == 0);
  driver->timer.data = wheel;
  driver->rearm.data = wheel;
  uv_unref((uv_handle_t*) &driver->timer); /* referenced only while needed */
  uv_unref((uv_handle_t*) &driver->rearm);
  driver->ref = 0;
}
