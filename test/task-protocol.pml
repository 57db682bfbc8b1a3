/* SPDX-License-Identifier: MIT */
/* The cross-thread task protocol of lib/task-shared.c (its rules 1-5 and
 * the verbs task.c calls), for SPIN.  Steps carry the code's names.  Two
 * nodes of the table; the queue is the stack of nodes pushed (up to both,
 * its head the newest) and the inbox the loop took in; the free stack is
 * a Treiber stack of node indices with its ABA tag, popped by every
 * submit and pushed by the loop.  Each read-modify-write of the code is
 * one atomic step, and so is each CAS retry loop at its successful CAS
 * where what it computes depends on the word only; with two poppers
 * (NODES: producer1 and the loop) the free stack's pop and push are three
 * steps each (load the top, read or write free_next, CAS top and tag).
 *
 * Every submit first tries to take over the queue head's node (rule 4):
 * reuse_claim loads the head, then claims the node by one CAS (writers
 * + 1) if its word is CANCELLED | W_INQ alone; the submit writes the task
 * while the claim holds the node, and reuse_publish moves the word, from
 * whatever the loop's take made of it meanwhile, to the next generation's
 * PENDING | W_INQ, pushing the node again if the take cleared W_INQ.  A
 * submit that claims nothing pops the free stack.  The loop counts a use
 * it takes in by generation (take_use: node->seen_gen), each generation
 * it never saw as accepted and cancelled.
 *
 * A submit enters the gate with its task's live count, and as a call too
 * in the same step if its peek at the queue's head (a relaxed load, so
 * either value here) saw the queue empty.  The live count holds the wheel
 * open until the task's push (or publish); after it the task may end at
 * once, so the submit touches the wheel only inside a call: a push that
 * finds the stack empty (so wakes the loop) is preceded by an entry as a
 * call unless the submit has one (queue_push), and the submit leaves it
 * after the wake-up.
 *
 * Three configurations (spin -D), each checked exhaustively by the suite:
 *   (default)  producer1 submits task A, may cancel it, then submits task
 *           B (on a wheel with max_tasks 0, or 1 and then the loop
 *           submits nothing: UV_ENOSPC), which takes A's node over if A
 *           was cancelled before take-in and its entry heads the queue;
 *           producer2 holds A's id and resets it, then cancels it (B may
 *           take over after that cancel too), also after A ended and its
 *           node was reused (a stale id); the loop takes the queue in,
 *           fires timers (time moves by steps of the loop), runs loop
 *           tasks or hands them to pool_thread, and closes the wheel at
 *           any moment; a run's callback may cancel its own task.
 *   NODES  no producer2; the free stack in three steps a side; producer1
 *           may cancel B too; the loop also submits task C itself at any
 *           moment (a submit on the loop thread, which may take over A's
 *           or B's node, so also a node B took over: the loop then counts
 *           three uses at once; its claim and publish are one thread's, so
 *           no take comes between them).
 *   RESETTERS  two resetters: producer1 submits A and may cancel it;
 *           producer2 resets A, then resets or cancels it; producer3
 *           resets A once more, racing producer2's resets; no task B or C
 *           (so no takeover: this one checks resets and the counts).
 * The loop pushes each freed node at once (the code chains them and
 * pushes the chain after the batch: the same CAS, later).  A wake-up
 * (uv_async_send) is a step of its own after a push that found the stack
 * empty, an access to the wheel (its async handle); that it wakes the
 * loop in time is rule 4's argument and test-task-liveness's, and the
 * loop's references are not modelled.  Nor is the retirement of
 * a node at the last generation (generations stay small here), nor the
 * memory orders (test/task-protocol-relacy.cpp): every load sees the
 * latest store (the head a submit loads may be stale only by the steps
 * of others between its load and its claim), but for the hints: a
 * submit's peek at the head and queue_push's first load of it may see
 * the queue empty or not, whatever it holds (a stale relaxed load).
 *
 * Properties (assertions):
 *   - every accepted task ends exactly once: a run of a one-shot, a cancel
 *     that returned 0 or UV_EBUSY, or its final call (checked when all
 *     processes are done);
 *   - no task is lost: once the producers are done and nothing is inside
 *     a call, in the queue, on the pool or the final list, none is live
 *     (close would wait for it forever, a cycle a safety search misses);
 *   - no run starts after a cancel returned 0, and none before the
 *     deadline of a reset that returned 0 (or UV_EBUSY: the next run);
 *   - an id never moves another task: a reset's deadline store hits the
 *     task of its id, and the loop files only deadlines its task's calls
 *     wrote; a node is in the queue at most once;
 *   - the free stack hands out only free nodes (the tag makes a stale CAS
 *     fail), and a node is freed only once nothing refers to it;
 *   - a claimed node: its entry is queued (stack or inbox) when claimed;
 *     the loop neither frees nor files it while claimed; the publish finds
 *     the claim alone (one writer, CANCELLED, the previous generation),
 *     and, with W_INQ still set, the entry still queued;
 *   - close does not finish while a call is inside or a task is live, no
 *     call writes the wheel's shared state after it, nor touches the
 *     wheel: every push, wake-up and leave of a call comes before close
 *     finishes, so a submit touches nothing after its push but inside a
 *     call; and a submit racing close returns UV_ECANCELED or its task
 *     gets its final call;
 *   - the stats count every cancel that returned 0 or UV_EBUSY once, and
 *     every accepted task once (taken over or not);
 *   - after a cancel returned 0, the same thread's submit is not refused
 *     with UV_ENOSPC on a wheel with max_tasks 1.
 *
 * The broken twins must each yield a counterexample.  -DBROKEN (the
 * suite's spin-task-protocol-broken) lets uvtw_reset check the task's
 * generation and store its deadline without holding the node as a writer
 * (no writers + 1 around the store), so the loop may free the node and a
 * new task take it between the check and the store: a stale id moves
 * another task.  -DBROKEN_PUBLISH (spin-task-protocol-broken-publish)
 * leaves out reuse_publish's push again: when the loop took the claimed
 * node in between claim and publish, the new task is in no queue, and the
 * "no task is lost" assertion fails.  -DBROKEN_WAKE
 * (spin-task-protocol-broken-wake) lets a submit push without ever
 * entering as a call (no +G_CALL at its entry, none by its push): after
 * a push that found the stack empty, the loop may take the task in, end
 * it and finish close before the submit's wake-up, whose !close_done
 * assertion fails. */

