/* SPDX-License-Identifier: MIT */
/* Helpers: logging and allocation. */

#include "server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void logf_(const char* fmt, ...) {
  va_list ap;

  fputs("uvtw-echo-server: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}


void* xmalloc(size_t n) {
  void* p = malloc(n);

  if (p == NULL) {
    logf_("out of memory");
    abort();
  }
  return p;
}
