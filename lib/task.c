/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks.
 *
 * A task is a node from a per-wheel pool.  Its life:
 *
 *   producer: take a free node from the thread's own record (one per
 *             thread and wheel; a free batch from the pool refills it),
 *             fill it, and put its id in the record's queue, which only
 *             this thread fills and only the loop empties; wake the loop,
 *             unless a wake-up is pending that the loop has not begun to
 *             serve.
 *   loop:     the async callback empties every record's queue, oldest
 *             first, in batches of UVTW__DRAIN_BATCH ids that give every
 *             record a share (drain), and files each task's timer in the
 *             wheel, for the deadline "uv_hrtime at submit + delay".
 *   loop:     the driver pass pops the timer; the task runs on the loop, or
 *             goes to uv_queue_work, with a request (uvtw__work_t) that it
 *             holds only until after_work, and comes back in after_work.
 *
 * So a submit writes only its own record's lines and its node's first
 * line, and the loop reads queue slots (8 ids per cache line) instead of
 * chasing links through nodes.  A queue is a chain of one-page blocks
 * (uvtw__block_t) that the loop hands back to the producer once read (up
 * to SPARE_BLOCKS waiting for reuse; it frees the others), so it never
 * fills up, one producer's tasks reach the loop in order, and a queue that
 * grew while the loop lagged shrinks back to three blocks once it caught
 * up.  Only the owner writes a block, and only the loop reads one.
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
 * The state word.  Each node has one atomic word: generation << 16 |
 * flags | state.  Every transition that another thread could race with
 * is one CAS on it, so a cancel and an expiry (or close) racing for the
 * same task see exactly one winner, and a stale id, whose generation no
 * longer matches, changes nothing.  Every move of a live task goes through
 * move() or a CAS that checks it against the diagram; plain stores only
 * take a free node to PENDING (submit) and an ended one to FREE, when no
 * other thread can move its state.  Each use of a node carries a new
 * generation, one that no use of the same index in any wheel of the
 * process carried before (task-pool.c), so an id is never reused, and
 * names nothing on another wheel.
 *
 *   PENDING   waiting (in a queue, the wheel, or between pool runs)
 *   QUEUED    handed to uv_queue_work, not started
 *   RUNNING   callback executing
 *   STOPPING  running, and a cancel from another thread returned EBUSY
 *   CANCELLED ended by a cancel that returned 0
 *   DONE      ended by its (last) run
 *   CLOSED    owed its final UV_ECANCELED call (wheel closing)
 *   FREE      in a record's cache or the pool
 *
 *   cancel: PENDING/QUEUED -> CANCELLED (0); RUNNING -> STOPPING (EBUSY), or
 *           from the task's own callback: repeating -> CANCELLED (0),
 *           one-shot unchanged (ENOENT); anything else: ENOENT.
 *   loop:   PENDING -> RUNNING -> PENDING (repeat) or DONE; pool: PENDING
 *           -> QUEUED, and the pool thread QUEUED -> RUNNING -> PENDING or
 *           DONE; after a run: STOPPING -> DONE; close: PENDING/QUEUED ->
 *           CLOSED, a repeating task's RUNNING -> CLOSED after its run, and
 *           CLOSED -> DONE after its final call.
 *
 * Who owns a node, by its flags:
 *   IN_RING   its id is in a producer's queue slot that the loop has not
 *             taken.  The loop takes it with a CAS that clears the flag.  A
 *             cancel that wins against it clears the flag too, and then
 *             owns the node: the loop never saw the task, so the canceller
 *             frees the node into its own cache at once, and marks the
 *             slot (TOMBSTONE) if it is in the block the canceller itself
 *             fills (a loop that reads the id finds the flag gone, or a
 *             newer generation, and skips it).  Not for a task
 *             submitted on the loop thread (LOOP_HELD), which the loop
 *             holds already: a cancel on the loop thread takes it back
 *             too (and lets go of it in `held`), so that submit+cancel
 *             pairs there reuse one node; a cancel from another thread
 *             leaves it IN_RING, and the loop frees it when it reads the
 *             slot.  That canceller sets COUNTED and counts it in the
 *             stats, as for a task taken back.
 *   NOTICE    a cancel won after the loop took the task in, and put the id
 *             in its own queue, so that the loop unfiles the timer promptly
 *             instead of at its deadline.
 *   IN_STACK  the same, for a cancel made without a record (out of
 *             memory, or a thread's first call during close): the node is
 *             on the wheel's stack.
 * The loop frees a node once it is ended, none of these is set, and it is
 * not on the threadpool; all checked on the loop thread.
 *
 * Counting.  A live task is one submitted and not ended.  Each record
 * counts its thread's submits and cancels, the loop its own ends, so no
 * line is written by every task's producer and its consumer:
 *   live = sum(submitted) - sum(ended) - loop_ended - ended_shared,
 * ends read first, the submits then over the record list read again, so
 * that an end is never counted without its submit (live_count).  With
 * max_tasks set, a submit also reserves its place in `reserved` by one
 * CAS and every end returns it: exact, at the price of one shared line.
 * The stats count a task cancelled before the loop took it in by its
 * canceller (`retracted` per record, `retracted_shared`), at once.
 *
 * Liveness.  The loop holds itself alive (the async handle referenced) for
 * the tasks it has taken in and those submitted on its own thread
 * (`held`), and while a queue holds ids it has not taken in (`backlog`,
 * noted after every batch of loop work): see hold_sync.
 *
 * Calls inside the wheel, and close.  uvtw_submit and uvtw_cancel enter
 * the wheel before they touch its shared state, and leave it when done:
 * a thread marks its record (`calls` odd; a call without a record uses the
 * wheel's `calls_shared`), then a seq_cst fence, then it reads the close
 * word.  Close sets CLOSING (seq_cst read-modify-write) when it begins, and
 * when no task is live any more, CLOSED; then a fence, then it reads the
 * marks (calls_inside), and finishes only once no call it must wait for
 * is inside, looking again on later loop iterations (it never blocks the
 * loop).  The two fences are a Dekker pair: of a call and close, at least
 * one sees the other's write.  So a submit either sees CLOSING before it
 * publishes anything (UV_ECANCELED), or close waits for it to leave, and
 * then drains its task and gives it its final call; a cancel either sees
 * CLOSED (UV_ENOENT: nothing is left) or is waited for.  Leaving is a
 * release store, read with acquire by close, and by a thread that adopts
 * the record of an exited one (an acq_rel read-modify-write of `calls`):
 * each sees what the call did.  What close cannot wait for is a call that
 * has not marked itself yet when close finishes: the wheel, its pool and
 * its records are freed after the close callback, so other threads must
 * have stopped calling by then (uvtw.h).
 *
 * The store-then-load pairs, each a seq_cst fence (full_fence) on both
 * sides, correct on weakly ordered CPUs as well as on x86:
 *   enter:     mark; fence; load close word  /  close: set CLOSING or
 *              CLOSED; fence; load the marks (calls_inside);
 *   wake_loop: publish an id; fence; load wake_pending  /  async_cb: clear
 *              wake_pending; fence; drain the queues.
 */

#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "uvtw-assert.h"

enum {
  T_FREE,
  T_PENDING,
  T_QUEUED,
  T_RUNNING,
  T_STOPPING,
  T_CANCELLED,
  T_DONE,
  T_CLOSED
};

enum { AT_NONE, AT_WHEEL, AT_POOL, AT_FINAL_LIST };

#define STATE_MASK ((uint64_t) 0xff)
#define IN_RING ((uint64_t) 0x100) /* in a producer's queue */
#define IN_STACK ((uint64_t) 0x200)
#define NOTICE ((uint64_t) 0x400)
/* UVTW_THREADPOOL: set by submit, fixed for the task's life. */
#define POOL ((uint64_t) 0x800)
/* Submitted on the loop thread, which counted it in `held` at once. */
#define LOOP_HELD ((uint64_t) 0x1000)
/* Cancelled before the loop took it in, and counted in the stats by its
 * canceller (the loop frees it, but counts it in neither `accepted` nor
 * `cancelled`). */
#define COUNTED ((uint64_t) 0x2000)
#define QUEUE_FLAGS (IN_RING | IN_STACK | NOTICE)
#define STATE(word) ((unsigned) ((word) & STATE_MASK))
#define GEN_SHIFT 16
#define GEN(word) ((word) >> GEN_SHIFT)
#define WITH_STATE(word, st) (((word) & ~STATE_MASK) | (st))
#define S(st) (1u << (st)) /* a set of states */

/* The moves of the diagram above, as the states each state may move to;
 * move() checks every move against it.  (FREE -> PENDING is submit's plain
 * store, CANCELLED/DONE -> FREE recycle's.)  Only that assert reads it, and
 * NDEBUG leaves it in sizeof alone, where clang would warn that the table
 * is never emitted: hence `unused`. */
__attribute__((unused)) static const unsigned legal_moves[] = {
    [T_FREE] = 0,
    [T_PENDING] = S(T_QUEUED) | S(T_RUNNING) | S(T_CANCELLED) | S(T_CLOSED),
    [T_QUEUED] = S(T_RUNNING) | S(T_CANCELLED) | S(T_CLOSED),
    [T_RUNNING] = S(T_PENDING) | S(T_STOPPING) | S(T_CANCELLED) | S(T_DONE) |
                  S(T_CLOSED),
    [T_STOPPING] = S(T_DONE),
    [T_CANCELLED] = 0,
    [T_DONE] = 0,
    [T_CLOSED] = S(T_DONE),
};

#define CLOSING ((uint64_t) 1) /* uvtw_wheel_close has begun */
#define CLOSED ((uint64_t) 2)  /* close is done with the tasks */

/* A slot whose task a cancel took back: index 1, generation 0, which no
 * id carries. */
#define TOMBSTONE ((uint64_t) 1 << UVTW__GEN_BITS)

/* Thread-local records: the last few (wheel, serial) pairs this thread
 * used, so that a call finds its record without a search. */
#define TLS_RECORDS 4

typedef struct {
  const uvtw_wheel_t* wheel;
  uint64_t serial;
  uvtw__producer_t* rec;
} tls_record_t;

/* This thread's state, in one thread-local object.  initial-exec: one
 * %fs-relative load instead of a __tls_get_addr call per access (which
 * cost more than the rest of a cancel); the object is small, so even a
 * dlopen()ed libuvtw finds room for it in glibc's static TLS surplus. */
static _Thread_local struct {
  /* The records this thread used last, most recent first, so that a call
   * finds its record without a search. */
  tls_record_t records[TLS_RECORDS];
  /* The task whose callback runs on this thread, to tell a cancel from
   * inside its own callback. */
  uvtw__task_t* current_task;
  /* Its address names the thread: the loop thread is the one whose token
   * the wheel recorded at creation, and a record belongs to the thread
   * whose token it holds. */
  char token;
} tls __attribute__((tls_model("initial-exec")));

#define current_task (tls.current_task)
#define thread_token (tls.token)

/* A seq_cst fence, for the store-then-load handshakes (wake_loop, and
 * close).  ThreadSanitizer does not model fences, and GCC refuses them
 * under -fsanitize=thread: there a seq_cst read-modify-write of a
 * thread-local word stands in (a full barrier on the x86 machines TSan
 * runs on), which synchronizes with no other thread and so hides no race
 * from it.  The happens-before edges TSan checks are all release/acquire
 * pairs on the words themselves. */
#if defined(__SANITIZE_THREAD__)
#define UVTW__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UVTW__TSAN 1
#endif
#endif

static inline void full_fence(void) {
#ifdef UVTW__TSAN
  static _Thread_local _Atomic int fence_word;

  atomic_fetch_add_explicit(&fence_word, 1, memory_order_seq_cst);
#else
  atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* Serials of wheels, process-wide; 0 is never one. */
static _Atomic uint64_t wheel_serials;


static uvtw__task_t* task_of(uvtw_timer_t* timer) {
  return uvtw__container_of(timer, uvtw__task_t, timer);
}


static uvtw_id_t id_of(const uvtw__task_t* node, uint64_t gen) {
  return (uint64_t) node->index << UVTW__GEN_BITS | gen;
}


/* Every state move of a live task goes through here: if the node's state
 * is one of `from` (a set of S() bits), and its generation is `gen` (0:
 * any), one CAS moves it to `to` and sets the flag bits `set`; the CAS is
 * retried for as long as only a concurrent change of flag bits, or a move
 * within `from`, made it fail.  Returns non-zero if it moved.  *seen gets
 * the word the move started from, or the word that stopped it. */
static int move(uvtw__task_t* node,
                unsigned from,
                unsigned to,
                uint64_t set,
                uint64_t gen,
                uint64_t* seen) {
  uint64_t word;

  word = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (!(from & S(STATE(word))) || (gen != 0 && GEN(word) != gen)) {
      *seen = word;
      return 0;
    }
    UVTW__ASSERT(legal_moves[STATE(word)] & S(to));
    if (atomic_compare_exchange_weak_explicit(
            &node->state, &word, WITH_STATE(word, to) | set,
            memory_order_acq_rel, memory_order_acquire)) {
      *seen = word;
      return 1;
    }
  }
}


/* The one thread that owns an ended node gives it its next generation and
 * makes it FREE.  Its id stays the ended task's, so a late cancel finds a
 * newer generation: UV_ENOENT.  Returns 0 if the node is retired (its index
 * has no generation left): it is never handed out again. */
static int recycle(uvtw__task_t* node) {
  uint64_t word;
  uint64_t gen;

  word = atomic_load_explicit(&node->state, memory_order_relaxed);
  UVTW__ASSERT(STATE(word) == T_CANCELLED || STATE(word) == T_DONE);
  gen = uvtw__pool_next_gen(node, GEN(word));
  atomic_store_explicit(&node->state, gen << GEN_SHIFT | T_FREE,
                        memory_order_release);
  return gen != 0;
}


/* Adds `delta` to a counter that only the calling thread writes: a load
 * and a store, no read-modify-write (readers on other threads see either
 * value); `order` is the store's. */
static inline void own_add(_Atomic uint64_t* counter,
                           uint64_t delta,
                           memory_order order) {
  atomic_store_explicit(
      counter, atomic_load_explicit(counter, memory_order_relaxed) + delta,
      order);
}


/* ---- producer records --------------------------------------------------- */

/* Zeroed memory on its own cache lines, or NULL; line_free() frees it.
 * posix_memalign rather than C11's aligned_alloc, which glibc has only from
 * 2.16: the Debian package promises libc6 >= 2.3 (cmake/Package.cmake).
 * Windows has neither, and its _aligned_malloc needs _aligned_free. */
static void* line_alloc(size_t size) {
  void* p;

#ifdef _WIN32
  if ((p = _aligned_malloc(size, 64)) == NULL)
    return NULL;
#else
  if (posix_memalign(&p, 64, size) != 0)
    return NULL;
#endif
  memset(p, 0, size);
  return p;
}


static void line_free(void* p) {
#ifdef _WIN32
  _aligned_free(p);
#else
  free(p);
#endif
}


/* A zeroed block for the owner's queue: a consumed one, or a new one. */
static uvtw__block_t* block_new(uvtw__producer_t* rec) {
  uvtw__block_t* b;

  if (rec->spare == NULL)
    rec->spare = atomic_exchange_explicit(&rec->returned, NULL,
                                          memory_order_acquire);
  b = rec->spare;
  if (b != NULL) {
    rec->spare = atomic_load_explicit(&b->next, memory_order_relaxed);
    own_add(&rec->taken_back, 1, memory_order_relaxed);
  } else {
    b = line_alloc(sizeof(*b));
    if (b == NULL)
      return NULL;
    atomic_fetch_add_explicit(&rec->nblocks, 1, memory_order_relaxed);
  }
  atomic_store_explicit(&b->next, NULL, memory_order_relaxed);
  return b;
}


/* A new record of the calling thread, already marked inside a call
 * (`calls` 1), pushed on the wheel's list; NULL if out of memory. */
static uvtw__producer_t* record_new(uvtw_wheel_t* wheel) {
  uvtw__producer_t* rec;

  rec = line_alloc(sizeof(*rec));
  if (rec == NULL)
    return NULL;
  rec->wblock = block_new(rec);
  if (rec->wblock == NULL) {
    line_free(rec);
    return NULL;
  }
  rec->rblock = rec->wblock;
  atomic_init(&rec->owner, &thread_token);
  atomic_init(&rec->calls, 1);
  rec->next = atomic_load_explicit(&wheel->tasks.producers,
                                   memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &wheel->tasks.producers, &rec->next, rec, memory_order_release,
      memory_order_relaxed))
    ;
  return rec;
}


/* The owner marks its record inside a call (odd `calls`). */
static inline void record_enter(uvtw__producer_t* rec) {
  own_add(&rec->calls, 1, memory_order_relaxed);
}


/* enter's search, when the wheel is not the one this thread used last. */
static __attribute__((noinline)) uvtw__producer_t* enter_search(
    uvtw_wheel_t* wheel) {
  uvtw__producer_t* rec;
  uvtw__tasks_t* tasks;
  tls_record_t hit;
  unsigned i;

  tasks = &wheel->tasks;
  for (i = 1; i < TLS_RECORDS; i++)
    if (tls.records[i].wheel == wheel &&
        tls.records[i].serial == tasks->serial)
      break;
  if (i < TLS_RECORDS) {
    rec = tls.records[i].rec;
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
    for (rec = atomic_load_explicit(&tasks->producers, memory_order_acquire);
         rec != NULL; rec = rec->next)
      if (atomic_load_explicit(&rec->owner, memory_order_relaxed) ==
          &thread_token)
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
  memmove(&tls.records[1], &tls.records[0], i * sizeof(tls.records[0]));
  tls.records[0] = hit;
  return rec;
}


/* Every uvtw_submit and uvtw_cancel enters the wheel before it reads or
 * writes any of its shared state (apart from the creation-time serial and
 * a first look at the close word), and leaves it when it is done: close
 * does not finish while a call is inside (task.c, "Close").  Returns the
 * calling thread's record of the wheel, a new one on its first call; NULL
 * if it has none (out of memory, or the wheel is closing), and then the
 * call is inside by the wheel's shared count.  The fence orders the mark
 * before the caller's load of the close word: one side of a Dekker pair
 * whose other side is close's seq_cst read-modify-write of that word,
 * then a fence, then its loads of the marks (calls_inside). */
static inline uvtw__producer_t* enter(uvtw_wheel_t* wheel) {
  uvtw__producer_t* rec;

  if (tls.records[0].wheel == wheel &&
      tls.records[0].serial == wheel->tasks.serial) {
    rec = tls.records[0].rec;
    record_enter(rec);
  } else {
    rec = enter_search(wheel);
  }
  full_fence();
  return rec;
}


/* The call is done with the wheel (release: close, which reads the mark
 * with acquire, sees everything the call did). */
static inline void leave(uvtw_wheel_t* wheel, uvtw__producer_t* rec) {
  if (rec != NULL)
    own_add(&rec->calls, 1, memory_order_release);
  else
    atomic_fetch_sub_explicit(&wheel->tasks.calls_shared, 1,
                              memory_order_release);
}


/* A free node from the record's cache, refilled from the pool: a free
 * batch, else one never-used node (one at a time, so that an ended node is
 * reused before a fresh one is touched). */
static uvtw__task_t* cache_get(uvtw__tasks_t* tasks, uvtw__producer_t* rec) {
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
static void cache_put(uvtw__tasks_t* tasks,
                      uvtw__producer_t* rec,
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
static int queue_room(uvtw__producer_t* rec) {
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


/* The owner puts an id in its queue (after queue_room) and returns its
 * slot.  A release store: the loop that reads the id (acquire) sees the
 * node as written before.  The caller then wakes the loop (wake_loop). */
static _Atomic uint64_t* queue_put(uvtw__producer_t* rec, uvtw_id_t id) {
  _Atomic uint64_t* slot;

  UVTW__ASSERT(rec->widx < UVTW__BLOCK_IDS);
  slot = &rec->wblock->slot[rec->widx++];
  atomic_store_explicit(slot, id, memory_order_release);
  return slot;
}


/* Wakes the loop after an id or a node was published: one uv_async_send
 * per batch that the loop has not begun to take in.  A store (the
 * publish) then a load of another variable (`wake_pending`) on each side,
 * so a seq_cst fence on each side (a Dekker pair, correct on weakly
 * ordered CPUs too):
 *   caller:   publish;                  fence; load wake_pending
 *   async_cb: store wake_pending = 0;   fence; drain (load the queues)
 * Either the caller's fence comes first in the single order of seq_cst
 * fences, and then the drain sees the publish; or the async callback's
 * does, and then the caller sees the flag clear (or set again by a later
 * wake-up, which sent) and sends.  The caller must have issued its fence
 * after publishing (publish_fence). */
static void wake_loop(uvtw_wheel_t* wheel) {
  _Atomic int* pending;

  pending = &wheel->tasks.wake_pending;
  if (atomic_load_explicit(pending, memory_order_relaxed) == 0 &&
      atomic_exchange_explicit(pending, 1, memory_order_relaxed) == 0)
    uv_async_send(&wheel->async);
}


/* The caller's side of the seq_cst pairs in wake_loop (and of close, in
 * uvtw_submit): orders what it published before the loads that follow. */
static inline void publish_fence(void) {
  full_fence();
}


static void stack_push(uvtw__task_t* _Atomic* top, uvtw__task_t* node) {
  uvtw__task_t* head;

  head = atomic_load_explicit(top, memory_order_relaxed);
  do
    atomic_store_explicit(&node->q.queue_next, head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(top, &head, node,
                                                memory_order_release,
                                                memory_order_relaxed));
}


/* ---- liveness ----------------------------------------------------------- */

/* Live tasks keep the loop alive the way uv_queue_work requests do: the
 * loop thread references the (otherwise unreferenced) async handle while
 * it holds a task, and drops the reference once it holds none.  It holds a
 * task from the moment it takes it in (or, submitted on the loop thread,
 * from the submit) until it frees its node.  It also holds itself while a
 * drain left ids in a queue (`backlog`): one batch may be all tombstones,
 * and the task behind them holds nothing until it is taken in.  Only the
 * loop thread may call uv_ref.  A task that ends on another thread (a
 * cancel, a pool run) always leads the loop back here: the cancel's notice
 * or the run's after_work_cb; a task a cancel takes back before the loop
 * saw it was never held. */
static void hold_sync(uvtw_wheel_t* wheel) {
  int want;

  if (wheel->closing)
    return; /* close holds the async handle until it closes it */
  want = wheel->tasks.held != 0 || wheel->tasks.backlog;
  if (want == wheel->tasks.holds_loop)
    return;
  wheel->tasks.holds_loop = want;
  if (want)
    uv_ref((uv_handle_t*) &wheel->async);
  else
    uv_unref((uv_handle_t*) &wheel->async);
}


/* Non-zero if the record's queue holds an id the loop has not read. */
static int record_busy(uvtw__producer_t* rec) {
  if (rec->ridx == UVTW__BLOCK_IDS)
    return atomic_load_explicit(&rec->rblock->next, memory_order_relaxed) !=
           NULL;
  return atomic_load_explicit(&rec->rblock->slot[rec->ridx],
                              memory_order_relaxed) != 0;
}


/* Non-zero if a queue (or the stack) holds something the loop has not
 * taken in.  A relaxed look: what another thread published before
 * something that happens-before this call (a join, a lock) is seen. */
static int queues_busy(uvtw__tasks_t* tasks) {
  uvtw__producer_t* rec;

  if (atomic_load_explicit(&tasks->queue, memory_order_relaxed) != NULL)
    return 1;
  for (rec = atomic_load_explicit(&tasks->producers, memory_order_acquire);
       rec != NULL; rec = rec->next)
    if (record_busy(rec))
      return 1;
  return 0;
}


/* After each batch of loop work (a drain, a driver pass, a threadpool
 * task's after_work): also notes a backlog, so that a task submitted
 * while the batch ran (say from a thread that a timer's callback joined)
 * holds the loop before it is taken in.  From libuv 1.48 on, the timers
 * phase is the last of an iteration, and uv_run returns right after it if
 * nothing is referenced: the async callback would come too late. */
void uvtw__tasks_flush(uvtw_wheel_t* wheel) {
  uvtw__pool_flush(&wheel->tasks.pool);
  wheel->tasks.backlog = queues_busy(&wheel->tasks);
  hold_sync(wheel);
}


/* An end of a live task, counted by the thread that ended it. */
static void count_end(uvtw__tasks_t* tasks, uvtw__producer_t* rec) {
  if (tasks->max_tasks != 0)
    atomic_fetch_sub_explicit(&tasks->reserved, 1, memory_order_relaxed);
  if (rec != NULL)
    own_add(&rec->ended, 1, memory_order_release);
  else
    atomic_fetch_add_explicit(&tasks->ended_shared, 1, memory_order_release);
}


/* Loop thread. */
static void end_live(uvtw__tasks_t* tasks) {
  if (tasks->max_tasks != 0)
    atomic_fetch_sub_explicit(&tasks->reserved, 1, memory_order_relaxed);
  own_add(&tasks->loop_ended, 1, memory_order_release);
}


/* ---- producers ---------------------------------------------------------- */

/* uvtw_submit inside the wheel (enter): the task's node from the record's
 * cache, filled, and its id published in the record's queue. */
static int submit_inside(uvtw_wheel_t* wheel,
                         uvtw__producer_t* rec,
                         uint64_t deadline_ms,
                         uint64_t repeat_ms,
                         unsigned flags,
                         uvtw_task_cb cb,
                         void* arg,
                         uvtw_id_t* id) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t word;
  uint64_t gen;
  uint64_t n;

  tasks = &wheel->tasks;
  if (rec == NULL || queue_room(rec) != 0)
    return UV_ENOMEM;
  if (tasks->max_tasks != 0) {
    n = atomic_load_explicit(&tasks->reserved, memory_order_relaxed);
    do
      if (n >= tasks->max_tasks)
        return UV_ENOSPC;
    while (!atomic_compare_exchange_weak_explicit(
        &tasks->reserved, &n, n + 1, memory_order_relaxed,
        memory_order_relaxed));
  }
  node = cache_get(tasks, rec);
  if (node == NULL) {
    if (tasks->max_tasks != 0)
      atomic_fetch_sub_explicit(&tasks->reserved, 1, memory_order_relaxed);
    return UV_ENOMEM;
  }

  /* Counted before its node is published (see "Counting" at the top). */
  own_add(&rec->submitted, 1, memory_order_relaxed);

  node->cb = cb;
  node->arg = arg;
  node->repeat_ms = repeat_ms;
  node->deadline_ms = deadline_ms;
  word = atomic_load_explicit(&node->state, memory_order_relaxed);
  UVTW__ASSERT(STATE(word) == T_FREE);
  gen = GEN(word);
  UVTW__ASSERT(gen != 0 && gen < node->gen_end);
  word = gen << GEN_SHIFT | (flags & UVTW_THREADPOOL ? POOL : 0) | T_PENDING;
  if (tasks->loop_thread == &thread_token) {
    /* Held from now on; the loop frees it, even if a cancel wins first. */
    word |= LOOP_HELD;
    node->held = 1;
    tasks->held++;
    if (!tasks->holds_loop) {
      tasks->holds_loop = 1;
      uv_ref((uv_handle_t*) &wheel->async);
    }
  }
  if (id != NULL)
    *id = id_of(node, gen);
  /* Published to the loop by the release store in queue_put. */
  atomic_store_explicit(&node->state, word | IN_RING, memory_order_relaxed);
  node->q.slot = &rec->wblock->slot[rec->widx];
  queue_put(rec, id_of(node, gen));
  publish_fence();
  wake_loop(wheel);
  return 0;
}


int uvtw_submit(uvtw_wheel_t* wheel,
                uint64_t delay_ms,
                uint64_t repeat_ms,
                unsigned flags,
                uvtw_task_cb cb,
                void* arg,
                uvtw_id_t* id) {
  uvtw__producer_t* rec;
  uint64_t start_ms;
  uint64_t deadline_ms;
  int err;

  if (wheel == NULL || cb == NULL || (flags & ~UVTW_THREADPOOL) != 0)
    return UV_EINVAL;
  /* The delay counts from here, by uv_hrtime().  uv_now() reads the same
   * monotonic clock (or its coarse variant, which never runs ahead), so a
   * deadline in these milliseconds is never early on the loop's clock. */
  start_ms = uv_hrtime() / 1000000;
  deadline_ms = start_ms + delay_ms < start_ms ? UINT64_MAX
                                               : start_ms + delay_ms;
  if (atomic_load_explicit(&wheel->tasks.close_word, memory_order_relaxed) &
      CLOSING)
    return UV_ECANCELED;
  rec = enter(wheel);
  /* After enter's fence: either this sees CLOSING, or close sees this call
   * inside and waits until it has left, its task published (see "Close"
   * at the top).  So a task is never published once close may finish. */
  if (atomic_load_explicit(&wheel->tasks.close_word, memory_order_relaxed) &
      CLOSING)
    err = UV_ECANCELED;
  else
    err = submit_inside(wheel, rec, deadline_ms, repeat_ms, flags, cb, arg,
                        id);
  leave(wheel, rec);
  return err;
}


/* A task cancelled before the loop took it in, for the stats: counted by
 * its canceller, in the stats at once (uvtw_stats_t). */
static void count_retracted(uvtw__tasks_t* tasks, uvtw__producer_t* rec) {
  if (rec != NULL)
    own_add(&rec->retracted, 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&tasks->retracted_shared, 1,
                              memory_order_relaxed);
}


/* The canceller won against a task the loop has not taken in: the node is
 * its own.  The task's slot is marked, so that the loop reads no node for
 * it; by a CAS, since the slot may be another thread's, and reused by now
 * (ids are never reused, so a reused slot never matches). */
static void retract(uvtw__tasks_t* tasks,
                    uvtw__producer_t* rec,
                    uvtw__task_t* node,
                    uvtw_id_t id) {
  _Atomic uint64_t* slot;

  slot = node->q.slot;
  /* Only in the block this thread is filling, which nobody else writes and
   * the loop has not moved past (so it is neither handed back nor freed).
   * A slot in an older block may be freed by now (block_return): the id
   * stays there, and the loop, finding IN_RING gone or a newer generation,
   * skips it. */
  if (rec != NULL && slot >= rec->wblock->slot &&
      slot < rec->wblock->slot + rec->widx &&
      atomic_load_explicit(slot, memory_order_relaxed) == id)
    atomic_store_explicit(slot, TOMBSTONE, memory_order_relaxed);
  count_retracted(tasks, rec);
  if (rec == NULL) {
    if (recycle(node))
      uvtw__pool_give_batch(&tasks->pool, &node, 1);
    return;
  }
  if (recycle(node))
    cache_put(tasks, rec, node);
}


static int cancel_node(uvtw_wheel_t* wheel,
                       uvtw__producer_t* rec,
                       uvtw__task_t* node,
                       uvtw_id_t id,
                       int* ended) {
  uint64_t word;
  uint64_t next;
  uint64_t gen;
  int ring;

  gen = id & UVTW__GEN_MASK;
  word = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (GEN(word) != gen)
      return UV_ENOENT;
    if (STATE(word) == T_PENDING || STATE(word) == T_QUEUED) {
      /* Waiting: cancelled.  Who frees the node depends on where it is. */
      ring = 0;
      next = WITH_STATE(word, T_CANCELLED);
      if ((word & IN_RING) &&
          (!(word & LOOP_HELD) ||
           wheel->tasks.loop_thread == &thread_token))
        next &= ~IN_RING; /* taken back: ours (on the loop thread, also a
                           * task the loop holds, which it then lets go) */
      else if (word & IN_RING)
        next |= COUNTED; /* the loop will find it, and free it */
      else if (word & IN_STACK)
        ; /* the loop will find it */
      else if (rec != NULL && queue_room(rec) == 0)
        next |= NOTICE, ring = 1;
      else
        next |= IN_STACK; /* no record: the wheel's stack */
      if (!atomic_compare_exchange_weak_explicit(&node->state, &word, next,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire))
        continue;
      *ended = 1;
      if ((word & IN_RING) && !(next & IN_RING)) {
        if (word & LOOP_HELD) {
          /* The loop thread: no drain runs now, and `held` is its own. */
          UVTW__ASSERT(node->held);
          node->held = 0;
          wheel->tasks.held--;
        }
        retract(&wheel->tasks, rec, node, id);
      } else if (next & COUNTED) {
        count_retracted(&wheel->tasks, rec);
      } else if (ring) {
        queue_put(rec, id);
        publish_fence();
        wake_loop(wheel);
      } else if ((next & IN_STACK) && !(word & IN_STACK)) {
        stack_push(&wheel->tasks.queue, node);
        publish_fence();
        wake_loop(wheel);
      }
      return 0;
    }
    if (STATE(word) != T_RUNNING)
      return UV_ENOENT;
    if (node == current_task) {
      /* A one-shot's run is its end; a repeating task stops here. */
      if (node->repeat_ms == 0)
        return UV_ENOENT;
      if (move(node, S(T_RUNNING), T_CANCELLED, 0, gen, &word)) {
        *ended = 1;
        return 0;
      }
    } else if (move(node, S(T_RUNNING), T_STOPPING, 0, gen, &word)) {
      return UV_EBUSY;
    }
    /* The run ended in between: look again. */
    word = atomic_load_explicit(&node->state, memory_order_acquire);
  }
}


int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id) {
  uvtw__producer_t* rec;
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  int ended;
  int err;

  if (wheel == NULL)
    return UV_EINVAL;
  if ((id & UVTW__GEN_MASK) == 0)
    return UV_ENOENT;
  tasks = &wheel->tasks;
  /* Once close is done with the tasks nothing is left to cancel. */
  if (atomic_load_explicit(&tasks->close_word, memory_order_relaxed) & CLOSED)
    return UV_ENOENT;
  /* Without a record (out of memory, or a first call during close), the
   * shared paths. */
  rec = enter(wheel);
  /* After enter's fence: either this sees CLOSED, or close sees this call
   * inside and waits until it has left. */
  err = UV_ENOENT;
  if (!(atomic_load_explicit(&tasks->close_word, memory_order_relaxed) &
        CLOSED)) {
    node = uvtw__pool_node_at(&tasks->pool,
                              (uint32_t) (id >> UVTW__GEN_BITS));
    if (node != NULL) {
      ended = 0;
      err = cancel_node(wheel, rec, node, id, &ended);
      if (ended)
        count_end(tasks, rec);
    }
  }
  leave(wheel, rec);
  return err;
}


/* ---- the loop thread ---------------------------------------------------- */

/* The task's timer became (delta 1) or stopped being (-1) active in the
 * core.  One writer (the loop thread): a relaxed load and store. */
static void count_filed(uvtw_wheel_t* wheel, int delta) {
  own_add(&wheel->tasks.filed, (uint64_t) (int64_t) delta,
          memory_order_relaxed);
}


/* Stops the task's timer in the core, if active there. */
static void stop_timer(uvtw_wheel_t* wheel, uvtw_timer_t* timer) {
  if (timer->link_.next == NULL)
    return;
  uvtw__core_stop(&wheel->core, timer);
  count_filed(wheel, -1);
}


/* Takes the task's timer out of the wheel, if it is there. */
static void unfile(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  if (node->location != AT_WHEEL)
    return;
  stop_timer(wheel, &node->timer);
  node->location = AT_NONE;
}


/* Loop thread: the node has ended; the pool recycles it. */
static void release_node(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  UVTW__ASSERT(node->location == AT_NONE && node->work == NULL);
  if (node->held) {
    node->held = 0;
    tasks->held--;
  }
  node->taken_in = 0;
  if (recycle(node))
    uvtw__pool_release(&tasks->pool, node);
}


/* Frees an ended node once nothing on the loop or in a queue refers to it
 * any more. */
static void release_if_idle(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t word;

  if (node->location != AT_NONE)
    return;
  word = atomic_load_explicit(&node->state, memory_order_acquire);
  if (word & QUEUE_FLAGS)
    return; /* the loop takes it from its queue later, and frees it then */
  switch (STATE(word)) {
  case T_CANCELLED:
    if (!(word & COUNTED))
      wheel->tasks.cancelled++;
    release_node(&wheel->tasks, node);
    break;
  case T_DONE:
    release_node(&wheel->tasks, node);
    break;
  default:
    break;
  }
}


/* Moves a waiting task to CLOSED and queues its final call.  Returns 0 if a
 * cancel won the race instead. */
static int queue_final_call(uvtw_wheel_t* wheel,
                            uvtw__task_t* node,
                            unsigned from) {
  uint64_t word;

  UVTW__ASSERT(node->location == AT_NONE);
  if (!move(node, S(from), T_CLOSED, 0, 0, &word))
    return 0;
  node->location = AT_FINAL_LIST;
  uvtw__list_append(&wheel->tasks.final, &node->timer.link_);
  return 1;
}


static int is_pool(uvtw__task_t* node) {
  return (atomic_load_explicit(&node->state, memory_order_relaxed) & POOL) !=
         0;
}


/* Loop thread: a threadpool request for the node, recycled or new; NULL
 * when out of memory. */
static uvtw__work_t* work_get(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__work_t* w;

  w = tasks->free_works;
  if (w != NULL)
    tasks->free_works = w->next_free;
  else if ((w = malloc(sizeof(*w))) == NULL)
    return NULL;
  w->node = node;
  w->ran = 0;
  w->stopped = 0;
  w->uv_cancel_asked = 0;
  node->work = w;
  return w;
}


static void work_put(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__work_t* w;

  w = node->work;
  node->work = NULL;
  w->next_free = tasks->free_works;
  tasks->free_works = w;
}


static void file_task(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uvtw_timer_t* timer;
  uint64_t e;

  timer = &node->timer;
  timer->link_.next = NULL;
  timer->wheel_ = wheel;
  timer->cb_ = uvtw__task_fire;
  timer->repeat_ = is_pool(node) ? 0 : node->repeat_ms;
  timer->unref_ = 0;
  node->location = AT_WHEEL;
  e = uvtw__core_start(&wheel->core, timer, node->deadline_ms);
  count_filed(wheel, 1);
  uvtw__driver_earlier(wheel, e);
}


/* Takes in a node whose queue flag the loop just cleared (`word`: the state
 * after that): a new task is held and filed in the wheel; a cancelled one
 * (a notice, or a task cancelled before the loop got to it) is unfiled and
 * freed. */
static void take_in(uvtw_wheel_t* wheel, uvtw__task_t* node, uint64_t word) {
  if (!node->taken_in) {
    node->taken_in = 1;
    if (!(word & COUNTED))
      wheel->tasks.accepted++;
  }
  switch (STATE(word)) {
  case T_PENDING:
    /* Only submit queues a pending node: this is a new task. */
    if (!node->held) {
      node->held = 1;
      wheel->tasks.held++;
    }
    if (wheel->closing) {
      queue_final_call(wheel, node, T_PENDING);
      break;
    }
    file_task(wheel, node);
    /* A cancel may win from here on; its notice comes through a queue. */
    break;
  case T_CANCELLED:
    unfile(wheel, node);
    release_if_idle(wheel, node);
    break;
  default:
    UVTW__UNREACHABLE();
  }
}


/* Takes in the id read from a ring slot, unless a cancel took the task back
 * (the flag is gone, or the node already carries a newer generation). */
static void take_slot(uvtw_wheel_t* wheel, uvtw_id_t id) {
  uvtw__task_t* node;
  uint64_t word;
  uint64_t flag;

  node = uvtw__pool_node_at(&wheel->tasks.pool,
                            (uint32_t) (id >> UVTW__GEN_BITS));
  if (node == NULL)
    UVTW__UNREACHABLE(); /* a submitted node's chunk is published */
  word = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (GEN(word) != (id & UVTW__GEN_MASK))
      return;
    flag = word & NOTICE ? NOTICE : word & IN_RING ? IN_RING : 0;
    if (flag == 0)
      return;
    if (atomic_compare_exchange_weak_explicit(&node->state, &word,
                                              word & ~flag,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
      break;
  }
  take_in(wheel, node, word & ~flag);
}


/* Takes in a stack of nodes (newest first) in push order. */
static size_t take_stack(uvtw_wheel_t* wheel, uvtw__task_t* top) {
  uvtw__task_t* fifo;
  uvtw__task_t* next;
  uint64_t word;
  size_t n;

  for (fifo = NULL; top != NULL; top = next) {
    next = atomic_load_explicit(&top->q.queue_next, memory_order_relaxed);
    atomic_store_explicit(&top->q.queue_next, fifo, memory_order_relaxed);
    fifo = top;
  }
  for (n = 0; fifo != NULL; fifo = next, n++) {
    next = atomic_load_explicit(&fifo->q.queue_next, memory_order_relaxed);
    word = atomic_fetch_and_explicit(&fifo->state, ~IN_STACK,
                                     memory_order_acq_rel);
    take_in(wheel, fifo, word & ~IN_STACK);
  }
  return n;
}


/* Blocks the loop hands back to a record's owner, at most, once read (a
 * queue that grew while the loop was away shrinks back once it caught up):
 * the loop frees the others. */
#define SPARE_BLOCKS 2

/* The loop is done with a block of the record's queue: zeroed, it goes
 * back to the owner, or is freed if the owner has spares enough.  Nobody
 * else refers to it: only the loop reads a block, and only the owner
 * writes one, the one it fills (retract), which the loop has not passed. */
static void block_return(uvtw__producer_t* rec, uvtw__block_t* b) {
  uvtw__block_t* top;
  uint64_t handed;
  unsigned i;

  handed = atomic_load_explicit(&rec->handed_back, memory_order_relaxed);
  /* A stale taken_back only makes the loop free a block early. */
  if (handed - atomic_load_explicit(&rec->taken_back, memory_order_relaxed) >=
      SPARE_BLOCKS) {
    atomic_fetch_sub_explicit(&rec->nblocks, 1, memory_order_relaxed);
    line_free(b);
    return;
  }
  atomic_store_explicit(&rec->handed_back, handed + 1, memory_order_relaxed);
  for (i = 0; i < UVTW__BLOCK_IDS; i++)
    atomic_store_explicit(&b->slot[i], 0, memory_order_relaxed);
  top = atomic_load_explicit(&rec->returned, memory_order_relaxed);
  do
    atomic_store_explicit(&b->next, top, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&rec->returned, &top, b,
                                                memory_order_release,
                                                memory_order_relaxed));
}


/* Takes in up to `budget` of one record's submissions and notices, oldest
 * first.  Returns how many ids it read. */
static size_t drain_record(uvtw_wheel_t* wheel,
                           uvtw__producer_t* rec,
                           size_t budget) {
  uvtw__block_t* b;
  uvtw__block_t* next;
  uvtw_id_t id;
  unsigned i;
  size_t n;

  b = rec->rblock;
  i = rec->ridx;
  for (n = 0; n < budget;) {
    if (i == UVTW__BLOCK_IDS) {
      next = atomic_load_explicit(&b->next, memory_order_acquire);
      if (next == NULL)
        break;
      block_return(rec, b);
      b = next;
      i = 0;
      continue;
    }
    id = atomic_load_explicit(&b->slot[i], memory_order_acquire);
    if (id == 0)
      break; /* not written yet */
    i++;
    n++;
    if (id != TOMBSTONE)
      take_slot(wheel, id);
  }
  rec->rblock = b;
  rec->ridx = i;
  return n;
}


/* Processes about `budget` ids and nodes, each producer's oldest first.
 * Fair across records: a first pass gives every record its share of the
 * budget (at least one id), a second pass hands what the quiet ones left
 * to the busy ones.  So each record's oldest id is taken in by every
 * batch, however busy the others are (a newer record, first in the list,
 * could otherwise take the whole budget batch after batch).  Returns
 * non-zero if work remains. */
static int drain(uvtw_wheel_t* wheel, size_t budget) {
  uvtw__producer_t* first;
  uvtw__producer_t* rec;
  uvtw__tasks_t* tasks;
  size_t records;
  size_t share;
  size_t count;

  tasks = &wheel->tasks;
  first = atomic_load_explicit(&tasks->producers, memory_order_acquire);
  count = take_stack(
      wheel, atomic_exchange_explicit(&tasks->queue, NULL,
                                      memory_order_acquire));
  records = 0;
  for (rec = first; rec != NULL; rec = rec->next)
    records++;
  share = records == 0 || budget / records == 0 ? 1 : budget / records;
  for (rec = first; rec != NULL; rec = rec->next)
    count += drain_record(wheel, rec, share);
  for (rec = first; rec != NULL && count < budget; rec = rec->next)
    count += drain_record(wheel, rec, budget - count);
  if (count > tasks->high_water)
    tasks->high_water = count;
  /* A backlog holds the loop until it is taken in (flush): the batch may
   * have been all tombstones, and a task behind them holds nothing yet. */
  uvtw__tasks_flush(wheel);
  uvtw__driver_sync_ref(wheel);
  return tasks->backlog;
}
static void work_cb(uv_work_t* req);
static void after_work_cb(uv_work_t* req, int status);


/* The timer callback of every task: runs it, or sends it to the pool. */
void uvtw__task_fire(uvtw_timer_t* timer) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* w;
  uint64_t word;
  unsigned next;
  int pool;

  node = task_of(timer);
  wheel = timer->wheel_;
  if (timer->link_.next == NULL)
    count_filed(wheel, -1); /* a one-shot: the pass made it inactive */
  UVTW__ASSERT(node->location == AT_WHEEL);
  pool = is_pool(node);
  w = NULL;
  if (pool && STATE(atomic_load_explicit(&node->state,
                                         memory_order_relaxed)) == T_PENDING &&
      (w = work_get(&wheel->tasks, node)) == NULL) {
    /* Out of memory for the request: the task stays PENDING and tries
     * again a millisecond later (never early, never lost). */
    node->location = AT_NONE;
    node->deadline_ms = uv_now(wheel->loop) + 1;
    file_task(wheel, node);
    return;
  }
  if (!move(node, S(T_PENDING), pool ? T_QUEUED : T_RUNNING, 0, 0, &word)) {
    /* Cancelled: stop a repeat the wheel re-filed; the notice frees. */
    UVTW__ASSERT(STATE(word) == T_CANCELLED);
    if (w != NULL)
      work_put(&wheel->tasks, node);
    stop_timer(wheel, timer);
    return;
  }

  if (pool) {
    node->location = AT_POOL;
    w->dispatch_ms = uv_now(wheel->loop);
    uvtw__list_append(&wheel->tasks.in_pool, &timer->link_);
    /* Cannot fail: work_cb is not NULL and the loop is ours. */
    uv_queue_work(wheel->loop, &w->req, work_cb, after_work_cb);
    return;
  }

  outer = current_task;
  current_task = node;
  node->cb(node->arg, 0);
  current_task = outer;
  wheel->tasks.run++;

  /* A one-shot's run is its end.  A repeating task was re-filed by the
   * wheel before the run, from the dispatch time, and just waits again;
   * unless its own callback closed the wheel: its final call follows. */
  next = node->repeat_ms == 0 ? T_DONE : wheel->closing ? T_CLOSED : T_PENDING;
  if (move(node, S(T_RUNNING), next, 0, 0, &word)) {
    if (next == T_PENDING)
      return;
    unfile(wheel, node);
    if (next == T_CLOSED) {
      node->location = AT_FINAL_LIST;
      uvtw__list_append(&wheel->tasks.final, &timer->link_);
      return;
    }
    end_live(&wheel->tasks);
    release_if_idle(wheel, node);
    return;
  }
  if (move(node, S(T_STOPPING), T_DONE, 0, 0, &word)) {
    /* A cancel returned EBUSY during the run: this run was the last. */
    wheel->tasks.cancelled++;
    end_live(&wheel->tasks);
  } else if (STATE(word) != T_CANCELLED) { /* by its own callback */
    UVTW__UNREACHABLE();
  }
  unfile(wheel, node);
  release_if_idle(wheel, node);
}


static void work_cb(uv_work_t* req) {
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* w;
  uint64_t word;
  unsigned next;

  w = uvtw__container_of(req, uvtw__work_t, req);
  node = w->node;
  if (!move(node, S(T_QUEUED), T_RUNNING, 0, 0, &word))
    return; /* cancelled or closed before it started */

  outer = current_task;
  current_task = node;
  node->cb(node->arg, 0);
  current_task = outer;
  w->ran = 1; /* after_work_cb reads it after this thread is done */

  /* A repeating task waits (PENDING) for after_work to re-file it; a
   * cancel from now on wins at once.  CANCELLED stays; STOPPING ends below. */
  next = node->repeat_ms != 0 ? T_PENDING : T_DONE;
  /* A one-shot ends by its run: its place is free now, not when the loop
   * gets to after_work_cb.  Close waits for after_work_cb, so the wheel is
   * alive. */
  if (move(node, S(T_RUNNING), next, 0, 0, &word)) {
    if (next == T_DONE)
      count_end(&node->timer.wheel_->tasks, NULL);
  } else if (STATE(word) == T_STOPPING) {
    /* A cancel returned UV_EBUSY during this run: the task ends now, when
     * the run returns, as uvtw_cancel promises.  No other thread moves a
     * STOPPING task; after_work_cb counts it as cancelled. */
    if (!move(node, S(T_STOPPING), T_DONE, 0, 0, &word))
      UVTW__UNREACHABLE();
    w->stopped = 1;
    count_end(&node->timer.wheel_->tasks, NULL);
  }
}


static void after_work_cb(uv_work_t* req, int status) {
  uvtw__task_t* node;
  uvtw_wheel_t* wheel;
  uvtw__work_t* w;
  uint64_t word;
  uint64_t deadline;
  uint64_t dispatch_ms;
  int stopped;
  int ran;

  w = uvtw__container_of(req, uvtw__work_t, req);
  node = w->node;
  wheel = node->timer.wheel_;
  UVTW__ASSERT(node->location == AT_POOL && node->work == w);
  uvtw__list_remove(&node->timer.link_);
  node->location = AT_NONE;
  ran = w->ran;
  stopped = w->stopped;
  dispatch_ms = w->dispatch_ms;
  work_put(&wheel->tasks, node);

  word = atomic_load_explicit(&node->state, memory_order_acquire);
  if (status == UV_ECANCELED) {
    /* uv_cancel at close: the work never started. */
    if (!queue_final_call(wheel, node, T_QUEUED))
      release_if_idle(wheel, node);
    uvtw__tasks_flush(wheel);
    uvtw__wheel_close_continue(wheel);
    return;
  }
  if (ran)
    wheel->tasks.run++;
  switch (STATE(word)) {
  case T_DONE: /* work_cb ended it and freed its place */
    if (stopped)
      wheel->tasks.cancelled++;
    release_if_idle(wheel, node);
    break;
  case T_PENDING:
    if (wheel->closing) {
      queue_final_call(wheel, node, T_PENDING);
      break;
    }
    /* Due at dispatch + repeat; if that passed while it ran, it goes
     * again in the next pass, never overlapping itself. */
    deadline = dispatch_ms + node->repeat_ms;
    node->deadline_ms = deadline < dispatch_ms ? UINT64_MAX : deadline;
    file_task(wheel, node);
    uvtw__driver_sync_ref(wheel);
    break;
  case T_CANCELLED:
    release_if_idle(wheel, node);
    break;
  default: /* QUEUED, RUNNING and STOPPING end in work_cb; CLOSED and
            * FREE never come here */
    UVTW__UNREACHABLE();
  }
  uvtw__tasks_flush(wheel);
  if (wheel->closing)
    uvtw__wheel_close_continue(wheel);
}


/* ---- close ------------------------------------------------------------- */

static void take_from_wheel(uvtw_timer_t* timer, void* arg) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;

  if (!uvtw__task_owns(timer))
    return;
  wheel = arg;
  node = task_of(timer);
  unfile(wheel, node);
  /* Close called from this task's own callback: uvtw__task_fire ends it
   * after the callback returns (even if it cancelled itself first). */
  if (node == current_task)
    return;
  if (!queue_final_call(wheel, node, T_PENDING))
    release_if_idle(wheel, node); /* a cancel won */
}


