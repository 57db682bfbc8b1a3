/* SPDX-License-Identifier: MIT */
/* sizeof(uvtw_timer_t) is at most 64 bytes on x86-64 (a uv_timer_t is 152);
 * its public `void* data` field is the caller's, untouched by the wheel. */

#include <stddef.h>

#include "timer-harness.h"

static int token;
static int fired;


static void timer_cb(uvtw_timer_t* timer) {
  ASSERT_PTR_EQ(&token, timer->data);
  fired++;
}


int main(void) {
  uvtw_timer_t t;

  ASSERT_ULE(sizeof(uvtw_timer_t), 64);
  ASSERT_ULE(sizeof(struct uvtw_timer_s), 64);
  ASSERT_ULT(sizeof(uvtw_timer_t), sizeof(uv_timer_t));

  setup();
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  t.data = &token;
  ASSERT_EQ(0, uvtw_timer_start(&t, timer_cb, 1, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, fired);
  ASSERT_PTR_EQ(&token, t.data);
  teardown(); /* closes the wheel */
  ASSERT_PTR_EQ(&token, t.data);
  return 0;
}
