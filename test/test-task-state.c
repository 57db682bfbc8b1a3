/* SPDX-License-Identifier: MIT */
/* The task state word's rules, as pure functions (lib/task-state.h), on
 * words made up here: no wheel, no thread.
 *
 *   legal_moves_table  the diagram: every move a live task makes is in it, and
 *                 the ended states (CANCELLED, DONE) lead nowhere.
 *   cancel_waiting  a cancel of a waiting task (PENDING or QUEUED) ends
 *                 it (0, CANCELLED), and who frees the node follows from
 *                 where the task is: taken back if the loop has not taken
 *                 it in (also a loop-held one, by the loop thread only),
 *                 counted by the canceller if the loop will find it in a
 *                 queue, a notice in the canceller's queue if it has room,
 *                 else on the wheel's stack, nothing if one is there.
 *   cancel_running  a running task: UV_EBUSY (STOPPING) from another
 *                 place; from its own callback 0 (CANCELLED) if it repeats,
 *                 UV_ENOENT if it is a one-shot.
 *   cancel_stale  another generation, or an ended, closed or free task:
 *                 UV_ENOENT and no write. */

#include "task-state.h"
#include "test-cases.h"
#include "test.h"

#define GEN_OF_TEST ((uint64_t) 12345)


static uint64_t word_of(unsigned state, uint64_t flags) {
  return GEN_OF_TEST << GEN_SHIFT | flags | state;
}


static void legal_moves_table(void) {
  ASSERT(legal_moves(T_PENDING) & S(T_RUNNING));
  ASSERT(legal_moves(T_PENDING) & S(T_QUEUED));
  ASSERT(legal_moves(T_PENDING) & S(T_CANCELLED));
  ASSERT(legal_moves(T_QUEUED) & S(T_RUNNING));
  ASSERT(legal_moves(T_RUNNING) & S(T_STOPPING));
  ASSERT(legal_moves(T_RUNNING) & S(T_PENDING));
  ASSERT(legal_moves(T_STOPPING) == S(T_DONE));
  ASSERT(legal_moves(T_CLOSED) == S(T_DONE));
  ASSERT_EQ(0, legal_moves(T_CANCELLED));
  ASSERT_EQ(0, legal_moves(T_DONE));
  ASSERT_EQ(0, legal_moves(T_FREE));
  ASSERT(!(legal_moves(T_STOPPING) & S(T_PENDING)));
  ASSERT(!(legal_moves(T_QUEUED) & S(T_PENDING)));
}


/* One cancel of a waiting task: the plan's action and written flags. */
static void expect_waiting(unsigned state,
                           uint64_t flags,
                           int on_loop,
                           int can_notice,
                           cancel_action_t action,
                           uint64_t flags_after) {
  cancel_plan_t plan;
  uint64_t word;

  word = word_of(state, flags);
  plan = cancel_plan(word, GEN_OF_TEST, 0, 0, on_loop, can_notice);
  ASSERT_EQ(0, plan.err);
  ASSERT_EQ(1, plan.cas);
  ASSERT_EQ(action, plan.action);
  ASSERT_UEQ(word_of(T_CANCELLED, flags_after), plan.next);
  ASSERT(legal_moves(state) & S(STATE(plan.next)));
}


static void cancel_waiting(void) {
  unsigned states[2] = {T_PENDING, T_QUEUED};
  unsigned i;

  for (i = 0; i < 2; i++) {
    /* In a queue, not taken in: taken back, whoever cancels. */
    expect_waiting(states[i], IN_QUEUE, 0, 1, CANCEL_TAKE_BACK, 0);
    expect_waiting(states[i], IN_QUEUE | POOL, 1, 0, CANCEL_TAKE_BACK, POOL);
    /* Submitted on the loop thread (held there already): the loop thread
     * takes it back; another thread leaves it to the loop and counts it. */
    expect_waiting(states[i], IN_QUEUE | LOOP_HELD, 1, 1, CANCEL_TAKE_BACK,
                   LOOP_HELD);
    expect_waiting(states[i], IN_QUEUE | LOOP_HELD, 0, 1, CANCEL_COUNT,
                   IN_QUEUE | LOOP_HELD | COUNTED);
    /* Taken in: a notice, in the canceller's queue or on the stack. */
    expect_waiting(states[i], 0, 0, 1, CANCEL_NOTICE, NOTICE);
    expect_waiting(states[i], 0, 1, 1, CANCEL_NOTICE, NOTICE);
    expect_waiting(states[i], 0, 0, 0, CANCEL_STACK, IN_STACK);
    /* A notice on the stack already: the loop will find it. */
    expect_waiting(states[i], IN_STACK, 0, 0, CANCEL_NONE, IN_STACK);
  }
  ASSERT(cancel_needs_room(word_of(T_PENDING, 0)));
  ASSERT(cancel_needs_room(word_of(T_PENDING, POOL | LOOP_HELD)));
  ASSERT(!cancel_needs_room(word_of(T_PENDING, IN_QUEUE)));
  ASSERT(!cancel_needs_room(word_of(T_PENDING, IN_STACK)));
}


static void cancel_running(void) {
  cancel_plan_t plan;
  uint64_t word;
  int own;
  int rep;

  word = word_of(T_RUNNING, POOL);
  for (own = 0; own < 2; own++)
    for (rep = 0; rep < 2; rep++) {
      plan = cancel_plan(word, GEN_OF_TEST, own, rep, 0, 1);
      if (!own) {
        ASSERT_EQ(UV_EBUSY, plan.err);
        ASSERT_EQ(1, plan.cas);
        ASSERT_UEQ(word_of(T_STOPPING, POOL), plan.next);
      } else if (rep) {
        ASSERT_EQ(0, plan.err);
        ASSERT_EQ(1, plan.cas);
        ASSERT_UEQ(word_of(T_CANCELLED, POOL), plan.next);
      } else {
        ASSERT_EQ(UV_ENOENT, plan.err);
        ASSERT_EQ(0, plan.cas);
      }
      ASSERT_EQ(CANCEL_NONE, plan.action);
    }
}


static void cancel_stale(void) {
  unsigned ended[5] = {T_CANCELLED, T_DONE, T_CLOSED, T_FREE, T_STOPPING};
  cancel_plan_t plan;
  unsigned i;

  plan = cancel_plan(word_of(T_PENDING, IN_QUEUE), GEN_OF_TEST + 1, 0, 0, 0, 1);
  ASSERT_EQ(UV_ENOENT, plan.err);
  ASSERT_EQ(0, plan.cas);
  for (i = 0; i < 5; i++) {
    plan = cancel_plan(word_of(ended[i], 0), GEN_OF_TEST, 0, 1, 1, 1);
    ASSERT_EQ(UV_ENOENT, plan.err);
    ASSERT_EQ(0, plan.cas);
    ASSERT_EQ(CANCEL_NONE, plan.action);
  }
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(legal_moves_table),
  TEST_CASE(cancel_waiting),
  TEST_CASE(cancel_running),
  TEST_CASE(cancel_stale),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