#define FREE 0
#define PENDING 1
#define QUEUED 2
#define RUNNING 3
#define STOPPING 4
#define CANCELLED 5
#define DONE 6
#define CLOSED 7

#define AT_NONE 0
#define AT_WHEEL 1
#define AT_WORK 2
#define AT_FINAL_LIST 3

#define W_NONE 0    /* no threadpool request */
#define W_QUEUED 1  /* uv_queue_work'ed, not started */
#define W_STARTED 2 /* a pool thread runs uvtw__work_cb */
#define W_DONE 3    /* after_work_cb is due */
#define W_UV_CANCELED 4

#define OK 0
#define ENOENT 1
#define EBUSY 2
#define ECANCELED 3
#define ENOMEM 4
#define ENOSPC 5
#define INSIDE 9

#define MAXT 2
#define CAP(t) ((t) > MAXT -> MAXT : (t))
#define NN 2
/* A task: its node and generation. */
#define TK(n, g) ((n) * 4 + (g))

/* The nodes' state words: generation, state, flags, writers. */
byte gen[NN];
byte st[NN];
bool inq[NN];
bool taken[NN];
bool moved[NN];
bool pool[NN];
byte writers[NN];
bool repeating[NN]; /* written by submit before publishing */
/* node->deadline, and the generation of the call that wrote it */
byte dl[NN];
byte dl_gen[NN];
/* The gate. */
bool g_closing;
bool g_closed;
byte g_calls;
byte g_live;
/* The queue: nodes in the stack, and those the loop took in. */
bool instack[NN];
bool inbox[NN];
byte qhead; /* tasks->head: the newest node in the stack (index + 1), 0 empty */
/* The free stack: top (index + 1, 0 empty), its tag, the links. */
byte top_link;
byte top_tag;
byte free_next[NN];
/* The loop's (and the pool requests'). */
byte loc[NN];
byte fdl[NN]; /* the filed timer's deadline */
byte now;
byte wq[NN];
bool close_done;
byte pdone;
bool held[NN];     /* node->held: accepted by the loop, not freed */
byte seen_gen[NN]; /* node->seen_gen: the latest generation taken in */
byte counted;      /* the loop's tasks->cancelled */
byte acc_counted;  /* the loop's tasks->accepted */
/* For the properties. */
byte ends[8];
bool accepted[8];
bool claimed[NN]; /* a submit's claim holds the node (reuse_claim) */
bool cancelled0[8];
byte promised[8];
byte a_node; /* task A's id, once producer1 has it (a_known) */
byte a_gen;
bool a_known;
byte cancels; /* cancels that returned 0 or UV_EBUSY */
bool capped; /* task B's submit on a wheel with max_tasks 1: no task C */

