/* SPDX-License-Identifier: MIT */
/* uv_run(UV_RUN_ONCE) runs due uvtw timers as it runs uv_timer_t twins with
 * the same timeouts, on whatever libuv this runs with.  (libuv 1.44 runs
 * timers at the start of an iteration and, for UV_RUN_ONCE, again after
 * the poll; from 1.45 on only after the poll.  So whether a 0 ms and a 1 ms
 * timer fire in one call or in two depends on the release; uvtw follows.)
 * Nothing else is alive on the loop: with another referenced handle,
 * UV_RUN_ONCE would block in the poll after a timer ran, for uv_timer_t
 * too.  Each case of one or two timers runs
 *   - the uv_timer_t twins alone, then the uvtw timers alone, calling
 *     uv_run(UV_RUN_ONCE) until every timer has fired: each call fires at
 *     least one (forward progress) and returns non-zero exactly while a
 *     timer is still active;
 *   - both together, started at the same moment: after every call, as many
 *     uvtw timers have fired as uv_timer_t twins, and the call returns 0
 *     once all have fired. */

#include "timer-harness.h"

#define MAX_CALLS 100

static uvtw_timer_t t[2];
static uv_timer_t u[2];
static int t_fired[2];
static int u_fired[2];


static void t_cb(uvtw_timer_t* timer) {
  ASSERT(timer == &t[0] || timer == &t[1]);
  t_fired[timer - t]++;
}


static void u_cb(uv_timer_t* handle) {
  ASSERT(handle == &u[0] || handle == &u[1]);
  u_fired[handle - u]++;
}


static int fired(const int* count, int n) {
  int sum;
  int i;

  sum = 0;
  for (i = 0; i < n; i++) {
    ASSERT_LE(count[i], 1);
    sum += count[i];
  }
  return sum;
}


static int any_active(int n) {
  int i;

  for (i = 0; i < n; i++)
    if (uvtw_timer_is_active(&t[i]) || uv_is_active((uv_handle_t*) &u[i]))
      return 1;
  return 0;
}


static void start(int uv_side, int tw_side, const uint64_t* timeouts, int n) {
  int i;

  for (i = 0; i < n; i++) {
    t_fired[i] = u_fired[i] = 0;
    if (uv_side)
      ASSERT_UV_OK(uv_timer_start(&u[i], u_cb, timeouts[i], 0));
    if (tw_side)
      ASSERT_EQ(0, uvtw_timer_start(&t[i], t_cb, timeouts[i], 0));
  }
}


/* One side alone: forward progress, and the return value says whether a
 * timer is still active. */
static void alone(int uv_side, const uint64_t* timeouts, int n) {
  const int* count;
  int before;
  int calls;
  int r;

  count = uv_side ? u_fired : t_fired;
  start(uv_side, !uv_side, timeouts, n);
  for (calls = 0; fired(count, n) < n; calls++) {
    ASSERT_LT(calls, n);
    before = fired(count, n);
    r = uv_run(&loop, UV_RUN_ONCE);
    ASSERT_GT(fired(count, n), before);
    ASSERT_EQ(any_active(n), r);
  }
  ASSERT_EQ(0, uv_loop_alive(&loop));
}


/* Both sides at once: the same timers fire in the same call. */
static void together(const uint64_t* timeouts, int n) {
  int calls;
  int r;

  start(1, 1, timeouts, n);
  for (calls = 0; fired(u_fired, n) < n; calls++) {
    ASSERT_LT(calls, MAX_CALLS);
    r = uv_run(&loop, UV_RUN_ONCE);
    ASSERT_EQ(fired(u_fired, n), fired(t_fired, n));
    ASSERT_EQ(any_active(n), r);
  }
  ASSERT_EQ(n, fired(t_fired, n));
  ASSERT_EQ(0, uv_loop_alive(&loop));
}


static void one_case(const uint64_t* timeouts, int n) {
  alone(1, timeouts, n);
  alone(0, timeouts, n);
  together(timeouts, n);
}


int main(void) {
  static const uint64_t singles[] = {0, 1, 0, 1, 2, 5, 1, 0};
  static const uint64_t pairs[][2] = {{0, 1}, {1, 0}, {1, 1},
                                      {0, 0}, {0, 2}, {2, 1}};
  size_t i;
  int k;

  setup();
  for (i = 0; i < 2; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &t[i]));
    add_uv_timer(&u[i]);
  }

  /* Before the loop has ever run, and then repeatedly. */
  for (k = 0; k < 10; k++) {
    for (i = 0; i < sizeof(singles) / sizeof(singles[0]); i++)
      one_case(&singles[i], 1);
    for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
      one_case(pairs[i], 2);
  }

  teardown();
  return 0;
}
