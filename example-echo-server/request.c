/* SPDX-License-Identifier: MIT */
/* Requests: REQ lines, their admission, their work on the threadpool and
 * their deadline. */

#include "server.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uv_mutex_t work_mutex;
uv_cond_t work_cond;
atomic_int work_stop;


/* ---------------------------------------------------------------------- */
/* Requests.                                                                */

static void req_unref(req_t* r) {
  if (--r->refs == 0)
    free(r);
}


void req_deadline_closed(xtimer_t* t) {
  req_unref(t->data);
}


/* The request leaves its connection: answered, or the connection is gone. */
void req_detach(req_t* r) {
  r->prev->next = r->next;
  r->next->prev = r->prev;
  r->conn->nreqs--;
  r->conn = NULL;
  r->lp->inflight--;
}


/* Shutdown: requests still sleeping on the threadpool wake up now. */
void work_wake_all(void) {
  uv_mutex_lock(&work_mutex);
  atomic_store(&work_stop, 1);
  uv_cond_broadcast(&work_cond);
  uv_mutex_unlock(&work_mutex);
}


/* Loop thread: nobody waits for r's answer any more.  Its work, if it
 * runs, stops at its next look at r->abandoned.  Real work would look
 * between its steps (a row, a chunk, a call) and return early; the
 * simulated work sleeps, so it is woken.  One condition variable serves
 * every work: a broadcast wakes all that sleep, at most --threads, and
 * each looks at its own flag; taking the mutex to set the flag keeps a
 * work from missing the wake between its look and its wait. */
void req_abandon(req_t* r) {
  uv_mutex_lock(&work_mutex);
  atomic_store(&r->abandoned, 1);
  uv_cond_broadcast(&work_cond);
  uv_mutex_unlock(&work_mutex);
}


/* Threadpool: sleeping stands for the work, which ends early once nobody
 * waits for its answer (req_abandon) or the server shuts down. */
static void req_work(xwork_t* w) {
  req_t* r = w->data;
  uint64_t end = uv_hrtime() + r->work_ms * 1000000;
  uint64_t now = 0;

  uv_mutex_lock(&work_mutex);
  while (!atomic_load(&work_stop) && !atomic_load(&r->abandoned) &&
         (now = uv_hrtime()) < end)
    uv_cond_timedwait(&work_cond, &work_mutex, end - now);
  uv_mutex_unlock(&work_mutex);
  r->cut_short = now < end;
  atomic_store(&r->finished_ms, uv_hrtime() / 1000000);
}


/* Non-zero if the work, which finished at `finished` (0: not yet),
 * finished by r's deadline (see req_s). */
static int req_in_time(const req_t* r, uint64_t finished) {
  return finished != 0 && finished <= r->deadline_at;
}


/* Answers the request r, still attached to its connection: OK if its work
 * finished by the deadline, else TIMEOUT (and then, if abandon_late, its
 * work is abandoned: cancelled if it has not started, told to stop if it
 * runs, as its late result would be dropped).  Counts the answer, detaches
 * r and closes its deadline timer, which may free r.  Both ends of a
 * request come here: whichever of its work and its deadline the loop sees
 * first. */
