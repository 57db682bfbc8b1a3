/* SPDX-License-Identifier: MIT */
/* The cross-thread task protocol of lib/task-shared.c and lib/task.c, for
 * SPIN.  Processes and steps carry the code's names.  One node of the
 * table, used by two tasks in turn (generations 1 and 2): producer1
 * submits task 1, may cancel it, then submits task 2, which gets the node
 * again if the loop or the cancel freed it, on a wheel with max_tasks 0
 * or 1 (UV_ENOSPC); producer2 holds task 1's id and resets and cancels it
 * at any moment, also after task 1 ended and task 2 took the node (a
 * stale id).  The loop takes the queue in, fires the task's timer (time
 * moves by steps of the loop), runs it or hands it to pool_thread, and
 * closes the wheel at any moment, racing both producers; a run's callback
 * may cancel its own task.  (A reset from the task's own callback takes
 * the path of producer2's reset during a run; two racing resetters are
 * left out: they alone took 15.4M states, past the test's time budget.)
 *
 * Each read-modify-write of the code is one atomic step, and so is each
 * CAS retry loop, at its successful CAS (what it computes depends on the
 * word only); plain loads and stores between them are steps of their own.
 *
 * Properties (assertions):
 *   - every accepted task ends exactly once: a run of a one-shot, a cancel
 *     that returned 0 or UV_EBUSY, or its final call (ends[]; checked when
 *     all processes are done);
 *   - no run starts after a cancel returned 0, and none before the
 *     deadline of a reset that returned 0 (or UV_EBUSY: the next run);
 *   - an id never moves another task: a reset's deadline store hits the
 *     task of its id, and the loop reads only deadlines its task's calls
 *     wrote; the node is in the queue at most once;
 *   - close does not finish while a call is inside or a task is live, no
 *     call writes the wheel's shared state after it, and a submit racing
 *     close returns UV_ECANCELED or its task gets its final call (by the
 *     first rule);
 *   - the stats count every cancel that returned 0 or UV_EBUSY once
 *     (taken_back, or the loop's count), also when close races it;
 *   - after a cancel returned 0, the same thread's submit is not refused
 *     with UV_ENOSPC on a wheel with max_tasks 1.
 *
 * A broken twin, test/task-protocol-broken.pml, differs in one rule (its
 * header says which); SPIN must find a counterexample in it. */

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
#define W_STARTED 2 /* a pool thread runs work_cb */
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

/* The node's state word: generation, state, flags, writers. */
byte gen = 1;
byte st = FREE;
bool inq;
bool taken;
bool moved;
bool pool;
byte writers;
bool repeating; /* written by submit before publishing */
/* node->deadline, and the generation of the call that wrote it */
byte dl;
byte dl_gen;
/* The gate. */
bool g_closing;
bool g_closed;
byte g_calls;
byte g_live;
/* The queue: entries in the stack, and the one the loop holds. */
byte qlen;
bool inbox;
bool node_free = true; /* on the free stack */
/* The loop's (and the pool request's). */
byte loc = AT_NONE;
byte fdl; /* the filed timer's deadline */
byte now;
byte wq = W_NONE;
bool wran;
bool close_done;
byte pdone;
bool held;     /* node->held: accepted by the loop, not freed */
byte counted;  /* cancels counted: taken_back, the loop's cancelled */
/* For the properties. */
byte ends[4];
bool accepted[4];
bool cancelled0[4];
byte promised[4];
bool a_known;
byte cancels; /* cancels that returned 0 or UV_EBUSY */

inline push() {
  atomic {
    assert(!close_done);
    assert(qlen + inbox == 0); /* at most once in the queue */
    qlen++
  }
}

inline end_task(g) {
  ends[g]++;
  assert(ends[g] == 1)
}

/* A run starts (loop or pool thread). */
inline run_starts() {
  assert(!cancelled0[gen]);
  assert(now >= promised[gen]);
  promised[gen] = 0
}

inline enter(res) {
  atomic {
    if
    :: g_closed -> res = ENOENT
    :: else -> g_calls++; res = INSIDE
    fi
  }
}

inline leave(sub_live) {
  atomic {
    assert(g_calls > 0);
    g_calls--;
    if
    :: sub_live -> g_live--
    :: else
    fi
  }
}

/* capped: on a wheel with max_tasks 1, a CAS that refuses first; else
 * (max_tasks 0) a fetch_add, undone if close has begun. */
