/* SPDX-License-Identifier: MIT */
/* Loops: one uv_loop_t per thread, each with its own timer backend, its own
 * listener on the shared port and its own connections; and how a loop
 * drains and stops.
 *
 * Listening.  Every loop opens its own socket with SO_REUSEPORT on the same
 * address, so the kernel spreads new connections over the loops (by a hash
 * of the addresses) and no loop hands connections to another.  That, and
 * accept4(), are Linux's: elsewhere (or built with ECHO_POSIX_ONLY, to test
 * it) the server says so when it starts, the loops share one listening
 * socket (each polls its own dup() of it, and takes whichever connection
 * it wins), and accept() is followed by fcntl(), as libuv does there.  The loop
 * accepts by hand, from a uv_poll_t on that socket, instead of with
 * uv_listen: libuv answers EMFILE by accepting and closing the waiting
 * connections itself, without telling the program (it calls the
 * connection callback only when its trick fails), so a server out of
 * descriptors would shed clients silently.  Here every failed accept is
 * counted, and the loop stops accepting for ACCEPT_BACKOFF_MS, leaving the
 * clients in the kernel's queue until descriptors come back.
 *
 * Control.  The signal thread (server.c) reaches a loop only through
 * uvtw_submit on the loop's wheel: a task that runs on the loop thread and
 * starts the drain, or skips it.  Such a task may be submitted until the
 * loop starts closing its wheel; ctl_mutex orders the two, so that no
 * thread calls into a wheel that is closing (uvtw's shutdown rule).
 *
 * Drain.  On the first signal each loop stops accepting and stops reading
 * (no new requests), sends nothing new to idle connections (no PING, no
 * BYE idle), and waits for its requests in flight to be answered, for up
 * to --drain-ms.  Then, or at once on a second signal, every connection
 * gets BYE shutdown, and the loop closes.
 */

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4 */
#endif

#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__linux__) && !defined(ECHO_POSIX_ONLY)
# define ECHO_LINUX 1
#endif

/* How long a loop stops accepting after an accept error such as EMFILE. */
#define ACCEPT_BACKOFF_MS 100
/* Connections accepted per readiness of the listener, so that one loop
 * iteration also serves the connections it has. */
#define ACCEPT_BATCH 64

static void loop_stop(loop_t* lp);


/* ---------------------------------------------------------------------- */
/* Accepting.                                                               */

/* Marks fd non-blocking and close-on-exec, as accept4 and socket do on
 * Linux with SOCK_NONBLOCK | SOCK_CLOEXEC.  Returns fd, or -1 (errno set,
 * fd closed). */
#ifndef ECHO_LINUX
static int nonblock_cloexec(int fd) {
  int flags;

  if (fd < 0)
    return fd;
  if ((flags = fcntl(fd, F_GETFL)) == -1 ||
      fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1 ||
      fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}
#endif


static int accept_nonblock(int listen_fd) {
#ifdef ECHO_LINUX
  return accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
  return nonblock_cloexec(accept(listen_fd, NULL, NULL));
#endif
}


static void on_listen_readable(uv_poll_t* handle, int status, int events);

static void on_accept_timer(xtimer_t* t) {
  loop_t* lp = t->data;

  if (lp->phase != LOOP_RUN || !lp->accept_paused)
    return;
  lp->accept_paused = 0;
  uv_poll_start(&lp->listen_poll, UV_READABLE, on_listen_readable);
}


static void on_listen_readable(uv_poll_t* handle, int status, int events) {
  loop_t* lp = handle->data;
  int fd;
  int err;
  int i;

  (void) events;
  if (status < 0) {
    accept_error(lp, status);
    return;
  }
  for (i = 0; i < ACCEPT_BATCH && lp->phase == LOOP_RUN; i++) {
    fd = accept_nonblock(lp->listen_fd);
    if (fd >= 0) {
      conn_accepted(lp, fd);
      continue;
    }
    err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      return;
    if (err == EINTR || err == ECONNABORTED)
      continue; /* the client gave up: nothing to count */
    /* EMFILE, ENFILE, ENOBUFS, ENOMEM, or worse: count it and wait; the
     * clients stay in the kernel's queue meanwhile. */
    accept_error(lp, -err);
    lp->accept_paused = 1;
    uv_poll_stop(&lp->listen_poll);
    if (xtimer_start(&lp->accept_timer, on_accept_timer, ACCEPT_BACKOFF_MS) !=
        0)
      on_accept_timer(&lp->accept_timer); /* cannot wait: retry at once */
    return;
  }
}


/* A listening socket on opt.host and port, shared with the other loops. */
static int listen_socket(int port, int* fd_out) {
  struct sockaddr_storage addr;
  int one = 1;
  int fd;

  if (parse_address(opt.host, port, &addr) != 0) {
    logf_("--host %s is not an IPv4 or IPv6 address", opt.host);
    return UV_EINVAL;
  }
#ifdef ECHO_LINUX
  fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
#else
  fd = nonblock_cloexec(socket(addr.ss_family, SOCK_STREAM, 0));
#endif
  if (fd < 0)
    return -errno;
  /* A deep accept queue: when it overflows during a burst of connects,
   * the kernel drops the client's last ACK and the connection is only
   * accepted a second later, after a SYN-ACK retransmit, which a client
   * timing its silence from connect() sees as a late PING or BYE.  The
   * kernel caps this at net.core.somaxconn (4096 on Debian 12). */
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
#ifdef ECHO_LINUX
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
#endif
      bind(fd, (struct sockaddr*) &addr,
           addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                      : sizeof(struct sockaddr_in)) != 0 ||
      listen(fd, 65535) != 0) {
    int err = -errno;
    close(fd);
    return err;
  }
  *fd_out = fd;
  return 0;
}


