/* hier_exec_ll.h: the low-latency path for small messages of one node
 * (hier_exec_ll.c): payloads that carry their own ready flag in the node
 * segment's low-latency areas, no barrier. */
#ifndef HIER_EXEC_LL_H
#define HIER_EXEC_LL_H

#include <stddef.h>

#include "exec/hier_reduce.h"
#include "shm/hier_shm.h"

typedef struct {
    hier_shm_t *shm;              /* the node segment */
    const hier_shm_wait_t *wait;  /* its ranks, mine, and how to wait */
} hier_exec_ll_t;

/* The largest payload (bytes per rank) the areas hold. */
size_t hier_exec_ll_capacity(void);
/* sbuf NULL: in place. Every rank of the node calls, with the same sizes. */
hier_status_t hier_exec_ll_allreduce(const hier_exec_ll_t *c, const void *sbuf, void *rbuf, size_t count,
                                     size_t esize, hier_reduce_kernel_t kernel);
hier_status_t hier_exec_ll_allgather(const hier_exec_ll_t *c, const void *sbuf, void *rbuf, size_t block);
hier_status_t hier_exec_ll_reduce_scatter(const hier_exec_ll_t *c, const void *sbuf, void *rbuf,
                                          const size_t *rcounts, const size_t *rdispls, size_t total, size_t esize,
                                          hier_reduce_kernel_t kernel);

#endif
