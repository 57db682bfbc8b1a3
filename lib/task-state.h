/* SPDX-License-Identifier: MIT */
/* A task's state word: one atomic word per node, generation << 16 | flags |
 * state, and cas_word(), through which every change of a live task's word
 * goes.
 *
 * Every transition that another thread could race with is one CAS on it,
 * so a cancel and an expiry (or close) racing for the same task see
 * exactly one winner, and a stale id, whose generation no longer matches,
 * changes nothing.  Every change of a live task's word goes through
 * cas_word, which checks it against the diagram (move() and cancel_plan()
 * decide what to write); plain stores only take a free node to PENDING
 * (submit) and an ended one to FREE, when no other thread can move its
 * state.  Each use of a node carries a new
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

#include "list.h"
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
#define STATE(word) ((unsigned) ((word) &STATE_MASK))
#define GEN_SHIFT 16
#define GEN(word) ((word) >> GEN_SHIFT)
#define WITH_STATE(word, st) (((word) & ~STATE_MASK) | (st))
#define S(st) (1u << (st)) /* a set of states */

/* The moves of the diagram above, as the set of states that state `st`
 * may move to; cas_word() checks every move against it.  (FREE -> PENDING is
 * submit's plain store, CANCELLED/DONE -> FREE recycle's.)  A function, so
 * that a build without asserts, which never calls it, has no table. */
static inline unsigned legal_moves(unsigned st) {
  static const unsigned moves[] = {
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

  return moves[st];
}


static inline uvtw__task_t* task_of(uvtw_timer_t* timer) {
  return uvtw__container_of(timer, uvtw__task_t, timer);
}


static inline uvtw_id_t id_of(const uvtw__task_t* node, uint64_t gen) {
  return (uint64_t) node->index << UVTW__GEN_BITS | gen;
}


/* Every change of a live task's word goes through here: one CAS from
 * *word to `next`, which must keep the generation, and either keep the
 * state (a change of flags: the loop taking a task in) or make a move of
 * the diagram.  On failure *word is the word that stopped it. */
static inline int cas_word(uvtw__task_t* node, uint64_t* word, uint64_t next) {
  UVTW__ASSERT(GEN(next) == GEN(*word));
  UVTW__ASSERT(STATE(next) == STATE(*word) ||
               (legal_moves(STATE(*word)) & S(STATE(next))));
  return atomic_compare_exchange_weak_explicit(
      &node->state, word, next, memory_order_acq_rel, memory_order_acquire);
}


/* A move of the diagram: if the node's state is one of `from` (a set of
 * S() bits), and its generation is `gen` (0: any), one CAS moves it to
 * `to`; the CAS is retried for as long as only a concurrent change of flag
 * bits, or a move within `from`, made it fail.  Returns non-zero if it
 * moved.  *seen gets the word the move started from, or the word that
 * stopped it. */
static inline int move(uvtw__task_t* node,
                       unsigned from,
                       unsigned to,
                       uint64_t gen,
                       uint64_t* seen) {
  uint64_t word;

  word = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (!(from & S(STATE(word))) || (gen != 0 && GEN(word) != gen)) {
      *seen = word;
      return 0;
    }
    if (cas_word(node, &word, WITH_STATE(word, to))) {
      *seen = word;
      return 1;
    }
  }
}


/* What a cancel does after its CAS, besides ending the task. */
typedef enum {
  CANCEL_NONE,      /* nothing more (or nothing was done: see err) */
  CANCEL_TAKE_BACK, /* the loop never took it in: the canceller frees it */
  CANCEL_COUNT,     /* the loop will free it; the canceller counts it */
  CANCEL_NOTICE,    /* the id goes in the canceller's queue (a notice) */
  CANCEL_STACK      /* the node goes on the wheel's stack of notices */
} cancel_action_t;

typedef struct {
  int err;       /* what uvtw_cancel returns */
  int cas;       /* non-zero: CAS the word to `next` first */
  uint64_t next; /* the word the cancel writes */
  cancel_action_t action;
} cancel_plan_t;

/* Non-zero if a cancel of a task with this word needs to know whether the
 * canceller can queue a notice (cancel_plan's can_notice). */
static inline int cancel_needs_room(uint64_t word) {
  return !(word & (IN_QUEUE | IN_STACK));
}

/* The cancel's decision, from the task's word alone (a pure function, so
 * that it has a test of its own): `gen` the id's generation, `own` the
 * cancel is made from the task's own callback, `repeating` the task
 * repeats, `on_loop` the caller is the loop thread, `can_notice` its
 * record has room for a notice (only read if cancel_needs_room).
 *   waiting (PENDING, QUEUED): 0, CANCELLED; the node is the canceller's
 *     if the loop has not taken it in (also one the loop holds, when the
 *     canceller is the loop thread, which then lets go of it), else the
 *     loop is told by a notice, through the canceller's queue or, without
 *     room there, the wheel's stack (nothing more if one is there);
 *   running, from its own callback: a repeating task 0 (CANCELLED), a
 *     one-shot UV_ENOENT (its run is its end);
 *   running, from elsewhere: UV_EBUSY (STOPPING: this run is its last);
 *   anything else, or another generation: UV_ENOENT. */
static inline cancel_plan_t cancel_plan(uint64_t word,
                                        uint64_t gen,
                                        int own,
                                        int repeating,
                                        int on_loop,
                                        int can_notice) {
  cancel_plan_t plan;

  plan.err = UV_ENOENT;
  plan.cas = 0;
  plan.next = word;
  plan.action = CANCEL_NONE;
  if (GEN(word) != gen)
    return plan;
  switch (STATE(word)) {
  case T_PENDING:
  case T_QUEUED:
    plan.err = 0;
    plan.cas = 1;
    plan.next = WITH_STATE(word, T_CANCELLED);
    if ((word & IN_QUEUE) && (!(word & LOOP_HELD) || on_loop)) {
      plan.next &= ~IN_QUEUE;
      plan.action = CANCEL_TAKE_BACK;
    } else if (word & IN_QUEUE) {
      plan.next |= COUNTED;
      plan.action = CANCEL_COUNT;
    } else if (word & IN_STACK) {
      plan.action = CANCEL_NONE; /* the loop will find it */
    } else if (can_notice) {
      plan.next |= NOTICE;
      plan.action = CANCEL_NOTICE;
    } else {
      plan.next |= IN_STACK;
      plan.action = CANCEL_STACK;
    }
    break;
  case T_RUNNING:
    if (own && !repeating)
      break;
    plan.err = own ? 0 : UV_EBUSY;
    plan.cas = 1;
    plan.next = WITH_STATE(word, own ? T_CANCELLED : T_STOPPING);
    break;
  default:
    break;
  }
  return plan;
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
