/* SPDX-License-Identifier: MIT */
/* uvtw_timer_again and set_repeat behave like uv_timer_again and
 * uv_timer_set_repeat: UV_EINVAL if the timer was never started; nothing if
 * repeat is 0; else a restart with timeout = repeat.  Inside a callback,
 * libuv re-arms a repeating timer before running it, so set_repeat there
 * only affects the run after next (or a following again).  Every case runs
 * on a uv_timer_t twin; after every pass and inside every callback the two
 * must agree (active, due_in, repeat, fire count), and the cases also check
 * the expected outcome explicitly. */

#include "test-cases.h"
#include "timer-harness.h"

enum { UV_SIDE = 0, TW_SIDE = 1 };

struct tcase {
  char name;
  uv_timer_t u;
  uvtw_timer_t w;
  uint64_t timeout;
  uint64_t repeat;
  int count[2];
  uint64_t at[2]; /* uv_now at the last run */
  int active_in_cb[2][8];
  uint64_t due_in_cb[2][8];
  int again_rv[2];
};

static struct tcase twins[9];


static int t_again(struct tcase* c, int side) {
  return side == TW_SIDE ? uvtw_timer_again(&c->w) : uv_timer_again(&c->u);
}


static int t_stop(struct tcase* c, int side) {
  return side == TW_SIDE ? uvtw_timer_stop(&c->w) : uv_timer_stop(&c->u);
}


static void t_set_repeat(struct tcase* c, int side, uint64_t repeat) {
  if (side == TW_SIDE)
    uvtw_timer_set_repeat(&c->w, repeat);
  else
    uv_timer_set_repeat(&c->u, repeat);
}


static int t_active(struct tcase* c, int side) {
  if (side == TW_SIDE)
    return uvtw_timer_is_active(&c->w) != 0;
  return uv_is_active((uv_handle_t*) &c->u) != 0;
}


static uint64_t t_due_in(struct tcase* c, int side) {
  if (side == TW_SIDE)
    return uvtw_timer_get_due_in(&c->w);
  return uv_timer_get_due_in(&c->u);
}


static uint64_t t_repeat(struct tcase* c, int side) {
  if (side == TW_SIDE)
    return uvtw_timer_get_repeat(&c->w);
  return uv_timer_get_repeat(&c->u);
}


static void on_fire(struct tcase* c, int side) {
  int n;

  n = ++c->count[side];
  ASSERT_LE(n, 8);
  c->at[side] = uv_now(&loop);
  c->active_in_cb[side][n - 1] = t_active(c, side);
  c->due_in_cb[side][n - 1] = t_due_in(c, side);

  switch (c->name) {
  case 'A': /* one-shot; set_repeat in the callback does not re-arm it */
    t_set_repeat(c, side, 30000);
    break;
  case 'B': /* repeat 10; set_repeat(0) in the 1st run: one more run */
    if (n == 1)
      t_set_repeat(c, side, 0);
    break;
  case 'C': /* repeat 10000; already re-armed with it when set to 20000 */
    if (n == 1)
      t_set_repeat(c, side, 20000);
    break;
  case 'D': /* as C, then again: restarted with 20000 */
    if (n == 1) {
      t_set_repeat(c, side, 20000);
      c->again_rv[side] = t_again(c, side);
    }
    break;
  case 'E': /* one-shot; again in its callback does nothing */
    c->again_rv[side] = t_again(c, side);
    break;
  case 'F': /* repeating; stop then again in its callback: restarted */
    ASSERT_EQ(0, t_stop(c, side));
    ASSERT_EQ(0, t_active(c, side));
    c->again_rv[side] = t_again(c, side);
    break;
  case 'G': /* one-shot turned into repeat 5 by set_repeat + again */
    if (n == 1) {
      t_set_repeat(c, side, 5);
      c->again_rv[side] = t_again(c, side);
    } else if (n == 3) {
      ASSERT_EQ(0, t_stop(c, side));
    }
    break;
  case 'H': /* repeat 3, again in its own callback */
    if (n == 1)
      c->again_rv[side] = t_again(c, side);
    else if (n == 4)
      ASSERT_EQ(0, t_stop(c, side));
    break;
  case 'I': /* repeating, stops itself */
    ASSERT_EQ(0, t_stop(c, side));
    break;
  default:
    ASSERT(0);
  }
}


static void uv_cb(uv_timer_t* handle) {
  on_fire(handle->data, UV_SIDE);
}


static void tw_cb(uvtw_timer_t* timer) {
  on_fire(timer->data, TW_SIDE);
}


