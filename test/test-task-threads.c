/* SPDX-License-Identifier: MIT */
/* Which thread is the loop thread, and which wheel an id belongs to.
 *
 *   loop_on_other_thread  libuv's rule (docs/wheel.md): the main thread
 *                  creates the loop and the wheel, starts a uv_timer_t and
 *                  submits task a (its owner, before uv_run), then starts
 *                  thread L, which runs uv_run(UV_RUN_DEFAULT).  a runs on
 *                  L and submits b from its callback; 100 ms after a
 *                  ran (a and b ended: the loop holds nothing for
 *                  tasks), main submits c and a worker thread d, as
 *                  producers; the
 *                  uv_timer_t's callback on L (the last thing holding the
 *                  loop) submits e, which must hold the loop at once.
 *                  Every task runs exactly once, on L, before uv_run
 *                  returns; main joins L, then closes the wheel on its own
 *                  loop run.  Under TSan, any uv_ref from a thread not
 *                  running the loop is a reported race.
 *   foreign_ids    an id names no task of another wheel until 4,096
 *                  wheels were created after its own (uvtw.h, uvtw_id_t):
 *                  wheel 0 holds a 1 h task; each of the next 4,095
 *                  wheels, made and closed one after another on the same
 *                  loop, gets a task at the same node and generation, and
 *                  refuses wheel 0's id (cancel and reset: UV_ENOENT),
 *                  which stays wheel 0's; the 4,096th wheel after it issues
 *                  the very same id, as the header says it may. */

#include <stdatomic.h>
#include <stdint.h>

#include <uv.h>

#include "test-cases.h"
#include "test.h"
#include "uvtw.h"

#define HOUR_MS ((uint64_t) 3600 * 1000)

/* ---- loop_on_other_thread ----------------------------------------------- */

enum { TA, TB, TC, TD, TE, NT };

static uv_loop_t ot_loop;
static uvtw_wheel_t* ot_wheel;
static uv_thread_t ot_loop_tid;
static uv_timer_t ot_timer;
static uv_sem_t ot_a_ran;
static atomic_int ot_runs[NT];
static atomic_int ot_off_loop; /* runs not on L */
static int ot_args[NT] = {TA, TB, TC, TD, TE};


static void ot_cb(void* arg, int status) {
  uv_thread_t self;
  int which;

  ASSERT_EQ(0, status);
  which = *(int*) arg;
  self = uv_thread_self();
  if (!uv_thread_equal(&self, &ot_loop_tid))
    atomic_fetch_add(&ot_off_loop, 1);
  atomic_fetch_add(&ot_runs[which], 1);
  if (which == TA) {
    ASSERT_EQ(0, uvtw_submit(ot_wheel, 5, 0, 0, ot_cb, &ot_args[TB], NULL));
    uv_sem_post(&ot_a_ran);
  }
}


static void ot_timer_cb(uv_timer_t* timer) {
  (void) timer;
  /* The loop's last hold ends here: e holds it, or uv_run returns. */
  ASSERT_EQ(0, uvtw_submit(ot_wheel, 50, 0, 0, ot_cb, &ot_args[TE], NULL));
}


static void ot_loop_thread(void* arg) {
  (void) arg;
  ASSERT_EQ(0, uv_run(&ot_loop, UV_RUN_DEFAULT));
  /* Everything ran before uv_run returned. */
  ASSERT_EQ(1, atomic_load(&ot_runs[TE]));
}


static void ot_worker(void* arg) {
  (void) arg;
  ASSERT_EQ(0, uvtw_submit(ot_wheel, 10, 0, 0, ot_cb, &ot_args[TD], NULL));
}


static void loop_on_other_thread(void) {
  uv_thread_t worker;
  int i;

  ASSERT_UV_OK(uv_loop_init(&ot_loop));
  ASSERT_UV_OK(uv_sem_init(&ot_a_ran, 0));
  ASSERT_EQ(0, uvtw_wheel_new(&ot_loop, NULL, &ot_wheel));
  ASSERT_UV_OK(uv_timer_init(&ot_loop, &ot_timer));
  ASSERT_UV_OK(uv_timer_start(&ot_timer, ot_timer_cb, 300, 0));
  ASSERT_EQ(0, uvtw_submit(ot_wheel, 0, 0, 0, ot_cb, &ot_args[TA], NULL));
  ASSERT_UV_OK(uv_thread_create(&ot_loop_tid, ot_loop_thread, NULL));
  uv_sem_wait(&ot_a_ran);
  /* a and b have ended and the loop holds nothing for tasks: a submit
   * that took main for the loop thread would uv_ref from here. */
  uv_sleep(100);
  ASSERT_EQ(0, uvtw_submit(ot_wheel, 10, 0, 0, ot_cb, &ot_args[TC], NULL));
  ASSERT_UV_OK(uv_thread_create(&worker, ot_worker, NULL));
  ASSERT_UV_OK(uv_thread_join(&worker));
  ASSERT_UV_OK(uv_thread_join(&ot_loop_tid));
  for (i = 0; i < NT; i++)
    ASSERT_EQ(1, atomic_load(&ot_runs[i]));
  ASSERT_EQ(0, atomic_load(&ot_off_loop));
  /* Main runs the loop again: it is the loop thread now. */
  ASSERT_EQ(0, uvtw_wheel_close(ot_wheel, NULL));
  uv_close((uv_handle_t*) &ot_timer, NULL);
  ASSERT_EQ(0, uv_run(&ot_loop, UV_RUN_DEFAULT));
  ASSERT_UV_OK(uv_loop_close(&ot_loop));
  uv_sem_destroy(&ot_a_ran);
}


/* ---- foreign_ids -------------------------------------------------------- */

#define SERIALS 4096

static void fi_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(UV_ECANCELED, status); /* 1 h away: only close ends them */
}


static void foreign_ids(void) {
  uvtw_wheel_t* first;
  uvtw_wheel_t* other;
  uv_loop_t loop;
  uvtw_id_t id0;
  uvtw_id_t id;
  int k;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &first));
  ASSERT_EQ(0, uvtw_submit(first, HOUR_MS, 0, 0, fi_cb, NULL, &id0));
  for (k = 1; k < SERIALS; k++) {
    ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &other));
    ASSERT_EQ(0, uvtw_submit(other, HOUR_MS, 0, 0, fi_cb, NULL, &id));
    ASSERT(id != id0);
    ASSERT_EQ(UV_ENOENT, uvtw_cancel(other, id0));
    ASSERT_EQ(UV_ENOENT, uvtw_reset(other, id0, 1));
    ASSERT_EQ(0, uvtw_wheel_close(other, NULL));
    uv_run(&loop, UV_RUN_NOWAIT); /* close goes on */
  }
  /* The 4,096th wheel after the first has its serial again. */
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &other));
  ASSERT_EQ(0, uvtw_submit(other, HOUR_MS, 0, 0, fi_cb, NULL, &id));
  ASSERT_UEQ(id0, id);
  ASSERT_EQ(0, uvtw_cancel(other, id));
  ASSERT_EQ(0, uvtw_wheel_close(other, NULL));
  /* Wheel 0's task was never touched by the others. */
  ASSERT_EQ(1, (int) uvtw_wheel_pending(first));
  ASSERT_EQ(0, uvtw_cancel(first, id0));
  ASSERT_EQ(0, uvtw_wheel_close(first, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_UV_OK(uv_loop_close(&loop));
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(loop_on_other_thread),
  TEST_CASE(foreign_ids),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
