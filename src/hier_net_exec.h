/* hier_net_exec.h: runs inter-node schedules (hier_sched_net.c) over
 * channels (hier_chan.c), one channel per peer. */
#ifndef HIER_NET_EXEC_H
#define HIER_NET_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "hier_chan.h"
#include "hier_exec.h"
#include "hier_reduce.h"
#include "hier_sched.h"
#include "hier_shm.h"

typedef struct {
    hier_fabric_t *fab;
    hier_chan_t *const *chans; /* by participant index; chans[me] unused */
    const hier_exec_bufs_t *bufs; /* what steps' buffers name, the element size and the kernel */
    hier_progress_fn_t progress;  /* Open MPI's progress while waiting (may be NULL) */
    int spin;                  /* polls before a waiting rank yields the CPU (0: never) */
    hier_fabric_mr_t *mr;      /* registered memory [mr_base, mr_base + mr_len): sends from it go */
    const uint8_t *mr_base;    /* without a copy (NULL: every send is copied) */
    size_t mr_len;
    uint64_t net_bytes;        /* bytes this participant put on the fabric */
} hier_net_exec_t;

/* Run the steps. Sends are queued and proceed, segment by segment as
 * credits allow, while later steps run: a receive drives them, so two
 * participants sending to each other more than a channel holds cannot
 * deadlock; a receive segment that would overwrite bytes a queued send has
 * not handed over yet (or, sent in place, not yet seen written) waits for
 * them. Returns once every send is over, so the caller may reuse the bytes. */
hier_status_t hier_net_exec_run(hier_net_exec_t *x, const hier_step_t *steps, size_t n);

#endif
