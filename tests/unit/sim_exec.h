/* sim_exec.h: runs every rank's schedule in one process over plain memory.
 * Barriers split the flattened step lists into phases; inside a phase the
 * steps of different ranks are interleaved in a seeded random order, which is
 * exactly the freedom real processes have between two barriers. */
#ifndef SIM_EXEC_H
#define SIM_EXEC_H

#include <stdint.h>

#include "exec/hier_reduce.h"
#include "sched/hier_sched_build.h"

typedef struct {
    int nranks;
    size_t chunk_bytes;
    uint8_t **slots;      /* nranks of them */
    uint64_t chunk_seq;   /* continues across calls, like hier_comm */
    int break_buf;        /* test hook: always use buffer 0 (must make races visible) */
} sim_t;

int sim_open(sim_t *sim, int nranks, size_t chunk_bytes);
void sim_close(sim_t *sim);

/* One collective call: its shape (me ignored), per-rank buffers, kernel. */
typedef struct {
    const hier_sched_args_t *args;
    uint8_t *const *sbufs;
    uint8_t *const *rbufs;
    hier_reduce_kernel_t kernel;
} sim_call_t;

/* Run calls back to back as every rank would: one flattened step list per
 * rank, so a fast rank's next call overlaps a slow rank's previous one
 * between the same two barriers. Returns 0, or -1 if ranks disagree on the
 * number of barriers or a step failed. */
int sim_run_calls(sim_t *sim, const sim_call_t *calls, int ncalls, unsigned seed);

/* One collective for all ranks. */
int sim_run(sim_t *sim, const hier_sched_args_t *tmpl, uint8_t *const *sbufs, uint8_t *const *rbufs,
            hier_reduce_kernel_t kernel, unsigned seed);

#endif
