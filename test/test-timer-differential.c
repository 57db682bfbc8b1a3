/* SPDX-License-Identifier: MIT */
/* Differential test against uv_timer_t (tick 1).  NPAIRS pairs of one
 * uv_timer_t and one uvtw_timer_t share a loop and follow the same seeded
 * random script for about RUN_MS: starts, restarts, stops, again, repeats
 * and set_repeat, made before the loop runs, from a uv_check_t between
 * iterations (timeouts from 0) and from the timers' own callbacks
 * (timeouts from 0 on libuv 1.48 and later; from 1 ms before 1.48, which
 * runs a 0 ms uv_timer_t started inside a timer callback in the same pass,
 * where uvtw waits for the next iteration: docs/timers.md, "Which
 * libuv").
 *
 * Each side keeps its own copy of the script's random state and draws from
 * it in its own callbacks, so both sides run the same script as long as
 * they fire the same pairs in the same order.  At the end of every loop
 * iteration (a uv_check_t) the sequence of pair indices fired by the
 * uv_timer_t side in that iteration must equal the sequence fired by the
 * uvtw side: same iterations, same order (deadline, then (re)start order).
 *
 * Set UVTW_SEED in the environment to replay another seed. */

#include <stdlib.h>
#include <string.h>

#include "timer-harness.h"

#define NPAIRS 3000
#define RUN_MS 5000
#define LOG_CAP (1 << 20)

enum { UV_SIDE = 0, TW_SIDE = 1 };

struct pair {
  uv_timer_t u;
  uvtw_timer_t w;
  int idx;
};

struct side {
  uint64_t rng;
  int* log; /* pair indices fired in the current iteration */
  size_t n;
  uint64_t fired;
};

static uv_timer_t keeper; /* keeps the loop alive until the end, whatever
                             the script does; fires no pair */
static uint64_t end_time;
static int stopping;
static struct pair pairs[NPAIRS];
static struct side sides[2];
static uint64_t top_rng; /* drives the check's actions, applied to both */
static uint64_t max_per_iteration;
static uint64_t min_in_callback; /* the smallest timeout in callbacks */


static uint64_t next_rand(uint64_t* s) {
  return test_splitmix64(s);
}


/* Mostly short timeouts, so that equal deadlines are common; some long
 * ones, to reach the wheel's higher levels. */
static uint64_t pick_timeout(uint64_t* s, uint64_t min) {
  uint64_t r;
  uint64_t t;

  r = next_rand(s) % 1000;
  if (r < 780)
    t = next_rand(s) % 17;
  else if (r < 960)
    t = 17 + next_rand(s) % 300;
  else if (r < 995)
    t = 317 + next_rand(s) % 3000;
  else
    t = 3317 + next_rand(s) % 20000;
  return t < min ? min : t;
}


static uint64_t pick_repeat(uint64_t* s) {
  if (next_rand(s) % 3 != 0)
    return 0;
  return pick_timeout(s, 1);
}


static void uv_cb(uv_timer_t* handle);
static void tw_cb(uvtw_timer_t* timer);


static void side_start(int side,
                       struct pair* p,
                       uint64_t timeout,
                       uint64_t repeat) {
  if (side == UV_SIDE)
    ASSERT_UV_OK(uv_timer_start(&p->u, uv_cb, timeout, repeat));
  else
    ASSERT_EQ(0, uvtw_timer_start(&p->w, tw_cb, timeout, repeat));
}


static void side_stop(int side, struct pair* p) {
  if (side == UV_SIDE)
    ASSERT_UV_OK(uv_timer_stop(&p->u));
  else
    ASSERT_EQ(0, uvtw_timer_stop(&p->w));
}


static int side_again(int side, struct pair* p) {
  if (side == UV_SIDE)
    return uv_timer_again(&p->u);
  return uvtw_timer_again(&p->w);
}


static void side_set_repeat(int side, struct pair* p, uint64_t repeat) {
  if (side == UV_SIDE)
    uv_timer_set_repeat(&p->u, repeat);
  else
    uvtw_timer_set_repeat(&p->w, repeat);
}


/* One step of the script for `side`, drawing from state *s.  `min` is the
 * smallest timeout allowed (1 inside timer callbacks).  Every pair was
 * started before the loop ran, so again never fails. */
static void script_step(int side,
                        uint64_t* s,
                        struct pair* self,
                        uint64_t min) {
  struct pair* other;
  uint64_t r;
  uint64_t timeout;
  uint64_t repeat;

  r = next_rand(s) % 100;
  other = &pairs[next_rand(s) % NPAIRS];
  if (self == NULL)
    self = other;
  if (r < 10) {
    return;
  } else if (r < 55) {
    timeout = pick_timeout(s, min);
    repeat = pick_repeat(s);
    side_start(side, self, timeout, repeat);
  } else if (r < 75) {
    timeout = pick_timeout(s, min);
    repeat = pick_repeat(s);
    side_start(side, other, timeout, repeat);
  } else if (r < 79) {
    side_stop(side, other);
  } else if (r < 81) {
    side_stop(side, self);
  } else if (r < 87) {
    ASSERT_EQ(0, side_again(side, other));
  } else if (r < 91) {
    ASSERT_EQ(0, side_again(side, self));
  } else if (r < 95) {
    side_set_repeat(side, self, next_rand(s) % 2 ? 0 : pick_timeout(s, 1));
  } else if (r < 98) {
    side_set_repeat(side, other, next_rand(s) % 2 ? 0 : pick_timeout(s, 1));
  } else {
    /* Two actions in one callback. */
    script_step(side, s, self, min);
    script_step(side, s, self, min);
  }
}


