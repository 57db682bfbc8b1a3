/* SPDX-License-Identifier: MIT */
/* The checked build (UVTW_CHECK_THREADS; built only there): a loop-thread
 * call from a thread other than the one running the loop aborts with a
 * message naming the call, and a wheel made and set up on one thread whose
 * loop then runs on another raises no false alarm.
 *
 *   other_thread_aborts   a child process runs the loop on a thread of its
 *                         own; once the wheel's driver has run there, the
 *                         child's main thread starts a timer: the child
 *                         dies of SIGABRT, and its stderr names
 *                         uvtw_timer_start
 *   made_here_run_there   the wheel is made and a timer started on the main
 *                         thread, the loop runs on another thread, whose
 *                         callbacks restart timers and close the wheel;
 *                         the main thread joins it: no abort
 *   handed_over           the loop runs on another thread until it holds
 *                         nothing; after the join the main thread starts
 *                         a timer and runs the loop: no abort */

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "test-cases.h"
#include "test.h"
#include "uvtw.h"

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uvtw_timer_t ticker;
static uvtw_timer_t other;
static uv_sem_t fired_once;
static int fires;


static void run_loop(void* arg) {
  (void) arg;
  uv_run(&loop, UV_RUN_DEFAULT);
}


static void ticker_cb(uvtw_timer_t* timer) {
  (void) timer;
  if (++fires == 1)
    uv_sem_post(&fired_once);
}


static void never_cb(uvtw_timer_t* timer) {
  (void) timer;
}


/* In the child: the loop on thread B, then a start on the main thread. */
static void start_from_wrong_thread(void) {
  uv_thread_t b;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_UV_OK(uv_sem_init(&fired_once, 0));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &ticker));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &other));
  ASSERT_EQ(0, uvtw_timer_start(&ticker, ticker_cb, 1, 1));
  ASSERT_UV_OK(uv_thread_create(&b, run_loop, NULL));
  uv_sem_wait(&fired_once);                    /* the driver ran on B */
  uvtw_timer_start(&other, never_cb, 1000, 0); /* must abort */
}


static void other_thread_aborts(void) {
  char out[4096];
  size_t len;
  ssize_t n;
  pid_t pid;
  int fds[2];
  int status;

  ASSERT_EQ(0, pipe(fds));
  fflush(stderr);
  pid = fork();
  ASSERT_NE(-1, pid);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    start_from_wrong_thread();
    _exit(0); /* not reached in a checked build */
  }
  close(fds[1]);
  len = 0;
  while (len < sizeof(out) - 1 &&
         (n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
    len += (size_t) n;
  out[len] = '\0';
  close(fds[0]);
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  fprintf(stderr, "child's stderr: %s", out);
  ASSERT(WIFSIGNALED(status));
  ASSERT_EQ(SIGABRT, WTERMSIG(status));
  ASSERT(strstr(out,
                "uvtw_timer_start called on a thread that does not "
                "run the wheel's loop") != NULL);
}


static int restarts;


static void close_cb(uvtw_wheel_t* w) {
  (void) w;
  restarts += 1000;
}


static void restart_cb(uvtw_timer_t* timer) {
  if (++restarts < 5) {
    ASSERT_EQ(0, uvtw_timer_start(timer, restart_cb, 1, 0));
    ASSERT_EQ(0, uvtw_timer_start(&other, never_cb, 50, 0));
    ASSERT_EQ(0, uvtw_timer_stop(&other));
    return;
  }
  ASSERT_EQ(0, uvtw_wheel_close(wheel, close_cb));
}


/* On thread B: a start before the loop runs, then the loop. */
static void start_then_run(void* arg) {
  (void) arg;
  ASSERT_EQ(0, uvtw_timer_start(&other, never_cb, 100000, 0));
  ASSERT_EQ(0, uvtw_timer_stop(&other));
  uv_run(&loop, UV_RUN_DEFAULT);
}


static void made_here_run_there(void) {
  uv_thread_t b;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &ticker));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &other));
  ASSERT_EQ(0, uvtw_timer_start(&ticker, restart_cb, 1, 0));
  restarts = 0;
  ASSERT_UV_OK(uv_thread_create(&b, start_then_run, NULL));
  ASSERT_UV_OK(uv_thread_join(&b));
  ASSERT_EQ(1005, restarts);
  ASSERT_EQ(0, uv_loop_close(&loop));
}


/* The loop ran on thread B until it held nothing, B was joined, and the
 * main thread takes the loop over (libuv allows it): no abort. */
static void handed_over(void) {
  uv_thread_t b;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &ticker));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &other));
  fires = 0;
  ASSERT_EQ(0, uvtw_timer_start(&ticker, ticker_cb, 1, 0));
  ASSERT_UV_OK(uv_sem_init(&fired_once, 0));
  ASSERT_UV_OK(uv_thread_create(&b, run_loop, NULL));
  ASSERT_UV_OK(uv_thread_join(&b));
  ASSERT_EQ(1, fires);
  ASSERT_EQ(0, uvtw_timer_start(&ticker, ticker_cb, 1, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(2, fires);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, uv_loop_close(&loop));
  uv_sem_destroy(&fired_once);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(other_thread_aborts),
  TEST_CASE(made_here_run_there),
  TEST_CASE(handed_over),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
