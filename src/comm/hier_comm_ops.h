/* hier_comm_ops.h: what a communicator borrows from the glue, and its
 * handle (types only: the state of comm/ and the public API both use them). */
#ifndef HIER_COMM_OPS_H
#define HIER_COMM_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_wait.h"
#include "net/hier_pml.h"

typedef struct {
    /* Gather len bytes from every rank into rbuf, by rank, on every rank (Open MPI's base
     * algorithm over point-to-point: no previous module's, which may build sub-communicators). */
    int (*allgather)(const void *sbuf, void *rbuf, size_t len, void *arg);
    /* values[i] = the minimum over the communicator, for each i < n (the same, an allreduce). */
    int (*agree)(int *values, int n, void *arg);
    /* The same exchanges without blocking, for a set-up run as a fiber
     * (hier_comm_xchg.c): one round of point-to-point, slen bytes sent to
     * rank `to` and rlen received from rank `from`, posted (0) on a channel
     * of hier's own (no collective's messages match it); sendrecv_test: 1
     * that round is over, 0 not yet, negative failed (over, released either
     * way). NULL: the glue has none (set-ups then wait for a blocking call). */
    int (*sendrecv)(int to, const void *sbuf, size_t slen, int from, void *rbuf, size_t rlen, void *arg,
                    void **pending_p);
    int (*sendrecv_test)(void *pending, void *arg);
    /* Whether communicator rank `rank` runs on this rank's node, and its
     * process's identity (unique in the job, the same in every communicator). */
    int (*peer)(int rank, uint64_t *proc_p, void *arg);
    hier_progress_fn_t progress;
    /* Whether the runtime says processes outnumber cores (Open MPI's
     * yield_when_idle, known only once MPI_Init is done); may be NULL. */
    int (*oversubscribed)(void);
    /* Point-to-point on the communicator, a mailbox a tag of hier's own (net/hier_pml.h):
     * the network level's transport until libfabric is open on every rank. */
    hier_pml_ops_t p2p;
    void *arg;
} hier_comm_ops_t;

typedef struct hier_comm hier_comm_t;

#endif
