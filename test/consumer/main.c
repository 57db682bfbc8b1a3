/* SPDX-License-Identifier: MIT */
/* A program outside the uvtw tree, built against an installed uvtw: one
 * timer fires once on a real loop. */

#include <stdio.h>

#include <uvtw.h>

static int fired;


static void on_timer(uvtw_timer_t* timer) {
  fired++;
  uvtw_wheel_close(uvtw_timer_wheel(timer), NULL);
}


int main(void) {
  uv_loop_t loop;
  uvtw_wheel_t* wheel;
  uvtw_timer_t timer;

  if (uv_loop_init(&loop) != 0 || uvtw_wheel_new(&loop, NULL, &wheel) != 0)
    return 1;
  uvtw_timer_init(wheel, &timer);
  uvtw_timer_start(&timer, on_timer, 1, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (fired != 1 || uv_loop_close(&loop) != 0)
    return 1;
  printf("consumer: ok\n");
  return 0;
}
