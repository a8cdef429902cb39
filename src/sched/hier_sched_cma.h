/* hier_sched_cma.h: single-copy builders (internal to sched/). */
#ifndef HIER_SCHED_CMA_H
#define HIER_SCHED_CMA_H

#include "sched/hier_sched_emit.h"

/* The whole call (single copy has no chunks): at most nranks + 4 steps. */
void hier_sched_cma_build(const hier_sched_args_t *a, hier_sched_out_t *out);
/* Where rank's input starts in the buffer it publishes (its send buffer, or in place its receive buffer). */
size_t hier_sched_cma_input_offset(const hier_sched_args_t *a, int rank);

#endif
