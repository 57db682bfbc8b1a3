/* SPDX-License-Identifier: MIT */
/* Limits: the output cap, accept errors and admission for work.
 *
 * Output.  --max-output-bytes bounds the replies queued for writing across
 * all connections.  Each loop gets an equal share of it (its budget), so
 * that the accounting needs no shared state between loops.  A reply is
 * charged when it is queued and released when libuv has handed it to the
 * kernel.  When a loop's total passes its budget, the connections whose own
 * queues are above their fair share (budget / connections on the loop)
 * stop being read until they have drained; the others, which read their
 * replies, go on.  Past the budget a connection may still add one piece
 * of replies (OUT_CHUNK plus one reply, see conn_input) before it is
 * paused, so a loop can go over its budget by at most that much per
 * connection; the input it has not handled then waits in its pending
 * buffer (at most one read, READ_SIZE).
 *
 * Slow.  A connection paused for its output (over its share of the budget,
 * or over WRITE_QUEUE_HIGH on its own) is slow from then (slow_since) until
 * its queue has drained to OUTPUT_DRAINED; being read from again in
 * between does not count, so a client that never reads cannot reset the
 * clock by letting the loop's total dip.  Slow for --idle-ms: BYE slow
 * (conn_timer).
 *
 * Accept errors.  Counted per loop; logged at most once a second for the
 * whole server, with the count so far.
 *
 * Work.  --max-work-inflight bounds the requests queued or running on the
 * threadpool, across all loops: one atomic counter, touched once when a
 * request is admitted and once when its work's done call comes.
 */

#include "server.h"

#include <inttypes.h>


static uint64_t fair_share(const loop_t* lp) {
  return lp->output_budget / (lp->nconns > 0 ? lp->nconns : 1);
}


int output_over_share(const conn_t* c) {
  return c->queued > fair_share(c->lp);
}


/* Pauses every connection above its share: runs once each time the loop
 * goes over its budget, not on every write. */
static void output_squeeze(loop_t* lp) {
  conn_t* c;
  conn_t* next;

  for (c = lp->conns.next; c != &lp->conns; c = next) {
    next = c->next;
    if (output_over_share(c))
      conn_pause(c, PAUSE_CAP);
  }
}


void output_charge(conn_t* c, size_t len) {
  loop_t* lp = c->lp;

  c->queued += len;
  lp->output_bytes += len;
  counter_add(&lp->stat.output_bytes, len);

  if (lp->output_bytes <= lp->output_budget)
    return;
  if (!lp->over_budget) {
    lp->over_budget = 1;
    output_squeeze(lp);
  } else if (output_over_share(c)) {
    conn_pause(c, PAUSE_CAP);
  }
}


void output_release(conn_t* c, size_t len) {
  loop_t* lp = c->lp;
  conn_t* p;
  conn_t* next;

  c->queued -= len;
  lp->output_bytes -= len;
  counter_add(&lp->stat.output_bytes, (uint64_t) -len);
  if (c->slow_since != 0 && c->queued <= OUTPUT_DRAINED)
    c->slow_since = 0;
  if ((c->paused & PAUSE_CAP) && c->queued == 0)
    conn_resume(c, PAUSE_CAP); /* it drained */
  /* Back under three quarters of the budget: everyone reads again.  The
   * gap keeps a loop near its budget from pausing and resuming on every
   * write. */
  if (lp->over_budget && lp->output_bytes <= lp->output_budget / 4 * 3) {
    lp->over_budget = 0;
    for (p = lp->conns.next; p != &lp->conns; p = next) {
      next = p->next;
      conn_resume(p, PAUSE_CAP);
    }
  }
}


void accept_error(loop_t* lp, int err) {
  uint64_t now = uv_hrtime() / 1000000;
  uint64_t last;
  uint64_t total;
  unsigned i;

  counter_add(&lp->stat.accept_errors, 1);
  last = atomic_load_explicit(&srv.accept_log_ms, memory_order_relaxed);
  if (last != 0 && now - last < 1000)
    return;
  /* One loop wins the second; the others stay quiet. */
  if (!atomic_compare_exchange_strong(&srv.accept_log_ms, &last, now))
    return;
  total = 0;
  for (i = 0; i < srv.nloops; i++)
    total += counter_get(&srv.loops[i]->stat.accept_errors);
  logf_("accept: %s (%" PRIu64 " accept errors so far; serving %" PRIu64
        " connections)",
        uv_strerror(err), total,
        (uint64_t) atomic_load_explicit(&srv.nconns, memory_order_relaxed));
}


int work_admit(void) {
  uint64_t n = atomic_load_explicit(&srv.work_inflight, memory_order_relaxed);

  do {
    if (n >= opt.max_work_inflight)
      return 0;
  } while (!atomic_compare_exchange_weak_explicit(&srv.work_inflight, &n, n + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed));
  return 1;
}


void work_release(void) {
  atomic_fetch_sub_explicit(&srv.work_inflight, 1, memory_order_relaxed);
}
