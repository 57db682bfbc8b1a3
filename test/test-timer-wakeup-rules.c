/* SPDX-License-Identifier: MIT */
/* The wake-up rules of docs/internals.md ("Wake-ups"), from every place a
 * program may start or stop a timer: the driver is never armed later than
 * the wheel's earliest work; uv_backend_timeout() is exact right after a
 * start, and after a stop or a later restart of the earliest timer from
 * the loop's next prepare phase on; uv_loop_alive() is what a uv_timer_t
 * twin would give.  Outside uv_run uv_now does not move, so the numbers
 * compared there are exact; no case asserts how soon the kernel wakes.
 *
 *   rules_outside, rules_in_idle, rules_in_prepare, rules_in_check,
 *   rules_in_uv_timer, rules_in_uvtw_cb
 *                    from that place: a stop of the earliest timer, a later
 *                    restart of it (once, and 200 times), a stop followed
 *                    by a start later than the old wake-up, and one
 *                    followed by an earlier start.  Right after the call
 *                    the wake-up is never later than the new minimum (and
 *                    exact after the earlier start, outside a pass); after
 *                    one further uv_run(UV_RUN_NOWAIT), which holds a
 *                    prepare phase, it is exact; the loop stays alive.
 *   rules_by_level_tick_leeway  the same outside the loop, for an
 *                    earliest timer in levels 0 to 2, with 10 ms ticks and
 *                    with leeway.
 *   liveness_in_contexts  the stop of the one referenced timer (an
 *                    unreferenced one stays, and a uv_timer_t twin of
 *                    each) from each place: uv_loop_alive() is 0 right
 *                    after it, and uv_run(UV_RUN_DEFAULT) returns without
 *                    waiting for the unreferenced timers.
 *   restart_storm_one_wakeup  200 later restarts of the earliest timer
 *                    between two runs: the driver wakes once, for it.
 *   start_after_idle  a short timer started after the wheel idled for
 *                    longer than level 0 spans: exact backend timeout, one
 *                    wake-up, never early, at most one cascade.
 *   same_phase_as_driver  a uv_timer_t due with a uvtw timer stops,
 *                    restarts (0 and later) and starts uvtw timers in the
 *                    timers phase in which the driver is due (from libuv
 *                    1.48 on, collected but not yet run), also a first
 *                    referenced one (the driver was unreferenced): each
 *                    runs once,
 *                    never early, and from 1.48 on in the iteration its
 *                    uv_timer_t twin runs in.
 *   virtual_wheel_stops  starts and stops on a virtual wheel never touch
 *                    the loop: backend timeout and liveness are the
 *                    loop's own, no driver wake-up, advance runs them.
 *   close_with_rearm_pending  a wheel closed (from an idle callback) while
 *                    the re-arm of a stop is pending closes cleanly.
 *   task_earlier_than_armed  a loop task due before the armed wake-up
 *                    moves it earlier when the loop takes it in.
 *   saturated_alone_like_twin  a referenced timer with timeout UINT64_MAX
 *                    alone on the wheel keeps the loop alive, as its
 *                    uv_timer_t twin does. */

#include "test-cases.h"
#include "timer-harness.h"

/* uv_version() of 1.48.0: from it on libuv collects the due timers of a
 * timers phase before it runs any (docs/libuv-versions.md). */
#define COLLECTS_DUE_TIMERS 0x013000

#define A_MS 2000  /* the earliest timer */
#define B_MS 60000 /* the one after it */
#define LATER_MS 30000

static uvtw_timer_t a;
static uvtw_timer_t b;
static uvtw_timer_t c;
static uvtw_timer_t x;
static uv_timer_t u;
static uv_timer_t ua;
static uv_timer_t ub;
static uv_idle_t idle;
static uv_prepare_t prep;

typedef enum {
  CTX_OUTSIDE,
  CTX_IDLE,
  CTX_PREPARE,
  CTX_CHECK,
  CTX_UV_TIMER,
  CTX_UVTW_CB
} context_t;

