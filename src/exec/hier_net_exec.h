/* hier_net_exec.h: runs inter-node schedules (hier_sched_net.c) over
 * links (net/hier_link.h), one per peer: libfabric channels, or Open
 * MPI's point-to-point. */
#ifndef HIER_NET_EXEC_H
#define HIER_NET_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/hier_wait.h"
#include "exec/hier_exec.h"
#include "exec/hier_reduce.h"
#include "net/hier_chan.h"
#include "net/hier_link.h"
#include "net/hier_peers.h"
#include "sched/hier_sched.h"

typedef struct {
    const uint8_t *src;
    size_t len, done;      /* bytes handed to the channel */
    size_t freed;          /* bytes no longer needed: copied, or (in place) their writes completed */
    uint32_t to, tag;      /* the participant, and the step's tag */
    int over;              /* every byte freed */
    void *link;            /* once connected */
    hier_fabric_mr_t *mr;  /* src is registered: its bytes go from where they are (zero-copy) */
    uint64_t first;        /* in place: the channel's number of the first segment (the others follow it:
                            * one send at a time hands a channel its segments, hier_net_exec.c) */
    uint64_t order;        /* when it was queued, among every run's sends */
    size_t seg;            /* its segments' size (the link's segment), once connected */
} hier_net_send_t;