inline uvtw_submit(res, mygen, is_pool, is_rep, capped) {
  if
  :: capped ->
    atomic {
      if
      :: g_closing -> res = ECANCELED
      :: !g_closing && g_live >= 1 -> res = ENOSPC
      :: else -> g_calls++; g_live++; res = OK
      fi
    }
  :: else ->
    atomic {
      g_calls++;
      g_live++;
      res = (g_closing -> ECANCELED : OK)
    };
    if
    :: res == ECANCELED -> leave(1) /* undone */
    :: else
    fi
  fi;
  if
  :: res == OK ->
    atomic { /* free_pop */
      assert(!close_done);
      if
      :: node_free -> node_free = false; mygen = gen
      :: else -> res = ENOMEM
      fi
    }
    if
    :: res == ENOMEM -> leave(1)
    :: else ->
      d_step {
        assert(st == FREE);
        pool = is_pool;
        repeating = is_rep;
        dl = CAP(now + 1);
        dl_gen = mygen;
        st = PENDING;
        inq = 1;
        taken = 0;
        moved = 0
      }
      accepted[mygen] = 1;
      push();
      leave(0)
    fi
  :: else
  fi
}

/* unqueue(): the cancel holds the node as a writer; pops it if it is on
 * top of the queue (the model's one node: in the stack, not taken by the
 * loop's exchange), and frees it. */
inline unqueue() {
  atomic {
    if
    :: qlen == 1 -> qlen = 0; ok = 1
    :: else -> ok = 0
    fi
  }
  if
  :: ok ->
    atomic { /* no other thread can move the word */
      assert(!close_done && writers == 1 && st == CANCELLED && inq && !taken);
      gen++;
      st = FREE;
      inq = 0;
      writers = 0;
      moved = 0
    }
    node_free = true /* free_push */
  :: else ->
    atomic { /* let go, with a notice if the loop took it in meanwhile */
      writers--;
      mypush = 0;
      if
      :: taken && !inq -> inq = 1; mypush = 1
      :: else
      fi
    }
    if
    :: mypush -> push()
    :: else
    fi
  fi
}

/* No gate: a cancel that ends a task holds its live count until its last
 * step.  cur: called from the task's own callback. */
inline uvtw_cancel(idgen, res, cur) {
  atomic {
    mypush = 0;
    hold = 0;
    if
    :: gen == idgen && (st == PENDING || st == QUEUED ||
                        (st == RUNNING && cur && repeating)) ->
      assert(!close_done);
      st = CANCELLED;
      res = OK;
      cancels++;
      cancelled0[idgen] = 1;
      end_task(idgen);
      if
      :: !taken -> counted++ /* taken_back */
      :: else
      fi;
      if
      :: taken && !inq -> inq = 1; mypush = 1
      :: !taken && writers == 0 -> writers++; hold = 1 /* head == node */
      :: !taken && writers == 0 /* not on top */
      :: else
      fi
    :: gen == idgen && st == RUNNING && !cur ->
      assert(!close_done);
      st = STOPPING;
      res = EBUSY;
      cancels++;
      end_task(idgen)
    :: else -> res = ENOENT
    fi
  }
  if
  :: hold -> unqueue()
  :: mypush -> push()
  :: else
  fi;
  if
  :: res == OK -> atomic { assert(!close_done); g_live-- }
  :: else
  fi
}

inline uvtw_reset(idgen, res) {
  d = CAP(now + 2);
  enter(res);
  if
  :: res == INSIDE ->
    atomic { /* hold the node as a writer */
      assert(!close_done);
      if
      :: gen == idgen && st >= PENDING && st <= RUNNING -> writers++
      :: else -> res = ENOENT
      fi
    }
    if
    :: res == INSIDE ->
      atomic { /* the deadline store */
        assert(gen == idgen);
        dl = d;
        dl_gen = idgen
      }
      atomic { /* let go */
        assert(!close_done);
        writers--;
        mypush = 0;
        if
        :: st >= PENDING && st <= RUNNING ->
          res = (st == RUNNING -> EBUSY : OK);
          if
          :: st == QUEUED -> st = PENDING
          :: else
          fi;
          moved = 1;
          if
          :: res == OK || repeating -> promised[idgen] = d
          :: else
          fi
        :: else -> res = ENOENT
        fi;
        if
        :: taken && !inq && (res != ENOENT || writers == 0) ->
          inq = 1;
          mypush = 1
        :: else
        fi
      }
      if
      :: mypush -> push()
      :: else
      fi
    :: else
    fi;
    leave(0)
  :: else
  fi
}