typedef enum {
  ACT_STOP,
  ACT_LATER,
  ACT_LATER_MANY,
  ACT_STOP_START_LATER,
  ACT_STOP_START_EARLIER,
  ACT_COUNT,
  ACT_STOP_PAIR /* liveness_in_contexts' own, after the rules' */
} action_t;

static context_t ctx;
static action_t act;
static int acted;
static const uvtw_timer_t* target; /* the earliest timer after the action */
static int64_t act_iteration;


static int64_t due_in(const uvtw_timer_t* t) {
  return (int64_t) uvtw_timer_get_due_in(t);
}


static void stats(uvtw_stats_t* s) {
  uvtw_wheel_stats(wheel, s);
}


/* The one referenced uvtw timer (and its twin) stopped in each place; an
 * unreferenced one of each stays.  A uv_timer_t-only loop would not be
 * alive after it, so neither is this one, and uv_run(UV_RUN_DEFAULT)
 * returns without waiting for the unreferenced timers (their never_cb
 * would fail the test if it did). */
static void stop_pair(void) {
  ASSERT_EQ(0, uvtw_timer_stop(&a));
  ASSERT_UV_OK(uv_timer_stop(&ua));
  ASSERT_EQ(0, uv_loop_alive(&loop));
}


/* The action, in the context ctx.  Inside a pass the driver is re-armed
 * by the pass's end, so the immediate exactness of a start is checked only
 * outside one. */
static void do_action(void) {
  int i;

  ASSERT_EQ(0, acted);
  acted = 1;
  act_iteration = iteration;
  switch (act) {
  case ACT_STOP:
    ASSERT_EQ(0, uvtw_timer_stop(&a));
    target = &b;
    break;
  case ACT_LATER:
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, LATER_MS, 0));
    target = &a;
    break;
  case ACT_LATER_MANY:
    for (i = 0; i < 200; i++)
      ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, LATER_MS + (uint64_t) i, 0));
    target = &a;
    break;
  case ACT_STOP_START_LATER:
    ASSERT_EQ(0, uvtw_timer_stop(&a));
    ASSERT_EQ(0, uvtw_timer_start(&c, never_cb, A_MS + 1000, 0));
    target = &c;
    break;
  case ACT_STOP_START_EARLIER:
    ASSERT_EQ(0, uvtw_timer_stop(&a));
    ASSERT_EQ(0, uvtw_timer_start(&c, never_cb, A_MS / 2, 0));
    target = &c;
    if (ctx != CTX_UVTW_CB)
      ASSERT_EQ(due_in(&c), uv_backend_timeout(&loop));
    break;
  case ACT_STOP_PAIR:
    stop_pair();
    return;
  default:
    ASSERT(0);
  }
  /* Never late: the wake-up is at or before the new minimum (inside a
   * pass the driver is not armed, and the backend timeout is the loop's
   * other timers'). */
  if (ctx != CTX_UVTW_CB)
    ASSERT_LE(uv_backend_timeout(&loop), due_in(target));
}


static void idle_cb(uv_idle_t* h) {
  ASSERT_UV_OK(uv_idle_stop(h));
  do_action();
}


static void prepare_cb(uv_prepare_t* h) {
  ASSERT_UV_OK(uv_prepare_stop(h));
  do_action();
}


static void check_action(void) {
  on_check = NULL;
  do_action();
}


static void uv_timer_action_cb(uv_timer_t* h) {
  (void) h;
  do_action();
}


static void uvtw_action_cb(uvtw_timer_t* t) {
  (void) t;
  do_action();
}


/* A loop whose backend timeout means something (it has run once), with
 * b started for B_MS and the driver armed for it: no re-arm is pending,
 * so that none hides the one a case's action must cause. */