static void compare(struct tcase* c) {
  int i;

  if (c->count[UV_SIDE] != c->count[TW_SIDE] ||
      t_active(c, UV_SIDE) != t_active(c, TW_SIDE) ||
      (t_active(c, UV_SIDE) && t_due_in(c, UV_SIDE) != t_due_in(c, TW_SIDE)) ||
      t_repeat(c, UV_SIDE) != t_repeat(c, TW_SIDE)) {
    fprintf(stderr,
            "case %c differs: uv_timer_t (runs %d, active %d, "
            "due_in %" PRIu64 ", repeat %" PRIu64
            "), uvtw (runs %d, "
            "active %d, due_in %" PRIu64 ", repeat %" PRIu64 ")\n",
            c->name, c->count[UV_SIDE], t_active(c, UV_SIDE),
            t_due_in(c, UV_SIDE), t_repeat(c, UV_SIDE), c->count[TW_SIDE],
            t_active(c, TW_SIDE), t_due_in(c, TW_SIDE), t_repeat(c, TW_SIDE));
  }
  ASSERT_EQ(c->count[UV_SIDE], c->count[TW_SIDE]);
  ASSERT_EQ(t_active(c, UV_SIDE), t_active(c, TW_SIDE));
  /* uv_timer_get_due_in of a stopped uv_timer_t still reports its old
   * deadline; uvtw's is 0 when inactive (uvtw.h). */
  if (t_active(c, UV_SIDE))
    ASSERT_UEQ(t_due_in(c, UV_SIDE), t_due_in(c, TW_SIDE));
  else
    ASSERT_UEQ(0, t_due_in(c, TW_SIDE));
  ASSERT_UEQ(t_repeat(c, UV_SIDE), t_repeat(c, TW_SIDE));
  ASSERT_EQ(c->again_rv[UV_SIDE], c->again_rv[TW_SIDE]);
  for (i = 0; i < c->count[UV_SIDE]; i++) {
    ASSERT_EQ(c->active_in_cb[UV_SIDE][i], c->active_in_cb[TW_SIDE][i]);
    if (c->active_in_cb[UV_SIDE][i])
      ASSERT_UEQ(c->due_in_cb[UV_SIDE][i], c->due_in_cb[TW_SIDE][i]);
    else
      ASSERT_UEQ(0, c->due_in_cb[TW_SIDE][i]);
  }
}


static void in_callbacks(void) {
  static const char names[] = "ABCDEFGHI";
  static const uint64_t repeats[] = {0, 10, 10000, 10000, 0, 10000, 0, 3, 7};
  static const int finals[] = {1, 2, 1, 1, 1, 1, 3, 4, 1};
  struct tcase* c;
  uint64_t quiet_since;
  int done;
  int i;
  int k;

  setup();
  for (i = 0; i < 9; i++) {
    add_uv_timer(&twins[i].u);
    ASSERT_EQ(0, uvtw_timer_init(wheel, &twins[i].w));
  }
  for (i = 0; i < 9; i++) {
    c = &twins[i];
    c->name = names[i];
    c->repeat = repeats[i];
    c->u.data = c;
    c->w.data = c;
    ASSERT_UV_OK(uv_timer_start(&c->u, uv_cb, 10, c->repeat));
    ASSERT_EQ(0, uvtw_timer_start(&c->w, tw_cb, 10, c->repeat));
  }

  /* Run pass by pass until every case has fired its final number of times
   * and 50 more ms have passed. */
  quiet_since = 0;
  for (k = 0;; k++) {
    ASSERT_LT(k, 100000);
    uv_sleep(1);
    uv_run(&loop, UV_RUN_NOWAIT);
    done = 1;
    for (i = 0; i < 9; i++) {
      compare(&twins[i]);
      ASSERT_LE(twins[i].count[TW_SIDE], finals[i]);
      if (twins[i].count[TW_SIDE] < finals[i])
        done = 0;
    }
    if (!done)
      continue;
    if (quiet_since == 0)
      quiet_since = uv_now(&loop);
    else if (uv_now(&loop) >= quiet_since + 50)
      break;
  }

  /* The explicit outcomes. */
  c = &twins[0]; /* A */
  ASSERT_EQ(0, uvtw_timer_is_active(&c->w));
  ASSERT_EQ(0, c->active_in_cb[TW_SIDE][0]);
  ASSERT_UEQ(30000, uvtw_timer_get_repeat(&c->w));
  ASSERT_EQ(0, uvtw_timer_again(&c->w));
  ASSERT_EQ(0, uv_timer_again(&c->u));
  ASSERT_UEQ(30000, uvtw_timer_get_due_in(&c->w));
  compare(c);

  c = &twins[1]; /* B: re-armed with 10 before its 1st callback */
  ASSERT_EQ(1, c->active_in_cb[TW_SIDE][0]);
  ASSERT_UEQ(10, c->due_in_cb[TW_SIDE][0]);
  ASSERT_EQ(0, c->active_in_cb[TW_SIDE][1]);
  ASSERT_EQ(0, uvtw_timer_is_active(&c->w));

  c = &twins[2]; /* C */
  ASSERT_EQ(1, uvtw_timer_is_active(&c->w));
  ASSERT_UEQ(10000, c->due_in_cb[TW_SIDE][0]);
  ASSERT_UEQ(c->at[TW_SIDE] + 10000,
             uv_now(&loop) + uvtw_timer_get_due_in(&c->w));
  ASSERT_UEQ(20000, uvtw_timer_get_repeat(&c->w));

  c = &twins[3]; /* D */
  ASSERT_EQ(0, c->again_rv[TW_SIDE]);
  ASSERT_EQ(1, uvtw_timer_is_active(&c->w));
  ASSERT_UEQ(c->at[TW_SIDE] + 20000,
             uv_now(&loop) + uvtw_timer_get_due_in(&c->w));

  c = &twins[4]; /* E */
  ASSERT_EQ(0, c->again_rv[TW_SIDE]);
  ASSERT_EQ(0, uvtw_timer_is_active(&c->w));

  c = &twins[5]; /* F */
  ASSERT_EQ(0, c->again_rv[TW_SIDE]);
  ASSERT_EQ(1, uvtw_timer_is_active(&c->w));
  ASSERT_UEQ(c->at[TW_SIDE] + 10000,
             uv_now(&loop) + uvtw_timer_get_due_in(&c->w));

  c = &twins[6]; /* G */
  ASSERT_EQ(0, uvtw_timer_is_active(&c->w));
  ASSERT_UEQ(5, uvtw_timer_get_repeat(&c->w));
  ASSERT_UEQ(5, c->due_in_cb[TW_SIDE][1]);

  c = &twins[8]; /* I */
  ASSERT_EQ(0, uvtw_timer_is_active(&c->w));

  for (i = 0; i < 9; i++) {
    ASSERT_EQ(0, uvtw_timer_stop(&twins[i].w));
    ASSERT_UV_OK(uv_timer_stop(&twins[i].u));
  }
  teardown();
}


