/* hier_sched_intra.h: builders of the collectives of one node (internal to sched/). */
#ifndef HIER_SCHED_INTRA_H
#define HIER_SCHED_INTRA_H

#include "sched/hier_sched_emit.h"

/* Elements (allreduce, reduce_scatter: per block) or bytes (allgather) one chunk carries. */
size_t hier_sched_intra_units(const hier_sched_args_t *a);
/* At most this many steps per chunk. */
size_t hier_sched_intra_max_steps(const hier_sched_args_t *a);
/* Chunk k, the units [first, first + len), in pipeline buffer p. */
void hier_sched_intra_build(const hier_sched_args_t *a, size_t k, size_t first, size_t len, int p,
                            hier_sched_out_t *out);

#endif