#if defined(RESETTERS)
#define PRODUCERS 3
#elif defined(NODES)
#define PRODUCERS 1
#else
#define PRODUCERS 2
#endif

/* The push's successful CAS; woke: it found the stack empty, so the
 * pusher wakes the loop next (wake). */
inline push(n) {
  atomic {
    assert(!close_done);
    assert(!instack[n] && !inbox[n]); /* at most once in the queue */
    woke = (qhead == 0);
    instack[n] = 1;
    qhead = n + 1
  }
}

/* uv_async_send after a push that found the stack empty: a step of its
 * own, an access to the wheel (its async handle). */
inline wake() {
  if
  :: woke -> atomic { assert(!close_done); woke = 0 }
  :: else
  fi
}

/* queue_push(tasks, node, pinned): pinned, the caller holds the wheel
 * open past the push (a call, or a task's live count it ends last): the
 * push (the retry loop at its successful CAS), then the wake-up.  Not
 * pinned (a submit without a call): either a CAS that finds the stack
 * busy (no wake-up; nothing after it touches the wheel), or first an
 * entry as a call (gate_enter +G_CALL, acquire, while the task's live
 * count still holds the wheel open) after a load of the head that saw it
 * empty (or stale: the load is relaxed), then the push as pinned; the
 * caller leaves the call.  -DBROKEN_WAKE: no entry. */
inline queue_push(n, pinned) {
  if
  :: pinned -> push(n)
  :: !pinned ->
    if
    :: atomic { qhead != 0 -> push(n) }
#ifdef BROKEN_WAKE
    :: atomic { qhead == 0 -> push(n) }
#else
    :: atomic { assert(!close_done); g_calls++; pinned = 1 };
      push(n)
#endif
    fi
  fi;
  wake()
}

inline end_task(t) {
  ends[t]++;
  assert(ends[t] == 1)
}

/* A run starts (loop or pool thread). */
inline run_starts(n) {
  assert(!cancelled0[TK(n, gen[n])]);
  assert(now >= promised[TK(n, gen[n])]);
  promised[TK(n, gen[n])] = 0
}

inline gate_enter_reset(res) {
  atomic {
    if
    :: g_closed -> res = ENOENT
    :: else -> g_calls++; res = INSIDE
    fi
  }
}

/* An entry undone (fetch_sub, release): sub_call calls (0 or 1) and one
 * live task.  (A submit refused as close began may come after close
 * finished: the model keeps the gate readable, as the shutdown rule
 * makes the caller's concern.) */
inline gate_undo(sub_call) {
  atomic {
    assert(g_calls >= sub_call && g_live > 0);
    g_calls = g_calls - sub_call;
    g_live--
  }
}

/* The leave of a call (fetch_sub G_CALL, release): close waits for it. */
inline gate_leave() {
  atomic {
    assert(!close_done);
    assert(g_calls > 0);
    g_calls--
  }
}

#ifdef NODES
/* free_pop: the top, its free_next, a CAS of top and tag. */
inline free_pop(n, res) {
  do
  :: atomic { t_link = top_link; t_tag = top_tag };
    if
    :: t_link == 0 -> res = ENOMEM; break
    :: else
    fi;
    t_next = free_next[t_link - 1];
    atomic {
      if
      :: top_link == t_link && top_tag == t_tag ->
        top_link = t_next;
        top_tag++;
        n = t_link - 1;
        ok = 1
      :: else -> ok = 0
      fi
    }
    if
    :: ok -> break
    :: else
    fi
  od
}

/* free_push of one node (the loop). */
inline free_push(n) {
  do
  :: atomic { t_link = top_link; t_tag = top_tag };
    free_next[n] = t_link;
    atomic {
      if
      :: top_link == t_link && top_tag == t_tag ->
        top_link = n + 1;
        top_tag++;
        ok = 1
      :: else -> ok = 0
      fi
    }
    if
    :: ok -> break
    :: else
    fi
  od
}
#else
/* One popper (producer1) and one pusher (the loop): a pop whose CAS
 * fails because a push came between its steps retries and ends as if it
 * had come after the push, so each is one step here. */
