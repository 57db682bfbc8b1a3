/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the fuzzer's bytes choose the operations that
 * core-harness.h applies to the wheel and to the reference model.  Built
 * with clang (-fsanitize=fuzzer,address,undefined) when clang is present;
 * CTest runs it for a bounded time (test/extra-tests.cmake). */

#include <stddef.h>
#include <stdint.h>

#include "core-harness.h"

typedef struct {
  const uint8_t* data;
  size_t size;
  size_t pos;
} byte_source_t;


/* Enough bytes for the bound, little-endian; zeros once the input ends. */
static uint64_t draw_bytes(harness_t* h, uint64_t bound) {
  byte_source_t* src;
  uint64_t value;
  int bytes;
  int i;

  src = h->source;
  if (bound <= 1)
    return 0;
  bytes = bound <= 256 ? 1 : bound <= 65536 ? 2 : 8;
  value = 0;
  for (i = 0; i < bytes && src->pos < src->size; i++)
    value |= (uint64_t) src->data[src->pos++] << (8 * i);
  return value % bound;
}


static harness_t harness;


int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const uint64_t ticks[] = {1, 7, 100};
  byte_source_t src;
  harness_t* h;
  uint64_t tick;
  uint64_t start;
  uint32_t chunk;

  h = &harness;
  src.data = data;
  src.size = size;
  src.pos = 0;
  h->source = &src;
  h->draw = draw_bytes;
  tick = ticks[draw_bytes(h, 3)];
  start = draw_bytes(h, UINT64_MAX);
  if (draw_bytes(h, 2))
    start >>= 20; /* mostly ordinary clocks, sometimes near the end */
  /* Half the inputs pre-cascade in steps of 1 or 2 timers, so that every
   * step is checked on its own. */
  chunk = draw_bytes(h, 2) ? 0 : (uint32_t) (1 + draw_bytes(h, 2));
  h_init(h, tick, start, chunk);
  while (src.pos < src.size)
    h_step(h);
  return 0;
}
