/* SPDX-License-Identifier: MIT */
/* Assertions for uvtw's tests: each prints both operands, file and line, and
 * aborts, so CTest reports the test as failed.  No harness: every test file
 * is its own program with a main() that returns 0 on success. */

#ifndef UVTW_TEST_H
#define UVTW_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#define ASSERT_OP(a, op, b, type, fmt)                                         \
 do {                                                                          \
  type assert_a_ = (type) (a);                                                 \
  type assert_b_ = (type) (b);                                                 \
  if (!(assert_a_ op assert_b_)) {                                             \
   fprintf(stderr, "%s:%d: assertion failed: %s %s %s (" fmt " %s " fmt ")\n", \
           __FILE__, __LINE__, #a, #op, #b, assert_a_, #op, assert_b_);        \
   abort();                                                                    \
  }                                                                            \
 } while (0)

#define ASSERT_EQ(a, b) ASSERT_OP(a, ==, b, int64_t, "%" PRId64)
#define ASSERT_NE(a, b) ASSERT_OP(a, !=, b, int64_t, "%" PRId64)
#define ASSERT_LT(a, b) ASSERT_OP(a, <, b, int64_t, "%" PRId64)
#define ASSERT_LE(a, b) ASSERT_OP(a, <=, b, int64_t, "%" PRId64)
#define ASSERT_GT(a, b) ASSERT_OP(a, >, b, int64_t, "%" PRId64)
#define ASSERT_GE(a, b) ASSERT_OP(a, >=, b, int64_t, "%" PRId64)
#define ASSERT_UEQ(a, b) ASSERT_OP(a, ==, b, uint64_t, "%" PRIu64)
#define ASSERT_ULT(a, b) ASSERT_OP(a, <, b, uint64_t, "%" PRIu64)
#define ASSERT_ULE(a, b) ASSERT_OP(a, <=, b, uint64_t, "%" PRIu64)
#define ASSERT_UGE(a, b) ASSERT_OP(a, >=, b, uint64_t, "%" PRIu64)
#define ASSERT_PTR_EQ(a, b) ASSERT_OP(a, ==, b, const void*, "%p")
#define ASSERT_PTR_NE(a, b) ASSERT_OP(a, !=, b, const void*, "%p")
#define ASSERT(expr)                                                           \
 do {                                                                          \
  if (!(expr)) {                                                               \
   fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__,        \
           #expr);                                                             \
   abort();                                                                    \
  }                                                                            \
 } while (0)

/* Reproducible pseudo-random numbers, on the caller's state, so that a
 * seed replays a run: xorshift64 (shifts 13, 7, 17; the state must not be
 * 0) and splitmix64 (any state). */
static inline uint64_t test_xorshift64(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}


static inline uint64_t test_splitmix64(uint64_t* s) {
  uint64_t z;

  z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}


/* Sets an environment variable for libuv to read (UV_THREADPOOL_SIZE)
 * with getenv().  uv_os_setenv is setenv() on unix; on Windows it changes
 * only the process's environment block, not the C runtime's copy that
 * getenv() reads, which _putenv_s changes as well. */
static inline void test_setenv(const char* name, const char* value) {
#ifdef _WIN32
  if (_putenv_s(name, value) != 0)
    abort();
#else
  if (uv_os_setenv(name, value) != 0)
    abort();
#endif
}


/* uv_* calls that must succeed: prints uv_err_name on failure. */
#define ASSERT_UV_OK(expr)                                                     \
 do {                                                                          \
  int assert_r_ = (expr);                                                      \
  if (assert_r_ != 0) {                                                        \
   fprintf(stderr, "%s:%d: %s failed: %d (%s)\n", __FILE__, __LINE__, #expr,   \
           assert_r_, assert_r_ < 0 ? uv_err_name(assert_r_) : "?");           \
   abort();                                                                    \
  }                                                                            \
 } while (0)

#endif /* UVTW_TEST_H */
