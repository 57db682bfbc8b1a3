/* SPDX-License-Identifier: MIT */
/* Internal invariant checks.  UVTW__ASSERT(expr) stops the program with the
 * file and line when expr is false; it is active unless NDEBUG is defined
 * (the sanitizer builds keep it active, see CMakeLists.txt), and evaluates
 * nothing otherwise.  UVTW__UNREACHABLE() marks a point that a broken
 * invariant alone could reach: it always aborts, as libuv's UNREACHABLE()
 * does, instead of turning the broken invariant into undefined behaviour.
 * (Not named assert.h: lib/ is on the tests' include path, where it would
 * shadow <assert.h>.) */

#ifndef UVTW_ASSERT_H
#define UVTW_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

__attribute__((noreturn, unused)) static void uvtw__abort_at(const char* file,
                                                             int line,
                                                             const char* what) {
  fprintf(stderr, "%s:%d: %s\n", file, line, what);
  fflush(stderr);
  abort();
}

#ifdef NDEBUG
# define UVTW__ASSERT(expr) ((void) sizeof(!(expr)))
#else
# define UVTW__ASSERT(expr)                                                    \
  ((expr) ? (void) 0                                                           \
          : uvtw__abort_at(__FILE__, __LINE__, "assertion failed: " #expr))
#endif

#define UVTW__UNREACHABLE()                                                    \
 uvtw__abort_at(__FILE__, __LINE__, "unreachable code reached")

#endif /* UVTW_ASSERT_H */
