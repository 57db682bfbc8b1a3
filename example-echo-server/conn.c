/* SPDX-License-Identifier: MIT */
/* Connections: reading lines, writing replies, the connection's one timer
 * (heartbeat, idle close, line deadline, slow close), and closing. */

#include "server.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/ioctl.h>

static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
static void conn_input(conn_t* c, const char* p, size_t len);
static void conn_timer(xtimer_t* t);
static void conn_arm(conn_t* c);
static void conn_linger(conn_t* c, const char* msg, uint64_t ms);


/* ---------------------------------------------------------------------- */
/* Output.                                                                  */

static void on_write(uv_write_t* req, int status) {
  wreq_t* w = (wreq_t*) req;
  conn_t* c = req->handle->data;

  output_release(c, w->len);
  free(w);
  /* A failed write shows up as a read error, except after the client's
   * EOF, when the server reads no more: then it is the only sign that the
   * client is gone (it closed, and its kernel answered with a reset). */
  if (status < 0 && c->state == CONN_OPEN && c->eof) {
    conn_close(c);
    return;
  }
  if ((c->paused & PAUSE_OWN) && c->queued < WRITE_QUEUE_LOW)
    conn_resume(c, PAUSE_OWN);
}


/* Queues bytes to the client; returns 0 or a UV_E* error. */
int conn_send(conn_t* c, const char* data, size_t len) {
  wreq_t* w;
  uv_buf_t buf;
  int err;

  w = xmalloc(sizeof(*w) + len);
  w->len = len;
  memcpy(w->data, data, len);
  buf = uv_buf_init(w->data, (unsigned) len);
  err = uv_write(&w->req, (uv_stream_t*) &c->tcp, &buf, 1, on_write);
  if (err != 0) {
    free(w);
    return err;
  }
  output_charge(c, len);
  if (c->queued > WRITE_QUEUE_HIGH)
    conn_pause(c, PAUSE_OWN);
  return 0;
}


/* Sends a reply now (from a timer or a work's done call). */
void conn_reply(conn_t* c, const char* line) {
  char buf[256];
  int n;

  n = snprintf(buf, sizeof(buf), "%s\n", line);
  if (conn_send(c, buf, (size_t) n) != 0)
    conn_close(c);
}


void out_append(loop_t* lp, const char* data, size_t len) {
  if (lp->out_len + len > lp->out_cap) {
    size_t cap = lp->out_cap ? lp->out_cap : 65536;
    while (cap < lp->out_len + len)
      cap *= 2;
    lp->out = xrealloc(lp->out, cap);
    lp->out_cap = cap;
  }
  memcpy(lp->out + lp->out_len, data, len);
  lp->out_len += len;
}


void out_flush(conn_t* c) {
  loop_t* lp = c->lp;
  size_t len = lp->out_len;

  lp->out_len = 0;
  if (len > 0 && conn_send(c, lp->out, len) != 0)
    conn_close(c);
}


/* Reading stops while any reason to pause holds.  A connection paused for
 * its output is not idle by its own doing: BYE idle and PING do not apply
 * until it reads again; BYE slow does (limits.c). */
void conn_pause(conn_t* c, int why) {
  if (c->state != CONN_OPEN || (c->paused & why))
    return;
  if ((why & (PAUSE_OWN | PAUSE_CAP)) && c->slow_since == 0)
    c->slow_since = uv_now(&c->lp->loop) | 1; /* 0 means "not slow" */
  if (c->paused == 0)
    uv_read_stop((uv_stream_t*) &c->tcp);
  c->paused |= why;
}


void conn_resume(conn_t* c, int why) {
  if (c->state != CONN_OPEN || !(c->paused & why))
    return;
  c->paused &= ~why;
  if (c->paused != 0)
    return;
  /* Its silence while paused was ours, not the client's. */
  c->last_activity = uv_now(&c->lp->loop);
  conn_arm(c);
  if (c->pending != NULL) {
    /* The lines left over from its last read come first; they may pause
     * it again, and then keep waiting. */
    char* pending = c->pending;
    size_t len = c->pending_len;
    c->pending = NULL;
    c->pending_len = 0;
    conn_input(c, pending, len);
    free(pending);
    if (c->paused != 0)
      return;
  }
  if (c->state == CONN_OPEN && !c->eof &&
      uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read) != 0)
    conn_close(c);
}


