/* SPDX-License-Identifier: MIT */
/* options.precise, checked against include/uvtw.h and docs/timers.md
 * ("Precise deadlines"): a start's or submit's deadline counts from
 * uv_hrtime() at the call, rounded up to a ms, so no callback runs before
 * its timeout has truly passed since the call.
 *
 *   timer_from_callback  from a wheel callback that first busy-waits 20 ms
 *                        (also 0, 0.3, 0.7 and 1.5 ms), a timer started with
 *                        timeout 1, 2, 5 or 10 never runs before that many
 *                        ms of uv_hrtime() since the start, and get_due_in
 *                        right after the start counts the busy time too.
 *                        The same script on a default wheel prints how many
 *                        runs came early in real time (allowed there, and
 *                        not asserted: it depends on the scheduler).
 *   zero_next_iteration  with precise, timeout 0 from a callback still runs
 *                        in the next loop iteration, on a loop that does not
 *                        block (so a deadline of the call's uv_hrtime()
 *                        rounded up would come iterations later).
 *   task_from_thread     tasks submitted by another thread at random phases
 *                        of the ms never run before delay_ms of uv_hrtime()
 *                        since the call (in ns).
 *   task_from_loop       the same for tasks submitted from a callback that
 *                        busy-waited first.
 *   virtual_ignores      a virtual wheel with precise counts from its own
 *                        clock: after 30 ms of real sleep a timeout of 10
 *                        is due in 10 and runs at exactly clock + 10, and so
 *                        does a task. */

#include <stdatomic.h>
#include <string.h>

#include "test-cases.h"
#include "timer-harness.h"

#define NS_PER_MS ((uint64_t) 1000 * 1000)

static void busy_ns(uint64_t ns) {
  uint64_t until;

  until = uv_hrtime() + ns;
  while (uv_hrtime() < until) {
  }
}


static void setup_precise(int precise, int virtual_time) {
  uvtw_options_t o;

  uvtw_options_init(&o);
  ASSERT_EQ(0, o.precise);
  o.precise = precise;
  o.virtual_time = virtual_time;
  setup_opts(&o);
}


/* An idle handle keeps the loop from blocking in poll, as a busy server's
 * I/O does: each iteration then starts at once with uv_now updated, and a
 * deadline counted from a stale uv_now comes due early in real time.
 * (With a blocking poll libuv sleeps the whole timeout after the start, so
 * nothing would come early.)  It stops itself once done() holds. */
static uv_idle_t spin;
static int (*spin_done)(void);


static void spin_cb(uv_idle_t* h) {
  if (spin_done())
    ASSERT_UV_OK(uv_idle_stop(h));
}


static void spin_until(int (*done)(void)) {
  spin_done = done;
  ASSERT_UV_OK(uv_idle_init(&loop, &spin));
  close_at_teardown((uv_handle_t*) &spin);
  ASSERT_UV_OK(uv_idle_start(&spin, spin_cb));
}


/* ---- timer_from_callback ---------------------------------------------- */

static const uint64_t timeouts[] = {1, 2, 5, 10};
static const uint64_t busies_us[] = {20000, 0, 300, 700, 1500};
#define NTIMEOUTS (sizeof(timeouts) / sizeof(timeouts[0]))
#define NBUSIES (sizeof(busies_us) / sizeof(busies_us[0]))
#define ROUNDS (2 * NTIMEOUTS * NBUSIES)

static uvtw_timer_t outer;
static uvtw_timer_t inner;
static uv_timer_t twin; /* a uv_timer_t started beside inner */
static uint64_t twin_elapsed_ns;
static int64_t twin_iteration;
static int64_t inner_iteration;
static int twin_early;
static int later_than_twin;
static int round_;
static int precise_on;
static uint64_t call_ns;
static uint64_t cur_timeout;
static int early;
static uint64_t most_early_ns;


static void outer_cb(uvtw_timer_t* t);


static void twin_cb(uv_timer_t* h) {
  (void) h;
  twin_elapsed_ns = uv_hrtime() - call_ns;
  twin_iteration = iteration;
  if (twin_elapsed_ns < cur_timeout * NS_PER_MS)
    twin_early++;
}


static void inner_cb(uvtw_timer_t* t) {
  uint64_t elapsed;

  (void) t;
  elapsed = uv_hrtime() - call_ns;
  inner_iteration = iteration;
  if (precise_on) {
    ASSERT_UGE(elapsed, cur_timeout * NS_PER_MS);
  } else if (elapsed < cur_timeout * NS_PER_MS) {
    early++;
    if (cur_timeout * NS_PER_MS - elapsed > most_early_ns)
      most_early_ns = cur_timeout * NS_PER_MS - elapsed;
  }
  if (++round_ < (int) ROUNDS)
    ASSERT_EQ(0, uvtw_timer_start(&outer, outer_cb, 2, 0));
}