void uvtw__tasks_close_begin(uvtw_wheel_t* wheel) {
  atomic_fetch_or_explicit(&wheel->tasks.close_word, CLOSING,
                           memory_order_seq_cst);
  uvtw__core_walk(&wheel->core, take_from_wheel, wheel);
  uvtw__tasks_flush(wheel);
  /* The rest runs from the async callback, outside the caller's stack.  The
   * async handle holds the loop until close is done. */
  uv_ref((uv_handle_t*) &wheel->async);
  uv_async_send(&wheel->async);
}


static void run_finals(uvtw_wheel_t* wheel) {
  uvtw__task_t* node;
  uint64_t word;

  while (!uvtw__list_empty(&wheel->tasks.final)) {
    node = task_of(uvtw__container_of(wheel->tasks.final.next, uvtw_timer_t,
                                      link_));
    UVTW__ASSERT(node->location == AT_FINAL_LIST);
    uvtw__list_remove(&node->timer.link_);
    node->location = AT_NONE;
    node->cb(node->arg, UV_ECANCELED);
    wheel->tasks.closed++;
    end_live(&wheel->tasks);
    /* No other thread moves a CLOSED task. */
    if (!move(node, S(T_CLOSED), T_DONE, 0, 0, &word))
      UVTW__UNREACHABLE();
    release_if_idle(wheel, node);
  }
  uvtw__tasks_flush(wheel);
}


