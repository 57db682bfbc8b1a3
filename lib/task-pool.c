/* SPDX-License-Identifier: MIT */
/* The task node pool: lock-free allocation of task nodes by index, so that
 * an id can name a node without a pointer.
 *
 * Chunk c holds UVTW__CHUNK0 << c nodes and is never moved or freed before
 * the wheel is, so a node's address is stable and the chunk table is read
 * without a lock.  Producers pop freed nodes from a Treiber stack whose head
 * carries an ABA tag, or take a never-used node by a bump index; only
 * allocating a new chunk takes a mutex.  The loop thread returns ended
 * nodes in batches: they collect on a private chain, which one CAS pushes
 * on the free list (uvtw__pool_flush).
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

#include <pthread.h>
#include <stdlib.h>

#include "task.h"
#include "uvtw-assert.h"


#define GEN_FIRST 64
#define GEN_BLOCK 65536

static pthread_mutex_t gen_lock = PTHREAD_MUTEX_INITIALIZER;
/* Chunk c: the counters of indices CHUNK0 * (2^c - 1) onwards. */
static _Atomic uint64_t* _Atomic gen_chunks[UVTW__CHUNKS];


static unsigned chunk_of(uint32_t index, uint64_t* offset) {
  uint64_t q;
  unsigned c;

  q = (uint64_t) index / UVTW__CHUNK0 + 1;
  c = 63 - __builtin_clzll(q);
  *offset = index - (uint64_t) UVTW__CHUNK0 * ((1u << c) - 1);
  return c;
}


/* Makes sure the counters of chunk c exist (under the pool's grow_lock). */
static int gen_chunk_ensure(unsigned c) {
  _Atomic uint64_t* chunk;
  int err;

  err = 0;
  pthread_mutex_lock(&gen_lock);
  if (atomic_load_explicit(&gen_chunks[c], memory_order_relaxed) == NULL) {
    chunk = calloc((size_t) UVTW__CHUNK0 << c, sizeof(*chunk));
    if (chunk == NULL)
      err = UV_ENOMEM;
    else
      atomic_store_explicit(&gen_chunks[c], chunk, memory_order_release);
  }
  pthread_mutex_unlock(&gen_lock);
  return err;
}


/* Reserves n generations of the node's index: node->gen is the first,
 * node->gen_end the end.  Returns non-zero if the index has used up its
 * generations. */
static int gen_reserve(uvtw__task_t* node, uint64_t n) {
  _Atomic uint64_t* counter;
  uint64_t offset;
  uint64_t used;
  unsigned c;

  c = chunk_of(node->index, &offset);
  /* Published before the pool's chunk that holds this node. */
  counter = &atomic_load_explicit(&gen_chunks[c], memory_order_acquire)[offset];
  /* The counter holds the generations handed out; generation 0 is never. */
  used = atomic_load_explicit(counter, memory_order_relaxed);
  if (used >= UVTW__GEN_MASK - n)
    return 1;
  used = atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
  if (used >= UVTW__GEN_MASK - n)
    return 1; /* lost a race for the last block; the counter stays above */
  node->gen = used + 1;
  node->gen_end = used + 1 + n;
  return 0;
}


uvtw__task_t* uvtw__pool_node_at(const uvtw__pool_t* pool, uint32_t index) {
  uvtw__task_t* chunk;
  uint64_t offset;
  unsigned c;

  c = chunk_of(index, &offset);
  if (c >= UVTW__CHUNKS)
    return NULL;
  chunk = atomic_load_explicit(&pool->chunks[c], memory_order_acquire);
  if (chunk == NULL)
    return NULL;
  return &chunk[offset];
}


/* Pushes the chain first..last (linked by free_next) on the free list. */
static void free_push(uvtw__pool_t* pool,
                      uvtw__task_t* first,
                      uvtw__task_t* last) {
  uint64_t head;
  uint64_t next;

  head = atomic_load_explicit(&pool->free_head, memory_order_relaxed);
  do {
    atomic_store_explicit(&last->free_next, (uint32_t) head,
                          memory_order_relaxed);
    next = (((head >> 32) + 1) << 32) | (first->index + 1);
  } while (!atomic_compare_exchange_weak_explicit(&pool->free_head, &head,
                                                  next, memory_order_release,
                                                  memory_order_relaxed));
}


static uvtw__task_t* free_pop(uvtw__pool_t* pool) {
  uvtw__task_t* node;
  uint64_t head;
  uint64_t next;

  head = atomic_load_explicit(&pool->free_head, memory_order_acquire);
  while ((uint32_t) head != 0) {
    node = uvtw__pool_node_at(pool, (uint32_t) head - 1);
    if (node == NULL)
      UVTW__UNREACHABLE(); /* a listed node's chunk is published */
    /* The ABA tag in the high half makes this CAS fail if the node was
     * popped and pushed again since `head` was read. */
    next = (((head >> 32) + 1) << 32) |
           atomic_load_explicit(&node->free_next, memory_order_relaxed);
    if (atomic_compare_exchange_weak_explicit(&pool->free_head, &head, next,
                                              memory_order_acquire,
                                              memory_order_acquire))
      return node;
  }
  return NULL;
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


/* A node for a new task: a freed one, else the next never-used one. */
uvtw__task_t* uvtw__pool_alloc(uvtw__pool_t* pool) {
  uvtw__task_t* node;
  uint64_t i;

  node = free_pop(pool);
  if (node != NULL)
    return node;
  do {
    i = atomic_fetch_add_explicit(&pool->bump, 1, memory_order_relaxed);
    while (i >= atomic_load_explicit(&pool->capacity, memory_order_acquire))
      if (grow(pool, i) != 0)
        return NULL;
    node = uvtw__pool_node_at(pool, (uint32_t) i);
    node->index = (uint32_t) i;
  } while (gen_reserve(node, GEN_FIRST) != 0); /* a worn-out index: skip */
  return node;
}


/* Loop thread: the node has ended and will not be touched again.  It joins
 * a local chain that uvtw__pool_flush pushes on the free list with one CAS,
 * so that the loop does not fight the producers for the free list's cache
 * line once per task. */
void uvtw__pool_release(uvtw__pool_t* pool, uvtw__task_t* node) {
  UVTW__ASSERT(node->gen < node->gen_end);
  node->gen++;
  if (node->gen == node->gen_end && gen_reserve(node, GEN_BLOCK) != 0)
    return; /* retired: its index has no generation left */
  atomic_store_explicit(&node->free_next,
                        pool->freed != NULL ? pool->freed->index + 1 : 0,
                        memory_order_relaxed);
  if (pool->freed == NULL)
    pool->freed_last = node;
  pool->freed = node;
}


void uvtw__pool_flush(uvtw__pool_t* pool) {
  if (pool->freed == NULL)
    return;
  free_push(pool, pool->freed, pool->freed_last);
  pool->freed = NULL;
  pool->freed_last = NULL;
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
  pool->freed = NULL;
  pool->freed_last = NULL;
  return uv_mutex_init(&pool->grow_lock);
}


void uvtw__pool_destroy(uvtw__pool_t* pool) {
  unsigned c;

  for (c = 0; c < UVTW__CHUNKS; c++)
    free(pool->chunk_mem[c]);
  uv_mutex_destroy(&pool->grow_lock);
}
