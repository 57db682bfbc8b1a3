/* SPDX-License-Identifier: MIT */
/* Virtual time: a wheel made with options.virtual_time, its clock
 * (uvtw_wheel_now) and uvtw_wheel_advance.
 *
 *   order_ties       timers with equal and different deadlines run in
 *                    libuv's order (deadline, then start order; a restart
 *                    goes behind), each seeing uvtw_wheel_now() equal to
 *                    its deadline; none before the span reaches it;
 *                    get_due_in counts from the wheel's clock.
 *   repeat_counts    repeating timers fire once per period in a span,
 *                    each at its previous deadline plus the repeat, and
 *                    ties between them go by the order of their re-filing.
 *   start_stop_in_callbacks  a callback starts a timer due inside the span
 *                    (it runs, also at the span's very end), one due
 *                    beyond it (it waits), one with timeout 0 (it runs at
 *                    the same time, after the callbacks collected before
 *                    it), stops a timer due later in the span (it never
 *                    runs) and pushes one past the span.
 *   tick_10          tick_ms = 10 on a clock that is not a multiple of 10:
 *                    each callback sees its deadline rounded up to the
 *                    tick, repeats count from that, the clock itself moves
 *                    by exactly the ms given.
 *   span_2_40        one advance of 2^40 ms runs timers from 1 ms to 2^40
 *                    ms (every level and the overflow list) in order, a
 *                    repeat of 2^38 four times, leaves 2^40 + 1 for the
 *                    next ms; an advance by UINT64_MAX saturates the clock
 *                    and runs what lies before it; a saturated deadline
 *                    never fires.
 *   advance_errors   UV_EINVAL (NULL, an ordinary wheel), UV_EBUSY from a
 *                    timer's and from a loop task's callback, UV_ECANCELED
 *                    on a closing wheel; a callback that closes the wheel
 *                    ends the advance there; uvtw_wheel_now of an ordinary
 *                    wheel is uv_now(loop).
 *   liveness         uv_run(UV_RUN_DEFAULT) returns at once on a loop
 *                    whose only work is a virtual wheel's timers; a loop
 *                    task holds the loop until it is taken in and filed,
 *                    then waits for advance; a threadpool task handed to
 *                    the pool by advance holds the loop until it is done;
 *                    a task submitted by a thread that was joined before
 *                    the advance is taken in by it and runs in it.
 *   twin             a random script of starts, restarts and stops made
 *                    by the callbacks (one-shots and repeats), run on a
 *                    virtual wheel advanced 1 ms at a time and on an
 *                    ordinary wheel in real time: the same callbacks in
 *                    the same order at the same wheel times (on the real
 *                    wheel, uv_now at each callback minus its lateness;
 *                    the real side takes its lateness off the timeouts it
 *                    starts, and a run in which a callback was later than
 *                    a timeout it had to start is run again).
 *   producers        4 threads submit loop and threadpool tasks, and
 *                    cancel some: first all before an advance (each runs
 *                    at exactly its submit's clock plus its delay), then
 *                    while the loop thread advances 1 ms at a time (each
 *                    runs once, never before the clock the producer saw
 *                    before its submit plus its delay).  TSan: the clock
 *                    is read from the producers without a race.
 *   far_and_records  4 * 10^6 steps of 1 ms (one advance, a repeat-1
 *                    timer), then 4 * 10^6 advances of 1 ms, beside 10,000
 *                    timers at UINT64_MAX and the records of 256 threads
 *                    (their tasks taken back, the wake-up served): each
 *                    step and each call costs the same as on a clean
 *                    wheel, so the case takes well under a second in a
 *                    release build (CTest gives it 40 s, for sanitizers,
 *                    qemu and a loaded machine); a step that walked the
 *                    far timers (16-27 us each) or a call or step that
 *                    looked at every record would need minutes.  With
 *                    UVTW_CHECK_INVARIANTS, which checks every timer after
 *                    each step, 4,000 steps and 1,000 calls. */

#include <stdatomic.h>
#include <string.h>

#include "timer-harness.h"
#include "test-cases.h"

#define MAX_LOG 4096

typedef struct {
  int id;
  uint64_t now;
} entry_t;

static entry_t log_[MAX_LOG];
static int nlog;


static void log_add(int id, uint64_t now) {
  ASSERT_LT(nlog, MAX_LOG);
  log_[nlog].id = id;
  log_[nlog].now = now;
  nlog++;
}


static void setup_virtual(uint64_t tick_ms) {
  uvtw_options_t o;

  uvtw_options_init(&o);
  ASSERT_EQ(0, o.virtual_time);
  o.virtual_time = 1;
  o.tick_ms = tick_ms;
  setup_opts(&o);
  nlog = 0;
}


/* A timer that logs its index and the clock, and checks that the clock is
 * its expected deadline (expect[i], if not 0). */