/* Live tasks: see "Counting" at the top.  Every end is read before any
 * submit (seq_cst, also for close's side of the barrier in uvtw_submit),
 * so each end counted brings its submit with it; and the submits are
 * summed over the record list as read after the ends, which includes a
 * record made in between (a new thread's first task, which may have ended
 * already and been counted above).  That record's own ends may be missed:
 * a task that ended during this call may count as live, never the
 * reverse. */
static uint64_t live_count(const uvtw__tasks_t* tasks) {
  uvtw__producer_t* rec;
  uint64_t ended;
  uint64_t submitted;

  ended = atomic_load_explicit(&tasks->loop_ended, memory_order_seq_cst) +
          atomic_load_explicit(&tasks->ended_shared, memory_order_seq_cst);
  for (rec = atomic_load_explicit(&tasks->producers, memory_order_seq_cst);
       rec != NULL; rec = rec->next)
    ended += atomic_load_explicit(&rec->ended, memory_order_seq_cst);
  submitted = 0;
  for (rec = atomic_load_explicit(&tasks->producers, memory_order_seq_cst);
       rec != NULL; rec = rec->next)
    submitted += atomic_load_explicit(&rec->submitted, memory_order_seq_cst);
  return submitted > ended ? submitted - ended : 0;
}


/* Close's side of the Dekker pair in enter: after its seq_cst
 * read-modify-writes of the close word (CLOSING at close_begin, CLOSED just
 * before), a fence, then the marks.  Non-zero while a call that close must
 * wait for is inside the wheel: one that had marked itself before the
 * fence (the fence order puts its own fence first, so it may have missed
 * CLOSING or CLOSED), seen as a record's odd `calls` value at the first
 * look, which must change; a call that entered after that look saw the
 * flags and does nothing, but waiting for the first one after it (an even
 * value at the first look, + 1) costs nothing.  Calls without a record
 * are waited for by their shared count.  Acquire: what a call did before
 * it left is visible to close from here on. */
