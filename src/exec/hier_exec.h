/* hier_exec.h: runs schedule steps over real memory. The shared-memory engine
 * and the test simulator both use it; they differ only in what a barrier is
 * and where the slots live. */
#ifndef HIER_EXEC_H
#define HIER_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "exec/hier_reduce.h"
#include "sched/hier_sched.h"
#include "base/hier_status.h"

/* Read len bytes at `off` of another rank's input (HIER_BUF_PEER_INPUT) into dst. */
typedef hier_status_t (*hier_exec_peer_read_fn_t)(void *ctx, hier_ref_t ref, void *dst, size_t len);

/* Scratch for a reduction whose output overlaps an operand (in place):
 * one block; without it, the executor folds such an output into blocks of
 * HIER_EXEC_LOCAL_SCRATCH on its stack. (Not exec/hier_stage.c's staging
 * of device buffers.) */
#define HIER_EXEC_SCRATCH_BYTES (128 * 1024)
#define HIER_EXEC_LOCAL_SCRATCH 4096

typedef struct {
    const uint8_t *sbuf;
    uint8_t *rbuf;
    uint8_t *const *slots;  /* slot base of every local rank (buffer 0) */
    size_t buf_stride;      /* bytes from buffer 0 to buffer 1 in a slot */
    size_t esize;
    hier_reduce_kernel_t kernel;
    hier_exec_peer_read_fn_t peer_read; /* single-copy steps only */
    void *peer_ctx;
    uint8_t *scratch;       /* HIER_EXEC_SCRATCH_BYTES */
} hier_exec_bufs_t;

/* Resolve a local buffer reference to an address (NULL for another rank's). */
static inline void *hier_exec_ref(const hier_exec_bufs_t *bufs, hier_ref_t ref)
{
    switch ((hier_buf_kind_t)ref.kind) {
    case HIER_BUF_SEND: return (void *)(bufs->sbuf + ref.off);
    case HIER_BUF_RECV: return bufs->rbuf + ref.off;
    case HIER_BUF_SLOT: return bufs->slots[ref.rank] + ref.buf * bufs->buf_stride + ref.off;
    case HIER_BUF_PEER_INPUT: break;
    }
    return NULL;
}

/* Run one COPY or REDUCE step (BARRIER and NET_* steps belong to the
 * caller). Fails only when reading another rank's buffer fails. */
hier_status_t hier_exec_step(const hier_exec_bufs_t *bufs, const hier_step_t *step);

#endif