static int bound_port(int fd) {
  struct sockaddr_storage bound;
  socklen_t len = sizeof(bound);

  if (getsockname(fd, (struct sockaddr*) &bound, &len) != 0)
    return -1;
  return ntohs(bound.ss_family == AF_INET6
                   ? ((struct sockaddr_in6*) &bound)->sin6_port
                   : ((struct sockaddr_in*) &bound)->sin_port);
}


/* ---------------------------------------------------------------------- */
/* Control tasks from the signal thread.                                    */

static void loop_drain(loop_t* lp) {
  conn_t* c;

  if (lp->phase != LOOP_RUN)
    return;
  lp->phase = LOOP_DRAIN;
  /* Stop accepting at once: the kernel refuses new clients from now on,
   * once every loop has closed its socket. */
  xtimer_stop(&lp->accept_timer);
  uv_close((uv_handle_t*) &lp->listen_poll, NULL);
  close(lp->listen_fd);
  lp->listen_fd = -1;
  for (c = lp->conns.next; c != &lp->conns; c = c->next)
    conn_pause(c, PAUSE_DRAIN);
  if (lp->inflight == 0)
    loop_stop(lp);
}


static void on_drain_timeout(xtimer_t* t) {
  loop_stop(t->data);
}


static void on_ctl(void* arg, int status, int now) {
  loop_t* lp = arg;

  if (status != 0)
    return; /* the wheel is closing: the loop is stopping already */
  if (now) {
    loop_stop(lp);
    return;
  }
  if (lp->phase != LOOP_RUN)
    return;
  loop_drain(lp);
  if (lp->phase == LOOP_DRAIN &&
      xtimer_start(&lp->drain_timer, on_drain_timeout, opt.drain_ms) != 0)
    loop_stop(lp);
}


static void on_ctl_drain(void* arg, int status) {
  on_ctl(arg, status, 0);
}


static void on_ctl_now(void* arg, int status) {
  on_ctl(arg, status, 1);
}


/* Signal thread: asks every loop to drain (now = 0) or to stop at once. */
void loops_post_drain(int now) {
  loop_t* lp;
  unsigned i;
  int err;

  for (i = 0; i < srv.nloops; i++) {
    lp = srv.loops[i];
    uv_mutex_lock(&lp->ctl_mutex);
    err = 0;
    if (!lp->ctl_closed)
      err = uvtw_submit(lp->backend.wheel, 0, 0, 0,
                        now ? on_ctl_now : on_ctl_drain, lp, NULL);
    uv_mutex_unlock(&lp->ctl_mutex);
    if (err != 0)
      logf_("loop %u: cannot reach it: %s", i, uv_strerror(err));
  }
}