#define NT 16
static uvtw_timer_t tm[NT];
static uint64_t expect_at[NT];


static int index_of(uvtw_timer_t* t) {
  ASSERT(t >= tm && t < tm + NT);
  return (int) (t - tm);
}


static void log_cb(uvtw_timer_t* t) {
  int i;

  i = index_of(t);
  log_add(i, uvtw_wheel_now(wheel));
  if (expect_at[i] != 0)
    ASSERT_UEQ(expect_at[i], uvtw_wheel_now(wheel));
}


static void init_timers(void) {
  int i;

  for (i = 0; i < NT; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &tm[i]));
    expect_at[i] = 0;
  }
}


static void expect_log(const int* ids, const uint64_t* at, int n) {
  int i;

  ASSERT_EQ(n, nlog);
  for (i = 0; i < n; i++) {
    ASSERT_EQ(ids[i], log_[i].id);
    if (at != NULL)
      ASSERT_UEQ(at[i], log_[i].now);
  }
}


static void order_ties(void) {
  static const int ids[] = {1, 4, 5, 3, 0, 2};
  uint64_t t0;

  setup_virtual(1);
  init_timers();
  t0 = uvtw_wheel_now(wheel);
  ASSERT_UEQ(uv_now(&loop), t0); /* it starts at the loop's clock */
  ASSERT_EQ(0, uvtw_timer_start(&tm[0], log_cb, 30, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[1], log_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[2], log_cb, 30, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[5], log_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[3], log_cb, 20, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[4], log_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[5], log_cb, 10, 0)); /* goes behind 4 */
  expect_at[0] = expect_at[2] = t0 + 30;
  expect_at[1] = expect_at[4] = expect_at[5] = t0 + 10;
  expect_at[3] = t0 + 20;
  ASSERT_UEQ(30, uvtw_timer_get_due_in(&tm[0]));

  /* Real time does not move it, and the loop runs none of them. */
  uv_sleep(2);
  uv_update_time(&loop);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ(0, nlog);
  ASSERT_UEQ(t0, uvtw_wheel_now(wheel));

  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 9));
  ASSERT_EQ(0, nlog);
  ASSERT_UEQ(t0 + 9, uvtw_wheel_now(wheel));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 20));
  expect_log(ids, NULL, 4);
  ASSERT_UEQ(t0 + 29, uvtw_wheel_now(wheel));
  ASSERT_UEQ(1, uvtw_timer_get_due_in(&tm[0]));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 0)); /* nothing due now */
  ASSERT_EQ(4, nlog);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
  expect_log(ids, NULL, 6);
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
  teardown();
}


static int reps[2];
static uint64_t rep_period[2];
static uint64_t rep_next[2];

static void rep_cb(uvtw_timer_t* t) {
  int i;

  i = index_of(t);
  ASSERT_UEQ(rep_next[i], uvtw_wheel_now(wheel));
  ASSERT(uvtw_timer_is_active(t));
  ASSERT_UEQ(rep_period[i], uvtw_timer_get_due_in(t));
  rep_next[i] += rep_period[i];
  reps[i]++;
  log_add(i, uvtw_wheel_now(wheel));
}


static void repeat_counts(void) {
  uint64_t t0;
  int k;
  int i;

  setup_virtual(1);
  init_timers();
  t0 = uvtw_wheel_now(wheel);
  rep_period[0] = 10;
  rep_period[1] = 7;
  rep_next[0] = t0 + 3;
  rep_next[1] = t0 + 7;
  reps[0] = reps[1] = 0;
  ASSERT_EQ(0, uvtw_timer_start(&tm[0], rep_cb, 3, 10));
  ASSERT_EQ(0, uvtw_timer_start(&tm[1], rep_cb, 7, 7));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 100));
  /* 3, 13, ..., 93 and 7, 14, ..., 98. */
  ASSERT_EQ(10, reps[0]);
  ASSERT_EQ(14, reps[1]);
  for (i = 1; i < nlog; i++)
    ASSERT_UGE(log_[i].now, log_[i - 1].now);
  /* At 63 both are due: 0 was re-filed at 53, 1 at 56, so 0 goes first,
   * as two uv_timer_t's would. */
  for (i = 0; i < nlog; i++)
    if (log_[i].now == t0 + 63)
      break;
  ASSERT_LT(i + 1, nlog);
  ASSERT_EQ(0, log_[i].id);
  ASSERT_EQ(1, log_[i + 1].id);
  ASSERT_UEQ(t0 + 63, log_[i + 1].now);

  /* One step at a time gives the same. */
  k = nlog;
  for (i = 0; i < 100; i++)
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
  ASSERT_EQ(20, reps[0]);
  ASSERT_EQ(28, reps[1]);
  ASSERT_EQ(k + 24, nlog);
  ASSERT_UEQ(t0 + 200, uvtw_wheel_now(wheel));
  uvtw_timer_stop(&tm[0]);
  uvtw_timer_stop(&tm[1]);
  teardown();
}


