/* SPDX-License-Identifier: MIT */
/* uvtw__mul_div_ceil(a, b, d), the pre-cascade's quota ceil(a * b / d) in
 * 64-bit arithmetic, against a reference that divides the exact 128-bit
 * product bit by bit: at the limits of its domain (a < 2^32, b < d <=
 * 2^47), where a * b takes up to 79 bits, and at random points inside it.
 * The core reaches the function only after a jump of more than 2^32 ticks
 * past a crowded slot, so it is tested here on its own.  On targets with
 * unsigned __int128 the reference is checked against it too. */

#include "core.h"
#include "test.h"


/* ceil(a * b / d) through a 128-bit product (hi, lo) and long division;
 * independent of the function's 16-bit split. */
static uint64_t reference(uint32_t a, uint64_t b, uint64_t d) {
  uint64_t p0;
  uint64_t p1;
  uint64_t hi;
  uint64_t lo;
  uint64_t q;
  uint64_t r;
  uint64_t bit;
  int i;

  p0 = (uint64_t) a * (b & 0xffffffffu);
  p1 = (uint64_t) a * (b >> 32);
  lo = p0 + (p1 << 32);
  hi = (p1 >> 32) + (lo < p0);
  /* + d - 1, to round up. */
  lo += d - 1;
  hi += lo < d - 1;
  q = 0;
  r = 0;
  for (i = 127; i >= 0; i--) {
    bit = i >= 64 ? (hi >> (i - 64)) & 1 : (lo >> i) & 1;
    r = (r << 1) | bit; /* r < d <= 2^47: no overflow */
    if (r >= d) {
      r -= d;
      ASSERT(i < 64); /* the quotient is <= a */
      q |= (uint64_t) 1 << i;
    }
  }
#ifdef __SIZEOF_INT128__
  ASSERT_UEQ(q, (uint64_t) (((unsigned __int128) a * b + d - 1) / d));
#endif
  return q;
}


static void check(uint32_t a, uint64_t b, uint64_t d) {
  uint64_t want;
  uint64_t got;

  want = reference(a, b, d);
  got = uvtw__mul_div_ceil(a, b, d);
  if (got != want) {
    fprintf(stderr,
            "uvtw__mul_div_ceil(%" PRIu32 ", %" PRIu64 ", %" PRIu64
            ") = %" PRIu64 ", want %" PRIu64 "\n",
            a, b, d, got, want);
    abort();
  }
  ASSERT_ULE(got, a);
}


int main(void) {
  static const uint32_t as[] = {
      0, 1, 2, 0xffff, 0x10000, 0x10001, 0x7fffffff, 0xfffffffe, 0xffffffff,
  };
  static const uint64_t ds[] = {
      1,
      2,
      3,
      0xffff,
      0x10000,
      0xffffffffull,
      0x100000000ull,
      0x100000001ull,
      (uint64_t) 1 << 34,
      ((uint64_t) 1 << 35) - 1,
      (uint64_t) 1 << 35,
      ((uint64_t) 1 << 47) - 1,
      (uint64_t) 1 << 47,
  };
  uint64_t seed;
  uint64_t d;
  uint64_t b;
  size_t i;
  size_t j;
  int k;

  /* Every a against b at the bottom, middle and top of [0, d). */
  for (i = 0; i < sizeof(as) / sizeof(as[0]); i++) {
    for (j = 0; j < sizeof(ds) / sizeof(ds[0]); j++) {
      d = ds[j];
      check(as[i], 0, d);
      check(as[i], d - 1, d);
      check(as[i], d / 2, d);
      if (d > 2) {
        check(as[i], 1, d);
        check(as[i], d - 2, d);
        check(as[i], d / 2 + 1, d);
      }
      if (d > ((uint64_t) 1 << 32) + 1)
        check(as[i], ((uint64_t) 1 << 32) + 1, d); /* the core's branch */
    }
  }
  /* Random points, with d spread over its bit lengths. */
  seed = 12345;
  for (k = 0; k < 200000; k++) {
    d = test_splitmix64(&seed) >> (17 + test_splitmix64(&seed) % 47);
    if (d == 0)
      d = 1;
    b = test_splitmix64(&seed) % d;
    check((uint32_t) test_splitmix64(&seed), b, d);
  }
  /* The core's own case: elapsed > 2^32 ticks, left <= 2^34. */
  check(0xffffffff, ((uint64_t) 1 << 34) - 1, ((uint64_t) 1 << 35) - 1);
  return 0;
}
