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

/* The same calls as requests, for nonblocking collectives: post puts this
 * rank's payload (the call's signature set, as for the blocking call);
 * test looks once at the peers' headers, HIER_IN_PROGRESS until every one
 * is there, then reads them (HIER_OK) or fails as the blocking call would.
 * The call's buffers and counts stay as they are until then. */
typedef struct {
    const void *sbuf;          /* NULL: in place */
    void *rbuf;
    size_t block;              /* allgather: bytes per rank (else 0) */
    size_t total, esize;       /* reductions: elements of the input, and their size */
    const size_t *rcounts, *rdispls; /* reduce_scatter (else NULL: allreduce) */
    hier_reduce_kernel_t kernel;
} hier_exec_ll_call_t;
typedef struct {
    uint64_t seq;
    hier_shm_probe_t probe;
} hier_exec_ll_req_t;
void hier_exec_ll_post(const hier_exec_ll_t *c, const hier_exec_ll_call_t *call, hier_exec_ll_req_t *q);
hier_status_t hier_exec_ll_test(const hier_exec_ll_t *c, const hier_exec_ll_call_t *call, hier_exec_ll_req_t *q);

#endif