/* start_stop_in_callbacks: timer 0 at +10 acts on the others. */
static uint64_t ss_t0;

static void ss_actor_cb(uvtw_timer_t* t) {
  log_cb(t);
  ASSERT_EQ(0, uvtw_timer_start(&tm[6], log_cb, 5, 0));  /* +15 */
  ASSERT_EQ(0, uvtw_timer_start(&tm[7], log_cb, 10, 0)); /* +20: the end */
  ASSERT_EQ(0, uvtw_timer_start(&tm[8], log_cb, 11, 0)); /* +21: beyond */
  ASSERT_EQ(0, uvtw_timer_start(&tm[9], log_cb, 0, 0));  /* +10, after 1 */
  ASSERT_EQ(0, uvtw_timer_stop(&tm[2]));                 /* was +12 */
  ASSERT_EQ(0, uvtw_timer_start(&tm[3], log_cb, 20, 0)); /* +14 -> +30 */
  ASSERT_UEQ(20, uvtw_timer_get_due_in(&tm[3]));
  expect_at[6] = ss_t0 + 15;
  expect_at[7] = ss_t0 + 20;
  expect_at[8] = ss_t0 + 21;
  expect_at[9] = ss_t0 + 10;
  expect_at[3] = ss_t0 + 30;
}


static void start_stop_in_callbacks(void) {
  static const int first[] = {0, 1, 9, 6, 7};
  static const int second[] = {0, 1, 9, 6, 7, 8, 3};
  uint64_t t0;

  setup_virtual(1);
  init_timers();
  t0 = ss_t0 = uvtw_wheel_now(wheel);
  ASSERT_EQ(0, uvtw_timer_start(&tm[0], ss_actor_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[1], log_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[2], never_cb, 12, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[3], log_cb, 14, 0));
  expect_at[0] = expect_at[1] = t0 + 10;
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 20));
  expect_log(first, NULL, 5);
  ASSERT_UEQ(1, uvtw_timer_get_due_in(&tm[8]));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 10));
  expect_log(second, NULL, 7);
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
  teardown();
}


static uint64_t round_up(uint64_t ms, uint64_t tick) {
  return (ms + tick - 1) / tick * tick;
}


static uint64_t tick_next;

static void tick_rep_cb(uvtw_timer_t* t) {
  log_cb(t);
  ASSERT_UEQ(tick_next, uvtw_wheel_now(wheel));
  tick_next = round_up(tick_next + 25, 10);
}


static void tick_10(void) {
  static const uint64_t to[] = {1, 7, 8, 15};
  uint64_t t0;
  int i;

  setup_virtual(10);
  init_timers();
  /* A clock that is not on a tick: 3 ms past one. */
  t0 = uvtw_wheel_now(wheel);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 13 - t0 % 10));
  t0 = uvtw_wheel_now(wheel);
  ASSERT_UEQ(3, t0 % 10);
  /* Due at +7, +7, +17 and +17; the repeat at +7. */
  for (i = 0; i < 4; i++) {
    ASSERT_EQ(0, uvtw_timer_start(&tm[i], log_cb, to[i], 0));
    expect_at[i] = round_up(t0 + to[i], 10);
  }
  ASSERT_EQ(0, uvtw_timer_start(&tm[4], tick_rep_cb, 5, 25));
  tick_next = round_up(t0 + 5, 10);
  ASSERT_UEQ(7, uvtw_timer_get_due_in(&tm[0]));
  ASSERT_UEQ(17, uvtw_timer_get_due_in(&tm[3]));
  /* Steps of 4 ms: the clock moves by exactly that, the callbacks see
   * their ticks. */
  for (i = 1; i <= 25; i++) {
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 4));
    ASSERT_UEQ(t0 + 4 * (uint64_t) i, uvtw_wheel_now(wheel));
  }
  /* 4 one-shots; the repeat at +7, +37, +67, +97 (each 25 ms after the
   * last run, rounded up to the tick). */
  ASSERT_EQ(8, nlog);
  /* At +7 by deadline: 0 (+1), the repeat (+5), 1 (+7). */
  ASSERT_EQ(0, log_[0].id);
  ASSERT_EQ(4, log_[1].id);
  ASSERT_EQ(1, log_[2].id);
  ASSERT_UEQ(t0 + 7, log_[2].now);
  ASSERT_EQ(2, log_[3].id);
  ASSERT_EQ(3, log_[4].id);
  for (i = 0; i < nlog; i++)
    ASSERT_UEQ(0, log_[i].now % 10);
  ASSERT_UEQ(t0 + 97, tick_next - 30);
  uvtw_timer_stop(&tm[4]);
  teardown();
}


