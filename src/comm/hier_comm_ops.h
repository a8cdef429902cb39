/* hier_comm_ops.h: what a communicator borrows from the glue, and its
 * handle (types only: the state of comm/ and the public API both use them). */
#ifndef HIER_COMM_OPS_H
#define HIER_COMM_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_wait.h"

typedef struct {
    /* Gather len bytes from every rank into rbuf, by rank, on every rank (Open MPI's base
     * algorithm over point-to-point: no previous module's, which may build sub-communicators). */
    int (*allgather)(const void *sbuf, void *rbuf, size_t len, void *arg);
    /* values[i] = the minimum over the communicator, for each i < n (the same, an allreduce). */
    int (*agree)(int *values, int n, void *arg);
    /* Whether communicator rank `rank` runs on this rank's node, and its
     * process's identity (unique in the job, the same in every communicator). */
    int (*peer)(int rank, uint64_t *proc_p, void *arg);
    hier_progress_fn_t progress;
    /* Whether the runtime says processes outnumber cores (Open MPI's
     * yield_when_idle, known only once MPI_Init is done); may be NULL. */
    int (*oversubscribed)(void);
    void *arg;
} hier_comm_ops_t;

typedef struct hier_comm hier_comm_t;

#endif
