/* SPDX-License-Identifier: MIT */
/* Prints the libuv that this build runs with, and checks that it is the
 * one its headers come from: the suite is run against several libuv
 * releases (run.sh), and a test binary that loaded another libuv.so.1
 * than intended (a missing rpath) would test the wrong one.  uvtw itself
 * works with any libuv from 1.44 on, whatever it was compiled against; it
 * reads uv_version() at run time. */

#include <stdio.h>

#include <uv.h>

#include "test.h"


int main(void) {
  printf("libuv %s at run time (headers %d.%d.%d)\n", uv_version_string(),
         UV_VERSION_MAJOR, UV_VERSION_MINOR, UV_VERSION_PATCH);
  fflush(stdout);
  ASSERT_UEQ(UV_VERSION_HEX, uv_version());
  ASSERT_UGE(uv_version(), 0x012c00); /* 1.44.0, the oldest uvtw supports */
  return 0;
}