static void span_2_40(void) {
  static const uint64_t to[] = {
      1,                        /* 0: level 0 */
      (uint64_t) 1 << 11,       /* 1: level 1 */
      (uint64_t) 1 << 20,       /* 2 */
      ((uint64_t) 1 << 30) + 3, /* 3 */
      (uint64_t) 1 << 40,       /* 4: the span's last ms */
      ((uint64_t) 1 << 40) + 1, /* 5: one ms beyond */
      (uint64_t) 1 << 41,       /* 6: overflow list */
      UINT64_MAX,               /* 7: saturates: never */
  };
  static const int first[] = {0, 1, 2, 3, 8, 8, 8, 4, 8};
  uint64_t t0;
  uint64_t near_end;
  int i;

  setup_virtual(1);
  init_timers();
  t0 = uvtw_wheel_now(wheel);
  for (i = 0; i < 8; i++) {
    ASSERT_EQ(0,
              uvtw_timer_start(&tm[i], i == 7 ? never_cb : log_cb, to[i], 0));
    if (i != 7)
      expect_at[i] = t0 + to[i];
  }
  /* Started last: at 2^40 it follows 4, started before its re-filings. */
  ASSERT_EQ(0, uvtw_timer_start(&tm[8], log_cb, (uint64_t) 1 << 38,
                                (uint64_t) 1 << 38));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, (uint64_t) 1 << 40));
  expect_log(first, NULL, 9);
  for (i = 0; i < 4; i++) /* 8's runs: log entries 4, 5, 6 and 8 */
    ASSERT_UEQ(t0 + ((uint64_t) (i + 1) << 38), log_[i < 3 ? 4 + i : 8].now);
  ASSERT_UEQ(t0 + ((uint64_t) 1 << 40), uvtw_wheel_now(wheel));
  ASSERT_UEQ(1, uvtw_timer_get_due_in(&tm[5]));
  ASSERT_EQ(0, uvtw_timer_stop(&tm[8]));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
  ASSERT_EQ(10, nlog);
  ASSERT_EQ(5, log_[9].id);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, ((uint64_t) 1 << 40) - 1));
  ASSERT_EQ(11, nlog);
  ASSERT_EQ(6, log_[10].id);

  /* To the end of time: what lies before it runs, the clock stops at
   * UINT64_MAX, and the saturated deadline never comes. */
  near_end = UINT64_MAX - 1 - uvtw_wheel_now(wheel);
  ASSERT_EQ(0, uvtw_timer_start(&tm[9], log_cb, (uint64_t) 1 << 50, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[10], log_cb, near_end, 0));
  expect_at[9] = uvtw_wheel_now(wheel) + ((uint64_t) 1 << 50);
  expect_at[10] = UINT64_MAX - 1;
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, UINT64_MAX));
  ASSERT_UEQ(UINT64_MAX, uvtw_wheel_now(wheel));
  ASSERT_EQ(13, nlog);
  ASSERT_EQ(9, log_[11].id);
  ASSERT_EQ(10, log_[12].id);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 5));
  ASSERT_UEQ(UINT64_MAX, uvtw_wheel_now(wheel));
  ASSERT_EQ(0, uvtw_timer_start(&tm[11], never_cb, 5, 0));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 5));
  ASSERT_EQ(13, nlog);
  ASSERT_EQ(2, uvtw_wheel_pending(wheel)); /* 7 and 11, saturated */
  uvtw_timer_stop(&tm[7]);
  uvtw_timer_stop(&tm[11]);
  teardown();
}


/* advance_errors */
static int busy_seen;

static void busy_cb(uvtw_timer_t* t) {
  (void) t;
  ASSERT_EQ(UV_EBUSY, uvtw_wheel_advance(wheel, 1));
  ASSERT_EQ(UV_EBUSY, uvtw_wheel_advance(wheel, 0));
  busy_seen++;
}


static void busy_task_cb(void* arg, int status) {
  ASSERT_EQ(0, status);
  ASSERT_PTR_EQ(&busy_seen, arg);
  ASSERT_EQ(UV_EBUSY, uvtw_wheel_advance(wheel, 1));
  busy_seen++;
}


static void closer_cb(uvtw_timer_t* t) {
  log_cb(t);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, NULL));
  ASSERT_EQ(UV_ECANCELED, uvtw_wheel_advance(wheel, 1));
}


