/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks under stress, checked by accounting (for TSan, ASan
 * and UBSan as much as for the assertions).
 *
 * Four producer threads submit one-shot and repeating tasks, to the loop
 * and to the threadpool, with short and long (1 h) delays, and cancel ids
 * at random: their own recent ones, other threads' recent ones, old ones
 * (mostly stale), their own repeating ones, and 0.  Runs cancel random
 * recent tasks too, from the loop thread and from pool threads.  The loop
 * thread runs the loop meanwhile.  Two rounds:
 *
 *   drain_round  After UVTW_STRESS_MS (default 1500 ms) the producers stop; the
 *           loop thread cancels what would never end on its own (repeating
 *           and 1 h tasks) and waits until uvtw_wheel_pending is 0, every
 *           task has ended and the wheel's stats (tasks_accepted,
 *           tasks_run, tasks_cancelled, tasks_closed, tasks_live) agree
 *           with the test's counts; then it closes the wheel: no final
 *           call may follow.
 *   close_round  With max_tasks = 1024, so that UV_ENOSPC happens too.  After
 *           UVTW_STRESS_MS the loop thread closes the wheel while the
 *           producers are still submitting and cancelling for another
 *           20 ms; a submit that starts after close returned must fail
 *           with UV_ECANCELED.
 *
 * Checked, per task:
 *   - every accepted task ended exactly once: a one-shot by its run, a
 *     cancel that returned 0, or its final UV_ECANCELED call; a repeating
 *     task by a cancel that returned 0 or UV_EBUSY, or its final call;
 *   - a rejected submission is never called;
 *   - no run starts after a cancel returned 0, and none beyond the one
 *     that was executing after a cancel returned UV_EBUSY (per-task
 *     counters updated after the cancel returns, checked when a run
 *     starts);
 *   - no task runs concurrently with itself (per-task running counter),
 *     threadpool tasks on a pool thread, loop tasks and final calls on the
 *     loop thread; final calls only once close started, never during the
 *     task's own run, and before the wheel's close callback;
 *   - a cancel of an id whose task was already cancelled with 0 is
 *     UV_ENOENT; an id whose one-shot already ran is never cancelled;
 *   - uvtw_wheel_pending reaches 0 (drain round); nothing leaks (ASan);
 *     uv_loop_close() returns 0. */

#include <time.h>

#include "task-harness.h"
#include "test-cases.h"

#define NPROD 4
#define CAP 200000 /* records per producer and round */
#define NREP 3     /* live repeating tasks per producer, at most */
#define LONG_DELAY (3600 * 1000)
#define RECENT 16

typedef struct {
  atomic_uint_fast64_t id; /* 0 until accepted */
  uint64_t delay;
  uint64_t repeat;
  unsigned flags;
  int rejected; /* submit failed: it must never be called */
  long slow_ns; /* each run sleeps this long, so cancels hit it running */
  atomic_int runs;
  atomic_int returned;
  atomic_int running;
  atomic_int finals;
  atomic_int cancel0;    /* cancels that returned 0 */
  atomic_int busy;       /* cancels that returned UV_EBUSY */
  atomic_int busy_limit; /* after UV_EBUSY: the highest run number allowed */
  atomic_int cancelled;  /* a cancel returned 0 or UV_EBUSY */
} srec_t;

typedef struct {
  int idx;
  uv_thread_t tid;
  uint64_t rng;
  srec_t* recs;
  atomic_int npub; /* records 0..npub-1 are visible to other threads */
  int rep_slot[NREP];
  long n_submit;
  long n_rejected;
  long n_cancel[4]; /* 0, EBUSY, ENOENT, stale checks */
} producer_t;

enum { PH_RUN, PH_DRAIN };

static producer_t prod[NPROD];
static atomic_int stop;
static atomic_int close_started; /* set when uvtw_wheel_close returned */
static atomic_int close_calling; /* set just before it is called */
static uv_timer_t monitor;
static int round_close; /* 0: the drain round; 1: the close round */
static int phase;
static uint64_t round_end_ns;
static uint64_t drain_deadline_ns;
static unsigned round_ms;


static uint64_t prng(uint64_t* s) {
  return test_xorshift64(s);
}


static void do_cancel(long* stats, srec_t* r);
static _Thread_local uint64_t cb_rng;
static atomic_int cb_cancels;