inline free_pop(n, res) {
  atomic {
    if
    :: top_link == 0 -> res = ENOMEM
    :: else -> n = top_link - 1; top_link = free_next[n]; top_tag++
    fi
  }
}

inline free_push(n) {
  atomic { free_next[n] = top_link; top_link = n + 1; top_tag++ }
}
#endif

/* reuse_claim: the queue's head (acquire), then one CAS of its word that
 * adds a writer if the word is CANCELLED | W_INQ alone (any generation).
 * The code loads the word, checks it and CASes from it: a word that passed
 * the check never comes back once it changed (the claim adds a writer, a
 * take sets W_TAKEN until the node is freed into a later generation), so
 * the check and the CAS are one step here, and a check that failed on an
 * earlier word is the same step taken earlier. */
inline reuse_claim(n, reused) {
  hn = qhead;
  atomic {
    if
    :: hn != 0 && st[hn - 1] == CANCELLED && inq[hn - 1] && !taken[hn - 1] &&
       !moved[hn - 1] && writers[hn - 1] == 0 ->
      n = hn - 1;
      assert(instack[n] || inbox[n]); /* the entry is queued */
      writers[n]++;
      claimed[n] = 1;
      reused = 1
    :: else -> reused = 0
    fi;
    hn = 0
  }
}

/* reuse_publish: one CAS (the retry loop at its successful CAS) from the
 * word now (the claim, or the loop's take of it: W_INQ clear, W_TAKEN) to
 * the next generation's PENDING | W_INQ, writers 0; mypush: it must be
 * pushed again, the loop took the node in meanwhile (-DBROKEN_PUBLISH:
 * never). */
inline reuse_publish(n, mygen) {
  atomic {
    assert(!close_done);
    assert(claimed[n] && writers[n] == 1 && st[n] == CANCELLED &&
           gen[n] + 1 == mygen);
    /* W_INQ: the node is still in the stack or the loop's inbox. */
    assert(!inq[n] || instack[n] || inbox[n]);
#ifdef BROKEN_PUBLISH
    mypush = 0;
#else
    mypush = !inq[n];
#endif
    gen[n] = mygen;
    st[n] = PENDING;
    inq[n] = 1;
    taken[n] = 0;
    moved[n] = 0;
    writers[n] = 0;
    claimed[n] = 0;
    accepted[TK(n, mygen)] = 1
  }
}

/* The peek (a relaxed load of the head, so either value: a stale one
 * too) decides called: the entry takes a call too, in the same
 * read-modify-write, if the queue looked empty (-DBROKEN_WAKE: never).
 * capped: on a wheel with max_tasks 1, gate_enter_bounded's CAS; else
 * (max_tasks 0) a fetch_add, undone if close has begun.  The task's live
 * count holds the wheel open until its push (or publish): after it, the
 * submit touches the wheel only inside a call (queue_push enters one if
 * it will wake the loop). */
inline uvtw_submit(res, n, mygen, is_pool, is_rep, capped) {
  if
  :: capped ->
    atomic {
#ifndef BROKEN_WAKE
      if
      :: called = 1
      :: called = 0
      fi;
#endif
      if
      :: g_closing -> res = ECANCELED; called = 0
      :: !g_closing && g_live >= 1 -> res = ENOSPC; called = 0 /* max 1 */
      :: else -> g_calls = g_calls + called; g_live++; res = OK
      fi
    }
  :: else ->
    atomic {
#ifndef BROKEN_WAKE
      if
      :: called = 1
      :: called = 0
      fi;
#endif
      g_calls = g_calls + called;
      g_live++;
      res = (g_closing -> ECANCELED : OK)
    };
    if
    :: res == ECANCELED -> gate_undo(called); called = 0 /* undone */
    :: else
    fi
  fi;
  if
  :: res == OK ->
    reuse_claim(n, reused);
    if
    :: !reused -> free_pop(n, res)
    :: else
    fi;
    if
    :: res == ENOMEM -> gate_undo(called); called = 0
    :: else ->
      d_step { /* the owner's stores (in a claimed node: its claim holds) */
        assert(!close_done);
        if
        :: reused ->
          assert(claimed[n] && writers[n] == 1 && st[n] == CANCELLED);
          mygen = gen[n] + 1
        :: else ->
          assert(st[n] == FREE && !instack[n] && !inbox[n] &&
                 writers[n] == 0);
          mygen = gen[n]
        fi;
        pool[n] = is_pool;
        repeating[n] = is_rep;
        dl[n] = CAP(now + 1);
        dl_gen[n] = mygen;
        if
        :: !reused -> /* the plain store, then publish by the push */
          st[n] = PENDING;
          inq[n] = 1;
          taken[n] = 0;
          moved[n] = 0;
          accepted[TK(n, mygen)] = 1;
          mypush = 1
        :: else
        fi
      }
      if
      :: reused -> reuse_publish(n, mygen)
      :: else
      fi;
      reused = 0;
      /* From here the task may end at any moment. */
      if
      :: mypush -> mypush = 0; queue_push(n, called)
      :: else
      fi;
      if
      :: called -> gate_leave(); called = 0
      :: else
      fi
    fi
  :: else
  fi
}