static void advance_errors(void) {
  uvtw_options_t o;
  uvtw_wheel_t* real;
  uvtw_wheel_t* v;
  uint64_t t0;

  setup_virtual(1);
  init_timers();
  real = add_wheel(NULL);
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_advance(NULL, 1));
  ASSERT_EQ(UV_EINVAL, uvtw_wheel_advance(real, 1));
  ASSERT_UEQ(uv_now(&loop), uvtw_wheel_now(real));
  uv_sleep(3);
  uv_update_time(&loop);
  ASSERT_UEQ(uv_now(&loop), uvtw_wheel_now(real));
  ASSERT_UGE(uv_now(&loop), uvtw_wheel_now(wheel) + 3);

  busy_seen = 0;
  ASSERT_EQ(0, uvtw_timer_start(&tm[0], busy_cb, 5, 0));
  ASSERT_EQ(0, uvtw_submit(wheel, 6, 0, 0, busy_task_cb, &busy_seen, NULL));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 10));
  ASSERT_EQ(2, busy_seen);
  teardown();

  /* A wheel closed by one of its callbacks in mid-span. */
  ASSERT_UV_OK(uv_loop_init(&loop));
  uvtw_options_init(&o);
  o.virtual_time = 1;
  ASSERT_EQ(0, uvtw_wheel_new(&loop, &o, &v));
  wheel = v;
  nlog = 0;
  init_timers();
  t0 = uvtw_wheel_now(v);
  ASSERT_EQ(0, uvtw_timer_start(&tm[0], log_cb, 5, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[1], closer_cb, 6, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[2], never_cb, 6, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[3], never_cb, 7, 0));
  ASSERT_EQ(0, uvtw_wheel_advance(v, 100));
  ASSERT_EQ(2, nlog);
  ASSERT_UEQ(t0 + 6, uvtw_wheel_now(v));
  ASSERT_EQ(UV_ECANCELED, uvtw_wheel_advance(v, 1));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT)); /* the close finishes */
  ASSERT_EQ(0, uv_loop_close(&loop));
  wheel = NULL;
}


/* liveness */
static int live_runs;

static void live_task_cb(void* arg, int status) {
  uint64_t* due;

  due = arg;
  ASSERT_EQ(0, status);
  if (due != NULL)
    ASSERT_UEQ(*due, uvtw_wheel_now(wheel));
  live_runs++;
}


static atomic_int pool_runs;

static void live_pool_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(0, status);
  atomic_fetch_add(&pool_runs, 1);
}


static uint64_t thread_due;

static void submitter(void* arg) {
  (void) arg;
  ASSERT_EQ(0, uvtw_submit(wheel, 3, 0, 0, live_task_cb, &thread_due, NULL));
}


static void liveness(void) {
  uv_thread_t thread;
  uvtw_stats_t s;
  uint64_t t0;
  uint64_t due;

  setup_virtual(1);
  init_timers();
  live_runs = 0;
  atomic_store(&pool_runs, 0);
  t0 = uvtw_wheel_now(wheel);
  ASSERT_EQ(0, uvtw_timer_start(&tm[0], log_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_start(&tm[1], log_cb, 3600 * 1000, 0));
  /* Only the virtual timers: uv_run returns at once (the 10 ms timer does
   * not wait, nor does it run). */
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, iteration);
  ASSERT_EQ(0, nlog);

  /* A loop task: held until the loop takes it in and files it, then
   * waiting for advance like a timer. */
  due = t0 + 5;
  ASSERT_EQ(0, uvtw_submit(wheel, 5, 0, 0, live_task_cb, &due, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  uvtw_wheel_stats(wheel, &s);
  ASSERT_UEQ(1, s.tasks_accepted);
  ASSERT_EQ(0, live_runs);
  ASSERT_EQ(3, uvtw_wheel_pending(wheel));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 5));
  ASSERT_EQ(1, live_runs);
  ASSERT_EQ(0, nlog);

  /* A threadpool task: handed over by advance; uv_run then runs until its
   * completion. */
  ASSERT_EQ(
      0, uvtw_submit(wheel, 2, 0, UVTW_THREADPOOL, live_pool_cb, NULL, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, atomic_load(&pool_runs));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 2));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&pool_runs));
  uvtw_wheel_stats(wheel, &s);
  ASSERT_UEQ(2, s.tasks_run);
  ASSERT_EQ(2, uvtw_wheel_pending(wheel));

  /* From another thread, joined before the advance: the advance takes it
   * in before its clock moves, and runs it at its deadline. */
  thread_due = uvtw_wheel_now(wheel) + 3;
  ASSERT_UV_OK(uv_thread_create(&thread, submitter, NULL));
  ASSERT_UV_OK(uv_thread_join(&thread));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 3));
  ASSERT_EQ(2, live_runs);

  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 3600 * 1000));
  ASSERT_EQ(2, nlog);
  teardown();
}


/* twin: one script, run on a virtual wheel and on a real one. */
#define TW_N 32
#define TW_MAX_EVENTS 512
#define TW_SLACK 50 /* ms: the least timeout a callback starts */

typedef struct {
  int op; /* 0: none, 1: start, 2: stop */
  int target;
  uint64_t timeout;
} tw_action_t;