/* After both ran, at the end of the iteration: the wheel's timer ran in a
 * later iteration than its twin (allowed with precise only). */
static void compare_twin(void) {
  if (inner_iteration >= 0 && twin_iteration >= 0) {
    if (inner_iteration > twin_iteration)
      later_than_twin++;
    if (!precise_on)
      ASSERT_EQ(twin_iteration, inner_iteration);
    inner_iteration = twin_iteration = -1;
  }
}


static void outer_cb(uvtw_timer_t* t) {
  uint64_t busy;
  uint64_t now;
  uint64_t due;

  (void) t;
  cur_timeout = timeouts[round_ % NTIMEOUTS];
  busy = busies_us[(round_ / NTIMEOUTS) % NBUSIES] * 1000;
  now = uv_now(&loop);
  busy_ns(busy);
  call_ns = uv_hrtime();
  ASSERT_UV_OK(uv_timer_start(&twin, twin_cb, cur_timeout, 0));
  ASSERT_EQ(0, uvtw_timer_start(&inner, inner_cb, cur_timeout, 0));
  due = uvtw_timer_get_due_in(&inner);
  ASSERT_UEQ(now, uv_now(&loop));
  if (precise_on)
    ASSERT_UGE(due, cur_timeout + busy / NS_PER_MS);
  else
    ASSERT_UEQ(cur_timeout, due); /* timeout <= due_in < timeout + tick */
}


static int script_done(void) {
  return round_ == (int) ROUNDS;
}