static void setup_ran(void) {
  setup();
  ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &c));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &x));
  add_uv_timer(&u);
  add_uv_timer(&ua);
  add_uv_timer(&ub);
  ASSERT_UV_OK(uv_idle_init(&loop, &idle));
  close_at_teardown((uv_handle_t*) &idle);
  ASSERT_UV_OK(uv_prepare_init(&loop, &prep));
  close_at_teardown((uv_handle_t*) &prep);
  ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, B_MS, 0));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ(due_in(&b), uv_backend_timeout(&loop));
}


/* Makes the action happen in ctx: sets up what calls it. */
static void arm_context(void) {
  acted = 0;
  switch (ctx) {
  case CTX_OUTSIDE:
    do_action();
    break;
  case CTX_IDLE:
    ASSERT_UV_OK(uv_idle_start(&idle, idle_cb));
    break;
  case CTX_PREPARE:
    ASSERT_UV_OK(uv_prepare_start(&prep, prepare_cb));
    break;
  case CTX_CHECK:
    on_check = check_action;
    break;
  case CTX_UV_TIMER:
    ASSERT_UV_OK(uv_timer_start(&u, uv_timer_action_cb, 1, 0));
    break;
  case CTX_UVTW_CB:
    ASSERT_EQ(0, uvtw_timer_start(&x, uvtw_action_cb, 1, 0));
    break;
  }
}


/* Runs the loop without blocking until the action has run. */
static void run_until_acted(void) {
  int k;

  for (k = 0; !acted; k++) {
    ASSERT_LT(k, 100000);
    if (ctx == CTX_UV_TIMER || ctx == CTX_UVTW_CB)
      uv_sleep(1);
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  }
}


/* Non-zero if the action came before the prepare phase of the run in
 * which it came, or in a pass, whose end re-arms the driver. */
static int rearmed_in_same_run(void) {
  return ctx == CTX_IDLE || ctx == CTX_UVTW_CB ||
         (ctx == CTX_UV_TIMER && uv_version() < COLLECTS_DUE_TIMERS);
}


static void rules_in(context_t where) {
  ctx = where;
  for (act = 0; act < ACT_COUNT; act++) {
    setup_ran();
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, A_MS, 0));
    ASSERT_EQ(A_MS, uv_backend_timeout(&loop));
    arm_context();
    run_until_acted();
    /* Never late; exact at once where a prepare phase (or the pass's end)
     * followed the action. */
    ASSERT_LE(uv_backend_timeout(&loop), due_in(target));
    if (rearmed_in_same_run())
      ASSERT_EQ(due_in(target), uv_backend_timeout(&loop));
    ASSERT_EQ(1, uv_loop_alive(&loop));
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
    ASSERT_EQ(due_in(target), uv_backend_timeout(&loop));
    ASSERT_EQ(0, uvtw_timer_stop(&a));
    ASSERT_EQ(0, uvtw_timer_stop(&b));
    ASSERT_EQ(0, uvtw_timer_stop(&c));
    ASSERT_EQ(0, uv_loop_alive(&loop));
    teardown();
  }
}


static void rules_outside(void) {
  rules_in(CTX_OUTSIDE);
}


static void rules_in_idle(void) {
  rules_in(CTX_IDLE);
}


static void rules_in_prepare(void) {
  rules_in(CTX_PREPARE);
}


static void rules_in_check(void) {
  rules_in(CTX_CHECK);
}


static void rules_in_uv_timer(void) {
  rules_in(CTX_UV_TIMER);
}


static void rules_in_uvtw_cb(void) {
  rules_in(CTX_UVTW_CB);
}


/* The rules outside the loop for an earliest timer in level 0, 1 and 2
 * and a later one in level 3, with 1 ms and 10 ms ticks and with leeway:
 * a slot that holds one timer bounds it exactly, so the re-arm is exact
 * there too. */