typedef struct {
  uint64_t timeout; /* at t0; 0: not started at t0 */
  uint64_t repeat;
  int max_fires; /* a repeat stops itself after this many */
  tw_action_t act[3];
} tw_timer_t;

static tw_timer_t tw_script[TW_N];
static uvtw_timer_t tw[TW_N];
static uint64_t tw_logical[TW_N]; /* each timer's deadline, without lateness */
static int tw_fires[TW_N];
static int tw_virtual;
static int tw_disturbed;
static uint64_t tw_t0;
static entry_t tw_log[2][TW_MAX_EVENTS];
static int tw_nlog[2];


static void tw_cb(uvtw_timer_t* t);


/* Starts timer j for `timeout` after the logical time `from`, taking off
 * the lateness `late` of the callback that starts it. */
static void tw_start(int j, uint64_t from, uint64_t timeout, uint64_t late) {
  uint64_t real;

  real = 1;
  if (timeout > late)
    real = timeout - late;
  else
    tw_disturbed = 1;
  tw_logical[j] = from + timeout;
  ASSERT_EQ(0, uvtw_timer_start(&tw[j], tw_cb, real, tw_script[j].repeat));
}


static void tw_cb(uvtw_timer_t* t) {
  tw_timer_t* s;
  uint64_t logical;
  uint64_t late;
  uint64_t now;
  int side;
  int k;
  int i;

  k = (int) (t - tw);
  s = &tw_script[k];
  side = tw_virtual ? 0 : 1;
  now = uvtw_wheel_now(wheel);
  logical = tw_logical[k];
  ASSERT_UGE(now, logical); /* never early */
  late = now - logical;
  if (tw_virtual)
    ASSERT_UEQ(0, late);
  ASSERT_LT(tw_nlog[side], TW_MAX_EVENTS);
  tw_log[side][tw_nlog[side]].id = k;
  tw_log[side][tw_nlog[side]].now = logical - tw_t0;
  tw_nlog[side]++;
  tw_fires[k]++;
  if (s->repeat != 0) {
    tw_logical[k] = logical + s->repeat;
    if (tw_fires[k] >= s->max_fires)
      ASSERT_EQ(0, uvtw_timer_stop(t));
    else if (late != 0) /* the real side only: back on the logical period */
      tw_start(k, logical, s->repeat, late);
  }
  if (tw_fires[k] != 1)
    return;
  for (i = 0; i < 3; i++) {
    if (s->act[i].op == 1)
      tw_start(s->act[i].target, logical, s->act[i].timeout, late);
    else if (s->act[i].op == 2)
      ASSERT_EQ(0, uvtw_timer_stop(&tw[s->act[i].target]));
  }
}


static void tw_make_script(uint64_t seed) {
  uint64_t r;
  int k;
  int i;

  r = seed;
  memset(tw_script, 0, sizeof(tw_script));
  for (k = 0; k < TW_N; k++) {
    tw_timer_t* s = &tw_script[k];
    if (k < 20) /* the others only start from callbacks */
      s->timeout = TW_SLACK + 10 * (test_splitmix64(&r) % 16);
    if (k % 4 == 0) {
      s->repeat = TW_SLACK + 10 * (test_splitmix64(&r) % 5);
      s->max_fires = 2 + (int) (test_splitmix64(&r) % 4);
    }
    for (i = 0; i < 3; i++) {
      /* None, start (twice as often), stop. */
      s->act[i].op = (int) (test_splitmix64(&r) % 4);
      if (s->act[i].op == 3)
        s->act[i].op = 1;
      s->act[i].target = (int) (test_splitmix64(&r) % TW_N);
      /* Multiples of 10 ms: many ties, broken by start order. */
      s->act[i].timeout = TW_SLACK + 10 * (test_splitmix64(&r) % 16);
    }
  }
}


/* Runs the script on `wheel`: the virtual one 1 ms at a time, the real one
 * with uv_run. */
static void tw_run(void) {
  int side;
  int k;

  side = tw_virtual ? 0 : 1;
  tw_nlog[side] = 0;
  tw_disturbed = 0;
  memset(tw_fires, 0, sizeof(tw_fires));
  uv_update_time(&loop);
  tw_t0 = uvtw_wheel_now(wheel);
  for (k = 0; k < TW_N; k++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &tw[k]));
    if (tw_script[k].timeout != 0)
      tw_start(k, tw_t0, tw_script[k].timeout, 0);
  }
  if (tw_virtual) {
    while (uvtw_wheel_pending(wheel) != 0)
      ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
  } else {
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  }
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
}


