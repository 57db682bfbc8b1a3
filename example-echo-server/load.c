/* SPDX-License-Identifier: MIT */
/* echo-load: a bounded load client for uvtw-echo-server that checks the
 * protocol as it goes.  See README.md.
 *
 * It opens --conns connections to a loopback address, gives each a role
 * (active: send a line every --interval-ms and check the echo; idle: stay
 * silent and time PING and BYE idle; rpc: keep --inflight REQ lines going),
 * runs for --duration-ms, waits for the answers still owed, closes
 * everything and prints a summary.  It exits 1 if it saw a protocol
 * violation, 2 on a usage or setup error, 0 otherwise.
 *
 * It measures the timing wheel, so it does not use it: its timers are
 * plain uv_timer_t, and its clock is uv_hrtime() (nanoseconds, read when
 * an event is handled, not the loop's cached millisecond time).
 */

#include "load.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

struct load_s g;


/* ---------------------------------------------------------------------- */
/* Phases.                                                                  */

void finish(void);

static void on_phase_timer(uv_timer_t* handle) {
  (void) handle;
  if (g.phase == PHASE_RUN) {
    /* Stop sending; wait for what is owed: echoes, and answers that come
     * at the latest at their deadline plus slack. */
    g.phase = PHASE_DRAIN;
    server_stats_query(); /* while every connection is still open */
    noread_start_reading();
    uv_timer_start(&g.phase_timer, on_phase_timer,
                   g.deadline_max + 2 * g.slack_ms + 1000 +
                       (g.n_slowloris > 0 ? g.line_timeout_ms : 0) +
                       (g.n_noread > 0 ? g.idle_ms : 0),
                   0);
    maybe_done();
  } else if (g.phase == PHASE_DRAIN) {
    finish();
  }
}


static int owed(void) {
  int i;

  for (i = 0; i < g.nconns; i++) {
    conn_t* c = &g.conns[i];
    /* A never-reader flooding with STATS owes more than can be read back
     * (see finish); its echoes are not waited for. */
    if (c->role == ROLE_NOREAD && g.noread_stats)
      continue;
    if (c->state == SLOT_OPEN &&
        (c->seq_echoed < c->seq_sent || c->inflight > 0))
      return 1;
    /* A slowloris connection is owed its ERR line timeout. */
    if (c->state == SLOT_OPEN && c->role == ROLE_SLOWLORIS && c->cause == -1)
      return 1;
  }
  return 0;
}


void maybe_done(void) {
  if (g.phase == PHASE_DRAIN && !owed())
    finish();
  else if (g.phase != PHASE_DONE && g.open_slots == 0)
    finish(); /* everything closed (say, after BYE shutdown) */
}


void finish(void) {
  int i;

  if (g.phase == PHASE_DONE)
    return;
  g.phase = PHASE_DONE;
  uv_timer_stop(&g.phase_timer);
  for (i = 0; i < g.nconns; i++) {
    conn_t* c = &g.conns[i];
    if (c->state == SLOT_OPEN && c->role == ROLE_IDLE && c->cause == -1 &&
        ms_since(c->last_activity) > (double) (g.idle_ms + g.slack_ms))
      violation(c, "no BYE idle after %.1f ms of silence",
                ms_since(c->last_activity));
    /* A never-reader may owe more than a drain can read back (a STATS
     * line's reply is 60 times its size): not counted. */
    if (c->state == SLOT_OPEN && c->seq_echoed < c->seq_sent &&
        c->role != ROLE_NOREAD)
      violation(c, "%" PRIu64 " lines never echoed",
                c->seq_sent - c->seq_echoed);
    if (c->state == SLOT_OPEN && c->inflight > 0)
      violation(c, "%u requests never answered", c->inflight);
    if (c->state == SLOT_OPEN && c->role == ROLE_SLOWLORIS && c->cause == -1 &&
        c->line_started != 0 &&
        ms_since(c->line_started) > (double) (g.line_timeout_ms + g.slack_ms))
      violation(c, "no ERR line timeout %.1f ms into the line",
                ms_since(c->line_started));
    c->closing_by_us = 1;
    conn_close(c);
  }
}


int main(int argc, char** argv) {
  uint64_t fd_limit;
  int i;
  int err;

  program_name = "echo-load";
  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (resolve() != 0) {
    fprintf(stderr, "echo-load: --host must be a loopback address, not %s\n",
            g.host);
    return 2;
  }
  fd_limit = raise_fd_limit();
  if (fd_limit < (uint64_t) g.nconns + 64) {
    logf_(
        "%d connections need more file descriptors than the limit of "
        "%" PRIu64 ": raise ulimit -n",
        g.nconns, fd_limit);
    return 2;
  }
  g.rng = g.seed * 2654435761u + 88172645463325252ull;
  g.loop = uv_default_loop();
  g.conns = calloc((size_t) g.nconns, sizeof(*g.conns));
  if (g.conns == NULL)
    return 2;
  g.t0 = uv_hrtime();
  uv_timer_init(g.loop, &g.phase_timer);
  uv_timer_start(&g.phase_timer, on_phase_timer, g.duration_ms, 0);
  for (i = 0; i < g.nconns; i++) {
    conn_t* c = &g.conns[i];
    c->index = i;
    switch (g.mode) {
    case MODE_ACTIVE:
      c->role = ROLE_ACTIVE;
      break;
    case MODE_IDLE:
      c->role = ROLE_IDLE;
      break;
    case MODE_RPC:
      c->role = ROLE_RPC;
      break;
    case MODE_SLOWLORIS:
      c->role = ROLE_SLOWLORIS;
      break;
    case MODE_NOREAD:
      c->role = ROLE_NOREAD;
      break;
    case MODE_MIXED:
      /* Spread the idle share evenly over the indexes. */
      c->role = (int) ((i + 1) * g.idle_share) > (int) (i * g.idle_share)
                    ? ROLE_IDLE
                    : ROLE_ACTIVE;
      break;
    }
    g.n_active += c->role == ROLE_ACTIVE;
    g.n_idle += c->role == ROLE_IDLE;
    g.n_rpc += c->role == ROLE_RPC;
    g.n_slowloris += c->role == ROLE_SLOWLORIS;
    g.n_noread += c->role == ROLE_NOREAD;
    uv_timer_init(g.loop, &c->timer);
    c->timer.data = c;
    conn_start(c);
  }

  uv_run(g.loop, UV_RUN_DEFAULT);

  summary((uv_hrtime() - g.t0) / 1e9);
  for (i = 0; i < g.nconns; i++)
    uv_close((uv_handle_t*) &g.conns[i].timer, NULL);
  uv_close((uv_handle_t*) &g.phase_timer, NULL);
  uv_run(g.loop, UV_RUN_DEFAULT);
  err = uv_loop_close(g.loop);
  for (i = 0; i < g.nconns; i++)
    free(g.conns[i].line);
  free(g.conns);
  free(g.rpcs);
  for (i = 0; i < CAUSE_COUNT; i++)
    free(g.close_since[i].v);
  free(g.idle_late.v);
  free(g.first_ping.v);
  free(g.rtt.v);
  free(g.rpc_latency.v);
  free(g.timeout_late.v);
  free(g.line_late.v);
  free(g.slow_after.v);
  if (err != 0) {
    fprintf(stderr, "echo-load: uv_loop_close: %s\n", uv_strerror(err));
    return 2;
  }
  return g.violations ? 1 : 0;
}
