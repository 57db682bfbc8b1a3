/* SPDX-License-Identifier: MIT */
/* The task node pool (task-pool.c): nodes by index, lock-free. */

#ifndef UVTW_TASK_POOL_H
#define UVTW_TASK_POOL_H

#include <stdatomic.h>
#include <stdint.h>

#include <uv.h>

typedef struct uvtw__task_s uvtw__task_t;

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

_Static_assert((uint64_t) UVTW__CHUNK0 * ((1u << UVTW__CHUNKS) - 1) <=
                   (uint64_t) 1 << UVTW__INDEX_BITS,
               "every node index fits in an id");

typedef struct uvtw__pool_s {
  /* Free nodes: (ABA tag << 32) | (index + 1). */
  _Atomic uint64_t free_head;
  uvtw__task_t* _Atomic chunks[UVTW__CHUNKS]; /* 64-byte aligned */
  void* chunk_mem[UVTW__CHUNKS]; /* what calloc returned, under grow_lock */
  _Atomic uint64_t bump;     /* next never-used node index */
  _Atomic uint64_t capacity; /* nodes in the published chunks */
  uv_mutex_t grow_lock;      /* slow path only: allocating a chunk */
  unsigned nchunks;          /* under grow_lock */
  /* Loop thread only: released, not yet on the free list. */
  uvtw__task_t* freed;
  uvtw__task_t* freed_last;
} uvtw__pool_t;

int uvtw__pool_init(uvtw__pool_t* pool);
/* Frees the chunks; every node must be free. */
void uvtw__pool_destroy(uvtw__pool_t* pool);

/* The node with this index, or NULL if its chunk does not exist (an id
 * that was never issued).  Any thread. */
uvtw__task_t* uvtw__pool_node_at(const uvtw__pool_t* pool, uint32_t index);

/* A node for a new task: a freed one, else the next never-used one (zeroed:
 * its state word is 0).  node->gen is the generation this use carries.
 * NULL when out of memory.  Any thread. */
uvtw__task_t* uvtw__pool_alloc(uvtw__pool_t* pool);

/* Loop thread: returns an ended node, and moves it to its next generation;
 * it becomes reusable at the next uvtw__pool_flush.  A node whose index has
 * used up its generations is retired instead: never handed out again. */
void uvtw__pool_release(uvtw__pool_t* pool, uvtw__task_t* node);
void uvtw__pool_flush(uvtw__pool_t* pool);

#endif /* UVTW_TASK_POOL_H */
