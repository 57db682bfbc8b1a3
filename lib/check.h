/* SPDX-License-Identifier: MIT */
/* The one rule of the checkers (core-check.c, task-check.c): a broken
 * invariant is printed to `out` (a FILE*, NULL for silence) with the
 * checker's name, the rule and the numbers that broke it, and the checker
 * returns -1. */

#ifndef UVTW_CHECK_H
#define UVTW_CHECK_H

#include <stdio.h>

#define UVTW__CHECK(who, cond, ...)                                            \
 do {                                                                          \
  if (!(cond)) {                                                               \
   if (out != NULL) {                                                          \
    fprintf(out, "%s: %s: ", who, #cond);                                      \
    fprintf(out, __VA_ARGS__);                                                 \
    fputc('\n', out);                                                          \
   }                                                                           \
   return -1;                                                                  \
  }                                                                            \
 } while (0)

#endif /* UVTW_CHECK_H */
