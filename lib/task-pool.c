/* SPDX-License-Identifier: MIT */
/* The task node pool: lock-free allocation of task nodes by index, so that
 * an id can name a node without a pointer.
 *
 * Chunk c holds UVTW__CHUNK0 << c nodes and is never moved or freed before
 * the wheel is, so a node's address is stable and the chunk table is read
 * without a lock.  Free nodes sit in batches of up to UVTW__BATCH on a
 * Treiber stack whose head carries an ABA tag: a producer takes a whole
 * batch into its own cache (task-record.c) with one CAS, and gives one
 * back when its cache overflows; the loop thread returns the nodes it
 * ended a batch at a time.  When no batch is free, a producer takes a
 * never-used node by a bump index; only allocating a new chunk takes a
 * mutex.
 *
 * Generations.  An id is (index, generation), and every wheel numbers its
 * nodes from 0, so a generation counted per node would make the first task
 * of every wheel id 1 << UVTW__GEN_BITS | 1.  Instead one process-wide
 * counter per index hands out the generations of that index, to every
 * wheel: no two uses of an index, in any wheel, ever carry the same
 * generation, so an id names exactly one task of one wheel for the life of
 * the process, and is UV_ENOENT on every other wheel.  The counters are not
 * touched per task: a node reserves a block of generations at a time
 * (GEN_FIRST on its first use, so that short-lived wheels waste few, then
 * GEN_BLOCK), one atomic add on the shared counter per block.  With 36
 * generation bits an index serves 2^36 uses in the process; then the nodes
 * of that index are retired (never reused), and their wheels use fresh
 * indices.  The counters live as long as the process, 8 bytes per index
 * that any wheel has ever had, in chunks laid out like a pool's. */

#include <stdlib.h>

#include "task-pool.h"
#include "uvtw-assert.h"


#define GEN_FIRST 64
#define GEN_BLOCK 65536

/* libuv's mutex, not pthread's: the library needs no threads library of
 * its own on any platform.  It has no static initializer, hence the once. */
static uv_once_t gen_lock_once = UV_ONCE_INIT;
static uv_mutex_t gen_lock;
/* Chunk c: the counters of indices CHUNK0 * (2^c - 1) onwards. */
static _Atomic uint64_t* _Atomic gen_chunks[UVTW__CHUNKS];


static void gen_lock_init(void) {
  if (uv_mutex_init(&gen_lock) != 0)
    abort(); /* as libuv's own lock and unlock do on failure */
}


/* Makes sure the counters of chunk c exist (under the pool's grow_lock). */
static int gen_chunk_ensure(unsigned c) {
  _Atomic uint64_t* chunk;
  int err;

  err = 0;
  uv_once(&gen_lock_once, gen_lock_init);
  uv_mutex_lock(&gen_lock);
  if (atomic_load_explicit(&gen_chunks[c], memory_order_relaxed) == NULL) {
    chunk = calloc((size_t) UVTW__CHUNK0 << c, sizeof(*chunk));
    if (chunk == NULL)
      err = UV_ENOMEM;
    else
      atomic_store_explicit(&gen_chunks[c], chunk, memory_order_release);
  }
  uv_mutex_unlock(&gen_lock);
  return err;
}


/* Reserves n generations of the node's index: *gen gets the first,
 * node->gen_end the end.  Returns non-zero if the index has used up its
 * generations. */
static int gen_reserve(uvtw__task_t* node, uint64_t n, uint64_t* gen) {
  _Atomic uint64_t* counter;
  uint64_t offset;
  uint64_t used;
  unsigned c;

  c = uvtw__pool_chunk_of(node->index, &offset);
  /* Published before the pool's chunk that holds this node. */
  counter = &atomic_load_explicit(&gen_chunks[c], memory_order_acquire)[offset];
  /* The counter holds the generations handed out; generation 0 is never. */
  used = atomic_load_explicit(counter, memory_order_relaxed);
  if (used >= UVTW__GEN_MASK - n)
    return 1;
  used = atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
  if (used >= UVTW__GEN_MASK - n)
    return 1; /* lost a race for the last block; the counter stays above */
  *gen = used + 1;
  node->gen_end = used + 1 + n;
  return 0;
}


/* Links nodes[0..n) by free_next into one batch and pushes it. */
void uvtw__pool_give_batch(uvtw__pool_t* pool,
                           uvtw__task_t** nodes,
                           unsigned n) {
  uvtw__task_t* first;
  uint64_t head;
  uint64_t next;
  unsigned i;

  UVTW__ASSERT(n >= 1 && n <= UVTW__BATCH);
  for (i = 0; i + 1 < n; i++)
    atomic_store_explicit(&nodes[i]->free_next, nodes[i + 1]->index + 1,
                          memory_order_relaxed);
  atomic_store_explicit(&nodes[n - 1]->free_next, 0, memory_order_relaxed);
  first = nodes[0];
  head = atomic_load_explicit(&pool->free_head, memory_order_relaxed);
  do {
    atomic_store_explicit(&first->batch_next, (uint32_t) head,
                          memory_order_relaxed);
    next = (((head >> 32) + 1) << 32) | (first->index + 1);
  } while (!atomic_compare_exchange_weak_explicit(&pool->free_head, &head, next,
                                                  memory_order_release,
                                                  memory_order_relaxed));
}