static int calls_inside(uvtw__tasks_t* tasks) {
  uvtw__producer_t* rec;
  uint64_t calls;
  int inside;

  full_fence();
  inside = atomic_load_explicit(&tasks->calls_shared,
                                memory_order_acquire) != 0;
  for (rec = atomic_load_explicit(&tasks->producers, memory_order_acquire);
       rec != NULL; rec = rec->next) {
    calls = atomic_load_explicit(&rec->calls, memory_order_acquire);
    if (rec->close_seen == 0)
      rec->close_seen = calls | 1;
    if (calls == rec->close_seen)
      inside = 1;
  }
  return inside;
}


int uvtw__tasks_close_step(uvtw_wheel_t* wheel) {
  uvtw__tasks_t* tasks;
  struct uvtw__link* link;
  uvtw__task_t* node;

  tasks = &wheel->tasks;
  UVTW__ASSERT(wheel->closing == UVTW__CLOSING_TASKS);
  do {
    while (drain(wheel, SIZE_MAX))
      ;
    run_finals(wheel); /* user code: may submit (refused) or cancel */
  } while (drain(wheel, SIZE_MAX) || !uvtw__list_empty(&tasks->final));
  /* Queued pool work is cancelled; running work is waited for. */
  for (link = tasks->in_pool.next; link != &tasks->in_pool; link = link->next) {
    node = task_of(uvtw__container_of(link, uvtw_timer_t, link_));
    if (node->work->uv_cancel_asked)
      continue;
    node->work->uv_cancel_asked = 1;
    uv_cancel((uv_req_t*) &node->work->req);
  }
  if (!uvtw__list_empty(&tasks->in_pool))
    return 0; /* after_work_cb calls again */
  if (live_count(tasks) != 0) {
    /* A task is on its way to a queue, or a cancel has not counted its end
     * yet: look again next iteration. */
    uv_async_send(&wheel->async);
    return 0;
  }
  /* No task is live.  From here on a cancel finds nothing (CLOSED), and
   * close waits only for the calls already inside. */
  atomic_fetch_or_explicit(&tasks->close_word, CLOSED, memory_order_seq_cst);
  if (calls_inside(tasks)) {
    /* Never blocks the loop: looks again next iteration (a submit inside
     * may still publish a task, which this step then drains). */
    uv_async_send(&wheel->async);
    return 0;
  }
  return 1;
}


