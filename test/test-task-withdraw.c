/* SPDX-License-Identifier: MIT */
/* A submit that finds close begun after its fence takes back only its own
 * task.  Thread A publishes task a and is held between its publish and its
 * fence (this program builds lib/task-submit.c with a hook there, the
 * stand-in for a preemption); meanwhile thread C cancels a (taken back:
 * the node goes to C's cache) and submits c, which reuses the node with
 * the next generation; then the loop begins close, and A goes on.  A must
 * see that its task ended (another generation) and leave c alone: c, whose
 * submit returned 0, gets its final UV_ECANCELED call, and A's submit
 * returns 0 (its task ended by C's cancel).  Taking c back by its state
 * alone lost it (no call at all), and counted a's end twice. */

#include "uvtw.h"

static void before_fence(void);
#define UVTW__TEST_BEFORE_FENCE() before_fence()
#include "task-submit.c"

#include "test.h"

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uv_async_t kick;
static uv_sem_t go_a;
static uv_sem_t a_done;
static uv_sem_t go_c;
static uv_sem_t c_done;
static _Thread_local int is_a;
static uvtw_id_t id_a;
static uvtw_id_t id_c;
static int err_a = 99;
static int err_c = 99;
static int cancel_err = 99;
static int calls_a;
static int calls_c;
static int status_c = 99;
static uvtw_stats_t st;
static int closed;


/* Thread A, after publishing a: the loop takes over until A may go on. */
static void before_fence(void) {
  if (!is_a)
    return;
  ASSERT_UV_OK(uv_async_send(&kick));
  uv_sem_wait(&go_a);
}


static void cb_a(void* arg, int status) {
  (void) arg;
  (void) status;
  calls_a++;
}


static void cb_c(void* arg, int status) {
  (void) arg;
  calls_c++;
  status_c = status;
}


static void thread_a(void* arg) {
  (void) arg;
  is_a = 1;
  err_a = uvtw_submit(wheel, 100000, 0, 0, cb_a, NULL, &id_a);
  uv_sem_post(&a_done);
}


static void thread_c(void* arg) {
  (void) arg;
  uv_sem_wait(&go_c);
  cancel_err = uvtw_cancel(wheel, id_a);
  err_c = uvtw_submit(wheel, 100000, 0, 0, cb_c, NULL, &id_c);
  uv_sem_post(&c_done);
}


static void close_cb(uvtw_wheel_t* w) {
  uvtw_wheel_stats(w, &st);
  closed = 1;
}


/* The loop thread blocks here, so it takes nothing in meanwhile. */
static void kick_cb(uv_async_t* handle) {
  uv_sem_post(&go_c);
  uv_sem_wait(&c_done);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, close_cb));
  uv_sem_post(&go_a);
  uv_sem_wait(&a_done);
  uv_close((uv_handle_t*) handle, NULL);
}


int main(void) {
  uvtw_options_t opts;
  uv_thread_t ta;
  uv_thread_t tc;

  ASSERT_UV_OK(uv_sem_init(&go_a, 0));
  ASSERT_UV_OK(uv_sem_init(&a_done, 0));
  ASSERT_UV_OK(uv_sem_init(&go_c, 0));
  ASSERT_UV_OK(uv_sem_init(&c_done, 0));
  ASSERT_UV_OK(uv_loop_init(&loop));
  uvtw_options_init(&opts);
  opts.max_tasks = 16;
  ASSERT_EQ(0, uvtw_wheel_new(&loop, &opts, &wheel));
  ASSERT_UV_OK(uv_async_init(&loop, &kick, kick_cb));
  ASSERT_UV_OK(uv_thread_create(&ta, thread_a, NULL));
  ASSERT_UV_OK(uv_thread_create(&tc, thread_c, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_UV_OK(uv_thread_join(&ta));
  ASSERT_UV_OK(uv_thread_join(&tc));
  fprintf(stderr,
          "cancel(a) %d, submit(c) %d, submit(a) %d; a ran %d, c called %d "
          "(status %d); accepted %" PRIu64 ", cancelled %" PRIu64
          ", closed %" PRIu64 ", live %" PRIu64 "\n",
          cancel_err, err_c, err_a, calls_a, calls_c, status_c,
          st.tasks_accepted, st.tasks_cancelled, st.tasks_closed,
          st.tasks_live);
  ASSERT_EQ(1, closed);
  ASSERT_EQ(0, cancel_err);
  ASSERT_EQ(0, err_c);
  ASSERT_EQ(0, err_a); /* its task ended by the cancel, not taken back */
  ASSERT_EQ(0, calls_a);
  ASSERT_EQ(1, calls_c);
  ASSERT_EQ(UV_ECANCELED, status_c);
  ASSERT_UEQ(0, st.tasks_live);
  ASSERT_EQ(0, uv_loop_close(&loop));
  uv_sem_destroy(&go_a);
  uv_sem_destroy(&a_done);
  uv_sem_destroy(&go_c);
  uv_sem_destroy(&c_done);
  return 0;
}
