/* SPDX-License-Identifier: MIT */
/* The task node pool (task-pool.c): nodes by index, lock-free. */

#ifndef UVTW_TASK_POOL_H
#define UVTW_TASK_POOL_H

#include <stdatomic.h>
#include <stdint.h>

#include <uv.h>

#include "atomics.h"
#include "uvtw.h"

typedef struct uvtw__task_s uvtw__task_t;
typedef struct uvtw__work_s uvtw__work_t;

/* An id is index << UVTW__GEN_BITS | generation: the node's index in its
 * wheel's pool, and a generation that no other use of that index, in any
 * wheel of the process, ever carries (see task-pool.c).  Generation 0 is
 * never issued, so id 0 and a never-used node (state word 0) name nothing. */
#define UVTW__INDEX_BITS 28
#define UVTW__GEN_BITS (64 - UVTW__INDEX_BITS)
#define UVTW__GEN_MASK (((uint64_t) 1 << UVTW__GEN_BITS) - 1)

/* Chunk c holds UVTW__CHUNK0 << c nodes, so 20 chunk pointers address
 * 256 * (2^20 - 1), just under 2^28, nodes, and the table never moves
 * (lock-free lookup). */
#define UVTW__CHUNK0 256u
#define UVTW__CHUNKS 20

_Static_assert((uint64_t) UVTW__CHUNK0*((1u << UVTW__CHUNKS) - 1) <=
                   (uint64_t) 1 << UVTW__INDEX_BITS,
               "every node index fits in an id");

/* Free nodes travel in batches of up to UVTW__BATCH: producers take and
 * give back a batch with one CAS, and the loop returns the nodes it ended
 * a batch at a time. */
#define UVTW__BATCH 32

typedef struct uvtw__pool_s {
  /* Stack of free batches: (ABA tag << 32) | (index + 1 of the head node
   * of the top batch). */
  _Atomic uint64_t free_head;
  UVTW__PAD(pad_); /* chunks[] is read by every cancel: not on that line */
  uvtw__task_t* _Atomic chunks[UVTW__CHUNKS];
  void* chunk_mem[UVTW__CHUNKS]; /* what calloc returned, under grow_lock */
  _Atomic uint64_t bump;         /* next never-used node index */
  _Atomic uint64_t capacity;     /* nodes in the published chunks */
  uv_mutex_t grow_lock;          /* slow path only: allocating a chunk */
  unsigned nchunks;              /* under grow_lock */
  /* Loop thread only: released, not yet on the free stack. */
  unsigned nfreed;
  uvtw__task_t* freed[UVTW__BATCH];
} uvtw__pool_t;

/* A task node: three cache lines, laid out by who writes them, so that a
 * loop task moves one line between threads on its way in (the first) and
 * the loop keeps the rest.  192 bytes on LP64. */
struct uvtw__task_s {
  /* Line 1: what a submit writes and the loop reads, and the state that
   * cancels race on.  gen << 16 | flags | state (task-state.h); every contended
   * transition is one CAS.  A free node's word carries the generation of
   * its next use. */
  _Alignas(UVTW__LINE) _Atomic uint64_t state;
  /* Until the loop takes the task in: the queue slot that holds its id
   * (a cancel that takes it back marks the slot).  After: the link of a
   * notice on the wheel's stack, for a cancel made without a record. */
  union {
    _Atomic uint64_t* slot;
    uvtw__task_t* _Atomic queue_next;
  } q;
  uvtw_task_cb cb;
  void* arg;
  uint64_t deadline_ms; /* uv_hrtime ms at submit + delay, saturated */
  uint64_t repeat_ms;
  /* Free batches (task-pool.c): index + 1 of the next node of the batch,
   * and in a batch's first node, of the next batch's; 0 at the end. */
  _Atomic uint32_t free_next;
  _Atomic uint32_t batch_next;
  uint32_t index;

  /* Line 2, loop thread only: filed in the wheel while the task waits. */
  uvtw_timer_t timer;

  /* Line 3, loop thread only (gen_end also by the one thread that owns the
   * node while it is free). */
  uint64_t gen_end;   /* end of the generations reserved for its index */
  uvtw__work_t* work; /* while on the threadpool */
  uint8_t location;   /* wheel, pool, final list or none */
  uint8_t taken_in;   /* counted in `accepted` once */
  uint8_t held;       /* counted in the loop's `held` */
};

int uvtw__pool_init(uvtw__pool_t* pool);
/* Frees the chunks. */
void uvtw__pool_destroy(uvtw__pool_t* pool);

/* The chunk that holds index, and the index's offset in it. */
static inline unsigned uvtw__pool_chunk_of(uint32_t index, uint64_t* offset) {
  uint64_t q;
  unsigned c;

  q = (uint64_t) index / UVTW__CHUNK0 + 1;
  c = 63 - (unsigned) __builtin_clzll(q);
  *offset = index - (uint64_t) UVTW__CHUNK0 * ((1u << c) - 1);
  return c;
}


/* The node with this index, or NULL if its chunk does not exist (an id
 * that was never issued).  Any thread. */
static inline uvtw__task_t* uvtw__pool_node_at(const uvtw__pool_t* pool,
                                               uint32_t index) {
  uvtw__task_t* chunk;
  uint64_t offset;
  unsigned c;

  c = uvtw__pool_chunk_of(index, &offset);
  if (c >= UVTW__CHUNKS)
    return NULL;
  chunk = atomic_load_explicit(&pool->chunks[c], memory_order_acquire);
  if (chunk == NULL)
    return NULL;
  return &chunk[offset];
}


/* Up to `want` (1..UVTW__BATCH) never-used nodes (zeroed) into out[],
 * with the first generation of each one's index in gens[]; returns how
 * many, 0 when out of memory (or 2^28 nodes).  Any thread. */
unsigned uvtw__pool_alloc_new(uvtw__pool_t* pool,
                              uvtw__task_t** out,
                              uint64_t* gens,
                              unsigned want);

/* Pops one free batch into out[] (room for UVTW__BATCH); returns its
 * length, 0 if none is free.  Any thread. */
unsigned uvtw__pool_take_batch(uvtw__pool_t* pool, uvtw__task_t** out);

/* Pushes n (1..UVTW__BATCH) free nodes as one batch.  Any thread. */
void uvtw__pool_give_batch(uvtw__pool_t* pool,
                           uvtw__task_t** nodes,
                           unsigned n);

/* The generation that the next use of an ended node carries, whose last
 * use carried `gen`; 0 if its index has used up its generations (the node
 * is retired: never handed out again).  Called by the one thread that
 * owns the ended node. */
uint64_t uvtw__pool_next_gen(uvtw__task_t* node, uint64_t gen);

/* Loop thread: a released node (already given its next generation) joins
 * the loop's batch, which goes on the free stack when full, or at
 * uvtw__pool_flush. */
void uvtw__pool_release(uvtw__pool_t* pool, uvtw__task_t* node);
void uvtw__pool_flush(uvtw__pool_t* pool);

#endif /* UVTW_TASK_POOL_H */
