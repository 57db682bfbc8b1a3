/* SPDX-License-Identifier: MIT */
/* A thread's record of a wheel: how uvtw_submit and uvtw_cancel find it
 * (enter, leave), its cache of free nodes, its queue of ids (the owner's
 * half: room, and the loop's: blocks handed back), and the counts that
 * uvtw_wheel_pending and close read from all records.
 *
 * Records.  A thread gets its record of a wheel on its first submit or
 * cancel there (malloc: the record with its 64-node cache, and one 4 KiB
 * block; more blocks only while the loop lags behind that thread), and
 * finds it again through a thread-local cache of the last 4 wheels it
 * used, keyed by the wheel's address and a process-wide serial (a new
 * wheel at a freed wheel's address is not taken for it).  Records are
 * never freed before the wheel, so a thread may exit at any time; its
 * record stays on the wheel's list with the nodes in its cache, and a
 * later thread whose thread-local block lands at the same address (glibc
 * reuses an exited thread's) adopts it.  So a wheel holds one record per
 * thread-local address that ever called it, at most.
 *
 * Counting.  A live task is one submitted and not ended.  Each record
 * counts its thread's submits and cancels, the loop its own ends, so no
 * line is written by every task's producer and its consumer:
 *   live = sum(submitted) - sum(ended) - loop_ended - ended_shared,
 * with the ends read before the submits, so that an end is never counted
 * without its submit, and again after them, so that the count is exact
 * unless tasks ended meanwhile (uvtw__records_live).  With max_tasks set,
 * a submit also reserves its place in `reserved` by one CAS and every end
 * returns it: exact, at the price of one shared line.  The stats count a
 * task cancelled before the loop took it in by its canceller (`taken_back`
 * per record, `taken_back_shared`), at once.
 */

#include "task-record.h"

/* Blocks the loop hands back to a record's owner, at most, once read (a
 * queue that grew while the loop was away shrinks back once it caught up):
 * the loop frees the others. */
#define SPARE_BLOCKS 2

/* Serials of wheels, process-wide; 0 is never one. */
static _Atomic uint64_t wheel_serials;

/* This thread's state (task-record.h). */
_Thread_local uvtw__tls_t uvtw__tls __attribute__((tls_model("initial-exec")));


/* A zeroed block for the owner's queue: a consumed one, or a new one. */
static uvtw__block_t* block_new(uvtw__record_t* rec) {
  uvtw__block_t* b;

  if (rec->spare == NULL)
    rec->spare =
        atomic_exchange_explicit(&rec->returned, NULL, memory_order_acquire);
  b = rec->spare;
  if (b != NULL) {
    rec->spare = atomic_load_explicit(&b->next, memory_order_relaxed);
    uvtw__own_add(&rec->blocks_reused, 1, memory_order_relaxed);
  } else {
    b = uvtw__line_alloc(sizeof(*b));
    if (b == NULL)
      return NULL;
    atomic_fetch_add_explicit(&rec->nblocks, 1, memory_order_relaxed);
  }
  atomic_store_explicit(&b->next, NULL, memory_order_relaxed);
  return b;
}


/* A new record of the calling thread, already marked inside a call
 * (`calls` 1), pushed on the wheel's list; NULL if out of memory. */
static uvtw__record_t* record_new(uvtw_wheel_t* wheel) {
  uvtw__record_t* rec;

  rec = uvtw__line_alloc(sizeof(*rec));
  if (rec == NULL)
    return NULL;
  rec->wblock = block_new(rec);
  if (rec->wblock == NULL) {
    uvtw__line_free(rec);
    return NULL;
  }
  rec->rblock = rec->wblock;
  atomic_init(&rec->owner, &uvtw__tls.token);
  atomic_init(&rec->calls, 1);
  rec->next = atomic_load_explicit(&wheel->tasks.records, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &wheel->tasks.records, &rec->next, rec, memory_order_release,
      memory_order_relaxed))
    ;
  return rec;
}