typedef struct {
    uint8_t *dst;
    size_t len, done; /* bytes */
    int reduce;
    uint32_t from, tag;
    void *link;       /* once the sender has connected */
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

/* A note on the wire (HIER_STEP_NET_NOTE_*): a channel message between
 * two ends of the same build, so its layout is theirs alone. */
typedef struct {
    uint64_t kind;           /* hier_note_kind_t */
    hier_fabric_rkey_t rkey; /* HIER_NOTE_KEY: the buffer's registration */
    uint64_t off;            /* ... and where the buffer starts in it */
} hier_net_note_t;

/* One-sided steps' setting (HIER_STEP_NET_WRITE and its kin): the call's
 * buffers as registered, by kind (HIER_BUF_SEND, HIER_BUF_RECV), and where
 * peers' writes are counted. */
typedef struct {
    hier_fabric_mr_t *mr[2]; /* NULL: that buffer is not registered */
    const uint8_t *nic[2];   /* the buffer's start as the NIC addresses it (device memory: not the CPU's) */
    uint64_t reg_off[2];     /* ... and its offset in its registration, which a key names */
    const uint32_t *counts;  /* by tag, the pieces peers wrote here (hier_chan_direct_counts) */
    size_t ntags;
    size_t max_write;        /* writes are cut into pieces of this, alike at both ends */
} hier_net_direct_t;

/* One run of steps (a chunk's network part), from start to its end. */
typedef struct {
    const hier_step_t *steps;
    size_t n, next;        /* its steps; the first not done yet */
    hier_net_queue_t q;    /* sends not over yet (room: the caller's) */
    hier_net_recv_t r;     /* the receive under way, when `receiving` */
    int receiving, active;
    hier_status_t failed;  /* why it stopped early (kept for its finish or test) */
    /* one-sided steps */
    hier_net_note_t note_in;                    /* the note being received */
    hier_net_note_t note_out[HIER_NOTE_KINDS];  /* notes being sent, by kind (they stay until handed over) */
    hier_net_note_t key;                        /* the key to write with, from participant key_from */
    uint32_t key_from;
    int has_key;
    size_t wdone;                               /* bytes of the write under way posted */
    uint32_t wseen;                             /* pieces seen landed by the wait under way */
    hier_chan_t *wrote;                         /* a channel written on: its writes' errors end the run */
} hier_net_run_t;

/* Runs in flight at once, at most: one per chunk of a pipeline's depth. */
#define HIER_NET_RUNS_MAX 4

typedef struct {
    const hier_link_ops_t *link; /* the transport: hier_link_chan, hier_link_pml */
    hier_fabric_t *fab;          /* its context (libfabric's endpoint; NULL over the PML) */
    /* the other participants, by index (their entry [me] unused): the link to
     * each as far as known (the PML's and tests' channels, connected before;
     * libfabric's, found at first use and kept here), and (libfabric) the
     * processes, whose channels connect on the first send (net/hier_peers.h) */
    void **links;
    hier_peer_t *const *peers;
    /* by participant: the first mailbox its end takes this communicator's
     * streams from (NULL: mailbox 0); run d's messages go to that mailbox + d, so
     * runs in flight at once never take each other's */
    const uint32_t *mboxes;
    uint32_t mbox;              /* the first mailbox this end takes them from */
    const hier_exec_bufs_t *bufs; /* what steps' buffers name, the element size and the kernel */
    hier_progress_fn_t progress;  /* Open MPI's progress while waiting (may be NULL) */
    int spin;                  /* polls before a waiting rank yields the CPU (0: never) */
    unsigned progress_every;   /* past the spin, Open MPI's progress every this many turns (hier_wait.h) */
    hier_fabric_mr_t *mr;      /* registered memory [mr_base, mr_base + mr_len): sends from it go */
    const uint8_t *mr_base;    /* without a copy (NULL: every send is copied) */
    size_t mr_len;
    const hier_net_direct_t *direct; /* one-sided steps only */
    uint64_t net_bytes;        /* bytes this participant put on the fabric */
    hier_sig_t sig;            /* the call's signature: in every message's header, checked in every one received */
    hier_net_run_t run[HIER_NET_RUNS_MAX]; /* runs, by stream (start .. finish) */
    uint64_t moved;            /* counts progress of every run: steps done and segments moved */
    uint64_t queued;           /* sends queued so far, every run's (their order) */
    uint64_t seen, still_since; /* hier_net_exec_test's clock: moved when last looked, and since when still */
} hier_net_exec_t;

/* Run d (< HIER_NET_RUNS_MAX; its queue x->run[d].q made by the caller with
 * room for every send of its steps) of the steps, in three parts so local
 * work can run while the network does: start (steps must stay valid until
 * the run is over), poll now and then (never waits; it advances every run
 * in flight), finish (waits, advancing the others too; run d is over on
 * return and the caller may reuse its bytes). The buffers of a run must not
 * be touched in between. Sends are queued and proceed, segment by segment
 * as credits allow, while later steps run: a receive drives them, so two
 * participants sending to each other more than a channel holds cannot
 * deadlock; a receive segment that would overwrite bytes a queued send of
 * its run has not handed over yet (or, sent in place, not yet seen written)
 * waits for them. Runs in flight at once must touch disjoint bytes.
 * One-sided steps (x->direct): a write holds its run until every piece is
 * posted, a wait until every piece landed; neither waits for the writes'
 * local completions (on shm they need the target's progress): the caller
 * does, where the registration is its own (hier_chan_direct_pending). */
hier_status_t hier_net_exec_start(hier_net_exec_t *x, unsigned d, const hier_step_t *steps, size_t n);
/* Every run in flight moves on; the first error of one that stopped (that
 * run is over: its finish or test returns the error too). */
hier_status_t hier_net_exec_poll(hier_net_exec_t *x);
hier_status_t hier_net_exec_finish(hier_net_exec_t *x, unsigned d);
/* finish without waiting, for requests: HIER_IN_PROGRESS while run d is on
 * (a run that stands still for the timeout fails, as in finish). */
hier_status_t hier_net_exec_test(hier_net_exec_t *x, unsigned d);
/* Whether run d is started and not yet finished (or tested over). */
static inline int hier_net_exec_busy(const hier_net_exec_t *x, unsigned d)
{
    return x->run[d].active || x->run[d].steps;
}
/* Abandon every run (a dead or stuck peer): none is in flight after. */
void hier_net_exec_abandon(hier_net_exec_t *x);
/* A message taken by hier_net_exec_swap, held until hier_net_exec_swap_done. */
typedef struct {
    void *link;
    hier_link_msg_t msg;
} hier_net_swap_t;

/* One message each way with participant p, outside the runs (none may be
 * in flight; the pair path's, exec/hier_exec_pair.h): len bytes at src out
 * (copied: src is the caller's again on return), labelled tag, into run
 * 0's mailbox, and p's message of exactly `expect` bytes in, checked as a run's
 * receive is. Waits as finish does (the same turns and clock). Either
 * length may be 0: the message still goes, carrying the call's signature. */
hier_status_t hier_net_exec_swap(hier_net_exec_t *x, uint32_t p, uint32_t tag, const void *src, size_t len,
                                 size_t expect, hier_net_swap_t *sw_p);
hier_status_t hier_net_exec_swap_done(hier_net_exec_t *x, hier_net_swap_t *sw);
/* Where every run in flight stands, logged (a watchdog's question: nothing changes). */
void hier_net_exec_describe(const hier_net_exec_t *x);

#endif
