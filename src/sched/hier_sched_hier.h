/* hier_sched_hier.h: builders of the collectives over several nodes (internal to sched/). */
#ifndef HIER_SCHED_HIER_H
#define HIER_SCHED_HIER_H

#include "sched/hier_sched_emit.h"

/* Elements (allreduce, reduce_scatter) or block bytes (allgather) one chunk carries. */
size_t hier_sched_hier_units(const hier_sched_args_t *a);
/* Whether a reduce_scatter's chunks are slices of every rank's block (see
 * hier_sched_hier.c): with a->rs_slices, not in place, and room in a
 * chunk for one rounding element per rank. */
int hier_sched_hier_sliced(const hier_sched_args_t *a);
/* Its chunks: the fewest whose slices fit. */
size_t hier_sched_hier_sliced_nchunks(const hier_sched_args_t *a);
/* Fill a->rs_slices for chunk k of nchunks; its length. */
size_t hier_sched_hier_slice(const hier_sched_args_t *a, size_t k, size_t nchunks);
/* At most this many steps per chunk. */
size_t hier_sched_hier_max_steps(const hier_sched_args_t *a);
/* The most a chunk of a->kind takes for any count, sliced or not (a->pieces: the most pieces). */
size_t hier_sched_hier_max_steps_any(const hier_sched_args_t *a);
/* The units [first, first + len) in pipeline buffer p. */
void hier_sched_hier_build(const hier_sched_args_t *a, size_t first, size_t len, int p, hier_sched_out_t *out);

#endif
