/* hier_sched_build.h: every schedule, one entry point: how a call is cut into chunks, the steps of one chunk for
 * one rank, and how many steps that can be (what the executors and the communicator ask of sched/). */
#ifndef HIER_SCHED_BUILD_H
#define HIER_SCHED_BUILD_H

#include "sched/hier_sched.h"

/* Elements (allreduce, reduce_scatter) or bytes (allgather) one chunk carries. */
size_t hier_sched_chunk_units(const hier_sched_args_t *args);
/* Chunks the collective needs (0 when there is nothing to move). */
size_t hier_sched_nchunks(const hier_sched_args_t *args);
/* The most steps one chunk of this shape has: size the step array with it. */
size_t hier_sched_max_steps(const hier_sched_args_t *args);
/* The most steps a chunk of any collective takes on this layout (its fields, net_radix, pieces), over the kinds
 * whose most is at most `cap`, 0 if none: what a communicator reserves before its first call. */
size_t hier_sched_max_steps_within(const hier_sched_args_t *layout, size_t cap);
/* Steps of chunk `k` for rank args->me, using pipeline buffer `buf`, into `steps` (hier_sched_max_steps of them);
 * their number. */
size_t hier_sched_build(const hier_sched_args_t *args, size_t k, int buf, hier_step_t *steps);

/* Single-copy kinds publish where their input starts: the send buffer, or (in place) rbuf plus this offset. */
size_t hier_sched_input_offset(const hier_sched_args_t *args, int rank);
static inline int hier_sched_is_cma(hier_sched_kind_t kind)
{
    return kind == HIER_SCHED_CMA_ALLGATHER;
}
/* Several nodes: shared memory inside, the network between. */
static inline int hier_sched_is_hier(hier_sched_kind_t kind)
{
    return kind >= HIER_SCHED_HIER_ALLREDUCE && kind <= HIER_SCHED_HIER_REDUCE_SCATTER;
}

#endif
