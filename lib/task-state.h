/* SPDX-License-Identifier: MIT */
/* A task's state word: one atomic word per node, generation << 16 | flags |
 * state, and move(), through which every move of a live task goes.
 *
 * Every transition that another thread could race with
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
 *   IN_QUEUE  its id is in a record's queue slot that the loop has not
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
 *             leaves it IN_QUEUE, and the loop frees it when it reads the
 *             slot.  That canceller sets COUNTED and counts it in the
 *             stats, as for a task taken back.
 *   NOTICE    a cancel won after the loop took the task in, and put the id
 *             in its own queue, so that the loop unfiles the timer promptly
 *             instead of at its deadline.
 *   IN_STACK  the same, for a cancel made without a record (out of
 *             memory, or a thread's first call during close): the node is
 *             on the wheel's stack.
 * The loop frees a node once it is ended, none of these is set, and it is
 * not on the threadpool; all checked on the loop thread. */

#ifndef UVTW_TASK_STATE_H
#define UVTW_TASK_STATE_H

#include "task-pool.h"
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
#define IN_QUEUE ((uint64_t) 0x100) /* in a record's queue */
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
#define QUEUE_FLAGS (IN_QUEUE | IN_STACK | NOTICE)
#define STATE(word) ((unsigned) ((word) & STATE_MASK))
#define GEN_SHIFT 16
#define GEN(word) ((word) >> GEN_SHIFT)
#define WITH_STATE(word, st) (((word) & ~STATE_MASK) | (st))
#define S(st) (1u << (st)) /* a set of states */

/* The moves of the diagram above, as the set of states that state `st`
 * may move to; move() checks every move against it.  (FREE -> PENDING is
 * submit's plain store, CANCELLED/DONE -> FREE recycle's.)  A function, so
 * that a build without asserts, which never calls it, has no table. */
static inline unsigned legal_moves(unsigned st) {
  static const unsigned moves[] = {
      [T_FREE] = 0,
      [T_PENDING] = S(T_QUEUED) | S(T_RUNNING) | S(T_CANCELLED) | S(T_CLOSED),
      [T_QUEUED] = S(T_RUNNING) | S(T_CANCELLED) | S(T_CLOSED),
      [T_RUNNING] = S(T_PENDING) | S(T_STOPPING) | S(T_CANCELLED) |
                    S(T_DONE) | S(T_CLOSED),
      [T_STOPPING] = S(T_DONE),
      [T_CANCELLED] = 0,
      [T_DONE] = 0,
      [T_CLOSED] = S(T_DONE),
  };

  return moves[st];
}



static inline uvtw__task_t* task_of(uvtw_timer_t* timer) {
  return uvtw__container_of(timer, uvtw__task_t, timer);
}


static inline uvtw_id_t id_of(const uvtw__task_t* node, uint64_t gen) {
  return (uint64_t) node->index << UVTW__GEN_BITS | gen;
}


/* Every state move of a live task goes through here: if the node's state
 * is one of `from` (a set of S() bits), and its generation is `gen` (0:
 * any), one CAS moves it to `to` and sets the flag bits `set`; the CAS is
 * retried for as long as only a concurrent change of flag bits, or a move
 * within `from`, made it fail.  Returns non-zero if it moved.  *seen gets
 * the word the move started from, or the word that stopped it. */
static inline int move(uvtw__task_t* node,
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
    UVTW__ASSERT(legal_moves(STATE(word)) & S(to));
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
static inline int recycle(uvtw__task_t* node) {
  uint64_t word;
  uint64_t gen;

  word = atomic_load_explicit(&node->state, memory_order_relaxed);
  UVTW__ASSERT(STATE(word) == T_CANCELLED || STATE(word) == T_DONE);
  gen = uvtw__pool_next_gen(node, GEN(word));
  atomic_store_explicit(&node->state, gen << GEN_SHIFT | T_FREE,
                        memory_order_release);
  return gen != 0;
}

#endif /* UVTW_TASK_STATE_H */