/* From inside a run, now and then: cancel one of a random producer's
 * recent tasks (maybe this very one), from the loop or a pool thread. */
static void cancel_from_callback(void) {
  producer_t* o;
  int n;

  if (cb_rng == 0)
    cb_rng = uv_hrtime() | 1;
  if (prng(&cb_rng) % 8 != 0)
    return;
  o = &prod[prng(&cb_rng) % NPROD];
  n = atomic_load(&o->npub);
  if (n == 0)
    return;
  do_cancel(
      NULL,
      &o->recs[n - 1 -
               (int) (prng(&cb_rng) % (uint64_t) (n < RECENT ? n : RECENT))]);
  atomic_fetch_add(&cb_cancels, 1);
}


static void srec_cb(void* arg, int status) {
  srec_t* r;
  int n;

  r = arg;
  ASSERT_EQ(0, atomic_load(&close_cb_called));
  ASSERT(!r->rejected);
  if (status == UV_ECANCELED) {
    ASSERT(on_loop_thread());
    ASSERT_EQ(1, atomic_load(&close_calling));
    ASSERT_EQ(0, atomic_load(&r->running));
    ASSERT_EQ(0, atomic_load(&r->cancelled)); /* 0 or EBUSY: no final */
    ASSERT_EQ(0, atomic_fetch_add(&r->finals, 1));
    if (r->repeat == 0)
      ASSERT_EQ(0, atomic_load(&r->runs));
    return;
  }
  ASSERT_EQ(0, status);
  if (r->flags & UVTW_THREADPOOL)
    ASSERT(!on_loop_thread());
  else
    ASSERT(on_loop_thread());
  ASSERT_EQ(0, atomic_fetch_add(&r->running, 1));
  /* None after a cancel returned 0; after UV_EBUSY only the run that was
   * executing, whose callback may be entered a moment after the cancel
   * looked: at most one more than the canceller saw before its call. */
  ASSERT_EQ(0, atomic_load(&r->cancel0));
  ASSERT_EQ(0, atomic_load(&r->finals));
  n = atomic_fetch_add(&r->runs, 1) + 1;
  if (atomic_load(&r->busy_limit) != 0)
    ASSERT_LE(n, atomic_load(&r->busy_limit));
  if (r->repeat == 0)
    ASSERT_EQ(1, n);
  /* Short periods on the pool run longer than their period now and then,
   * so runs come due while the previous one is still running. */
  if ((r->flags & UVTW_THREADPOOL) && r->repeat != 0 && r->repeat <= 2 &&
      n % 3 == 0)
    uv_sleep(r->repeat + 1);
  if (r->slow_ns != 0) {
    struct timespec ts;

    ts.tv_sec = 0;
    ts.tv_nsec = r->slow_ns;
    nanosleep(&ts, NULL);
  }
  cancel_from_callback();
  atomic_fetch_sub(&r->running, 1);
  atomic_fetch_add(&r->returned, 1);
}


/* Cancels r's id and checks the result against what was known before.
 * stats: counters to update (NULL: none). */
static void do_cancel(long* stats, srec_t* r) {
  uvtw_id_t id;
  int had_cancel0;
  int had_busy;
  int had_run;
  int runs_before;
  int zero;
  int res;

  id = atomic_load(&r->id);
  if (id == 0) /* rejected */
    return;
  runs_before = atomic_load(&r->runs);
  had_cancel0 = atomic_load(&r->cancel0);
  had_busy = atomic_load(&r->busy);
  had_run = r->repeat == 0 && atomic_load(&r->returned) == 1;
  res = uvtw_cancel(wheel, id);
  if (res == 0) {
    atomic_fetch_add(&r->cancel0, 1);
    atomic_store(&r->cancelled, 1);
    if (stats != NULL)
      stats[0]++;
  } else if (res == UV_EBUSY) {
    zero = 0;
    atomic_compare_exchange_strong(&r->busy_limit, &zero, runs_before + 1);
    atomic_fetch_add(&r->busy, 1);
    atomic_store(&r->cancelled, 1);
    if (stats != NULL)
      stats[1]++;
  } else {
    ASSERT_EQ(UV_ENOENT, res);
    if (stats != NULL)
      stats[2]++;
  }
  /* Stale ids: cancelled before, or a one-shot that ran. */
  if (had_cancel0) {
    ASSERT_EQ(UV_ENOENT, res);
    if (stats != NULL)
      stats[3]++;
  }
  if (had_busy && r->repeat != 0)
    ASSERT(res == UV_ENOENT || res == UV_EBUSY);
  if (had_run) {
    ASSERT_NE(0, res);
    if (stats != NULL)
      stats[3]++;
  }
}