static void req_answer(req_t* r, int abandon_late) {
  loop_t* lp = r->lp;
  conn_t* c = r->conn;
  /* Read once: the answer and the end it reports must agree, and the
   * threadpool may store it at any moment. */
  uint64_t finished = atomic_load(&r->finished_ms);
  char buf[REQ_ID_MAX + 64];
  size_t n;

  if (req_in_time(r, finished)) {
    n = (size_t) snprintf(buf, sizeof(buf), "OK %s", r->id);
    counter_add(&lp->stat.req_ok, 1);
  } else {
    n = (size_t) snprintf(buf, sizeof(buf), "TIMEOUT %s", r->id);
    counter_add(&lp->stat.req_timeout, 1);
    if (abandon_late) {
      xwork_cancel(&r->work);
      req_abandon(r);
    }
  }
  /* The work's end, in ms since the REQ was read, on the same clocks as
   * the decision (req_s); "-": it had not ended.  A pool thread that the
   * OS runs late ends its work late, and then TIMEOUT is the right answer
   * even for work shorter than its deadline: this is how a test tells
   * that from a wrong answer. */
  if (r->timed && finished == 0)
    snprintf(buf + n, sizeof(buf) - n, " ended=-");
  else if (r->timed)
    snprintf(buf + n, sizeof(buf) - n, " ended=%" PRIu64,
             finished > r->read_at ? finished - r->read_at : 0);
  req_detach(r);
  conn_reply(c, buf);
  conn_answered(c); /* its last answer to a client that half-closed */
  xtimer_close(&r->deadline, req_deadline_closed);
}


static void req_work_done(xwork_t* w, int status) {
  req_t* r = w->data;
  loop_t* lp = r->lp;
  conn_t* owner = r->owner;

  /* Queued or running until now: its place under --max-work-inflight and
   * in its connection's share is free again. */
  work_release();
  r->owner = NULL;
  owner->works--;
  /* status != 0 means the work never ran; that happens only when the
   * request was already answered (TIMEOUT) or abandoned, and the thread
   * it would have taken stayed free. */
  if (status != 0)
    counter_add(&lp->stat.req_cancelled, 1);
  else if (r->cut_short)
    counter_add(&lp->stat.work_abandoned, 1);
  /* Not answered by its deadline yet: OK, or TIMEOUT if done after a
   * deadline whose timer the loop has not reached yet.  The work has run:
   * nothing to cancel.  r stays referenced until req_unref. */
  if (r->conn != NULL && status == 0)
    req_answer(r, 0);
  req_unref(r);
  conn_unref(owner); /* may free it, if it closed meanwhile */
  loop_maybe_finish(lp);
}


static void req_deadline(xtimer_t* t) {
  req_t* r = t->data;
  loop_t* lp = r->lp;

  /* OK if the work finished in time but its done call waits behind this
   * timer; else TIMEOUT, and work that has not started is cancelled. */
  req_answer(r, 1); /* may free r */
  loop_maybe_finish(lp);
}


/* Reads a decimal number of at most 10 digits: no sign, no spaces. */
static int parse_ms(const char* s, size_t len, uint64_t* out) {
  uint64_t v = 0;
  size_t i;

  if (len == 0 || len > 10)
    return -1;
  for (i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (uint64_t) (s[i] - '0');
  }
  *out = v;
  return 0;
}


/* Splits a line into space-separated fields; returns how many (at most
 * max + 1, so that "too many" shows). */
static int split(
    const char* s, size_t len, const char** f, size_t* flen, int max) {
  size_t i = 0;
  int n = 0;

  while (i < len) {
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
      i++;
    if (i == len)
      break;
    if (n > max)
      return n;
    f[n] = s + i;
    while (i < len && s[i] != ' ' && s[i] != '\t')
      i++;
    flen[n] = (size_t) (s + i - f[n]);
    n++;
  }
  return n;
}


#define ERR_USAGE "ERR usage: REQ <id> <work_ms> <deadline_ms> [timed]\n"
#define ERR_ID "ERR id must be printable ASCII\n"

/* "REQ <id> <work_ms> <deadline_ms> [timed]".  Errors go to the output and
 * leave the connection open. */
