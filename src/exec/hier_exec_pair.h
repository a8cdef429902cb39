/* hier_exec_pair.h: the three collectives between two nodes of one rank each, as one message each way from the
 * caller's buffers (hier_net_exec_swap), without the node level's segment, barriers and copies. The results are
 * the schedules' bit for bit: the peer's operand is folded into a copy of this rank's by the kernel's acc, as
 * hier_sched_net.c's steps fold it (docs/design.md, "Between nodes": Two nodes of one rank each). */
#ifndef HIER_EXEC_PAIR_H
#define HIER_EXEC_PAIR_H

#include "exec/hier_net_exec.h"
#include "exec/hier_reduce.h"

/* The label of the pair's messages: recursive doubling's first round's. */
#define HIER_EXEC_PAIR_TAG 1u

/* `me` is 0 or 1, this rank's participant index and communicator rank; x is set for the communicator's
 * transport, its signature the call's. In place: sbuf NULL. */
hier_status_t hier_exec_pair_allreduce(hier_net_exec_t *x, int me, const void *sbuf, void *rbuf, size_t count,
                                       size_t esize, hier_reduce_kernel_t kernel);
hier_status_t hier_exec_pair_allgather(hier_net_exec_t *x, int me, const void *sbuf, void *rbuf, size_t block);
/* In place, the input is rbuf's whole vector and the result lands at its start. */
hier_status_t hier_exec_pair_reduce_scatter(hier_net_exec_t *x, int me, const void *sbuf, void *rbuf,
                                            const size_t *rcounts, const size_t *rdispls, size_t esize,
                                            hier_reduce_kernel_t kernel);

#endif