/* One of o's last RECENT records, chosen with me's generator. */
static srec_t* recent(producer_t* me, producer_t* o) {
  int n;

  n = atomic_load(&o->npub);
  if (n == 0)
    return NULL;
  return &o->recs[n - 1 - (int) (prng(&me->rng) % (n < RECENT ? n : RECENT))];
}


static void do_submit(producer_t* p, int n) {
  srec_t* r;
  uvtw_id_t id;
  int was_closed;
  int slot;
  int res;
  int i;

  r = &p->recs[n];
  slot = -1;
  for (i = 0; i < NREP; i++) {
    if (p->rep_slot[i] < 0 || atomic_load(&p->recs[p->rep_slot[i]].cancelled)) {
      p->rep_slot[i] = -1;
      slot = i;
    }
  }
  r->repeat = 0;
  if (slot >= 0 && prng(&p->rng) % 4 == 0)
    r->repeat = 1 + prng(&p->rng) % 10;
  r->flags = (prng(&p->rng) % 2) ? UVTW_THREADPOOL : 0;
  r->delay = prng(&p->rng) % 21;
  r->slow_ns = 0;
  if ((r->flags & UVTW_THREADPOOL) && prng(&p->rng) % 32 == 0)
    r->slow_ns = 1000 * 1000;
  else if (!(r->flags & UVTW_THREADPOOL) && prng(&p->rng) % 128 == 0)
    r->slow_ns = 300 * 1000;
  if (prng(&p->rng) % 50 == 0)
    r->delay = LONG_DELAY;
  id = 0;
  was_closed = atomic_load(&close_started);
  res = uvtw_submit(wheel, r->delay, r->repeat, r->flags, srec_cb, r, &id);
  p->n_submit++;
  if (was_closed)
    ASSERT_EQ(UV_ECANCELED, res);
  if (res == 0) {
    ASSERT_NE(0, id);
    atomic_store(&r->id, id);
    if (r->repeat != 0)
      p->rep_slot[slot] = n;
  } else {
    ASSERT(res == UV_ECANCELED || res == UV_ENOSPC);
    r->rejected = 1;
    p->n_rejected++;
  }
  atomic_store(&p->npub, n + 1);
}


static void producer(void* arg) {
  producer_t* p;
  producer_t* o;
  struct timespec pause;
  srec_t* r;
  long ops;
  int n;
  int op;
  int i;

  p = arg;
  pause.tv_sec = 0;
  pause.tv_nsec = 100 * 1000;
  n = 0;
  for (ops = 0; !atomic_load(&stop); ops++) {
    op = (int) (prng(&p->rng) % 100);
    r = NULL;
    if (op < 45) {
      if (n < CAP)
        do_submit(p, n++);
    } else if (op < 60) {
      r = recent(p, p);
    } else if (op < 75) {
      o = &prod[(p->idx + 1 + prng(&p->rng) % (NPROD - 1)) % NPROD];
      r = recent(p, o);
    } else if (op < 85) {
      o = &prod[prng(&p->rng) % NPROD];
      i = atomic_load(&o->npub);
      if (i > 0)
        r = &o->recs[prng(&p->rng) % (uint64_t) i];
    } else if (op < 95) {
      i = p->rep_slot[prng(&p->rng) % NREP];
      if (i >= 0)
        r = &p->recs[i];
    } else {
      ASSERT_EQ(UV_ENOENT, uvtw_cancel(wheel, 0));
    }
    if (r != NULL)
      do_cancel(p->n_cancel, r);
    if (ops % 16 == 15)
      nanosleep(&pause, NULL);
  }
}


static void stop_producers(void) {
  int i;

  atomic_store(&stop, 1);
  for (i = 0; i < NPROD; i++)
    ASSERT_UV_OK(uv_thread_join(&prod[i].tid));
}


/* Drain round: cancel what would not end on its own.  Callbacks may
 * cancel some of these at the same time; the accounting settles it. */