static void rules_by_level_tick_leeway(void) {
  static const uint64_t ticks[] = {1, 10, 1};
  static const uint64_t leeways[] = {0, 0, 127};
  static const uint64_t firsts[] = {5, 2000, 5000, 70000};
  uvtw_options_t opts;
  size_t i;
  size_t j;
  int k;

  for (i = 0; i < sizeof(ticks) / sizeof(ticks[0]); i++) {
    for (j = 0; j < sizeof(firsts) / sizeof(firsts[0]); j++) {
      uvtw_options_init(&opts);
      opts.tick_ms = ticks[i];
      setup_opts(&opts);
      ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
      ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
      ASSERT_EQ(0, uvtw_timer_set_leeway(&a, leeways[i]));
      ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, 10000000, 0));
      ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
      ASSERT_EQ(due_in(&b), uv_backend_timeout(&loop));
      /* Start, stop. */
      ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, firsts[j], 0));
      ASSERT_EQ(due_in(&a), uv_backend_timeout(&loop));
      ASSERT_EQ(0, uvtw_timer_stop(&a));
      ASSERT_LE(uv_backend_timeout(&loop), due_in(&b));
      ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
      ASSERT_EQ(due_in(&b), uv_backend_timeout(&loop));
      /* Start, restart later (once, then 50 times). */
      ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, firsts[j], 0));
      ASSERT_EQ(due_in(&a), uv_backend_timeout(&loop));
      ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, firsts[j] * 3, 0));
      ASSERT_LE(uv_backend_timeout(&loop), due_in(&a));
      ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
      ASSERT_EQ(due_in(&a), uv_backend_timeout(&loop));
      for (k = 0; k < 50; k++)
        ASSERT_EQ(
            0, uvtw_timer_start(&a, never_cb, firsts[j] * 4 + (uint64_t) k, 0));
      ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
      ASSERT_EQ(due_in(&a), uv_backend_timeout(&loop));
      /* Restart earlier: exact at once. */
      ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, firsts[j], 0));
      ASSERT_EQ(due_in(&a), uv_backend_timeout(&loop));
      ASSERT_EQ(0, uvtw_timer_stop(&a));
      ASSERT_EQ(0, uvtw_timer_stop(&b));
      ASSERT_EQ(0, uv_loop_alive(&loop));
      teardown();
    }
  }
}


static void liveness_in_contexts(void) {
  context_t where;

  for (where = CTX_OUTSIDE; where <= CTX_UVTW_CB; where++) {
    setup_ran();
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, A_MS, 0));
    uvtw_timer_unref(&b);
    ASSERT_UV_OK(uv_timer_start(&ua, never_uv_cb, A_MS, 0));
    ASSERT_UV_OK(uv_timer_start(&ub, never_uv_cb, B_MS, 0));
    uv_unref((uv_handle_t*) &ub);
    ASSERT_EQ(1, uv_loop_alive(&loop));
    ctx = where;
    act = ACT_STOP_PAIR;
    arm_context();
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_EQ(1, acted);
    ASSERT_EQ(0, uv_loop_alive(&loop));
    ASSERT_EQ(1, uvtw_timer_is_active(&b));
    ASSERT_EQ(0, uvtw_timer_stop(&b));
    ASSERT_UV_OK(uv_timer_stop(&ub));
    teardown();
  }
}


/* 200 later restarts of the earliest timer between two runs: the prepare
 * phase re-arms the driver for the last deadline, so it wakes once. */
static int storm_fired;
static uint64_t storm_deadline;

static void storm_cb(uvtw_timer_t* t) {
  (void) t;
  storm_fired++;
  ASSERT_UGE(uv_now(&loop), storm_deadline);
  ASSERT_EQ(0, uvtw_timer_stop(&b));
}


static void restart_storm_one_wakeup(void) {
  uvtw_stats_t s0;
  uvtw_stats_t s1;
  int i;

  setup_ran();
  ASSERT_EQ(0, uvtw_timer_start(&a, storm_cb, 100, 0));
  ASSERT_EQ(100, uv_backend_timeout(&loop));
  for (i = 0; i < 200; i++)
    ASSERT_EQ(0, uvtw_timer_start(&a, storm_cb, 101 + (uint64_t) i, 0));
  storm_deadline = uv_now(&loop) + 300;
  ASSERT_LE(uv_backend_timeout(&loop), 300);
  stats(&s0);
  storm_fired = 0;
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  stats(&s1);
  ASSERT_EQ(1, storm_fired);
  ASSERT_UEQ(1, s1.driver_wakeups - s0.driver_wakeups);
  teardown();
}


