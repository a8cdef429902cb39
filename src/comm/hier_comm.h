/* hier_comm.h: the core's view of one communicator, on one node or several,
 * and its collectives. The glue supplies the few services the core cannot
 * provide itself, through hier_comm_ops_t. */
#ifndef HIER_COMM_H
#define HIER_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_dtype.h"
#include "shm/hier_shm.h"
#include "base/hier_stats.h"
#include "base/hier_status.h"

typedef struct {
    /* Gather len bytes from every rank into rbuf, by rank, on every rank (the previous module's allgather). */
    int (*allgather)(const void *sbuf, void *rbuf, size_t len, void *arg);
    /* *value = minimum over the communicator (the previous module's allreduce). */
    int (*agree)(int *value, void *arg);
    hier_progress_fn_t progress;
    /* Whether the runtime says processes outnumber cores (Open MPI's
     * yield_when_idle, known only once MPI_Init is done); may be NULL. */
    int (*oversubscribed)(void);
    void *arg;
} hier_comm_ops_t;

typedef struct hier_comm hier_comm_t;

/* A communicator of `size` ranks, this one being `rank`. my_node names my
 * node (any number, equal on the ranks that share it), or is -1 on every
 * rank when all share one node. Ranks learn each other's nodes at the first
 * collective, through ops->allgather. */
hier_status_t hier_comm_create(int size, int rank, int my_node, const hier_comm_ops_t *ops, hier_comm_t **comm_p);
void hier_comm_destroy(hier_comm_t *comm);

/* Each returns HIER_OK when served, HIER_ERR_NOT_SUPPORTED when the caller
 * must use its fallback (nothing has been touched then), or an error.
 * *path_p says which path served the call or why it was refused.
 * sbuf == NULL means MPI_IN_PLACE. */
hier_status_t hier_comm_allreduce(hier_comm_t *comm, const void *sbuf, void *rbuf, size_t count, hier_dtype_t dt,
                                  hier_op_t op, hier_path_t *path_p);
/* block_bytes: bytes each rank contributes; rbuf holds nranks blocks. */
hier_status_t hier_comm_allgather(hier_comm_t *comm, const void *sbuf, void *rbuf, size_t block_bytes,
                                  hier_path_t *path_p);
/* rcounts[r]: elements rank r receives; sbuf holds their sum. */
hier_status_t hier_comm_reduce_scatter(hier_comm_t *comm, const void *sbuf, void *rbuf, const size_t *rcounts,
                                       hier_dtype_t dt, hier_op_t op, hier_path_t *path_p);

/* Bytes this rank put on the fabric during its last collective. */
uint64_t hier_comm_net_bytes(const hier_comm_t *comm);
/* Whether the last collective's buffers were device memory, staged through host memory. */
int hier_comm_staged(const hier_comm_t *comm);

/* Release process-wide state (the topology, the fabric endpoint). */
void hier_core_finalize(void);

#endif