/* ---------------------------------------------------------------------- */
/* Stopping.                                                                */

static void on_timer_closed(xtimer_t* t) {
  (void) t;
}


static void on_backend_closed(xbackend_t* backend) {
  (void) backend;
  /* Nothing is left on the loop now; uv_run returns. */
}


/* BYE shutdown to every connection; the loop closes when they are gone. */
static void loop_stop(loop_t* lp) {
  if (lp->phase == LOOP_STOP)
    return;
  if (lp->phase == LOOP_RUN)
    loop_drain(lp); /* closes the listener */
  lp->phase = LOOP_STOP;
  xtimer_close(&lp->drain_timer, on_timer_closed);
  xtimer_close(&lp->accept_timer, on_timer_closed);
  uv_close((uv_handle_t*) &lp->publish, NULL);
  uv_close((uv_handle_t*) &lp->stats_timer, NULL);
  while (lp->conns.next != &lp->conns)
    conn_bye(lp->conns.next, "BYE shutdown\n");
  /* Work still sleeping for answers nobody waits for now ends at once,
   * unless another loop is still draining: it waits for its answers. */
  if (atomic_fetch_sub(&srv.loops_draining, 1) == 1)
    work_wake_all();
  loop_maybe_finish(lp);
}


/* Called whenever a request is answered or a connection freed: ends a
 * drain that has nothing left to wait for, and closes a stopped loop once
 * its last connection is gone. */
void loop_maybe_finish(loop_t* lp) {
  if (lp->phase == LOOP_DRAIN && lp->inflight == 0) {
    loop_stop(lp);
    return;
  }
  if (lp->phase != LOOP_STOP || lp->live > 0 || lp->closing)
    return;
  lp->closing = 1;
  uv_mutex_lock(&lp->ctl_mutex);
  lp->ctl_closed = 1;
  uv_mutex_unlock(&lp->ctl_mutex);
  /* The exit line's lateness: the publish handle is closed by now, and
   * no callback the backend runs from here on is counted (no timer is
   * active; the wheel's final calls at close are not timed). */
  stats_publish(lp);
  xbackend_close(&lp->backend, on_backend_closed);
}


/* ---------------------------------------------------------------------- */
/* Setting up and running.                                                  */

/* The backend's counters, for STATS on the other loops (see stats.c).  A
 * prepare handle runs once per iteration, right before the loop waits for
 * events, after everything the iteration did: its timers (where the wheel
 * runs the hop of a finished work, and answers it), its I/O and the close
 * callbacks of the one before.  So a loop that waits has published what
 * it holds while it waits.  (A check handle, after the wait, would leave
 * an idle loop showing the iteration before its last one.) */
static void on_publish(uv_prepare_t* handle) {
  stats_publish(handle->data);
}


static int loop_create(unsigned index) {
  loop_t* lp;
  int err;

  lp = xmalloc(sizeof(*lp));
  memset(lp, 0, sizeof(*lp));
  lp->index = (int) index;
  lp->listen_fd = -1;
  lp->conns.next = lp->conns.prev = &lp->conns;
  lp->phase = LOOP_RUN;
  lp->output_budget = opt.max_output_bytes / srv.nloops;
  if (uv_mutex_init(&lp->ctl_mutex) != 0 || uv_loop_init(&lp->loop) != 0) {
    free(lp);
    return UV_ENOMEM;
  }
  lp->loop.data = lp;
  srv.loops[index] = lp;
  err = xbackend_init(&lp->backend, opt.kind, &lp->loop);
  if (err != 0) {
    logf_("cannot set up the %s timers: %s", xbackend_name(opt.kind),
          uv_strerror(err));
    return err;
  }
#ifdef ECHO_LINUX
  err = listen_socket(index == 0 ? opt.port : srv.port, &lp->listen_fd);
#else
  if (index == 0) {
    logf_("accept4 and SO_REUSEPORT are Linux-only: the loops share one "
          "listening socket, and accept with accept()");
    err = listen_socket(opt.port, &lp->listen_fd);
  } else {
    lp->listen_fd = nonblock_cloexec(dup(srv.loops[0]->listen_fd));
    err = lp->listen_fd < 0 ? -errno : 0;
  }
#endif
  if (err != 0) {
    logf_("cannot listen on %s:%d: %s", opt.host,
          index == 0 ? opt.port : srv.port, uv_strerror(err));
    return err;
  }
  if (index == 0)
    srv.port = bound_port(lp->listen_fd);
  uv_poll_init(&lp->loop, &lp->listen_poll, lp->listen_fd);
  lp->listen_poll.data = lp;
  xtimer_init(&lp->backend, &lp->accept_timer);
  lp->accept_timer.data = lp;
  xtimer_init(&lp->backend, &lp->drain_timer);
  lp->drain_timer.data = lp;
  uv_prepare_init(&lp->loop, &lp->publish);
  lp->publish.data = lp;
  uv_prepare_start(&lp->publish, on_publish);
  uv_unref((uv_handle_t*) &lp->publish);
  uv_timer_init(&lp->loop, &lp->stats_timer);
  lp->stats_timer.data = lp;
  if (index == 0 && opt.stats_ms > 0)
    uv_timer_start(&lp->stats_timer, on_stats_timer, opt.stats_ms,
                   opt.stats_ms);
  return 0;
}