/* The wheel's now lags the loop's while it idles; a start files relative
 * to it, and still arms the driver for its own tick. */
static int idle_fired;
static uint64_t idle_deadline;

static void idle_start_cb(uvtw_timer_t* t) {
  (void) t;
  idle_fired++;
  ASSERT_UGE(uv_now(&loop), idle_deadline);
}


static void start_after_idle(void) {
  static const uint64_t timeouts[] = {1, 100, 2047};
  uvtw_stats_t s0;
  uvtw_stats_t s1;
  size_t i;

  setup_ran();
  ASSERT_EQ(0, uvtw_timer_stop(&b));
  for (i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++) {
    uv_sleep(2100);
    uv_update_time(&loop);
    stats(&s0);
    idle_deadline = uv_now(&loop) + timeouts[i];
    ASSERT_EQ(0, uvtw_timer_start(&a, idle_start_cb, timeouts[i], 0));
    ASSERT_EQ((int64_t) timeouts[i], uv_backend_timeout(&loop));
    ASSERT_UEQ(timeouts[i], uvtw_timer_get_due_in(&a));
    idle_fired = 0;
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_EQ(1, idle_fired);
    stats(&s1);
    ASSERT_UEQ(1, s1.driver_wakeups - s0.driver_wakeups);
    ASSERT_ULE(s1.cascades - s0.cascades, 1);
  }
  teardown();
}


/* A uv_timer_t due in the same timers phase as the driver, started
 * first so that it runs first: it stops a, restarts c with 0 and x later,
 * and starts b with 0 (each with a uv_timer_t twin, ua for c and ub for
 * b).  From libuv 1.48 on the driver is collected then; a start of it
 * there would corrupt libuv's ready queue (AddressSanitizer sees it). */
static int64_t fired_iter_c;
static int64_t fired_iter_b;
static int64_t fired_iter_ua;
static int64_t fired_iter_ub;
static int fired_x;
static uint64_t x_deadline;
/* The wheel's other timers are unreferenced, so that b's start with 0
 * refs the collected driver (uvtw__driver_earlier). */
static int unref_rest;

static void same_c_cb(uvtw_timer_t* t) {
  (void) t;
  ASSERT_EQ(-1, fired_iter_c);
  fired_iter_c = iteration;
}


static void same_b_cb(uvtw_timer_t* t) {
  (void) t;
  ASSERT_EQ(-1, fired_iter_b);
  fired_iter_b = iteration;
}


static void same_x_cb(uvtw_timer_t* t) {
  (void) t;
  fired_x++;
  ASSERT_UGE(uv_now(&loop), x_deadline);
}


static void same_ua_cb(uv_timer_t* h) {
  (void) h;
  ASSERT_EQ(-1, fired_iter_ua);
  fired_iter_ua = iteration;
}


static void same_ub_cb(uv_timer_t* h) {
  (void) h;
  ASSERT_EQ(-1, fired_iter_ub);
  fired_iter_ub = iteration;
}


static void same_u_cb(uv_timer_t* h) {
  (void) h;
  acted = 1;
  ASSERT_EQ(0, uvtw_timer_stop(&a));
  ASSERT_EQ(0, uvtw_timer_start(&c, same_c_cb, 0, 0));
  ASSERT_UV_OK(uv_timer_start(&ua, same_ua_cb, 0, 0));
  ASSERT_EQ(0, uvtw_timer_start(&b, same_b_cb, 0, 0));
  ASSERT_UV_OK(uv_timer_start(&ub, same_ub_cb, 0, 0));
  x_deadline = uv_now(&loop) + 20;
  ASSERT_EQ(0, uvtw_timer_start(&x, same_x_cb, 20, 0));
  if (unref_rest)
    uvtw_timer_ref(&x);
}