static void outside_callbacks(void) {
  uvtw_timer_t t;
  uv_timer_t u;

  setup();
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_UV_OK(uv_timer_init(&loop, &u));

  /* Never started. */
  ASSERT_EQ(UV_EINVAL, uv_timer_again(&u));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_again(&t));
  uvtw_timer_set_repeat(&t, 50);
  ASSERT_EQ(UV_EINVAL, uvtw_timer_again(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));
  /* A failed start does not count as a start. */
  ASSERT_EQ(UV_EINVAL, uvtw_timer_start(&t, NULL, 10, 10));
  ASSERT_EQ(UV_EINVAL, uvtw_timer_again(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));

  /* Active, repeat 0: nothing changes. */
  ASSERT_EQ(0, uvtw_timer_start(&t, never_cb, 1000, 0));
  ASSERT_UV_OK(uv_timer_start(&u, never_uv_cb, 1000, 0));
  ASSERT_EQ(0, uvtw_timer_again(&t));
  ASSERT_EQ(0, uv_timer_again(&u));
  ASSERT_EQ(1, uvtw_timer_is_active(&t));
  ASSERT_UEQ(1000, uvtw_timer_get_due_in(&t));
  ASSERT_UEQ(uv_timer_get_due_in(&u), uvtw_timer_get_due_in(&t));

  /* Stopped, repeat 0: stays stopped. */
  ASSERT_EQ(0, uvtw_timer_stop(&t));
  ASSERT_EQ(0, uvtw_timer_again(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));

  /* set_repeat does not start; again then starts with timeout = repeat. */
  uvtw_timer_set_repeat(&t, 70);
  ASSERT_UEQ(70, uvtw_timer_get_repeat(&t));
  ASSERT_EQ(0, uvtw_timer_is_active(&t));
  ASSERT_EQ(0, uvtw_timer_again(&t));
  ASSERT_EQ(1, uvtw_timer_is_active(&t));
  ASSERT_UEQ(70, uvtw_timer_get_due_in(&t));

  /* Active with a repeat: again restarts with timeout = repeat. */
  ASSERT_EQ(0, uvtw_timer_start(&t, never_cb, 1000, 50));
  ASSERT_UEQ(1000, uvtw_timer_get_due_in(&t));
  ASSERT_EQ(0, uvtw_timer_again(&t));
  ASSERT_UEQ(50, uvtw_timer_get_due_in(&t));
  ASSERT_EQ(1, uvtw_timer_is_active(&t));

  /* set_repeat on an active timer leaves its deadline alone. */
  uvtw_timer_set_repeat(&t, 400);
  ASSERT_UEQ(50, uvtw_timer_get_due_in(&t));
  ASSERT_EQ(0, uvtw_timer_again(&t));
  ASSERT_UEQ(400, uvtw_timer_get_due_in(&t));

  /* Stopped with a repeat: again starts it. */
  ASSERT_EQ(0, uvtw_timer_stop(&t));
  ASSERT_EQ(0, uvtw_timer_again(&t));
  ASSERT_EQ(1, uvtw_timer_is_active(&t));
  ASSERT_UEQ(400, uvtw_timer_get_due_in(&t));

  ASSERT_EQ(0, uvtw_timer_stop(&t));
  ASSERT_UV_OK(uv_timer_stop(&u));
  uv_close((uv_handle_t*) &u, NULL);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(outside_callbacks),
  TEST_CASE(in_callbacks),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
