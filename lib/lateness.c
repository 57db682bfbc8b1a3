/* SPDX-License-Identifier: MIT */
/* Lateness: how late the wheel runs its callbacks.  A pass counts each
 * timer it pops in late_bits, by the bit length of its lateness
 * (internal.h, uvtw__late_slot); this file folds the counts into the
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


uint64_t uvtw_lateness_quantile(const uvtw_stats_t* stats, double q) {
  uint64_t total;
  uint64_t rank;
  uint64_t seen;
  /* The product rounded to double on every target: where the FPU holds
   * more precision (x87, on i686), 0.9 * 100 would be a little over 90,
   * and its ceiling 91. */
  volatile double r;
  unsigned i;

  total = 0;
  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    total += stats->lateness[i];
  if (total == 0)
    return 0;
  if (!(q > 0)) /* also NaN */
    q = 0;
  if (q > 1)
    q = 1;
  /* ceil(q * total), in [1, total], without libm. */
  r = q * (double) total;
  rank = (uint64_t) r;
  if ((double) rank < r)
    rank++;
  if (rank < 1)
    rank = 1;
  if (rank > total)
    rank = total;
  for (seen = 0, i = 0; i < UVTW_LATENESS_BUCKETS - 1; i++) {
    seen += stats->lateness[i];
    if (seen >= rank)
      return ((uint64_t) 1 << i) - 1;
  }
  return UINT64_MAX;
}