/* What a loop thread reports to main once its loop is set up. */
typedef struct {
  unsigned index;
  uv_sem_t ready;
  int err;
} loop_start_t;


/* Each loop is set up on the thread that runs it: a uvtw wheel's loop
 * thread is the one that creates it (uvtw.h), and uvtw_submit from that
 * thread takes the loop's reference itself, which only the thread that
 * runs the loop may do. */
static void loop_thread(void* arg) {
  loop_start_t* start = arg;
  loop_t* lp;
  int err;

  err = loop_create(start->index);
  lp = srv.loops[start->index];
  start->err = err;
  uv_sem_post(&start->ready); /* `start` is main's, and gone after this */
  if (err != 0)
    return; /* main exits */
  uv_sem_wait(&srv.loops_go);
  uv_poll_start(&lp->listen_poll, UV_READABLE, on_listen_readable);
  uv_run(&lp->loop, UV_RUN_DEFAULT);
  err = uv_loop_close(&lp->loop);
  if (err != 0)
    logf_("loop %d: uv_loop_close: %s (a handle was left open)", lp->index,
          uv_strerror(err));
  lp->loop_close_err = err;
  atomic_fetch_sub(&srv.loops_running, 1);
}


/* Starts the loops one after the other, each on its own thread, so that
 * loop 0 has bound the port before the others share it; then lets them
 * all serve at once, when srv.loops[] is complete. */
int loops_start(void) {
  loop_start_t start;
  unsigned i;
  int err;

  srv.nloops = opt.loops;
  atomic_store(&srv.loops_draining, (int) srv.nloops);
  atomic_store(&srv.loops_running, (int) srv.nloops);
  if (uv_sem_init(&start.ready, 0) != 0 ||
      uv_sem_init(&srv.loops_go, 0) != 0)
    return UV_ENOMEM;
  for (i = 0; i < srv.nloops; i++) {
    start.index = i;
    start.err = 0;
    err = uv_thread_create(&srv.threads[i], loop_thread, &start);
    if (err != 0) {
      logf_("cannot start loop %u: %s", i, uv_strerror(err));
      abort(); /* the loops already running cannot be stopped cleanly */
    }
    uv_sem_wait(&start.ready);
    if (start.err != 0)
      return start.err; /* main exits: loops already running go with it */
  }
  uv_sem_destroy(&start.ready);
  for (i = 0; i < srv.nloops; i++)
    uv_sem_post(&srv.loops_go);
  return 0;
}


/* Waits for every loop thread; returns 0 if every loop closed cleanly. */
int loops_join(void) {
  unsigned i;
  int bad = 0;

  for (i = 0; i < srv.nloops; i++) {
    uv_thread_join(&srv.threads[i]);
    bad |= srv.loops[i]->loop_close_err != 0;
  }
  uv_sem_destroy(&srv.loops_go);
  return bad ? -1 : 0;
}


void loops_free(void) {
  unsigned i;

  for (i = 0; i < srv.nloops; i++) {
    uv_mutex_destroy(&srv.loops[i]->ctl_mutex);
    free(srv.loops[i]->out);
    free(srv.loops[i]);
    srv.loops[i] = NULL;
  }
}
