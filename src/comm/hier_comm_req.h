/* hier_comm_req.h: what the entry points of hier_comm.c and a
 * communicator's life ask of the requests (hier_comm_req.c). */
#ifndef HIER_COMM_REQ_H
#define HIER_COMM_REQ_H

#include "base/hier_dtype.h"
#include "comm/hier_comm_state.h"
#include "comm/hier_req.h"
#include "comm/hier_req_stage.h"

/* Turns a blocking call's drain spins before it yields the CPU between looks. */
#define HIER_REQ_DRAIN_SPIN 64

/* A nonblocking call as its entry point took it. */
typedef struct {
    hier_coll_t coll;        /* its blocking twin: what select/ chooses for */
    hier_coll_t sig_coll;    /* itself: what its signature says */
    const void *sbuf;        /* NULL: in place */
    void *rbuf;
    size_t count;            /* elements (allgather: bytes of a block; reduce_scatter: filled in) */
    hier_dtype_t dt;
    hier_op_t op;
    hier_user_op_t user;     /* HIER_OP_USER */
    const size_t *rcounts;   /* reduce_scatter (copied) */
    int persistent;          /* HIER_REQ_PERSISTENT */
    hier_req_stage_t stage;  /* device buffers: sbuf and rbuf are their host mirrors (the request's: copied in
                              * at each start, out at each end, freed with it) */
} hier_req_call_t;

hier_status_t hier_req_make(hier_comm_t *c, const hier_req_call_t *call, const hier_req_notify_t *notify,
                            hier_path_t *path_p, hier_req_t **req_p);
/* A persistent request (MPI 4.0, 6.13: its init is collective, and may
 * wait): the set-up and the collective steps its plan needs taken now, on
 * every rank alike, so that no start waits; not running until started. */
hier_status_t hier_req_init(hier_comm_t *c, const hier_req_call_t *call, const hier_req_notify_t *notify,
                            hier_path_t *path_p, hier_req_t **req_p);
/* A persistent request's buffers are device memory: it runs on mirrors
 * (the request's from now on; it is not running). */
void hier_req_restage(hier_req_t *q, const hier_req_stage_t *stage);
/* A blocking call on c: its requests over first (advancing them, and
 * Open MPI's progress, between looks). */
void hier_req_drain(hier_comm_t *c);
/* The communicator goes with requests not over: they end, failed. */
void hier_req_orphan(hier_comm_t *c);

#endif