static void twin(void) {
  uvtw_options_t o;
  int attempt;
  int round;
  int ties;
  int i;

  for (round = 0; round < 3; round++) {
    tw_make_script(0x7477 + (uint64_t) round);
    setup_virtual(1);
    tw_virtual = 1;
    tw_run();
    ASSERT(!tw_disturbed);
    ASSERT_GT(tw_nlog[0], 10);
    for (ties = 0, i = 1; i < tw_nlog[0]; i++)
      ties += tw_log[0][i].now == tw_log[0][i - 1].now;
    ASSERT_GT(ties, 0);
    fprintf(stderr,
            "twin: round %d, %d callbacks over %" PRIu64 " ms, %d ties\n",
            round, tw_nlog[0], tw_log[0][tw_nlog[0] - 1].now, ties);
    teardown();

    for (attempt = 0;; attempt++) {
      uvtw_options_init(&o);
      setup_opts(&o);
      tw_virtual = 0;
      tw_run();
      teardown();
      if (!tw_disturbed)
        break;
      /* A callback ran later than a timeout it had to start: this run
       * cannot be the virtual one's twin.  A loaded machine; again. */
      fprintf(stderr, "twin: round %d, run %d was disturbed, again\n", round,
              attempt);
      ASSERT_LT(attempt, 8);
    }
    ASSERT_EQ(tw_nlog[0], tw_nlog[1]);
    for (i = 0; i < tw_nlog[0]; i++) {
      ASSERT_EQ(tw_log[0][i].id, tw_log[1][i].id);
      ASSERT_UEQ(tw_log[0][i].now, tw_log[1][i].now);
    }
  }
}


/* producers */
#define PR_THREADS 4
#define PR_TASKS 200

typedef struct {
  uint64_t due; /* the earliest clock it may run at */
  int exact;    /* it must run at exactly `due` */
  unsigned flags;
  atomic_int runs;
  uint64_t ran_at; /* loop tasks */
  atomic_int cancelled;
} pr_task_t;

static pr_task_t pr[PR_THREADS][PR_TASKS];
static _Atomic uint64_t pr_clock; /* the clock as the loop thread last set */
static int pr_concurrent;


static void pr_cb(void* arg, int status) {
  pr_task_t* t;

  t = arg;
  ASSERT_EQ(0, status);
  ASSERT_EQ(0, atomic_load(&t->cancelled));
  ASSERT_EQ(1, atomic_fetch_add(&t->runs, 1) + 1);
  if (!(t->flags & UVTW_THREADPOOL)) {
    t->ran_at = uvtw_wheel_now(wheel);
    ASSERT_UGE(t->ran_at, t->due);
    if (t->exact)
      ASSERT_UEQ(t->due, t->ran_at);
  }
}


static void producer(void* arg) {
  pr_task_t* tasks;
  uvtw_id_t id;
  uint64_t delay;
  int i;
  int r;

  tasks = arg;
  for (i = 0; i < PR_TASKS; i++) {
    pr_task_t* t = &tasks[i];
    delay = (uint64_t) (i * 7 % 50);
    t->flags = i % 4 == 3 ? UVTW_THREADPOOL : 0;
    /* Read before the submit: the wheel's clock at the submit is at least
     * this (only the loop thread moves it, and only forward). */
    t->due = atomic_load(&pr_clock) + delay;
    t->exact = !pr_concurrent;
    ASSERT_EQ(0, uvtw_submit(wheel, delay, 0, t->flags, pr_cb, t, &id));
    if (i % 10 == 9) {
      r = uvtw_cancel(wheel, id);
      if (r == 0)
        atomic_store(&t->cancelled, 1);
      else
        ASSERT(r == UV_ENOENT || r == UV_EBUSY);
    }
    if (pr_concurrent && i % 16 == 0)
      uv_sleep(1);
  }
}


static int pr_all_done(void) {
  int k;
  int i;

  for (k = 0; k < PR_THREADS; k++)
    for (i = 0; i < PR_TASKS; i++)
      if (atomic_load(&pr[k][i].runs) + atomic_load(&pr[k][i].cancelled) == 0)
        return 0;
  return 1;
}


static void producers(void) {
  uv_thread_t threads[PR_THREADS];
  uvtw_stats_t s;
  uint64_t runs;
  int round;
  int k;
  int i;

  setup_virtual(1);
  runs = 0;
  for (round = 0; round < 2; round++) {
    pr_concurrent = round;
    memset(pr, 0, sizeof(pr));
    atomic_store(&pr_clock, uvtw_wheel_now(wheel));
    for (k = 0; k < PR_THREADS; k++)
      ASSERT_UV_OK(uv_thread_create(&threads[k], producer, pr[k]));
    if (pr_concurrent) {
      /* The loop thread moves the clock while they submit. */
      for (i = 0; i < 200; i++) {
        uv_run(&loop, UV_RUN_NOWAIT); /* pool runs, tasks not taken in */
        ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
        atomic_store(&pr_clock, uvtw_wheel_now(wheel));
      }
    }
    for (k = 0; k < PR_THREADS; k++)
      ASSERT_UV_OK(uv_thread_join(&threads[k]));
    while (!pr_all_done()) {
      ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
      atomic_store(&pr_clock, uvtw_wheel_now(wheel));
      uv_run(&loop, UV_RUN_NOWAIT);
    }
    /* The threadpool's completions: their requests hold the loop, the
     * filed tasks do not (there are none left to hold it). */
    ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
    ASSERT_EQ(0, uvtw_wheel_pending(wheel));
    for (k = 0; k < PR_THREADS; k++)
      for (i = 0; i < PR_TASKS; i++) {
        ASSERT_EQ(
            1, atomic_load(&pr[k][i].runs) + atomic_load(&pr[k][i].cancelled));
        runs += (uint64_t) atomic_load(&pr[k][i].runs);
      }
    uvtw_wheel_stats(wheel, &s);
    ASSERT_UEQ(0, s.tasks_live);
    ASSERT_UEQ(runs, s.tasks_run);
  }
  teardown();
}


