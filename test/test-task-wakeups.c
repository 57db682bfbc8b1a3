/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: "at most one uv_async_send per batch of submissions
 * the loop has not yet drained".
 *
 * This program is linked with --wrap=uv_async_send (test/CMakeLists.txt):
 * the static library's calls go to __wrap_uv_async_send, which counts the
 * calls made on the wheel's async handle (its data points to the wheel) and
 * forwards to libuv's, __real_uv_async_send.  (The linker's wrap works
 * on Windows as on ELF systems; dlsym(RTLD_NEXT) does not exist there.
 * Where the library calls libuv's DLL through an import slot, the slot's
 * name is wrapped too.)
 *
 *   scenario_blocked  While the loop thread is blocked in a callback,
 *             another thread submits 1,000 tasks: one batch, so at most
 *             one send.
 *   scenario_concurrent  20 times: while the loop thread is blocked, four
 *             threads submit 250 tasks each at the same time: one batch, so
 *             at most one send each time.  Every task runs once.
 * (While the loop runs, it may drain any number of times per iteration, so
 * the number of batches, and of sends, is not observable from outside.) */

#include "task-harness.h"
#include "test-cases.h"

static atomic_int wheel_sends;

int __real_uv_async_send(uv_async_t* handle);
int __wrap_uv_async_send(uv_async_t* handle);


int __wrap_uv_async_send(uv_async_t* handle) {
  if (handle->data == wheel && wheel != NULL)
    atomic_fetch_add(&wheel_sends, 1);
  return __real_uv_async_send(handle);
}

#ifdef _WIN32
/* Against libuv's DLL, the library calls uv_async_send through its import
 * slot, the pointer __imp_uv_async_send: the program is also linked with
 * --wrap=__imp_uv_async_send, and its slot points to the wrap. */
int (*__wrap___imp_uv_async_send)(uv_async_t*) = __wrap_uv_async_send;
#endif


static atomic_int ran;


static void count_cb(void* arg, int status) {
  (void) arg;
  ASSERT_EQ(0, status);
  atomic_fetch_add(&ran, 1);
}


/* ---- blocked ---------------------------------------------------------- */

#define NBLOCKED 1000

static uv_timer_t blocker;
static uv_sem_t blocked;
static uv_sem_t submitted;
static int sends_in_block;


static void blocker_cb(uv_timer_t* handle) {
  int before;

  (void) handle;
  before = atomic_load(&wheel_sends);
  uv_sem_post(&blocked);
  uv_sem_wait(&submitted);
  sends_in_block = atomic_load(&wheel_sends) - before;
}


static void blocked_thread(void* arg) {
  int i;

  (void) arg;
  uv_sem_wait(&blocked);
  for (i = 0; i < NBLOCKED; i++)
    ASSERT_EQ(0, uvtw_submit(wheel, 0, 0, 0, count_cb, NULL, NULL));
  uv_sem_post(&submitted);
}


static int blocked_done(void) {
  return atomic_load(&ran) == NBLOCKED;
}


static void scenario_blocked(void) {
  uv_thread_t tid;

  setup(0);
  atomic_store(&ran, 0);
  ASSERT_UV_OK(uv_sem_init(&blocked, 0));
  ASSERT_UV_OK(uv_sem_init(&submitted, 0));
  ASSERT_UV_OK(uv_timer_init(&loop, &blocker));
  run_for(10); /* a running loop with an empty queue */
  atomic_store(&wheel_sends, 0);
  ASSERT_UV_OK(uv_thread_create(&tid, blocked_thread, NULL));
  ASSERT_UV_OK(uv_timer_start(&blocker, blocker_cb, 1, 0));
  run_until(blocked_done, 0);
  ASSERT_UV_OK(uv_thread_join(&tid));
  printf("blocked: %d tasks in one batch, %d uv_async_send\n", NBLOCKED,
         sends_in_block);
  ASSERT_LE(sends_in_block, 1);
  /* The batch woke the loop, so the wrap saw a send: it is in place. */
  ASSERT_GE(atomic_load(&wheel_sends), 1);
  uv_close((uv_handle_t*) &blocker, NULL);
  teardown();
  uv_sem_destroy(&blocked);
  uv_sem_destroy(&submitted);
}


/* ---- concurrent ------------------------------------------------------- */

#define NTHREADS 4
#define NEACH 250
#define NROUNDS 20

static uv_sem_t round_go;
static uv_sem_t round_done;
static int max_sends_in_block;
static int expected_ran;


static void concurrent_blocker_cb(uv_timer_t* handle) {
  int before;
  int sends;
  int i;

  (void) handle;
  before = atomic_load(&wheel_sends);
  for (i = 0; i < NTHREADS; i++)
    uv_sem_post(&round_go);
  for (i = 0; i < NTHREADS; i++)
    uv_sem_wait(&round_done);
  sends = atomic_load(&wheel_sends) - before;
  if (sends > max_sends_in_block)
    max_sends_in_block = sends;
}


static void concurrent_thread(void* arg) {
  int round;
  int i;

  (void) arg;
  for (round = 0; round < NROUNDS; round++) {
    uv_sem_wait(&round_go);
    for (i = 0; i < NEACH; i++)
      ASSERT_EQ(0, uvtw_submit(wheel, i % 3, 0, 0, count_cb, NULL, NULL));
    uv_sem_post(&round_done);
  }
}


static int round_ran(void) {
  return atomic_load(&ran) == expected_ran;
}


static void scenario_concurrent(void) {
  uv_thread_t tid[NTHREADS];
  int round;
  int i;

  setup(0);
  atomic_store(&ran, 0);
  ASSERT_UV_OK(uv_sem_init(&round_go, 0));
  ASSERT_UV_OK(uv_sem_init(&round_done, 0));
  ASSERT_UV_OK(uv_timer_init(&loop, &blocker));
  max_sends_in_block = 0;
  atomic_store(&wheel_sends, 0);
  for (i = 0; i < NTHREADS; i++)
    ASSERT_UV_OK(uv_thread_create(&tid[i], concurrent_thread, NULL));
  for (round = 0; round < NROUNDS; round++) {
    expected_ran = (round + 1) * NTHREADS * NEACH;
    ASSERT_UV_OK(uv_timer_start(&blocker, concurrent_blocker_cb, 1, 0));
    run_until(round_ran, 0);
  }
  for (i = 0; i < NTHREADS; i++)
    ASSERT_UV_OK(uv_thread_join(&tid[i]));
  printf(
      "concurrent: %d rounds of %d threads x %d tasks, at most %d "
      "uv_async_send per round\n",
      NROUNDS, NTHREADS, NEACH, max_sends_in_block);
  ASSERT_LE(max_sends_in_block, 1);
  ASSERT_GE(atomic_load(&wheel_sends), 1); /* the wrap is in place */
  ASSERT_UEQ(0, uvtw_wheel_pending(wheel));
  uv_close((uv_handle_t*) &blocker, NULL);
  teardown();
  uv_sem_destroy(&round_go);
  uv_sem_destroy(&round_done);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(scenario_blocked),
  TEST_CASE(scenario_concurrent),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