static void cancel_long_lived(void) {
  producer_t* p;
  srec_t* r;
  int i;
  int j;
  int n;

  for (i = 0; i < NPROD; i++) {
    p = &prod[i];
    n = atomic_load(&p->npub);
    for (j = 0; j < n; j++) {
      r = &p->recs[j];
      if (r->rejected || atomic_load(&r->cancelled))
        continue;
      if (r->repeat == 0 && r->delay != LONG_DELAY)
        continue;
      do_cancel(NULL, r);
    }
  }
}


/* How many times r ended so far (see the contract's "Exactly once"). */
static int rec_ends(srec_t* r) {
  if (r->repeat == 0)
    return atomic_load(&r->runs) + atomic_load(&r->cancel0) +
           atomic_load(&r->finals);
  return atomic_load(&r->cancel0) + atomic_load(&r->busy) +
         atomic_load(&r->finals);
}


/* Sums over all accepted records; returns non-zero if every one has ended
 * and none is running. */
static int totals(long* accepted, long* runs, long* cancels) {
  producer_t* p;
  srec_t* r;
  int quiet;
  int i;
  int j;
  int n;

  quiet = 1;
  *accepted = *runs = *cancels = 0;
  for (i = 0; i < NPROD; i++) {
    p = &prod[i];
    n = atomic_load(&p->npub);
    for (j = 0; j < n; j++) {
      r = &p->recs[j];
      if (r->rejected)
        continue;
      ++*accepted;
      *runs += atomic_load(&r->runs);
      *cancels += atomic_load(&r->cancel0) + atomic_load(&r->busy);
      if (rec_ends(r) != 1 || atomic_load(&r->running) != 0 ||
          atomic_load(&r->runs) != atomic_load(&r->returned))
        quiet = 0;
    }
  }
  return quiet;
}


/* Drain round, once pending is 0 and every task has ended: the wheel's
 * counters agree with the test's (they may lag a little behind runs that
 * finish on the pool). */
static int stats_agree(int report) {
  uvtw_stats_t st;
  long accepted;
  long runs;
  long cancels;

  if (!totals(&accepted, &runs, &cancels))
    return 0;
  uvtw_wheel_stats(wheel, &st);
  if (report)
    fprintf(stderr,
            "stats: accepted %" PRIu64 " (test: %ld), run %" PRIu64
            " (%ld), cancelled %" PRIu64 " (%ld), closed %" PRIu64
            " (0), live %" PRIu64 " (0)\n",
            st.tasks_accepted, accepted, st.tasks_run, runs, st.tasks_cancelled,
            cancels, st.tasks_closed, st.tasks_live);
  return st.tasks_accepted == (uint64_t) accepted &&
         st.tasks_run == (uint64_t) runs &&
         st.tasks_cancelled == (uint64_t) cancels && st.tasks_closed == 0 &&
         st.tasks_live == 0;
}


static void check_round(void);


static void monitor_cb(uv_timer_t* handle) {
  uint64_t now;

  now = uv_hrtime();
  if (phase == PH_RUN) {
    if (now < round_end_ns)
      return;
    if (round_close) {
      atomic_store(&close_calling, 1);
      ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
      atomic_store(&close_started, 1);
      /* The producers keep going against a closing wheel for a while. */
      uv_sleep(20);
      stop_producers();
      uv_close((uv_handle_t*) handle, NULL);
      return;
    }
    stop_producers();
    cancel_long_lived();
    phase = PH_DRAIN;
    drain_deadline_ns = now + (uint64_t) 30 * 1000 * 1000 * 1000;
    return;
  }
  if (uvtw_wheel_pending(wheel) != 0 || !stats_agree(0)) {
    if (now > drain_deadline_ns) {
      fprintf(stderr, "drain: not settled after 30 s, pending %zu\n",
              uvtw_wheel_pending(wheel));
      stats_agree(1);
      check_round(); /* says which task did not end */
      abort();
    }
    return;
  }
  atomic_store(&close_calling, 1);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  atomic_store(&close_started, 1);
  uv_close((uv_handle_t*) handle, NULL);
}