/* No gate: a cancel that ends a task holds its live count until its last
 * step.  cur: called from the task's own callback. */
inline uvtw_cancel(n, idgen, res, cur) {
  atomic {
    mypush = 0;
    if
    :: gen[n] == idgen && (st[n] == PENDING || st[n] == QUEUED ||
                           (st[n] == RUNNING && cur && repeating[n])) ->
      assert(!close_done);
      st[n] = CANCELLED;
      res = OK;
      cancels++;
      cancelled0[TK(n, idgen)] = 1;
      end_task(TK(n, idgen));
      if
      :: taken[n] && !inq[n] -> inq[n] = 1; mypush = 1
      :: else
      fi
    :: gen[n] == idgen && st[n] == RUNNING && !cur ->
      assert(!close_done);
      st[n] = STOPPING;
      res = EBUSY;
      cancels++;
      end_task(TK(n, idgen))
    :: else -> res = ENOENT
    fi
  }
  if
  :: mypush -> push(n); wake() /* pinned: the task counts live */
  :: else
  fi;
  if
  :: res == OK -> atomic { assert(!close_done); g_live-- }
  :: else
  fi
}

inline uvtw_reset(n, idgen, res) {
  d = CAP(now + 2);
  gate_enter_reset(res);
  if
  :: res == INSIDE ->
    atomic { /* hold the node as a writer */
      assert(!close_done);
      if
      :: gen[n] == idgen && st[n] >= PENDING && st[n] <= RUNNING ->
#ifdef BROKEN
        skip
#else
        writers[n]++
#endif
      :: else -> res = ENOENT
      fi
    }
    if
    :: res == INSIDE ->
      atomic { /* the deadline store */
        assert(gen[n] == idgen);
        dl[n] = d;
        dl_gen[n] = idgen
      }
      atomic { /* let go: writers - 1, W_MOVED */
        assert(!close_done);
#ifndef BROKEN
        writers[n]--;
#endif
        mypush = 0;
        if
        :: st[n] >= PENDING && st[n] <= RUNNING ->
          res = (st[n] == RUNNING -> EBUSY : OK);
          if
          :: st[n] == QUEUED -> st[n] = PENDING
          :: else
          fi;
          moved[n] = 1;
          if
          :: res == OK || repeating[n] -> promised[TK(n, idgen)] = d
          :: else
          fi
        :: else -> res = ENOENT
        fi;
        if
        :: taken[n] && !inq[n] && (res != ENOENT || writers[n] == 0) ->
          inq[n] = 1;
          mypush = 1
        :: else
        fi
      }
      if
      :: mypush -> push(n); wake() /* pinned: a call */
      :: else
      fi
    :: else
    fi;
    gate_leave()
  :: else
  fi
}

proctype producer1() {
  byte res;
  byte n;
  byte g;
  byte n2;
  byte g2;
  bool mypush;
  bool woke;
  bool ok;
  byte t_link;
  byte t_tag;
  byte t_next;
  bool is_pool;
  bool is_rep;
  bool c_ok;
  byte hn;
  bool reused;
  bool called;

  if
  :: is_pool = 0
  :: is_pool = 1
  fi;
  if
  :: is_rep = 0
  :: is_rep = 1
  fi;
  uvtw_submit(res, n, g, is_pool, is_rep, 0);
  atomic {
    if
    :: res == OK -> a_node = n; a_gen = g
    :: else -> a_gen = 0
    fi;
    a_known = 1
  }
#ifndef RESETTERS
  if
  :: res == OK -> skip; uvtw_cancel(n, g, res, 0); c_ok = (res == OK)
  :: skip
  fi;
#endif
#ifndef RESETTERS
  /* The second submit as on a wheel with max_tasks 1, or 0. */
  uvtw_submit(res, n2, g2, 0, 0, capped);
  /* A cancel that returned 0 freed the task's place. */
  assert(!(c_ok && res == ENOSPC));
#endif
#ifdef NODES
  /* B may be cancelled too: task C may take over a node taken over. */
  if
  :: res == OK -> skip; uvtw_cancel(n2, g2, res, 0)
  :: skip
  fi;
#endif
  pdone++
}

