/* hier_net_exec.h: runs inter-node schedules (hier_sched_net.c) over
 * channels (hier_chan.c), one channel per peer. */
#ifndef HIER_NET_EXEC_H
#define HIER_NET_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/hier_wait.h"
#include "exec/hier_exec.h"
#include "exec/hier_reduce.h"
#include "net/hier_chan.h"
#include "net/hier_peers.h"
#include "sched/hier_sched.h"

typedef struct {
    const uint8_t *src;
    size_t len, done;      /* bytes handed to the channel */
    size_t freed;          /* bytes no longer needed: copied, or (in place) their writes completed */
    uint32_t to, tag;      /* the participant, and the step's tag */
    int over;              /* every byte freed */
    hier_chan_t *ch;       /* once connected */
    hier_fabric_mr_t *mr;  /* src is registered: its bytes go from where they are (zero-copy) */
    uint64_t first;        /* in place: the channel's number of the first segment */
    size_t seg;            /* its segments' size (hier_chan_segment), once connected */
} hier_net_send_t;

typedef struct {
    uint8_t *dst;
    size_t len, done; /* bytes */
    int reduce;
    uint32_t from, tag;
    hier_chan_t *ch;  /* once the sender has connected */
    size_t seg;       /* its segments' size, as the sender cuts them */
} hier_net_recv_t;

/* Sends not yet handed over in full, oldest first, in a ring the caller
 * provides with room for every send of a run (its steps suffice): a send
 * never waits for the ones behind it, so a schedule may post every message
 * of a step before receiving any (one latency per step, not one per
 * message) without two peers blocking each other. With less room a send
 * would wait for room, which a receive behind it may be needed to make. */
typedef struct {
    hier_net_send_t *q;
    size_t cap, head, n;
} hier_net_queue_t;

typedef struct {
    hier_fabric_t *fab;
    /* the other participants, by index (their entry [me] unused): processes,
     * whose channels connect on the first send (net/hier_peers.h), or, for
     * tests, channels already connected */
    hier_peer_t *const *peers;
    hier_chan_t *const *chans;
    const uint32_t *boxes;     /* by participant: the box its end takes this stream from (NULL: box 0) */
    uint32_t box;              /* the box this end takes it from */
    const hier_exec_bufs_t *bufs; /* what steps' buffers name, the element size and the kernel */
    hier_progress_fn_t progress;  /* Open MPI's progress while waiting (may be NULL) */
    int spin;                  /* polls before a waiting rank yields the CPU (0: never) */
    unsigned progress_every;   /* past the spin, Open MPI's progress every this many turns (hier_wait.h) */
    hier_fabric_mr_t *mr;      /* registered memory [mr_base, mr_base + mr_len): sends from it go */
    const uint8_t *mr_base;    /* without a copy (NULL: every send is copied) */
    size_t mr_len;
    uint64_t net_bytes;        /* bytes this participant put on the fabric */
    hier_sig_t sig;            /* the call's signature: in every message's header, checked in every one received */
    /* the run in progress (hier_net_exec_start .. finish) */
    const hier_step_t *steps;
    size_t n, next;            /* its steps; the first not done yet */
    hier_net_queue_t q;        /* sends not over yet */
    hier_net_recv_t r;         /* the receive under way, when `receiving` */
    int receiving, active;
    uint64_t moved;            /* counts progress: steps done and segments received */
    uint64_t seen, still_since; /* hier_net_exec_test's clock: moved when last looked, and since when still */
} hier_net_exec_t;

/* Run the steps, in three parts so local work can run while the network
 * does: start (steps must stay valid until the run is over), poll now and
 * then (never waits), finish (waits; the run is over on return, x->active
 * 0, and the caller may reuse the bytes). The buffers of the run must not
 * be touched in between. Sends are queued and proceed, segment by segment
 * as credits allow, while later steps run: a receive drives them, so two
 * participants sending to each other more than a channel holds cannot
 * deadlock; a receive segment that would overwrite bytes a queued send has
 * not handed over yet (or, sent in place, not yet seen written) waits for
 * them. */
hier_status_t hier_net_exec_start(hier_net_exec_t *x, const hier_step_t *steps, size_t n);
hier_status_t hier_net_exec_poll(hier_net_exec_t *x);
hier_status_t hier_net_exec_finish(hier_net_exec_t *x);
/* finish without waiting, for requests: HIER_IN_PROGRESS while the run is
 * on (a run that stands still for the timeout fails, as in finish). */
hier_status_t hier_net_exec_test(hier_net_exec_t *x);

#endif