static void check_round(void) {
  long accepted;
  long runs;
  long cancel0;
  long busy;
  long finals;
  long rejected;
  long stale;
  long submits;
  producer_t* p;
  srec_t* r;
  int ends;
  int i;
  int j;
  int n;

  accepted = runs = cancel0 = busy = finals = rejected = stale = 0;
  submits = 0;
  for (i = 0; i < NPROD; i++) {
    p = &prod[i];
    submits += p->n_submit;
    stale += p->n_cancel[3];
    n = atomic_load(&p->npub);
    for (j = 0; j < n; j++) {
      r = &p->recs[j];
      if (r->rejected) {
        ASSERT_EQ(0, atomic_load(&r->runs) + atomic_load(&r->finals));
        rejected++;
        continue;
      }
      accepted++;
      ASSERT_EQ(0, atomic_load(&r->running));
      ASSERT_EQ(atomic_load(&r->runs), atomic_load(&r->returned));
      ends = rec_ends(r);
      if (r->repeat == 0) {
        ASSERT_LE(atomic_load(&r->runs), 1);
        if (atomic_load(&r->busy) != 0)
          ASSERT_EQ(1, atomic_load(&r->runs));
      }
      if (ends != 1) {
        fprintf(stderr,
                "%s %s task (delay %" PRIu64 ", repeat %" PRIu64
                ") ended %d times: runs %d, cancel 0: %d, EBUSY: %d, "
                "final calls: %d\n",
                r->repeat ? "repeating" : "one-shot",
                r->flags ? "threadpool" : "loop", r->delay, r->repeat, ends,
                atomic_load(&r->runs), atomic_load(&r->cancel0),
                atomic_load(&r->busy), atomic_load(&r->finals));
        abort();
      }
      if (!round_close)
        ASSERT_EQ(0, atomic_load(&r->finals));
      runs += atomic_load(&r->runs);
      cancel0 += atomic_load(&r->cancel0);
      busy += atomic_load(&r->busy);
      finals += atomic_load(&r->finals);
    }
  }
  printf(
      "%s round: %ld submits, %ld accepted, %ld rejected, %ld runs, "
      "%ld cancelled (0), %ld busy, %ld final calls, %ld stale cancels, "
      "%d cancels from callbacks\n",
      round_close ? "close" : "drain", submits, accepted, rejected, runs,
      cancel0, busy, finals, stale, atomic_load(&cb_cancels));
  ASSERT_GT(accepted, 100);
}


static void run_round(int closing) {
  int i;
  int j;

  round_close = closing;
  phase = PH_RUN;
  atomic_store(&stop, 0);
  atomic_store(&close_started, 0);
  atomic_store(&close_calling, 0);
  atomic_store(&cb_cancels, 0);
  setup(closing ? 1024 : 0);
  uv_close((uv_handle_t*) &poll_timer, NULL);
  uv_close((uv_handle_t*) &spin_idle, NULL);
  ASSERT_UV_OK(uv_timer_init(&loop, &monitor));
  ASSERT_UV_OK(uv_timer_start(&monitor, monitor_cb, 5, 5));
  for (i = 0; i < NPROD; i++) {
    memset(&prod[i], 0, sizeof(prod[i]));
    prod[i].idx = i;
    prod[i].rng = 0x2545F4914F6CDD1Dull * (uint64_t) (i + 1 + 10 * closing);
    prod[i].recs = calloc(CAP, sizeof(srec_t));
    ASSERT_PTR_NE(prod[i].recs, NULL);
    for (j = 0; j < NREP; j++)
      prod[i].rep_slot[j] = -1;
  }
  round_end_ns = uv_hrtime() + (uint64_t) round_ms * 1000 * 1000;
  for (i = 0; i < NPROD; i++)
    ASSERT_UV_OK(uv_thread_create(&prod[i].tid, producer, &prod[i]));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, atomic_load(&close_cb_called));
  ASSERT_EQ(0, uv_loop_close(&loop));
  check_round();
  for (i = 0; i < NPROD; i++)
    free(prod[i].recs);
}


static void drain_round(void) {
  run_round(0);
}


static void close_round(void) {
  run_round(1);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(drain_round),
  TEST_CASE(close_round),
};
/* clang-format on */


int main(int argc, char** argv) {
  const char* s;

  round_ms = 1500;
  s = getenv("UVTW_STRESS_MS");
  if (s != NULL && atoi(s) > 0)
    round_ms = (unsigned) atoi(s);
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
