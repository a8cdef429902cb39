/* hier_sched_direct.h: the allgather NIC to NIC ("peer direct"): a ring of
 * one-sided writes from one registered buffer straight into the next
 * (hier_sched_direct.c). Pure; exec/hier_net_exec.c runs it, comm/
 * (hier_comm_pd.c) decides when and registers the buffers. */
#ifndef HIER_SCHED_DIRECT_H
#define HIER_SCHED_DIRECT_H

#include "sched/hier_sched.h"

/* The two participants of a rank's ring: its steps name them, not ranks
 * (in a ring of two they are the same rank, over two channels). */
enum { HIER_DIRECT_LEFT, HIER_DIRECT_RIGHT, HIER_DIRECT_PEERS };

typedef struct {
    int total;            /* ranks in the ring */
    int pos;              /* my position in it */
    const uint32_t *ring; /* position -> communicator rank (blocks lie in the receive buffer by rank) */
    size_t block;         /* bytes per rank */
    int in_place;         /* my block is at its place in the receive buffer already */
} hier_direct_args_t;

/* Steps of my part of the ring into `steps` (at least
 * hier_sched_direct_max_steps(total)); their number, 0 for a ring of one.
 * My own block's copy into the receive buffer (unless in place) is not a
 * step: it is the caller's, between start and finish (a device copy). */
size_t hier_sched_direct_allgather(const hier_direct_args_t *a, hier_step_t *steps);
size_t hier_sched_direct_max_steps(int total);

#endif
