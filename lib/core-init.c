/* SPDX-License-Identifier: MIT */
/* uvtw__core_init: the wheel's geometry (core.h) set up once per wheel:
 * the tick's reciprocal, the start's level table, the empty lists.  Apart
 * from core.c, which holds what a start, a stop and a pass run. */

#include "core.h"

#include <string.h>


void uvtw__core_init(uvtw__core_t* core, uint64_t tick_ms, uint64_t now_ms) {
  uint64_t magic;
  uint64_t rem;
  unsigned b;
  unsigned l;
  unsigned s;

  UVTW__ASSERT(tick_ms >= 1);
  memset(core, 0, sizeof(*core));
  core->tick_ms = tick_ms;
  core->max_tick = (UINT64_MAX - 1) / tick_ms;
  if (tick_ms > 1) {
    /* The reciprocal: 2^64 (2^l - tick_ms) / tick_ms + 1, by long division
     * one bit at a time (no 128-bit integer on 32-bit targets; once per
     * wheel).  The remainder stays below tick_ms, far below 2^63. */
    l = 64 - (unsigned) __builtin_clzll(tick_ms - 1);
    rem = ((uint64_t) 1 << l) - tick_ms;
    magic = 0;
    for (s = 0; s < 64; s++) {
      rem <<= 1;
      magic <<= 1;
      if (rem >= tick_ms) {
        rem -= tick_ms;
        magic |= 1;
      }
    }
    core->tick_magic = magic + 1;
    core->tick_shift = l - 1;
  }
  /* Level l >= 1 takes bit lengths up to L0_BITS + LN_BITS l, so bit index
   * b (bit length b + 1) is level ceil((b + 1 - L0_BITS) / LN_BITS). */
  for (b = 0; b < UVTW__FILE_MAX_LEN; b++) {
    l = b < UVTW__L0_BITS ? 1
                          : (b + UVTW__LN_BITS - UVTW__L0_BITS) / UVTW__LN_BITS;
    core->file_levels[b].shift = (uint8_t) uvtw__level_shift(l);
    core->file_levels[b].upper_base =
        (uint16_t) uvtw__upper_index(uvtw__slot_base(l));
  }
  core->precascade_chunk = UVTW__PRECASCADE_CHUNK;
  uvtw__core_set_now(core, now_ms / tick_ms);
  for (s = 0; s < UVTW__NSLOTS; s++)
    uvtw__list_init(&core->slots[s]);
  uvtw__list_init(&core->overflow);
  core->overflow_min = UVTW__NO_TICK;
  uvtw__list_init(&core->ready);
  uvtw__list_init(&core->due);
}