/* ---------------------------------------------------------------------- */
/* Closing.                                                                 */

void conn_unref(conn_t* c) {
  loop_t* lp = c->lp;

  if (--c->refs > 0)
    return;
  free(c->line);
  free(c->pending);
  free(c);
  lp->live--;
  loop_maybe_finish(lp);
}


static void on_tcp_closed(uv_handle_t* handle) {
  conn_unref(handle->data);
}


static void on_timer_closed(xtimer_t* t) {
  conn_unref(t->data);
}


/* Leaves CONN_OPEN: out of the list and the counts, requests abandoned:
 * works that have not started are cancelled, running ones are told to
 * stop (their done calls still come, see req_work_done). */
static void conn_leave_open(conn_t* c) {
  loop_t* lp = c->lp;
  req_t* r;

  if (c->counted) {
    c->prev->next = c->next;
    c->next->prev = c->prev;
    lp->nconns--;
    counter_add(&lp->stat.conns, (uint64_t) -1);
    atomic_fetch_sub_explicit(&srv.nconns, 1, memory_order_relaxed);
  }
  while (c->reqs.next != &c->reqs) {
    r = c->reqs.next;
    req_detach(r);
    xwork_cancel(&r->work);
    req_abandon(r);
    xtimer_close(&r->deadline, req_deadline_closed);
  }
}


/* Closes now, dropping whatever is not sent yet.  Idempotent. */
void conn_close(conn_t* c) {
  if (c->state == CONN_CLOSED)
    return;
  if (c->state == CONN_OPEN)
    conn_leave_open(c);
  c->state = CONN_CLOSED;
  uv_close((uv_handle_t*) &c->tcp, on_tcp_closed);
  xtimer_close(&c->timer, on_timer_closed); /* last: may free c */
}


static void on_shutdown(uv_shutdown_t* req, int status) {
  conn_t* c = req->data;

  if (c->state != CONN_CLOSING)
    return; /* closed meanwhile: the close cancels the shutdown */
  c->shut = 1;
  if (status != 0 || c->peer_eof)
    conn_close(c);
  /* Else the linger goes on: until the client's EOF (on_read) or the
   * timer (conn_timer). */
}


/* Sends msg (if not NULL) and ends the connection: shuts down our side
 * once everything queued is sent, and closes on the client's EOF, on an
 * error, or after ms. */
static void conn_linger(conn_t* c, const char* msg, uint64_t ms) {
  if (c->state != CONN_OPEN)
    return;
  conn_leave_open(c);
  c->state = CONN_CLOSING;
  c->shutdown_req.data = c;
  /* Reading may be stopped (paused, or not started yet for BYE busy): from
   * now on on_read only throws input away.  After the client's EOF there
   * is nothing left to read, and the shutdown alone ends it. */
  uv_read_stop((uv_stream_t*) &c->tcp);
  if (c->eof)
    c->peer_eof = 1;
  if ((msg != NULL && conn_send(c, msg, strlen(msg)) != 0) ||
      uv_shutdown(&c->shutdown_req, (uv_stream_t*) &c->tcp, on_shutdown) != 0 ||
      (!c->eof &&
       uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read) != 0) ||
      xtimer_start(&c->timer, conn_timer, ms) != 0) {
    conn_close(c);
  }
}


/* Sends a last line and ends the connection with a lingering close.
 *
 * Closing a socket whose receive buffer holds unread bytes, or that
 * receives more after the close, makes the kernel answer with a reset
 * instead of a FIN; the reset can reach the client before it has read the
 * last line, and its next send fails (EPIPE).  A client that is still
 * sending when the server ends the connection (a line too long, a line
 * that timed out, BYE idle to a client that just began to talk) would then
 * lose the line that says why.  So the server shuts down its side once
 * the line is sent (uv_shutdown: the client reads the line, then EOF), and
 * goes on reading, throwing the input away, until the client's EOF or
 * LINGER_MS; then it closes. */
