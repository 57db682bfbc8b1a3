/* SPDX-License-Identifier: MIT */
/* uvtw_wheel_walk calls fn exactly once for every timer active when the walk
 * starts, never for an inactive one (never started, stopped, or a one-shot
 * that ran), even if fn restarts the timer it is given (to the same, a
 * later, an earlier or a zero timeout, landing in any slot or level) or
 * stops it.  Restarted timers then carry their new deadline. */

#include <string.h>

#include "timer-harness.h"

#define NT 2000

struct item {
  uvtw_timer_t t;
  int visits;
  uint64_t timeout;
};

static struct item items[NT];
static int walk_arg_token;
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static const uint64_t timeouts[] = {1,
                                    2,
                                    63,
                                    64,
                                    65,
                                    255,
                                    256,
                                    257,
                                    1000,
                                    4095,
                                    4096,
                                    65536,
                                    1 << 20,
                                    (uint64_t) 1 << 32,
                                    ((uint64_t) 1 << 48) - 1,
                                    UINT64_MAX};
#define NTIMEOUTS (sizeof(timeouts) / sizeof(timeouts[0]))


static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}


static uint64_t next_rand(void) {
  return test_xorshift64(&rng);
}


static void fired_cb(uvtw_timer_t* timer) {
  (void) timer;
}


static struct item* item_of(uvtw_timer_t* timer) {
  struct item* it;

  it = timer->data;
  ASSERT_PTR_EQ(&it->t, timer);
  return it;
}


static void count_fn(uvtw_timer_t* timer, void* arg) {
  ASSERT_PTR_EQ(arg, &walk_arg_token);
  ASSERT_EQ(1, uvtw_timer_is_active(timer));
  item_of(timer)->visits++;
}


/* Restarts every timer with a timeout chosen from its index and a random
 * draw: same, later, earlier, zero, huge. */
static void restart_fn(uvtw_timer_t* timer, void* arg) {
  struct item* it;
  uint64_t timeout;

  (void) arg;
  it = item_of(timer);
  it->visits++;
  switch (next_rand() % 5) {
  case 0:
    timeout = it->timeout;
    break;
  case 1:
    timeout = it->timeout + 1 + next_rand() % 1000;
    break;
  case 2:
    timeout = it->timeout / 2;
    break;
  case 3:
    timeout = 0;
    break;
  default:
    timeout = timeouts[next_rand() % NTIMEOUTS];
    break;
  }
  it->timeout = sat_add(1000000, timeout);
  ASSERT_EQ(0, uvtw_timer_start(timer, never_cb, it->timeout,
                                next_rand() % 2 ? 0 : 50));
}


static void stop_every_other_fn(uvtw_timer_t* timer, void* arg) {
  struct item* it;

  (void) arg;
  it = item_of(timer);
  it->visits++;
  if ((it - items) % 2 == 0)
    ASSERT_EQ(0, uvtw_timer_stop(timer));
}


static void restart_or_stop_fn(uvtw_timer_t* timer, void* arg) {
  if (next_rand() % 2)
    restart_fn(timer, arg);
  else
    stop_every_other_fn(timer, arg);
}


static void clear_visits(void) {
  int i;

  for (i = 0; i < NT; i++)
    items[i].visits = 0;
}


/* Each active timer visited once, each inactive one never. */
static void expect_visits(const int* was_active) {
  int i;

  for (i = 0; i < NT; i++) {
    if (items[i].visits != (was_active[i] ? 1 : 0))
      fprintf(stderr, "timer %d (active %d) visited %d times\n", i,
              was_active[i], items[i].visits);
    ASSERT_EQ(was_active[i] ? 1 : 0, items[i].visits);
  }
}


static void snapshot(int* was_active) {
  int i;

  for (i = 0; i < NT; i++)
    was_active[i] = uvtw_timer_is_active(&items[i].t) != 0;
}


static void walk_with(void (*fn)(uvtw_timer_t*, void*)) {
  int was_active[NT];
  uint64_t now;
  uint64_t t;
  int i;

  snapshot(was_active);
  clear_visits();
  uvtw_wheel_walk(wheel, fn, &walk_arg_token);
  expect_visits(was_active);
  for (i = 0; i < NT; i++) {
    if (!uvtw_timer_is_active(&items[i].t))
      continue;
    /* uv_now has not moved: due_in is the timeout given last, or
     * UINT64_MAX ("never") if the deadline saturated. */
    now = uv_now(&loop);
    t = items[i].timeout;
    ASSERT_UEQ(t >= UINT64_MAX - now ? UINT64_MAX : t,
               uvtw_timer_get_due_in(&items[i].t));
  }
}


int main(void) {
  int i;
  int k;

  setup();
  for (i = 0; i < NT; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &items[i].t));
    items[i].t.data = &items[i];
  }

  /* Empty wheel: no calls. */
  walk_with(count_fn);

  /* A few one-shots that run, so that they are inactive afterwards. */
  for (i = 0; i < 50; i++)
    ASSERT_EQ(0, uvtw_timer_start(&items[i].t, fired_cb, i % 3, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));

  /* Most of the rest active with timeouts over every level (ties included);
   * every 7th never started; every 11th started and stopped. */
  for (i = 50; i < NT; i++) {
    if (i % 7 == 0)
      continue;
    items[i].timeout = sat_add(1000000, timeouts[i % NTIMEOUTS]);
    ASSERT_EQ(0, uvtw_timer_start(&items[i].t, never_cb, items[i].timeout, 0));
    if (i % 11 == 0)
      ASSERT_EQ(0, uvtw_timer_stop(&items[i].t));
  }
  /* Some with short timeouts, kept away from running by staying outside the
   * loop. */
  for (i = 60; i < 200; i += 3) {
    items[i].timeout = (uint64_t) (i % 5);
    ASSERT_EQ(0, uvtw_timer_start(&items[i].t, never_cb, items[i].timeout, 0));
  }

  walk_with(count_fn);
  walk_with(count_fn);
  for (k = 0; k < 5; k++) {
    walk_with(restart_fn);
    walk_with(count_fn);
  }
  walk_with(stop_every_other_fn);
  walk_with(count_fn);
  for (k = 0; k < 5; k++)
    walk_with(restart_or_stop_fn);
  walk_with(count_fn);

  /* Stop everything; the walk then has nothing to visit. */
  for (i = 0; i < NT; i++)
    ASSERT_EQ(0, uvtw_timer_stop(&items[i].t));
  walk_with(count_fn);

  teardown();
  return 0;
}