unsigned uvtw__pool_take_batch(uvtw__pool_t* pool, uvtw__task_t** out) {
  uvtw__task_t* node;
  uint64_t head;
  uint64_t next;
  uint32_t link;
  unsigned n;

  head = atomic_load_explicit(&pool->free_head, memory_order_acquire);
  for (;;) {
    if ((uint32_t) head == 0)
      return 0;
    node = uvtw__pool_node_at(pool, (uint32_t) head - 1);
    if (node == NULL)
      UVTW__UNREACHABLE(); /* a listed node's chunk is published */
    /* The ABA tag in the high half makes this CAS fail if the batch was
     * taken and a batch pushed again since `head` was read. */
    next = (((head >> 32) + 1) << 32) |
           atomic_load_explicit(&node->batch_next, memory_order_relaxed);
    if (atomic_compare_exchange_weak_explicit(&pool->free_head, &head, next,
                                              memory_order_acquire,
                                              memory_order_acquire))
      break;
  }
  /* The batch is ours now: nobody else reads its links. */
  for (n = 0; node != NULL; n++) {
    UVTW__ASSERT(n < UVTW__BATCH);
    out[n] = node;
    link = atomic_load_explicit(&node->free_next, memory_order_relaxed);
    node = link == 0 ? NULL : uvtw__pool_node_at(pool, link - 1);
  }
  return n;
}


/* Slow path, under grow_lock: allocates chunks until index i exists.
 * Chunks come from calloc and are not touched here: the kernel's zero
 * pages are faulted in as nodes are first used, so growing never stalls a
 * producer for the whole chunk.  A zero state word is generation 0, which
 * no id carries, so a never-used node answers every cancel with ENOENT. */
static int grow(uvtw__pool_t* pool, uint64_t i) {
  uvtw__task_t* chunk;
  uint64_t capacity;
  void* mem;
  int err;

  err = 0;
  uv_mutex_lock(&pool->grow_lock);
  capacity = atomic_load_explicit(&pool->capacity, memory_order_relaxed);
  while (capacity <= i) {
    if (pool->nchunks == UVTW__CHUNKS) {
      err = UV_ENOMEM;
      break;
    }
    err = gen_chunk_ensure(pool->nchunks);
    if (err != 0)
      break;
    /* One spare node's worth, to start the chunk on a cache line. */
    mem = calloc(((size_t) UVTW__CHUNK0 << pool->nchunks) + 1, sizeof(*chunk));
    if (mem == NULL) {
      err = UV_ENOMEM;
      break;
    }
    pool->chunk_mem[pool->nchunks] = mem;
    chunk = (uvtw__task_t*) (((uintptr_t) mem + 63) & ~(uintptr_t) 63);
    atomic_store_explicit(&pool->chunks[pool->nchunks], chunk,
                          memory_order_release);
    capacity += (uint64_t) UVTW__CHUNK0 << pool->nchunks;
    pool->nchunks++;
    atomic_store_explicit(&pool->capacity, capacity, memory_order_release);
  }
  uv_mutex_unlock(&pool->grow_lock);
  return err;
}


unsigned uvtw__pool_alloc_new(uvtw__pool_t* pool,
                              uvtw__task_t** out,
                              uint64_t* gens,
                              unsigned want) {
  uvtw__task_t* node;
  uint64_t first;
  uint64_t i;
  unsigned n;

  UVTW__ASSERT(want >= 1 && want <= UVTW__BATCH);
  n = 0;
  do {
    /* A run of indices for this caller alone: one RMW on `bump`.  An index
     * whose generations are used up is retired (skipped, never handed out);
     * if the whole run was, the next run: out of memory only when the pool
     * cannot grow. */
    first = atomic_fetch_add_explicit(&pool->bump, want, memory_order_relaxed);
    for (i = first; i < first + want; i++) {
      while (i >= atomic_load_explicit(&pool->capacity, memory_order_acquire))
        if (grow(pool, i) != 0)
          return n;
      node = uvtw__pool_node_at(pool, (uint32_t) i);
      node->index = (uint32_t) i;
      if (gen_reserve(node, GEN_FIRST, &gens[n]) == 0) /* else worn out */
        out[n++] = node;
    }
  } while (n == 0);
  return n;
}


uint64_t uvtw__pool_next_gen(uvtw__task_t* node, uint64_t gen) {
  UVTW__ASSERT(gen < node->gen_end);
  gen++;
  if (gen == node->gen_end && gen_reserve(node, GEN_BLOCK, &gen) != 0)
    return 0; /* retired: its index has no generation left */
  return gen;
}


/* Loop thread: the node has ended and will not be touched again.  It joins
 * a local batch, so that the loop does not fight the producers for the free
 * stack's cache line once per task. */
void uvtw__pool_release(uvtw__pool_t* pool, uvtw__task_t* node) {
  pool->freed[pool->nfreed++] = node;
  if (pool->nfreed == UVTW__BATCH)
    uvtw__pool_flush(pool);
}


void uvtw__pool_flush(uvtw__pool_t* pool) {
  if (pool->nfreed == 0)
    return;
  uvtw__pool_give_batch(pool, pool->freed, pool->nfreed);
  pool->nfreed = 0;
}


int uvtw__pool_init(uvtw__pool_t* pool) {
  unsigned c;

  atomic_init(&pool->free_head, 0);
  atomic_init(&pool->bump, 0);
  atomic_init(&pool->capacity, 0);
  for (c = 0; c < UVTW__CHUNKS; c++) {
    atomic_init(&pool->chunks[c], NULL);
    pool->chunk_mem[c] = NULL;
  }
  pool->nchunks = 0;
  pool->nfreed = 0;
  return uv_mutex_init(&pool->grow_lock);
}


void uvtw__pool_destroy(uvtw__pool_t* pool) {
  unsigned c;

  for (c = 0; c < UVTW__CHUNKS; c++)
    free(pool->chunk_mem[c]);
  uv_mutex_destroy(&pool->grow_lock);
}
