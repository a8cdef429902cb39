/* hier_run.h: runs a schedule, chunk by chunk, over a node's shared memory
 * and (several nodes) the network: local steps here, barriers through the
 * node segment, network steps through hier_net_exec. */
#ifndef HIER_RUN_H
#define HIER_RUN_H

#include "exec/hier_exec.h"
#include "exec/hier_net_exec.h"
#include "sched/hier_sched_build.h"
#include "shm/hier_shm.h"

typedef struct {
    hier_shm_t *node;              /* the node segment: barriers, error flags, single-copy publication */
    const hier_shm_wait_t *wait;
    uint8_t *const *slots;         /* every local rank's slot of the tier the call runs in */
    size_t parity_stride;
    uint8_t *stage;                /* HIER_EXEC_STAGE_BYTES */
    hier_exec_peer_read_fn_t peer_read; /* single copy */
    void *peer_ctx;
    hier_net_exec_t *netx;         /* several nodes: settings filled by the caller; else NULL */
    hier_step_t *steps[2];         /* hier_sched_max_steps(args) each: a chunk's, and the next one's */
    uint64_t *chunk_seq;           /* chunks run so far over the tier: picks the pipeline parity */
} hier_run_t;

/* Run every chunk of the collective args describes (nranks, me, chunk and
 * the layout filled in). A failed step does not make this rank skip the
 * barriers its peers wait at: every rank returns the error together.
 * *net_bytes_p: what this rank put on the fabric. */
hier_status_t hier_run(hier_run_t *r, const hier_sched_args_t *args, const void *sbuf, void *rbuf,
                       hier_reduce_kernel_t kernel, uint64_t *net_bytes_p);

#endif