/* Holds A's id: resets it, then resets or cancels it (op). */
proctype resetter(bool one) {
  byte op;
  byte res;
  byte d;
  bool mypush;
  bool woke;

  a_known;
  if
  :: a_gen == 0 -> goto out
  :: else
  fi;
  uvtw_reset(a_node, a_gen, res);
  if
  :: one -> goto out
  :: else
  fi;
  /* (A choice first: an option must not begin with an atomic step that
   * holds an else.) */
#ifdef RESETTERS
  if
  :: op = 0
  :: op = 1
  fi;
#else
  op = 1; /* a reset racing a reset: RESETTERS */
#endif
  if
  :: op == 0 -> uvtw_reset(a_node, a_gen, res)
  :: else -> uvtw_cancel(a_node, a_gen, res, 0)
  fi;
out:
  pdone++
}

/* release_if_idle: frees an ended node nothing refers to
 * (uvtw__node_free, then the free stack). */
inline release_if_idle(n) {
  if
  :: loc[n] == AT_NONE && !inq[n] && writers[n] == 0 &&
     (st[n] == CANCELLED || st[n] == DONE) ->
    atomic { /* uvtw__node_free's plain store: nobody can move it */
      assert(!claimed[n]);
      assert(!inq[n] && writers[n] == 0 &&
             (st[n] == CANCELLED || st[n] == DONE));
      if
      :: held[n] && st[n] == CANCELLED -> counted++
      :: else
      fi;
      held[n] = 0;
      gen[n]++;
      st[n] = FREE;
      taken[n] = 0;
      moved[n] = 0
    }
    free_push(n)
  :: else
  fi
}

/* uvtw__task_close, or a free if a cancel ended it first. */
inline to_final(n) {
  atomic {
    if
    :: st[n] == PENDING || st[n] == QUEUED -> st[n] = CLOSED; ok = 1
    :: else -> ok = 0
    fi
  }
  if
  :: ok -> loc[n] = AT_FINAL_LIST
  :: else -> release_if_idle(n)
  fi
}

inline file_at_deadline(n) {
  assert(!claimed[n]);
  assert(dl_gen[n] == gen[n]);
  fdl[n] = dl[n];
  loc[n] = AT_WHEEL
}

/* uvtw__task_take, then what take() does with the word it saw. */
inline take(n) {
  atomic {
    assert(inbox[n]);
    inbox[n] = 0;
    w_st = st[n];
    w_taken = taken[n];
    w_moved = moved[n];
    inq[n] = 0;
    taken[n] = 1;
    if
    :: loc[n] != AT_WORK -> moved[n] = 0
    :: else
    fi;
    if
    :: !w_taken -> /* take_use: this use, and each one taken over */
      assert(gen[n] > seen_gen[n]);
      acc_counted = acc_counted + gen[n] - seen_gen[n];
      counted = counted + gen[n] - seen_gen[n] - (w_st == PENDING);
      seen_gen[n] = gen[n];
      held[n] = (w_st == PENDING)
    :: else
    fi
  }
  if
  :: w_st == PENDING && loc[n] == AT_WORK
  :: w_st == PENDING && loc[n] != AT_WORK && g_closing -> to_final(n)
  :: w_st == PENDING && loc[n] != AT_WORK && !g_closing &&
     (!w_taken || w_moved) -> file_at_deadline(n)
  :: w_st == PENDING && loc[n] != AT_WORK && !g_closing && w_taken && !w_moved
  :: w_st == CANCELLED || w_st == DONE ->
    if
    :: loc[n] == AT_WHEEL -> loc[n] = AT_NONE
    :: else
    fi;
    release_if_idle(n)
  :: else
  fi
}

/* uvtw__task_fire: the timer came due (uvtw__task_dispatch, the run,
 * uvtw__task_after_run, uvtw__task_clear_moved). */