/* enter's search, when the wheel is not the one this thread used last. */
__attribute__((noinline)) uvtw__record_t* uvtw__record_enter_search(
    uvtw_wheel_t* wheel) {
  uvtw__record_t* rec;
  uvtw__tasks_t* tasks;
  uvtw__tls_record_t hit;
  unsigned i;

  tasks = &wheel->tasks;
  for (i = 1; i < TLS_RECORDS; i++)
    if (uvtw__tls.records[i].wheel == wheel &&
        uvtw__tls.records[i].serial == tasks->serial)
      break;
  if (i < TLS_RECORDS) {
    rec = uvtw__tls.records[i].rec;
    record_enter(rec);
  } else {
    /* Not cached.  Inside the wheel from here on by the shared count (its
     * barrier is the seq_cst read-modify-write), so that close waits for
     * this search; once it has begun, no record is made any more. */
    atomic_fetch_add_explicit(&tasks->calls_shared, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&tasks->close_word, memory_order_seq_cst) &
        CLOSING)
      return NULL;
    /* This thread's record, or one left by an exited thread whose
     * thread-local block this thread now has (so it is this thread's
     * too), or a new one. */
    i = TLS_RECORDS - 1;
    for (rec = atomic_load_explicit(&tasks->records, memory_order_acquire);
         rec != NULL; rec = rec->next)
      if (atomic_load_explicit(&rec->owner, memory_order_relaxed) ==
          &uvtw__tls.token)
        break;
    if (rec != NULL) {
      /* Adopted (or ours, evicted from the thread-local cache): the mark
       * by a read-modify-write, which reads the last leave of the thread
       * that used the record before (an exited one, when adopted) and
       * acquires what it wrote there, its cache and queue included. */
      atomic_fetch_add_explicit(&rec->calls, 1, memory_order_acq_rel);
    } else if ((rec = record_new(wheel)) == NULL) {
      return NULL; /* inside by the shared count until leave */
    }
    /* Marked in the record, which is on the list: the shared count may go
     * (release: close reads the count first, then the records). */
    atomic_fetch_sub_explicit(&tasks->calls_shared, 1, memory_order_release);
  }
  hit.wheel = wheel;
  hit.serial = tasks->serial;
  hit.rec = rec;
  memmove(&uvtw__tls.records[1], &uvtw__tls.records[0],
          i * sizeof(uvtw__tls.records[0]));
  uvtw__tls.records[0] = hit;
  return rec;
}


/* A free node from the record's cache, refilled from the pool: a free
 * batch, else one never-used node (one at a time, so that an ended node is
 * reused before a fresh one is touched). */
uvtw__task_t* uvtw__record_cache_get(uvtw__tasks_t* tasks,
                                     uvtw__record_t* rec) {
  uint64_t gens[UVTW__BATCH];
  unsigned i;

  if (rec->ncache == 0) {
    rec->ncache = uvtw__pool_take_batch(&tasks->pool, rec->cache);
    if (rec->ncache == 0) {
      rec->ncache = uvtw__pool_alloc_new(&tasks->pool, rec->cache, gens, 1);
      if (rec->ncache == 0)
        return NULL;
      for (i = 0; i < rec->ncache; i++)
        atomic_store_explicit(&rec->cache[i]->state,
                              gens[i] << GEN_SHIFT | T_FREE,
                              memory_order_relaxed);
    }
  }
  return rec->cache[--rec->ncache];
}


/* A FREE node back into the record's cache (most recent first, so the
 * next submit reuses a line still in this core's cache); half of a full
 * cache goes back to the pool. */
void uvtw__record_cache_put(uvtw__tasks_t* tasks,
                            uvtw__record_t* rec,
                            uvtw__task_t* node) {
  if (rec->ncache == UVTW__CACHE) {
    uvtw__pool_give_batch(&tasks->pool, rec->cache, UVTW__BATCH);
    memmove(rec->cache, rec->cache + UVTW__BATCH,
            (UVTW__CACHE - UVTW__BATCH) * sizeof(rec->cache[0]));
    rec->ncache -= UVTW__BATCH;
  }
  rec->cache[rec->ncache++] = node;
}


/* Makes room for one more id in the owner's queue: links a new block when
 * the current one is full.  Non-zero if out of memory. */
int uvtw__record_queue_room(uvtw__record_t* rec) {
  uvtw__block_t* b;

  if (rec->widx < UVTW__BLOCK_IDS)
    return 0;
  b = block_new(rec);
  if (b == NULL)
    return UV_ENOMEM;
  atomic_store_explicit(&rec->wblock->next, b, memory_order_release);
  rec->wblock = b;
  rec->widx = 0;
  return 0;
}


/* Non-zero if the record's queue holds an id the loop has not read. */
static int record_busy(uvtw__record_t* rec) {
  if (rec->ridx == UVTW__BLOCK_IDS)
    return atomic_load_explicit(&rec->rblock->next, memory_order_relaxed) !=
           NULL;
  return atomic_load_explicit(&rec->rblock->slot[rec->ridx],
                              memory_order_relaxed) != 0;
}


/* Non-zero if a queue (or the stack) holds something the loop has not
 * taken in.  A relaxed look: what another thread published before
 * something that happens-before this call (a join, a lock) is seen. */
int uvtw__records_busy(uvtw__tasks_t* tasks) {
  uvtw__record_t* rec;

  if (atomic_load_explicit(&tasks->notices, memory_order_relaxed) != NULL)
    return 1;
  for (rec = atomic_load_explicit(&tasks->records, memory_order_acquire);
       rec != NULL; rec = rec->next)
    if (record_busy(rec))
      return 1;
  return 0;
}


/* The loop is done with a block of the record's queue: zeroed, it goes
 * back to the owner, or is freed if the owner has spares enough.  Nobody
 * else refers to it: only the loop reads a block, and only the owner
 * writes one, the one it fills (retract), which the loop has not passed. */