proctype producer1() {
  byte res;
  byte g;
  byte g2;
  byte d;
  bool mypush;
  bool hold;
  bool ok;
  bool is_pool;
  bool is_rep;
  bool capped;
  bool c_ok;

  if
  :: is_pool = 0
  :: is_pool = 1
  fi;
  if
  :: is_rep = 0
  :: is_rep = 1
  fi;
  uvtw_submit(res, g, is_pool, is_rep, 0);
  if
  :: res == OK -> a_known = 1
  :: else -> a_known = 1; g = 0
  fi;
  if
  :: g != 0 -> skip; uvtw_cancel(g, res, 0); c_ok = (res == OK)
  :: skip
  fi;
  /* The second submit as on a wheel with max_tasks 1, or 0: the first
   * takes either path alike (nothing else submits). */
  if
  :: capped = 0
  :: capped = 1
  fi;
  uvtw_submit(res, g2, 0, 0, capped);
  /* A cancel that returned 0 freed the task's place. */
  assert(!(c_ok && res == ENOSPC));
  pdone++
}

proctype producer2() {
  byte op;
  byte res;
  byte d;
  bool mypush;
  bool hold;
  bool ok;

  a_known;
  uvtw_reset(1, res);
  /* (A choice first: an option must not begin with an atomic step that
   * holds an else.) */
  if
  :: op = 0
  :: op = 1
  fi;
  if
  :: op == 0 -> uvtw_reset(1, res)
  :: else -> uvtw_cancel(1, res, 0)
  fi;
  pdone++
}

/* release_if_idle: frees an ended node nothing refers to. */
inline release_if_idle() {
  if
  :: loc == AT_NONE && !inq && writers == 0 &&
     (st == CANCELLED || st == DONE) ->
    atomic { /* uvtw__node_free's plain store: nobody can move it */
      assert(!inq && writers == 0 && (st == CANCELLED || st == DONE));
      if
      :: held && st == CANCELLED -> counted++ /* a cancel counted it not */
      :: else
      fi;
      held = 0;
      gen++;
      st = FREE;
      taken = 0;
      moved = 0
    }
    node_free = true /* uvtw__free_flush */
  :: else
  fi
}

inline to_final() {
  atomic {
    if
    :: st == PENDING || st == QUEUED -> st = CLOSED; ok = 1
    :: else -> ok = 0
    fi
  }
  if
  :: ok -> loc = AT_FINAL_LIST
  :: else -> release_if_idle()
  fi
}

inline file_at_deadline() {
  assert(dl_gen == gen);
  fdl = dl;
  loc = AT_WHEEL
}

inline take() {
  atomic {
    assert(inbox);
    inbox = 0;
    w_st = st;
    w_taken = taken;
    w_moved = moved;
    inq = 0;
    taken = 1;
    if
    :: loc != AT_WORK -> moved = 0
    :: else
    fi;
    if
    :: !w_taken && w_st == PENDING -> held = 1
    :: else
    fi
  }
  if
  :: w_st == PENDING && loc == AT_WORK
  :: w_st == PENDING && loc != AT_WORK && g_closing -> to_final()
  :: w_st == PENDING && loc != AT_WORK && !g_closing && (!w_taken || w_moved) ->
    file_at_deadline()
  :: w_st == PENDING && loc != AT_WORK && !g_closing && w_taken && !w_moved
  :: w_st == CANCELLED || w_st == DONE ->
    if
    :: loc == AT_WHEEL -> loc = AT_NONE
    :: else
    fi;
    release_if_idle()
  :: else
  fi
}