inline fire(n) {
  atomic {
    if
    :: st[n] != PENDING -> act = 0
    :: st[n] == PENDING && moved[n] -> moved[n] = 0; act = 1
    :: st[n] == PENDING && !moved[n] && pool[n] -> act = 2; st[n] = QUEUED
    :: st[n] == PENDING && !moved[n] && !pool[n] ->
      act = 2;
      st[n] = RUNNING;
      run_starts(n) /* the run starts with this CAS */
    fi
  }
  if
  :: act == 0 -> loc[n] = AT_NONE; release_if_idle(n)
  :: act == 1 -> file_at_deadline(n)
  :: act == 2 && pool[n] -> loc[n] = AT_WORK; wq[n] = W_QUEUED
  :: act == 2 && !pool[n] ->
    /* The pass re-filed a repeating timer before the run. */
    if
    :: repeating[n] -> fdl[n] = CAP(now + 1)
    :: else -> loc[n] = AT_NONE
    fi;
    /* The callback may cancel its own task. */
    if
    :: skip
    :: skip; uvtw_cancel(n, gen[n], cres, 1)
    fi;
    atomic { /* uvtw__task_after_run */
      if
      :: st[n] == RUNNING && !repeating[n] ->
        st[n] = DONE; end_task(TK(n, gen[n])); g_live--
      :: st[n] == RUNNING && repeating[n] -> st[n] = PENDING
      :: st[n] == STOPPING -> st[n] = DONE; g_live--; counted++
      :: else /* cancelled from its own callback */
      fi;
      w_st = st[n]
    }
    if
    :: w_st == PENDING ->
      atomic { /* uvtw__task_clear_moved */
        if
        :: st[n] == PENDING && moved[n] -> moved[n] = 0; act = 1
        :: else -> act = 0 /* no reset, or a cancel won first */
        fi
      }
      if
      :: act == 1 -> file_at_deadline(n)
      :: else
      fi
    :: else -> loc[n] = AT_NONE; release_if_idle(n)
    fi
  fi
}

inline after_work_cb(n) {
  loc[n] = AT_NONE;
  status = (wq[n] == W_UV_CANCELED -> ECANCELED : OK);
  wq[n] = W_NONE;
  act = 2;
  if
  :: status == OK && !g_closing ->
    atomic { /* uvtw__task_clear_moved */
      if
      :: st[n] == PENDING && moved[n] -> moved[n] = 0; act = 1
      :: st[n] == PENDING && !moved[n] -> act = 0
      :: else
      fi
    }
  :: else
  fi;
  if
  :: act == 1 -> file_at_deadline(n)
  :: act == 0 -> fdl[n] = CAP(now + 1); loc[n] = AT_WHEEL
  :: act == 2 ->
    if
    :: g_closing -> to_final(n)
    :: else -> release_if_idle(n)
    fi
  fi
}

inline close_begin() {
  atomic { g_closing = 1 }; /* uvtw__gate_close_begin */
  if
  :: loc[0] == AT_WHEEL -> loc[0] = AT_NONE; to_final(0)
  :: else
  fi;
  if
  :: loc[1] == AT_WHEEL -> loc[1] = AT_NONE; to_final(1)
  :: else
  fi
}

inline run_finals(n) {
  loc[n] = AT_NONE;
  end_task(TK(n, gen[n])); /* cb(arg, UV_ECANCELED) */
  g_live--;
  atomic { assert(st[n] == CLOSED); st[n] = DONE }; /* final_done */
  release_if_idle(n)
}

inline close_step() {
  /* No task is lost: once the producers are done and nothing is inside a
   * call, in the queue, on the pool or the final list, none is live. */
  assert(pdone < PRODUCERS || g_calls > 0 || instack[0] || instack[1] ||
         wq[0] != W_NONE || wq[1] != W_NONE || g_live == 0);
  atomic {
    if
    :: wq[0] == W_QUEUED -> wq[0] = W_UV_CANCELED /* uv_cancel */
    :: else
    fi
  }
  atomic {
    if
    :: wq[1] == W_QUEUED -> wq[1] = W_UV_CANCELED
    :: else
    fi
  }
  /* uvtw__gate_close_end: the gate, then the queue, then the CAS (which
   * compares the word it read). */
  if
  :: wq[0] == W_NONE && wq[1] == W_NONE ->
    atomic { ok = (g_calls == 0 && g_live == 0) }
    if
    :: ok && !instack[0] && !instack[1] ->
      atomic {
        if
        :: g_calls == 0 && g_live == 0 -> g_closed = 1; close_done = 1
        :: else
        fi
      }
    :: else
    fi
  :: else
  fi
}