static void script(int precise) {
  setup_precise(precise, 0);
  precise_on = precise;
  round_ = 0;
  early = 0;
  most_early_ns = 0;
  twin_early = 0;
  later_than_twin = 0;
  inner_iteration = twin_iteration = -1;
  add_uv_timer(&twin);
  on_check = compare_twin;
  spin_until(script_done);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &outer));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &inner));
  ASSERT_EQ(0, uvtw_timer_start(&outer, outer_cb, 1, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(ROUNDS, round_);
  fprintf(stderr,
          "precise %d: %d of %d runs before their timeout in uv_hrtime "
          "(by up to %.3f ms), %d in a later iteration than a uv_timer_t "
          "started with it; the uv_timer_t's: %d early\n",
          precise, early, (int) ROUNDS, (double) most_early_ns / 1e6,
          later_than_twin, twin_early);
  teardown();
}


static void timer_from_callback(void) {
  script(1);
  script(0); /* printed only */
}


/* ---- zero_next_iteration ---------------------------------------------- */

static int64_t zero_started_in;
static int zero_rounds;
static uvtw_timer_t zero_t;

static void zero_cb(uvtw_timer_t* t);


static void zero_starter_cb(uvtw_timer_t* t) {
  (void) t;
  zero_started_in = iteration;
  ASSERT_EQ(0, uvtw_timer_start(&zero_t, zero_cb, 0, 0));
}


static void zero_cb(uvtw_timer_t* t) {
  (void) t;
  ASSERT_EQ(zero_started_in + 1, iteration);
  if (++zero_rounds < 50)
    ASSERT_EQ(0, uvtw_timer_start(&outer, zero_starter_cb, 1, 0));
}


static int zero_done(void) {
  return zero_rounds == 50;
}


static void zero_next_iteration(void) {
  setup_precise(1, 0);
  zero_rounds = 0;
  spin_until(zero_done); /* the next iteration comes at once */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &outer));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &zero_t));
  ASSERT_EQ(0, uvtw_timer_start(&outer, zero_starter_cb, 1, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(50, zero_rounds);
  teardown();
}


/* ---- task_from_thread, task_from_loop --------------------------------- */

#define NTASKS 60

typedef struct {
  uint64_t call_ns; /* uv_hrtime() just before the submit */
  uint64_t delay;
  uint64_t ran_ns;
} rec_t;

static rec_t recs[NTASKS];
static atomic_int tasks_done;
static atomic_int tasks_submitted;
static uv_timer_t poll;


static void rec_cb(void* arg, int status) {
  rec_t* r;

  ASSERT_EQ(0, status);
  r = arg;
  r->ran_ns = uv_hrtime();
  ASSERT_UGE(r->ran_ns - r->call_ns, r->delay * NS_PER_MS);
  atomic_fetch_add(&tasks_done, 1);
}


static int submit_rec(rec_t* r, uint64_t delay) {
  int e;

  r->delay = delay;
  r->call_ns = uv_hrtime();
  e = uvtw_submit(wheel, delay, 0, 0, rec_cb, r, NULL);
  if (e == 0)
    atomic_fetch_add(&tasks_submitted, 1);
  return e;
}


static void producer(void* arg) {
  uint64_t rng;
  int i;

  (void) arg;
  rng = 0x6a09e667f3bcc909ull;
  for (i = 0; i < NTASKS; i++) {
    busy_ns(test_xorshift64(&rng) % (1500 * 1000));
    ASSERT_EQ(0, submit_rec(&recs[i], timeouts[i % NTIMEOUTS]));
  }
}


static int all_done(void) {
  return atomic_load(&tasks_done) == NTASKS;
}


static int loop_done(void) {
  return atomic_load(&tasks_done) == (int) ROUNDS;
}


static void poll_cb(uv_timer_t* h) {
  if (atomic_load(&tasks_done) == NTASKS)
    uv_timer_stop(h);
}


static int tasks_built(void) {
  int e;

  e = uvtw_submit(wheel, 0, 0, 0, NULL, NULL, NULL);
  return e != UV_ENOSYS;
}


/* A precise wheel and fresh records for a task case; 0 (after teardown)
 * if the library was built without tasks, and the case is skipped. */
static int setup_tasks(void) {
  setup_precise(1, 0);
  if (!tasks_built()) {
    fprintf(stderr, "tasks are not built: skipped\n");
    teardown();
    return 0;
  }
  atomic_store(&tasks_done, 0);
  atomic_store(&tasks_submitted, 0);
  memset(recs, 0, sizeof(recs));
  return 1;
}


static void task_from_thread(void) {
  uv_thread_t tid;

  if (!setup_tasks())
    return;
  add_uv_timer(&poll);
  ASSERT_UV_OK(uv_timer_start(&poll, poll_cb, 1, 1));
  spin_until(all_done);
  ASSERT_UV_OK(uv_thread_create(&tid, producer, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_UV_OK(uv_thread_join(&tid));
  ASSERT_EQ(NTASKS, atomic_load(&tasks_done));
  teardown();
}


static int loop_submits;

static void loop_submit_cb(uvtw_timer_t* t) {
  rec_t* r;

  r = &recs[loop_submits];
  busy_ns(busies_us[(loop_submits / NTIMEOUTS) % NBUSIES] * 1000);
  ASSERT_EQ(0, submit_rec(r, timeouts[loop_submits % NTIMEOUTS]));
  if (++loop_submits < (int) ROUNDS)
    ASSERT_EQ(0, uvtw_timer_start(t, loop_submit_cb, 1, 0));
}


static void task_from_loop(void) {
  uvtw_timer_t t;

  if (!setup_tasks())
    return;
  loop_submits = 0;
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_EQ(0, uvtw_timer_start(&t, loop_submit_cb, 1, 0));
  spin_until(loop_done);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(ROUNDS, loop_submits);
  ASSERT_EQ(ROUNDS, atomic_load(&tasks_done));
  teardown();
}


/* ---- virtual_ignores -------------------------------------------------- */

static int v_runs;
static uint64_t v_now;

static void v_cb(uvtw_timer_t* t) {
  (void) t;
  v_runs++;
  v_now = uvtw_wheel_now(wheel);
}


static void v_task_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(0, status);
  v_runs++;
  v_now = uvtw_wheel_now(wheel);
}


static void virtual_ignores(void) {
  uvtw_timer_t t;
  uint64_t c0;
  int e;

  setup_precise(1, 1);
  v_runs = 0;
  uv_sleep(30);
  uv_update_time(&loop);
  c0 = uvtw_wheel_now(wheel);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_EQ(0, uvtw_timer_start(&t, v_cb, 10, 0));
  ASSERT_UEQ(10, uvtw_timer_get_due_in(&t));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 9));
  ASSERT_EQ(0, v_runs);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
  ASSERT_EQ(1, v_runs);
  ASSERT_UEQ(c0 + 10, v_now);

  uv_sleep(30);
  uv_update_time(&loop);
  c0 = uvtw_wheel_now(wheel);
  e = uvtw_submit(wheel, 10, 0, 0, v_task_cb, NULL, NULL);
  if (e == UV_ENOSYS) {
    fprintf(stderr, "tasks are not built: the task half skipped\n");
  } else {
    ASSERT_EQ(0, e);
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 9));
    ASSERT_EQ(1, v_runs);
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
    ASSERT_EQ(2, v_runs);
    ASSERT_UEQ(c0 + 10, v_now);
  }
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(timer_from_callback),
  TEST_CASE(zero_next_iteration),
  TEST_CASE(task_from_thread),
  TEST_CASE(task_from_loop),
  TEST_CASE(virtual_ignores),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