/* far_and_records */
#define FR_FAR 10000
#define FR_THREADS 256
#ifdef UVTW_CHECK_INVARIANTS
# define FR_STEPS 4000
# define FR_CALLS 1000
#else
# define FR_STEPS 4000000
# define FR_CALLS 4000000
#endif
static uint64_t fr_runs;
static uv_barrier_t fr_made;
static uv_barrier_t fr_done;


static uv_timer_t fr_keep;


static void fr_keep_cb(uv_timer_t* h) {
  (void) h;
}


static void fr_cb(uvtw_timer_t* t) {
  (void) t;
  fr_runs++;
}


static void fr_task_cb(void* arg, int status) {
  (void) arg;
  (void) status;
  ASSERT(0); /* cancelled before it was due */
}


/* Makes this thread's record of the wheel, and keeps the thread (so its
 * record) alive until the advance is over. */
static void fr_thread(void* arg) {
  uvtw_id_t id;

  (void) arg;
  ASSERT_EQ(0, uvtw_submit(wheel, UINT64_MAX, 0, 0, fr_task_cb, NULL, &id));
  ASSERT_EQ(0, uvtw_cancel(wheel, id));
  uv_barrier_wait(&fr_made);
  uv_barrier_wait(&fr_done);
}


static void far_and_records(void) {
  static uvtw_timer_t far_timers[FR_FAR];
  static uv_thread_t threads[FR_THREADS];
  uvtw_stats_t stats;
  uvtw_timer_t rep;
  int i;

  setup_virtual(1);
  for (i = 0; i < FR_FAR; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &far_timers[i]));
    ASSERT_EQ(0, uvtw_timer_start(&far_timers[i], never_cb, UINT64_MAX, 0));
  }
  ASSERT_EQ(0, uv_barrier_init(&fr_made, FR_THREADS + 1));
  ASSERT_EQ(0, uv_barrier_init(&fr_done, FR_THREADS + 1));
  for (i = 0; i < FR_THREADS; i++)
    ASSERT_EQ(0, uv_thread_create(&threads[i], fr_thread, NULL));
  uv_barrier_wait(&fr_made);
  /* The async callback takes in what the threads left (their ids, taken
   * back), as a loop that runs between advances would; a uv timer keeps
   * the loop alive for it (the tasks, taken back, hold nothing). */
  add_uv_timer(&fr_keep);
  ASSERT_EQ(0, uv_timer_start(&fr_keep, fr_keep_cb, 1, 1));
  do {
    uv_run(&loop, UV_RUN_ONCE);
    uvtw_wheel_stats(wheel, &stats);
  } while (stats.async_wakeups == 0);
  ASSERT_EQ(0, uv_timer_stop(&fr_keep));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &rep));
  ASSERT_EQ(0, uvtw_timer_start(&rep, fr_cb, 1, 1));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, FR_STEPS));
  ASSERT_UEQ(FR_STEPS, fr_runs);
  for (i = 0; i < FR_CALLS; i++)
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
  ASSERT_UEQ(FR_STEPS + FR_CALLS, fr_runs);
  uv_barrier_wait(&fr_done);
  for (i = 0; i < FR_THREADS; i++)
    ASSERT_EQ(0, uv_thread_join(&threads[i]));
  uv_barrier_destroy(&fr_made);
  uv_barrier_destroy(&fr_done);
  uvtw_timer_stop(&rep);
  for (i = 0; i < FR_FAR; i++)
    uvtw_timer_stop(&far_timers[i]);
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(order_ties),
  TEST_CASE(repeat_counts),
  TEST_CASE(start_stop_in_callbacks),
  TEST_CASE(tick_10),
  TEST_CASE(span_2_40),
  TEST_CASE(advance_errors),
  TEST_CASE(liveness),
  TEST_CASE(twin),
  TEST_CASE(producers),
  TEST_CASE(far_and_records),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