void conn_bye(conn_t* c, const char* msg) {
  conn_linger(c, msg, LINGER_MS);
}


/* The client has half-closed (c->eof) and every request it sent is
 * answered: what is left is the queued output.  The shutdown sends it,
 * then our FIN; the client gets --idle-ms to read it, as a client that
 * never reads must not hold its descriptor for ever. */
void conn_answered(conn_t* c) {
  if (c->state == CONN_OPEN && c->eof && c->nreqs == 0)
    conn_linger(c, NULL, opt.idle_ms);
}


/* ---------------------------------------------------------------------- */
/* The connection's timer.                                                  */

/* Arms the timer for the first thing due: the next PING or BYE idle (from
 * the silence so far), the partial line's deadline, or BYE slow. */
static void conn_arm(conn_t* c) {
  uint64_t now = uv_now(&c->lp->loop);
  uint64_t silent = now - c->last_activity;
  uint64_t wait;
  uint64_t due;

  /* The next PING is due at the next multiple of heartbeat_ms of silence,
   * unless the BYE comes first.  A late wake-up skips PINGs, never BYE.
   * While paused for output, neither applies (its silence is ours), only
   * BYE slow and the line deadline.  After the client's EOF it cannot
   * answer a PING: only BYE idle is left. */
  wait = UINT64_MAX;
  if (!(c->paused & (PAUSE_OWN | PAUSE_CAP))) {
    wait = (silent / opt.heartbeat_ms + 1) * opt.heartbeat_ms;
    if (wait > opt.idle_ms || c->eof)
      wait = opt.idle_ms;
    wait = wait > silent ? wait - silent : 0;
  }
  if (c->slow_since != 0) {
    due = c->slow_since + opt.idle_ms;
    if (due <= now)
      wait = 0;
    else if (due - now < wait)
      wait = due - now;
  }
  if (c->line_len > 0) {
    due = c->line_started + opt.line_timeout_ms;
    if (due <= now)
      wait = 0;
    else if (due - now < wait)
      wait = due - now;
  }
  if (wait == UINT64_MAX) {
    xtimer_stop(&c->timer); /* conn_resume arms it again */
    return;
  }
  /* Never 0: libuv 1.44 runs a timer started with 0 from inside a timer
   * callback again in the same pass, and would spin if the callback
   * found nothing to do yet.  At worst this is 1 ms late. */
  if (wait == 0)
    wait = 1;
  if (xtimer_start(&c->timer, conn_timer, wait) != 0)
    conn_close(c);
}


/* Looks again in 1 ms, after this iteration's reads. */
static void conn_arm_soon(conn_t* c) {
  if (xtimer_start(&c->timer, conn_timer, 1) != 0)
    conn_close(c);
}


/* Non-zero if the client's input waits unread in the kernel.  libuv runs
 * timers before it polls, so a loop that was held up (descheduled on a
 * busy machine) reaches the idle deadline before the input that arrived
 * meanwhile: that client is not idle. */
static int input_waiting(conn_t* c) {
  uv_os_fd_t fd;
  int n;

  if (uv_fileno((uv_handle_t*) &c->tcp, &fd) != 0)
    return 0;
  return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}


