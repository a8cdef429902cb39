/* hier_comm_setup.h: a communicator's set-up, collective, at its first call (hier_comm_setup.c), and the first
 * call itself when it is small enough to be piggybacked on the set-up's exchange (hier_comm_piggyback.c). */
#ifndef HIER_COMM_SETUP_H
#define HIER_COMM_SETUP_H

#include "comm/hier_comm_state.h"

/* The most bytes of one rank's contribution that piggyback in its set-up record (an allreduce's vector, an
 * allgather's block, a reduce_scatter's whole vector). */
#define HIER_PIGGYBACK_MAX 64

/* The call that brought the set-up about, offered to be piggybacked on its exchange: in, my contribution (len
 * bytes); out, where my result goes; for reduce_scatter rcounts (every rank's). */
typedef struct {
    hier_coll_t coll;
    hier_dtype_t dt;
    hier_op_t op;
    size_t count;   /* allreduce, reduce_scatter: elements of the whole vector; allgather: bytes per rank */
    uint32_t digest; /* reduce_scatter: hier_sig_digest of rcounts */
    const void *in;
    size_t len;
    void *out;
    const size_t *rcounts;
    int done;       /* set by the set-up: the call is served, out holds the result */
} hier_piggyback_t;

/* HIER_OK: served from now on; HIER_ERR_NOT_SUPPORTED: never (c->refused says why). pb (may be NULL): the first
 * call, served with the set-up (pb->done) when every rank offered the same call and its result is the one the
 * call's own algorithm gives. */
hier_status_t hier_comm_setup(hier_comm_t *c, hier_piggyback_t *pb);
/* The one way a communicator stops being served (hier_comm_setup.c): every
 * call from now on goes to the previous component, counted under `why`. */
void hier_comm_refuse(hier_comm_t *c, hier_path_t why);

/* Start the set-up as a fiber (HIER_COMM_SETTING), its exchanges posted and tested where they would wait, where
 * every rank meets the communicator NEW (its first call, nonblocking); whether it started: not where the glue has
 * no exchanges without waiting (alike on every rank), nor without memory. */
int hier_comm_setup_begin(hier_comm_t *c);
/* The pipeline segment the same way, for a nonblocking call that wants it on a served communicator without one
 * (every rank at the same call); whether it started. */
int hier_comm_pipe_begin(hier_comm_t *c);
/* The move to libfabric the same way (hier_net_switch), for a nonblocking call due to ask on a PML communicator
 * (hier_comm_switch_due: every rank at the same call); whether it started. */
int hier_comm_switch_begin(hier_comm_t *c);
/* On, as far as it goes without waiting: 1 when it is over (c->state its verdict), 0 not yet. */
int hier_comm_setup_step(hier_comm_t *c);


/* hier_comm_piggyback.c. Whether this rank can offer its call (host buffers, which the caller knows; few enough
 * bytes, a predefined operation, no algorithm forced): fills *pb. call->sbuf NULL: in place. */
int hier_piggyback_offer(const hier_comm_t *c, const hier_call_t *call, hier_piggyback_t *pb);

/* What a rank's set-up record carries of its piggyback. */
typedef struct {
    uint8_t coll;   /* hier_coll_t + 1; 0: nothing is piggybacked */
    uint8_t dt, op;
    uint8_t pad;
    uint32_t digest;
    uint64_t count;
    uint8_t data[HIER_PIGGYBACK_MAX];
} hier_piggyback_rec_t;

void hier_piggyback_pack(const hier_piggyback_t *pb, hier_piggyback_rec_t *rec);
/* Whether every record (stride bytes apart, the first at recs) carries my call, and the layout lets it be folded
 * here exactly as its algorithm would: the same verdict on every rank. */
int hier_piggyback_agreed(const hier_comm_t *c, const hier_piggyback_t *pb, const void *recs, size_t stride);
/* The call's result from every rank's contribution, into pb->out. */
void hier_piggyback_serve(const hier_comm_t *c, hier_piggyback_t *pb, const void *recs, size_t stride);

/* A call's start: HIER_OK to go on, HIER_ALONE for a one-rank communicator (the caller copies), or a fallback
 * with its reason; the set-up at the first call, the move to libfabric when due. bytes: the call's whole vector,
 * the same on every rank (it may start opening libfabric). pb (may be NULL): the call, offered to the set-up if
 * this call makes one (pb->done: served, HIER_OK). */
hier_status_t hier_comm_prepare(hier_comm_t *c, hier_coll_t coll, size_t bytes, hier_piggyback_t *pb,
                                hier_path_t *path_p);
/* A PML communicator's call of `bytes` (the whole vector): counted, the opening started when due; whether it is
 * time to ask every rank whether its endpoint is open (the same answer on every rank). */
int hier_comm_switch_due(hier_comm_t *c, size_t bytes);
/* A failed call fails the communicator (its later calls fall back) and says so to the node's ranks waiting for
 * it; HIER_OK and HIER_ERR_NOT_SUPPORTED pass. */
hier_status_t hier_comm_failed(hier_comm_t *c, hier_status_t st);

#endif