void handle_req(conn_t* c, const char* line, size_t len) {
  loop_t* lp = c->lp;
  const char* f[6];
  size_t flen[6];
  uint64_t work_ms;
  uint64_t deadline_ms;
  char msg[128];
  req_t* r;
  size_t i;
  int n;
  int err;

  n = split(line, len, f, flen, 5);
  if ((n != 4 && (n != 5 || flen[4] != 5 || memcmp(f[4], "timed", 5) != 0)) ||
      parse_ms(f[2], flen[2], &work_ms) != 0 ||
      parse_ms(f[3], flen[3], &deadline_ms) != 0) {
    out_append(lp, ERR_USAGE, sizeof(ERR_USAGE) - 1);
    return;
  }
  if (flen[1] > REQ_ID_MAX) {
    n = snprintf(msg, sizeof(msg), "ERR id longer than %d bytes\n", REQ_ID_MAX);
    out_append(lp, msg, (size_t) n);
    return;
  }
  for (i = 0; i < flen[1]; i++) {
    if ((unsigned char) f[1][i] < 0x21 || (unsigned char) f[1][i] > 0x7e) {
      out_append(lp, ERR_ID, sizeof(ERR_ID) - 1);
      return;
    }
  }
  if (work_ms > opt.max_work_ms || deadline_ms > opt.max_deadline_ms) {
    n = snprintf(msg, sizeof(msg),
                 "ERR work_ms must be <= %" PRIu64
                 " and deadline_ms <= %" PRIu64 "\n",
                 opt.max_work_ms, opt.max_deadline_ms);
    out_append(lp, msg, (size_t) n);
    return;
  }
  if (c->nreqs >= opt.max_reqs) {
    n = snprintf(msg, sizeof(msg),
                 "ERR too many requests in flight (max %" PRIu64 ")\n",
                 opt.max_reqs);
    out_append(lp, msg, (size_t) n);
    return;
  }

  /* Admission: a request that could only wait in the threadpool's queue
   * is turned away at once, before its deadline starts, so that the pool
   * works on requests that can still be answered in time; and so is one
   * past its connection's share of the pool, so that one client cannot
   * take every thread from the others. */
  if (c->works >= opt.max_work_per_conn || !work_admit()) {
    counter_add(&lp->stat.req_busy, 1);
    out_append(lp, "BUSY ", 5);
    out_append(lp, f[1], flen[1]);
    out_append(lp, "\n", 1);
    return;
  }

  r = xmalloc(sizeof(*r));
  memset(r, 0, sizeof(*r));
  memcpy(r->id, f[1], flen[1]);
  r->id[flen[1]] = '\0';
  r->work_ms = work_ms;
  r->timed = n == 5;
  r->work.data = r;
  r->deadline.data = r;
  r->lp = lp;
  r->refs = 1; /* the deadline timer; the work adds one once submitted */
  atomic_init(&r->abandoned, 0);
  xtimer_init(&lp->backend, &r->deadline);
  /* The deadline first: once the work is submitted it may finish at any
   * moment, and its answer needs the deadline there to cancel. */
  /* The loop's time is that of the poll that read the line, which a busy
   * or stopped loop may have left well behind: the deadline counts from
   * now, as the work's end (uv_hrtime) does, so that ended= and the answer
   * agree with what the client saw. */
  uv_update_time(&lp->loop);
  r->read_at = uv_now(&lp->loop);
  r->deadline_at = r->read_at + deadline_ms;
  atomic_init(&r->finished_ms, 0);
  err = xtimer_start(&r->deadline, req_deadline, deadline_ms);
  if (err == 0) {
    err = xwork_submit(&lp->backend, &r->work, req_work, req_work_done);
    if (err == 0) {
      r->refs++;
      r->owner = c;
      c->works++;
      c->refs++;
    }
  }
  if (err != 0) {
    n = snprintf(msg, sizeof(msg), "ERR %s cannot start: %s\n", r->id,
                 uv_err_name(err));
    out_append(lp, msg, (size_t) n);
    work_release();
    xtimer_close(&r->deadline, req_deadline_closed);
    return;
  }
  r->conn = c;
  r->next = c->reqs.next;
  r->prev = &c->reqs;
  r->next->prev = r;
  c->reqs.next = r;
  c->nreqs++;
  lp->inflight++;
}