void uvtw__tasks_async_cb(uv_async_t* async) {
  uvtw_wheel_t* wheel;

  wheel = async->data;
  wheel->tasks.async_wakeups++;
  /* The loop's side of the pair in wake_loop: the flag is clear before the
   * drain loads the queues. */
  atomic_store_explicit(&wheel->tasks.wake_pending, 0, memory_order_relaxed);
  full_fence();
  if (wheel->closing) {
    uvtw__wheel_close_continue(wheel);
    return;
  }
  /* A flood of submissions cannot starve the loop: after a batch, signal
   * ourselves and let the rest of this iteration run. */
  if (drain(wheel, UVTW__DRAIN_BATCH))
    uv_async_send(async);
}


/* ---- set-up ------------------------------------------------------------ */

int uvtw__tasks_init(uvtw_wheel_t* wheel, size_t max_tasks) {
  uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  memset(tasks, 0, sizeof(*tasks));
  tasks->max_tasks = max_tasks;
  tasks->loop_thread = &thread_token;
  tasks->serial = atomic_fetch_add_explicit(&wheel_serials, 1,
                                            memory_order_relaxed) + 1;
  atomic_init(&tasks->close_word, 0);
  atomic_init(&tasks->wake_pending, 0);
  atomic_init(&tasks->producers, NULL);
  atomic_init(&tasks->reserved, 0);
  atomic_init(&tasks->ended_shared, 0);
  atomic_init(&tasks->retracted_shared, 0);
  atomic_init(&tasks->loop_ended, 0);
  atomic_init(&tasks->queue, NULL);
  uvtw__list_init(&tasks->in_pool);
  uvtw__list_init(&tasks->final);
  return uvtw__pool_init(&tasks->pool);
}


