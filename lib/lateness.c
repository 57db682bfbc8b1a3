/* SPDX-License-Identifier: MIT */
/* Lateness: how late the wheel runs its callbacks.  A pass counts each
 * timer it pops in late_bits, by the bit length of its lateness
 * (core.h, uvtw__late_slot); this file folds the counts into the
 * public buckets, and reads a quantile from them. */

#include "internal.h"


uint64_t uvtw__lateness_fold(const uvtw_wheel_t* wheel, uint64_t* lateness) {
  uint64_t sum;
  unsigned i;

  sum = 0;
  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    sum += lateness[i] = wheel->late_bits[i];
  for (; i < 64; i++) {
    lateness[UVTW_LATENESS_BUCKETS - 1] += wheel->late_bits[i];
    sum += wheel->late_bits[i];
  }
  return sum;
}


/* A count of callbacks that may pass 2^64 (16 buckets of up to 2^64 - 1
 * each): hi * 2^64 + lo, hi at most 15.  Two words rather than
 * unsigned __int128, which i686 and 32-bit Arm lack. */
typedef struct {
  uint64_t hi;
  uint64_t lo;
} wide_t;


static void wide_add(wide_t* w, uint64_t n) {
  w->lo += n;
  w->hi += w->lo < n;
}


static int wide_less(wide_t a, wide_t b) {
  return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}


uint64_t uvtw_lateness_quantile(const uvtw_stats_t* stats, double q) {
  wide_t total;
  wide_t rank;
  wide_t seen;
  /* The product rounded to double on every target: where the FPU holds
   * more precision (x87, on i686), 0.9 * 100 would be a little over 90,
   * and its ceiling 91. */
  volatile double r;
  double low;
  unsigned i;

  total.hi = total.lo = 0;
  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    wide_add(&total, stats->lateness[i]);
  if (total.hi == 0 && total.lo == 0)
    return 0;
  if (!(q > 0)) /* also NaN */
    q = 0;
  if (q > 1)
    q = 1;
  /* ceil(q * total), in [1, total], without libm.  r is at most 2^68, so
   * r / 2^64 (exact: a power of two) converts to at most 16, and what is
   * left below 2^64 is exact in a double and converts in range. */
  r = q * ((double) total.hi * 0x1p64 + (double) total.lo);
  rank.hi = (uint64_t) (r * 0x1p-64);
  low = r - (double) rank.hi * 0x1p64;
  rank.lo = (uint64_t) low;
  if ((double) rank.lo < low)
    rank.lo++; /* low has a fraction only below 2^53: no carry */
  if (rank.hi == 0 && rank.lo == 0)
    rank.lo = 1;
  if (wide_less(total, rank))
    rank = total;
  seen.hi = seen.lo = 0;
  for (i = 0; i < UVTW_LATENESS_BUCKETS - 1; i++) {
    wide_add(&seen, stats->lateness[i]);
    if (!wide_less(seen, rank))
      return ((uint64_t) 1 << i) - 1;
  }
  return UINT64_MAX;
}