static void same_phase_as_driver(void) {
  int k;

  for (k = 0; k < 20; k++) {
    setup_ran();
    ASSERT_EQ(0, uvtw_timer_stop(&b));
    fired_iter_c = fired_iter_b = fired_iter_ua = fired_iter_ub = -1;
    fired_x = 0;
    acted = 0;
    ASSERT_UV_OK(uv_timer_start(&u, same_u_cb, 5, 0));
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, 5, 0));
    ASSERT_EQ(0, uvtw_timer_start(&c, never_cb, 5, 0));
    ASSERT_EQ(0, uvtw_timer_start(&x, never_cb, 5, 0));
    unref_rest = k % 2;
    if (unref_rest) {
      uvtw_timer_unref(&a);
      uvtw_timer_unref(&c);
      uvtw_timer_unref(&x);
    }
    uv_sleep(6); /* u and the driver are both due in the next phase */
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_EQ(1, acted);
    ASSERT_EQ(1, fired_x);
    ASSERT_NE(-1, fired_iter_c);
    ASSERT_NE(-1, fired_iter_b);
    if (uv_version() >= COLLECTS_DUE_TIMERS) {
      ASSERT_EQ(fired_iter_ua, fired_iter_c);
      ASSERT_EQ(fired_iter_ub, fired_iter_b);
    }
    ASSERT_EQ(0, uv_loop_alive(&loop));
    teardown();
  }
}


/* A virtual wheel's driver is never armed: its starts and stops leave
 * the loop's backend timeout and liveness to the loop's own handles. */
static int virtual_fired;

static void virtual_cb(uvtw_timer_t* t) {
  (void) t;
  virtual_fired++;
}


static void virtual_wheel_stops(void) {
  uvtw_options_t opts;
  uvtw_stats_t s;

  uvtw_options_init(&opts);
  opts.virtual_time = 1;
  setup_opts(&opts);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &c));
  add_uv_timer(&u);
  ASSERT_UV_OK(uv_timer_start(&u, never_uv_cb, 777, 0));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ((int64_t) uv_timer_get_due_in(&u), uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_start(&a, virtual_cb, 50, 0));
  ASSERT_EQ(0, uvtw_timer_start(&b, virtual_cb, 5000, 0));
  ASSERT_EQ((int64_t) uv_timer_get_due_in(&u), uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_stop(&a));
  ASSERT_EQ(0, uvtw_timer_start(&c, virtual_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_start(&c, virtual_cb, 6000, 0)); /* later */
  ASSERT_EQ((int64_t) uv_timer_get_due_in(&u), uv_backend_timeout(&loop));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ((int64_t) uv_timer_get_due_in(&u), uv_backend_timeout(&loop));
  ASSERT_UV_OK(uv_timer_stop(&u));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  virtual_fired = 0;
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 5000));
  ASSERT_EQ(1, virtual_fired);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1000));
  ASSERT_EQ(2, virtual_fired);
  uvtw_wheel_stats(wheel, &s);
  ASSERT_UEQ(0, s.driver_wakeups);
  teardown();
}


/* The re-arm of a stop is pending when the wheel closes, in the idle
 * phase before the prepare phase that would run it. */
static uvtw_wheel_t* own;
static int own_closed;

static void own_close_cb(uvtw_wheel_t* w) {
  ASSERT_PTR_EQ(own, w);
  own_closed++;
}


static void close_idle_cb(uv_idle_t* h) {
  ASSERT_UV_OK(uv_idle_stop(h));
  ASSERT_EQ(0, uvtw_timer_stop(&a));
  ASSERT_EQ(0, uvtw_wheel_close(own, own_close_cb));
}