/* PING, BYE idle, ERR line timeout, BYE slow, or the end of a linger. */
static void conn_timer(xtimer_t* t) {
  conn_t* c = t->data;
  loop_t* lp = c->lp;
  uint64_t now = uv_now(&lp->loop);
  uint64_t silent;

  if (c->state != CONN_OPEN) {
    conn_close(c); /* the linger is over */
    return;
  }
  if (lp->phase != LOOP_RUN)
    return; /* draining: nothing new to say; BYE shutdown comes later */
  if (c->line_len > 0 && now - c->line_started >= opt.line_timeout_ms) {
    counter_add(&lp->stat.line_timeouts, 1);
    conn_bye(c, "ERR line timeout\n");
    return;
  }
  if (c->slow_since != 0 && now - c->slow_since >= opt.idle_ms) {
    counter_add(&lp->stat.slow_closes, 1);
    conn_bye(c, "BYE slow\n");
    return;
  }
  if (!(c->paused & (PAUSE_OWN | PAUSE_CAP))) {
    silent = now - c->last_activity;
    if (silent >= opt.heartbeat_ms && c->paused == 0 && !c->eof &&
        input_waiting(c)) {
      conn_arm_soon(c); /* the read comes in this iteration's poll */
      return;
    }
    if (silent >= opt.idle_ms) {
      counter_add(&lp->stat.idle_closes, 1);
      conn_bye(c, "BYE idle\n");
      return;
    }
    if (silent >= opt.heartbeat_ms && !c->eof)
      conn_reply(c, "PING");
  }
  if (c->state == CONN_OPEN)
    conn_arm(c);
}


/* ---------------------------------------------------------------------- */
/* Input.                                                                   */

static void handle_line(conn_t* c, const char* line, size_t len) {
  loop_t* lp = c->lp;
  size_t n = len;
  char buf[STATS_LINE_MAX];

  if (n > 0 && line[n - 1] == '\r')
    n--; /* accept CRLF; the echo keeps the line as it came */
  if (n > opt.max_line) {
    out_flush(c);
    conn_bye(c, "ERR line too long\n");
    return;
  }
  if (n == 4 && memcmp(line, "PONG", 4) == 0)
    return; /* an answer to PING: activity, and nothing to say */
  if (n == 5 && memcmp(line, "STATS", 5) == 0) {
    stats_format(lp, buf, sizeof(buf));
    out_append(lp, buf, strlen(buf));
    out_append(lp, "\n", 1);
    return;
  }
  if (n >= 3 && memcmp(line, "REQ", 3) == 0 &&
      (n == 3 || line[3] == ' ' || line[3] == '\t')) {
    handle_req(c, line, n);
    return;
  }
  out_append(lp, line, len);
  out_append(lp, "\n", 1);
}


static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  /* libuv calls on_read right after on_alloc, on this one thread, so one
   * buffer per loop serves every connection; a partial line is copied
   * out. */
  conn_t* c = handle->data;

  (void) suggested;
  *buf = uv_buf_init(c->lp->slab, sizeof(c->lp->slab));
}


/* Handles input: every complete line, and the start of the next one.
 * Replies are sent at least every OUT_CHUNK bytes; if that pauses the
 * connection (its queue, or the loop's, is over the limit), the lines not
 * handled yet wait in c->pending until it resumes, so one read never
 * queues more than OUT_CHUNK plus one reply beyond the limits, whatever
 * the lines ask for (a read full of STATS lines would be 4 MB). */
static void conn_input(conn_t* c, const char* p, size_t len) {
  loop_t* lp = c->lp;
  const char* end = p + len;
  const char* nl;
  size_t n;

  lp->out_len = 0;
  while (p < end && c->state == CONN_OPEN) {
    if (lp->out_len >= OUT_CHUNK) {
      out_flush(c);
      if (c->state != CONN_OPEN)
        break;
      if (c->paused & (PAUSE_OWN | PAUSE_CAP)) {
        c->pending_len = (size_t) (end - p);
        c->pending = xmalloc(c->pending_len);
        memcpy(c->pending, p, c->pending_len);
        break;
      }
    }
    nl = memchr(p, '\n', (size_t) (end - p));
    n = (size_t) ((nl != NULL ? nl : end) - p);
    if (c->line_len > 0 || nl == NULL) {
      /* Part of a line is kept, up to max_line + 1 bytes (room for a \r);
       * one byte more is enough to know that it is too long. */
      if (c->line_len + n > opt.max_line + 1) {
        out_flush(c);
        conn_bye(c, "ERR line too long\n");
        break;
      }
      if (c->line == NULL)
        c->line = xmalloc(opt.max_line + 1);
      if (c->line_len == 0)
        c->line_started = c->last_activity;
      memcpy(c->line + c->line_len, p, n);
      c->line_len += n;
      if (nl == NULL)
        break;
      handle_line(c, c->line, c->line_len);
      c->line_len = 0;
    } else {
      handle_line(c, p, n);
    }
    p = nl + 1;
  }
  if (c->state == CONN_OPEN) {
    out_flush(c);
    if (c->state == CONN_OPEN)
      conn_arm(c);
  }
  lp->out_len = 0;
}