/* Frees a chain of blocks linked by `next`. */
static void free_chain(uvtw__block_t* b) {
  uvtw__block_t* next;

  for (; b != NULL; b = next) {
    next = atomic_load_explicit(&b->next, memory_order_relaxed);
    line_free(b);
  }
}


void uvtw__tasks_destroy(uvtw_wheel_t* wheel) {
  uvtw__producer_t* rec;
  uvtw__block_t* b;
  uvtw__work_t* w;

  /* Every request is idle: close waited for the threadpool. */
  while ((w = wheel->tasks.free_works) != NULL) {
    wheel->tasks.free_works = w->next_free;
    free(w);
  }
  while ((rec = atomic_load_explicit(&wheel->tasks.producers,
                                     memory_order_relaxed)) != NULL) {
    atomic_store_explicit(&wheel->tasks.producers, rec->next,
                          memory_order_relaxed);
    /* Each block is in the queue, the returned stack or the spare list. */
    b = rec->rblock;
    free_chain(b);
    free_chain(atomic_load_explicit(&rec->returned, memory_order_relaxed));
    free_chain(rec->spare);
    line_free(rec);
  }
  uvtw__pool_destroy(&wheel->tasks.pool);
}


uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel) {
  return atomic_load_explicit(&wheel->tasks.filed, memory_order_relaxed);
}


uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel) {
  return live_count(&wheel->tasks);
}


void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out) {
  const uvtw__tasks_t* tasks;
  uvtw__producer_t* rec;
  uint64_t retracted;

  tasks = &wheel->tasks;
  retracted = atomic_load_explicit(&tasks->retracted_shared,
                                   memory_order_relaxed);
  for (rec = atomic_load_explicit(&tasks->producers, memory_order_acquire);
       rec != NULL; rec = rec->next)
    retracted += atomic_load_explicit(&rec->retracted, memory_order_relaxed);
  out->tasks_live = live_count(tasks);
  out->async_wakeups = tasks->async_wakeups;
  /* A task cancelled before the loop took it in never reached the loop:
   * its canceller counted it. */
  out->tasks_accepted = tasks->accepted + retracted;
  out->tasks_run = tasks->run;
  out->tasks_cancelled = tasks->cancelled + retracted;
  out->tasks_closed = tasks->closed;
  out->queue_high_water = tasks->high_water;
}
