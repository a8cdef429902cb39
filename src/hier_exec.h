/* hier_exec.h: runs schedule steps over real memory. The shared-memory engine
 * and the test simulator both use it; they differ only in what a barrier is
 * and where the slots live. */
#ifndef HIER_EXEC_H
#define HIER_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "hier_reduce.h"
#include "hier_sched.h"
#include "hier_status.h"

typedef struct {
    const uint8_t *sbuf;
    uint8_t *rbuf;
    uint8_t *const *slots;  /* slot base of every local rank (parity 0) */
    size_t parity_stride;   /* bytes from parity 0 to parity 1 in a slot */
    size_t esize;
    hier_reduce_kernel_t kernel;
} hier_exec_bufs_t;

/* Resolve a buffer reference to an address. */
void *hier_exec_ref(const hier_exec_bufs_t *bufs, hier_ref_t ref);

/* Run one COPY or REDUCE step (BARRIER steps belong to the caller). */
void hier_exec_step(const hier_exec_bufs_t *bufs, const hier_step_t *step);

#endif