static void on_fire(int side, struct pair* p) {
  struct side* sd;

  sd = &sides[side];
  ASSERT_LT(sd->n, LOG_CAP);
  sd->log[sd->n++] = p->idx;
  sd->fired++;
  if (stopping)
    return;
  script_step(side, &sd->rng, p, min_in_callback);
}


static void uv_cb(uv_timer_t* handle) {
  on_fire(UV_SIDE, handle->data);
}


static void tw_cb(uvtw_timer_t* timer) {
  on_fire(TW_SIDE, timer->data);
}


static void compare_iteration(void) {
  size_t n;
  size_t i;

  n = sides[UV_SIDE].n < sides[TW_SIDE].n ? sides[UV_SIDE].n : sides[TW_SIDE].n;
  for (i = 0; i < n; i++)
    if (sides[UV_SIDE].log[i] != sides[TW_SIDE].log[i])
      break;
  if (i < n || sides[UV_SIDE].n != sides[TW_SIDE].n) {
    fprintf(stderr,
            "iteration %" PRId64
            ": uv_timer_t side fired %zu, uvtw side "
            "%zu; first difference at position %zu\n",
            iteration, sides[UV_SIDE].n, sides[TW_SIDE].n, i);
    for (n = i > 5 ? i - 5 : 0; n < i + 5; n++) {
      fprintf(stderr, "  [%zu] uv %d  uvtw %d\n", n,
              n < sides[UV_SIDE].n ? sides[UV_SIDE].log[n] : -1,
              n < sides[TW_SIDE].n ? sides[TW_SIDE].log[n] : -1);
    }
  }
  ASSERT_EQ(sides[UV_SIDE].n, sides[TW_SIDE].n);
  ASSERT_EQ(i, n);
  if (n > max_per_iteration)
    max_per_iteration = n;
  sides[UV_SIDE].n = 0;
  sides[TW_SIDE].n = 0;
}


/* At the end of every iteration; `iteration` moves on right after. */
static void in_check(void) {
  uint64_t s;
  int k;
  int side;
  int i;

  compare_iteration();
  if (stopping)
    return;

  if (uv_now(&loop) >= end_time) {
    stopping = 1;
    ASSERT_UV_OK(uv_timer_stop(&keeper));
    for (i = 0; i < NPAIRS; i++) {
      side_stop(UV_SIDE, &pairs[i]);
      side_stop(TW_SIDE, &pairs[i]);
    }
    return;
  }

  /* Between iterations: a few script steps, 0 ms timeouts allowed, the same
   * steps applied to each side (each from a copy of the same state). */
  if (next_rand(&top_rng) % 2 != 0)
    return;
  k = 1 + (int) (next_rand(&top_rng) % 40);
  s = top_rng;
  for (side = 0; side < 2; side++) {
    s = top_rng;
    for (i = 0; i < k; i++)
      script_step(side, &s, NULL, 0);
  }
  top_rng = s;
}


static void keeper_cb(uv_timer_t* handle) {
  (void) handle;
}


int main(void) {
  uint64_t seed;
  uint64_t s;
  uint64_t timeout;
  uint64_t repeat;
  uint64_t start;
  const char* env;
  int i;

  seed = 20240611;
  env = getenv("UVTW_SEED");
  if (env != NULL)
    seed = strtoull(env, NULL, 0);
  min_in_callback = uv_version() >= 0x013000 ? 0 : 1; /* 1.48.0 */
  fprintf(stderr,
          "seed %" PRIu64 ", libuv %s, timeouts in callbacks from %" PRIu64
          " ms\n",
          seed, uv_version_string(), min_in_callback);
  sides[UV_SIDE].rng = seed;
  sides[TW_SIDE].rng = seed;
  top_rng = seed ^ 0x5deece66dull;
  sides[UV_SIDE].log = malloc(LOG_CAP * sizeof(int));
  sides[TW_SIDE].log = malloc(LOG_CAP * sizeof(int));
  ASSERT_PTR_NE(NULL, sides[UV_SIDE].log);
  ASSERT_PTR_NE(NULL, sides[TW_SIDE].log);

  setup();
  on_check = in_check;

  /* Every pair starts before the loop runs, in the same order on both
   * sides (timeouts from 0). */
  s = seed ^ 0x1234567ull;
  for (i = 0; i < NPAIRS; i++) {
    pairs[i].idx = i;
    add_uv_timer(&pairs[i].u);
    ASSERT_EQ(0, uvtw_timer_init(wheel, &pairs[i].w));
    pairs[i].u.data = &pairs[i];
    pairs[i].w.data = &pairs[i];
    timeout = pick_timeout(&s, 0);
    repeat = pick_repeat(&s);
    side_start(UV_SIDE, &pairs[i], timeout, repeat);
    side_start(TW_SIDE, &pairs[i], timeout, repeat);
  }

  add_uv_timer(&keeper);
  ASSERT_UV_OK(uv_timer_start(&keeper, keeper_cb, RUN_MS, RUN_MS));
  start = uv_hrtime();
  end_time = uv_now(&loop) + RUN_MS;
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, stopping);
  ASSERT_UEQ(sides[UV_SIDE].fired, sides[TW_SIDE].fired);
  ASSERT_UGE(sides[TW_SIDE].fired, NPAIRS);
  fprintf(stderr,
          "%" PRIu64 " runs per side in %" PRId64
          " iterations "
          "(at most %" PRIu64 " in one), %" PRIu64 " ms\n",
          sides[TW_SIDE].fired, iteration, max_per_iteration,
          (uv_hrtime() - start) / 1000000);

  for (i = 0; i < NPAIRS; i++)
    ASSERT_EQ(0, uvtw_timer_is_active(&pairs[i].w));
  teardown();
  free(sides[UV_SIDE].log);
  free(sides[TW_SIDE].log);
  return 0;
}