static void close_with_rearm_pending(void) {
  int k;

  for (k = 0; k < 2; k++) {
    setup_loop();
    ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &own));
    ASSERT_EQ(0, uvtw_timer_init(own, &a));
    ASSERT_EQ(0, uvtw_timer_init(own, &b));
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, A_MS, 0));
    ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, B_MS, 0));
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
    own_closed = 0;
    if (k == 0) {
      /* Stopped outside the loop: the re-arm waits for its prepare. */
      ASSERT_EQ(0, uvtw_timer_stop(&a));
      ASSERT_EQ(0, uvtw_wheel_close(own, own_close_cb));
    } else {
      ASSERT_UV_OK(uv_idle_init(&loop, &idle));
      ASSERT_UV_OK(uv_idle_start(&idle, close_idle_cb));
      close_at_teardown((uv_handle_t*) &idle);
    }
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_EQ(1, own_closed);
    teardown();
  }
}


/* A loop task due before the armed wake-up: taken in by the async
 * callback, it arms the driver earlier (uvtw__driver_earlier, no scan). */
static int task_ran;

static void task_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(0, status);
  task_ran++;
  ASSERT_EQ(0, uvtw_timer_stop(&b));
}


static void task_earlier_than_armed(void) {
  int k;

  setup_ran();
  task_ran = 0;
  ASSERT_EQ(0, uvtw_submit(wheel, 20, 0, 0, task_cb, NULL, NULL));
  /* Taken in by the async callback of one of the next runs. */
  for (k = 0; uv_backend_timeout(&loop) > 1000; k++) {
    ASSERT_LT(k, 1000);
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  }
  /* 20 ms from the submit, on a clock that may lag uv_hrtime() by a few
   * ms: far from B_MS either way. */
  ASSERT_LE(uv_backend_timeout(&loop), 100);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, task_ran);
  teardown();
}


/* A referenced timer whose deadline saturates at UINT64_MAX never fires,
 * but, as a uv_timer_t started with timeout UINT64_MAX does, it holds the
 * loop while active: alone on the wheel, with 1 ms and with 10 ms ticks,
 * and whatever the wheel did before. */
static void saturated_alone_like_twin(void) {
  static const uint64_t ticks[] = {1, 10};
  uvtw_options_t opts;
  size_t i;

  for (i = 0; i < sizeof(ticks) / sizeof(ticks[0]); i++) {
    uvtw_options_init(&opts);
    opts.tick_ms = ticks[i];
    setup_opts(&opts);
    ASSERT_EQ(0, uvtw_timer_init(wheel, &a));
    ASSERT_EQ(0, uvtw_timer_init(wheel, &b));
    add_uv_timer(&ua);
    ASSERT_UV_OK(uv_timer_start(&ua, never_uv_cb, UINT64_MAX, 0));
    ASSERT_EQ(1, uv_loop_alive(&loop)); /* the twin holds the loop */
    ASSERT_UV_OK(uv_timer_stop(&ua));
    ASSERT_EQ(0, uv_loop_alive(&loop));
    ASSERT_EQ(0, uvtw_timer_start(&a, never_cb, UINT64_MAX, 0));
    ASSERT_EQ(1, uv_loop_alive(&loop));
    /* The same after another timer came and went. */
    ASSERT_EQ(0, uvtw_timer_start(&b, never_cb, 10, 0));
    ASSERT_EQ(0, uvtw_timer_stop(&b));
    ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
    ASSERT_EQ(1, uv_loop_alive(&loop));
    ASSERT_EQ(0, uvtw_timer_stop(&a));
    ASSERT_EQ(0, uv_loop_alive(&loop));
    teardown();
  }
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(rules_outside),
  TEST_CASE(rules_in_idle),
  TEST_CASE(rules_in_prepare),
  TEST_CASE(rules_in_check),
  TEST_CASE(rules_in_uv_timer),
  TEST_CASE(rules_in_uvtw_cb),
  TEST_CASE(rules_by_level_tick_leeway),
  TEST_CASE(liveness_in_contexts),
  TEST_CASE(restart_storm_one_wakeup),
  TEST_CASE(start_after_idle),
  TEST_CASE(same_phase_as_driver),
  TEST_CASE(virtual_wheel_stops),
  TEST_CASE(close_with_rearm_pending),
  TEST_CASE(task_earlier_than_armed),
  TEST_CASE(saturated_alone_like_twin),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