/* uvtw__work_cb and the rest of a threadpool thread's work on node n. */
inline pool_run(n) {
  atomic { /* QUEUED -> RUNNING */
    if
    :: st[n] == QUEUED -> st[n] = RUNNING; go = 1; run_starts(n)
    :: else -> go = 0
    fi
  }
  if
  :: go ->
    if /* the callback may cancel its own task */
    :: skip
    :: skip; uvtw_cancel(n, gen[n], cres, 1)
    fi;
    atomic { /* uvtw__task_after_run */
      if
      :: st[n] == RUNNING && !repeating[n] ->
        st[n] = DONE; end_task(TK(n, gen[n])); g_live--
      :: st[n] == RUNNING && repeating[n] -> st[n] = PENDING
      :: st[n] == STOPPING -> st[n] = DONE; g_live--; counted++
      :: else /* cancelled from its own callback */
      fi
    }
  :: else
  fi;
  wq[n] = W_DONE
}

proctype pool_thread() {
  bool go;
  byte cres;
  bool mypush;
  bool woke;

  do
  :: atomic { wq[0] == W_QUEUED -> wq[0] = W_STARTED }; pool_run(0)
  :: atomic { wq[1] == W_QUEUED -> wq[1] = W_STARTED }; pool_run(1)
  :: close_done && wq[0] == W_NONE && wq[1] == W_NONE -> break
  od
}

proctype loop() {
  byte w_st;
  bool w_taken;
  bool w_moved;
  byte act;
  byte status;
  bool ok;
  byte cres;
  bool mypush;
  bool woke;
  byte t_link;
  byte t_tag;
  byte t_next;
  byte res;
  byte cn;
  byte cg;
  bool c_tried;
  byte hn;
  bool reused;
  bool called;

  do
  :: atomic {
      (instack[0] || instack[1]) && !inbox[0] && !inbox[1] ->
      inbox[0] = instack[0]; /* uvtw__queue_take: the whole stack */
      inbox[1] = instack[1];
      instack[0] = 0;
      instack[1] = 0;
      qhead = 0
    }
  :: inbox[0] -> take(0)
  :: inbox[1] -> take(1)
  :: loc[0] == AT_WHEEL && fdl[0] <= now -> fire(0)
  :: loc[1] == AT_WHEEL && fdl[1] <= now -> fire(1)
  :: loc[0] == AT_FINAL_LIST -> run_finals(0)
  :: loc[1] == AT_FINAL_LIST -> run_finals(1)
  :: wq[0] == W_DONE || wq[0] == W_UV_CANCELED -> after_work_cb(0)
  :: wq[1] == W_DONE || wq[1] == W_UV_CANCELED -> after_work_cb(1)
  :: now < MAXT -> now++
#ifdef NODES
  /* A submit on the loop thread (task C). */
  :: !c_tried && !capped -> c_tried = 1; uvtw_submit(res, cn, cg, 0, 0, 0)
#endif
  :: !g_closing -> close_begin()
  :: g_closing && !close_done && !instack[0] && !instack[1] && !inbox[0] &&
     !inbox[1] && loc[0] != AT_FINAL_LIST && loc[1] != AT_FINAL_LIST ->
    close_step()
  :: close_done -> break
  od;
  pdone == PRODUCERS;
  /* Every accepted task ended exactly once. */
  assert(ends[1] == accepted[1] && ends[2] == accepted[2] &&
         ends[3] == accepted[3] && ends[5] == accepted[5] &&
         ends[6] == accepted[6] && ends[7] == accepted[7]);
  /* tasks_cancelled counts every cancel that returned 0 or UV_EBUSY, and
   * tasks_accepted every task accepted, taken over or not. */
  assert(counted == cancels);
  assert(acc_counted == accepted[1] + accepted[2] + accepted[3] +
                        accepted[5] + accepted[6] + accepted[7]);
  assert(g_live == 0 && g_calls == 0)
}

init {
  atomic {
    /* Two nodes set up by grow: generation 1, free, 0 on top of 1. */
    gen[0] = 1;
    gen[1] = 1;
    free_next[0] = 2;
    free_next[1] = 0;
    top_link = 1;
#ifndef RESETTERS
    if
    :: capped = 0
    :: capped = 1
    fi;
#endif
    run producer1();
#ifndef NODES
    run resetter(0);
#endif
#ifdef RESETTERS
    run resetter(1);
#endif
    run loop();
    run pool_thread()
  }
}