void uvtw__record_block_return(uvtw__record_t* rec, uvtw__block_t* b) {
  uvtw__block_t* top;
  uint64_t handed;
  unsigned i;

  handed = atomic_load_explicit(&rec->blocks_handed, memory_order_relaxed);
  /* A stale blocks_reused only makes the loop free a block early. */
  if (handed -
          atomic_load_explicit(&rec->blocks_reused, memory_order_relaxed) >=
      SPARE_BLOCKS) {
    atomic_fetch_sub_explicit(&rec->nblocks, 1, memory_order_relaxed);
    uvtw__line_free(b);
    return;
  }
  atomic_store_explicit(&rec->blocks_handed, handed + 1, memory_order_relaxed);
  for (i = 0; i < UVTW__BLOCK_IDS; i++)
    atomic_store_explicit(&b->slot[i], 0, memory_order_relaxed);
  top = atomic_load_explicit(&rec->returned, memory_order_relaxed);
  do
    atomic_store_explicit(&b->next, top, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &rec->returned, &top, b, memory_order_release, memory_order_relaxed));
}


/* The ends of every task so far: the loop's, the shared count's and every
 * record's.  Each count only grows, so two equal sums mean that no task
 * ended in between. */
static uint64_t ends(const uvtw__tasks_t* tasks) {
  uvtw__record_t* rec;
  uint64_t ended;

  ended = atomic_load_explicit(&tasks->loop_ended, memory_order_seq_cst) +
          atomic_load_explicit(&tasks->ended_shared, memory_order_seq_cst);
  for (rec = atomic_load_explicit(&tasks->records, memory_order_seq_cst);
       rec != NULL; rec = rec->next)
    ended += atomic_load_explicit(&rec->ended, memory_order_seq_cst);
  return ended;
}


/* How often the live count reads the ends again before it gives up on an
 * exact snapshot. */
#define LIVE_TRIES 4

/* Live tasks: see "Counting" at the top.  A try reads the ends (E1), then
 * the submits (S), summed over the record list as read after the ends
 * (which includes a record made in between), then the ends again (E2), all
 * seq_cst (also for close's side of the barrier in uvtw_submit).  Every
 * task that ended before E1 was submitted before S, so S - E1 counts every
 * task live throughout the try, and at most adds the tasks that ended
 * after E1 (however long the reader was descheduled).  If E2 == E1, no
 * task ended during the try: S - E1 is the exact number of tasks live when
 * S was read.  Otherwise it tries again, and after LIVE_TRIES returns the
 * smallest count, which still counts every task live throughout.
 * `between` (tests only; NULL otherwise) runs between E1 and S on the
 * first try, to stand in for a reader descheduled there. */
uint64_t uvtw__records_live(const uvtw__tasks_t* tasks, void (*between)(void)) {
  uvtw__record_t* rec;
  uint64_t ended;
  uint64_t submitted;
  uint64_t live;
  uint64_t best;
  unsigned try;

  best = UINT64_MAX;
  for (try = 0; try < LIVE_TRIES; try++) {
    ended = ends(tasks);
    if (between != NULL && try == 0)
      between();
    submitted = 0;
    for (rec = atomic_load_explicit(&tasks->records, memory_order_seq_cst);
         rec != NULL; rec = rec->next)
      submitted += atomic_load_explicit(&rec->submitted, memory_order_seq_cst);
    live = submitted > ended ? submitted - ended : 0;
    if (ends(tasks) == ended)
      return live;
    if (live < best)
      best = live;
  }
  return best;
}


/* Frees a chain of blocks linked by `next`. */
static void free_chain(uvtw__block_t* b) {
  uvtw__block_t* next;

  for (; b != NULL; b = next) {
    next = atomic_load_explicit(&b->next, memory_order_relaxed);
    uvtw__line_free(b);
  }
}


void uvtw__records_init(uvtw__tasks_t* tasks) {
  tasks->loop_thread = &uvtw__tls.token;
  tasks->serial =
      atomic_fetch_add_explicit(&wheel_serials, 1, memory_order_relaxed) + 1;
}


void uvtw__records_free(uvtw__tasks_t* tasks) {
  uvtw__record_t* rec;

  while ((rec = atomic_load_explicit(&tasks->records, memory_order_relaxed)) !=
         NULL) {
    atomic_store_explicit(&tasks->records, rec->next, memory_order_relaxed);
    /* Each block is in the queue, the returned stack or the spare list. */
    free_chain(rec->rblock);
    free_chain(atomic_load_explicit(&rec->returned, memory_order_relaxed));
    free_chain(rec->spare);
    uvtw__line_free(rec);
  }
}


uint64_t uvtw__records_taken_back(const uvtw__tasks_t* tasks) {
  uvtw__record_t* rec;
  uint64_t taken_back;

  taken_back =
      atomic_load_explicit(&tasks->taken_back_shared, memory_order_relaxed);
  for (rec = atomic_load_explicit(&tasks->records, memory_order_acquire);
       rec != NULL; rec = rec->next)
    taken_back += atomic_load_explicit(&rec->taken_back, memory_order_relaxed);
  return taken_back;
}