/* The client's EOF: it has sent its last line, and may still read (a
 * half-close, as nc -N or an HTTP/1.0 client does).  Every request it
 * sent is answered, or its deadline answers it, then the queued output
 * is sent, then the server shuts down and closes (conn_answered).  A
 * partial line can never end now: it is dropped.  EOF is the client's
 * last activity, so BYE idle still comes --idle-ms after it if answers
 * are owed that long. */
static void conn_eof(conn_t* c) {
  c->eof = 1;
  uv_read_stop((uv_stream_t*) &c->tcp);
  c->line_len = 0;
  c->last_activity = uv_now(&c->lp->loop);
  conn_answered(c);
  if (c->state == CONN_OPEN)
    conn_arm(c);
}


static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  conn_t* c = stream->data;

  if (c->state == CONN_CLOSING) {
    /* Lingering (conn_bye): input is thrown away.  The client's EOF ends
     * it once the last line is out; before that, the line still goes. */
    if (nread == UV_EOF && !c->shut) {
      c->peer_eof = 1;
      uv_read_stop(stream);
    } else if (nread < 0) {
      conn_close(c);
    }
    return;
  }
  if (nread == UV_EOF) {
    conn_eof(c);
    return;
  }
  if (nread < 0) {
    conn_close(c); /* a reset or an error: nobody is left to answer */
    return;
  }
  if (nread == 0)
    return;
  /* Activity: once per read, not per line, is enough.  Bytes that do not
   * complete a line count too, but they do not move the line's deadline:
   * line_started is set only when a line begins. */
  c->last_activity = uv_now(&c->lp->loop);
  conn_input(c, buf->base, (size_t) nread);
}


/* ---------------------------------------------------------------------- */
/* A new connection, accepted by loop.c.                                    */

void conn_accepted(loop_t* lp, int fd) {
  conn_t* c;

  c = xmalloc(sizeof(*c));
  memset(c, 0, sizeof(*c));
  c->lp = lp;
  uv_tcp_init(&lp->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_tcp_open(&c->tcp, fd) != 0) {
    close(fd);
    c->refs = 1;
    lp->live++;
    c->state = CONN_CLOSED;
    uv_close((uv_handle_t*) &c->tcp, on_tcp_closed);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1); /* small request/reply lines: no Nagle */
  c->reqs.next = c->reqs.prev = &c->reqs;
  c->state = CONN_OPEN;
  c->refs = 2;
  lp->live++;
  xtimer_init(&lp->backend, &c->timer);
  c->timer.data = c;

  if (atomic_load_explicit(&srv.nconns, memory_order_relaxed) >=
      opt.max_conns) {
    counter_add(&lp->stat.busy_closes, 1);
    conn_bye(c, "BYE busy\n");
    return;
  }
  c->counted = 1;
  c->next = lp->conns.next;
  c->prev = &lp->conns;
  c->next->prev = c;
  lp->conns.next = c;
  lp->nconns++;
  counter_add(&lp->stat.conns, 1);
  atomic_fetch_add_explicit(&srv.nconns, 1, memory_order_relaxed);

  /* The loop's time was read before this iteration's accepts began, and
   * accepting a burst of connections takes a while: without a fresh
   * reading, silence would count from before the client even connected,
   * and PING and BYE idle would come early by that much. */
  uv_update_time(&lp->loop);
  c->last_activity = uv_now(&lp->loop);
  conn_arm(c);
  if (c->state == CONN_OPEN &&
      uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read) != 0)
    conn_close(c);
}