/* uvtw__task_fire: the timer came due. */
inline fire() {
  atomic {
    if
    :: st != PENDING -> act = 0
    :: st == PENDING && moved -> moved = 0; act = 1
    :: st == PENDING && !moved && pool -> act = 2; st = QUEUED
    :: st == PENDING && !moved && !pool ->
      act = 2;
      st = RUNNING;
      run_starts() /* the run starts with this CAS */
    fi
  }
  if
  :: act == 0 -> loc = AT_NONE; release_if_idle()
  :: act == 1 -> file_at_deadline()
  :: act == 2 && pool -> loc = AT_WORK; wran = 0; wq = W_QUEUED
  :: act == 2 && !pool ->
    /* The pass re-filed a repeating timer before the run. */
    if
    :: repeating -> fdl = CAP(now + 1)
    :: else -> loc = AT_NONE
    fi;
    /* The callback may cancel its own task. */
    if
    :: skip
    :: skip; uvtw_cancel(gen, cres, 1)
    fi;
    atomic { /* after_run */
      if
      :: st == RUNNING && !repeating ->
        st = DONE; end_task(gen); g_live--
      :: st == RUNNING && repeating -> st = PENDING
      :: st == STOPPING -> st = DONE; g_live--; counted++
      :: else /* cancelled from its own callback */
      fi
    }
    w_st = st;
    if
    :: w_st == PENDING ->
      atomic { /* clear_moved */
        if
        :: st == PENDING && moved -> moved = 0; act = 1
        :: else -> act = 0 /* no reset, or a cancel won first */
        fi
      }
      if
      :: act == 1 -> file_at_deadline()
      :: else
      fi
    :: else -> loc = AT_NONE; release_if_idle()
    fi
  fi
}

inline after_work_cb() {
  loc = AT_NONE;
  status = (wq == W_UV_CANCELED -> ECANCELED : OK);
  wq = W_NONE;
  act = 2;
  if
  :: status == OK && !g_closing ->
    atomic { /* clear_moved */
      if
      :: st == PENDING && moved -> moved = 0; act = 1
      :: st == PENDING && !moved -> act = 0
      :: else
      fi
    }
  :: else
  fi;
  if
  :: act == 1 -> file_at_deadline()
  :: act == 0 -> fdl = CAP(now + 1); loc = AT_WHEEL
  :: act == 2 ->
    if
    :: g_closing -> to_final()
    :: else -> release_if_idle()
    fi
  fi
}

inline close_begin() {
  atomic { g_closing = 1 };
  if
  :: loc == AT_WHEEL -> loc = AT_NONE; to_final()
  :: else
  fi
}

inline run_finals() {
  loc = AT_NONE;
  end_task(gen); /* cb(arg, UV_ECANCELED) */
  g_live--;
  atomic { assert(st == CLOSED); st = DONE };
  release_if_idle()
}

inline close_step() {
  atomic {
    if
    :: wq == W_QUEUED -> wq = W_UV_CANCELED /* uv_cancel */
    :: else
    fi
  }
  /* The gate first, then the queue, then the CAS (which compares the
   * word it read). */
  if
  :: wq == W_NONE && loc != AT_FINAL_LIST ->
    atomic { ok = (g_calls == 0 && g_live == 0) }
    if
    :: ok && qlen == 0 ->
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

proctype pool_thread() {
  bool go;
  byte cres;
  bool mypush;
  bool hold;
  bool ok;

  do
  :: atomic { wq == W_QUEUED -> wq = W_STARTED }
    atomic { /* work_cb */
      if
      :: st == QUEUED -> st = RUNNING; go = 1; run_starts()
      :: else -> go = 0
      fi
    }
    if
    :: go ->
      if /* the callback may cancel its own task */
      :: skip
      :: skip; uvtw_cancel(gen, cres, 1)
      fi;
      wran = 1;
      atomic { /* after_run */
        if
        :: st == RUNNING && !repeating -> st = DONE; end_task(gen); g_live--
        :: st == RUNNING && repeating -> st = PENDING
        :: st == STOPPING -> st = DONE; g_live--; counted++
        :: else /* cancelled from its own callback */
        fi
      }
    :: else
    fi;
    wq = W_DONE
  :: close_done && wq == W_NONE -> break
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
  bool hold;

  do
  :: atomic { qlen > 0 && !inbox -> qlen--; inbox = 1 }; take()
  :: loc == AT_WHEEL && fdl <= now -> fire()
  :: loc == AT_FINAL_LIST -> run_finals()
  :: wq == W_DONE || wq == W_UV_CANCELED -> after_work_cb()
  :: now < MAXT -> now++
  :: !g_closing -> close_begin()
  :: g_closing && !close_done && qlen == 0 && !inbox &&
     loc != AT_FINAL_LIST -> close_step()
  :: close_done -> break
  od;
  pdone == 2;
  /* Every accepted task ended exactly once. */
  assert(ends[1] == accepted[1] && ends[2] == accepted[2]);
  /* tasks_cancelled counts every cancel that returned 0 or UV_EBUSY. */
  assert(counted == cancels);
  assert(g_live == 0 && g_calls == 0)
}

init {
  atomic {
    run producer1();
    run producer2();
    run loop();
    run pool_thread()
  }
}
