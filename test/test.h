/* SPDX-License-Identifier: MIT */
/* Assertions for uvtw's tests: each prints both operands, file and line, and
 * aborts, so CTest reports the test as failed.  No harness: every test file
 * is its own program with a main() that returns 0 on success. */

#ifndef UVTW_TEST_H
#define UVTW_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define ASSERT_OP(a, op, b, type, fmt)                                        \
  do {                                                                        \
    type assert_a_ = (type) (a);                                              \
    type assert_b_ = (type) (b);                                              \
    if (!(assert_a_ op assert_b_)) {                                          \
      fprintf(stderr,                                                         \
              "%s:%d: assertion failed: %s %s %s (" fmt " %s " fmt ")\n",     \
              __FILE__, __LINE__, #a, #op, #b, assert_a_, #op, assert_b_);    \
      abort();                                                                \
    }                                                                         \
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
#define ASSERT(expr)                                                          \
  do {                                                                        \
    if (!(expr)) {                                                            \
      fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__,    \
              #expr);                                                         \
      abort();                                                                \
    }                                                                         \
  } while (0)

/* uv_* calls that must succeed: prints uv_err_name on failure. */
#define ASSERT_UV_OK(expr)                                                    \
  do {                                                                        \
    int assert_r_ = (expr);                                                   \
    if (assert_r_ != 0) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %d (%s)\n", __FILE__, __LINE__,      \
              #expr, assert_r_, assert_r_ < 0 ? uv_err_name(assert_r_) : "?"); \
      abort();                                                                \
    }                                                                         \
  } while (0)

#endif /* UVTW_TEST_H */
