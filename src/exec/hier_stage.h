/* hier_stage.h: collectives on device (accelerator) buffers, staged through host memory in a pipeline of chunks,
 * each run by the caller as a host call (hier_stage.c). */
#ifndef HIER_STAGE_H
#define HIER_STAGE_H

#include "accel/hier_accel.h"
#include "base/hier_coll.h"
#include "base/hier_status.h"

/* A call's buffers as classified (hier_accel_classify_pair), and whether every rank runs it as the pipeline's
 * chunks (the caller decides from what every rank knows alike: hier_comm.c). */
typedef struct {
    hier_accel_buf_t sbuf;
    hier_accel_buf_t rbuf;
    int chunked;
} hier_stage_bufs_t;

/* The host buffers device data goes through: one per owner (a communicator), made at its first staged call, grown
 * to the largest, pinned by the backend when it can. */
typedef struct hier_stage hier_stage_t;

/* How the owner runs one chunk: a call of the staged call's kind and shape on host buffers (count, rcounts and
 * the buffers its own); its result added to *res. */
typedef hier_status_t (*hier_stage_chunk_fn_t)(void *arg, const hier_call_t *chunk, hier_result_t *res);

/* Run `call` (allreduce, allgather or reduce_scatter; sbuf NULL: in place) as the pipeline's chunks, this rank
 * `rank` of `size`, each through run_chunk(arg, ...). *stage_p (NULL at first) is made or grown as needed and stays
 * the caller's until hier_stage_free. Every chunk runs whatever fails: the first error is returned. */
hier_status_t hier_stage_run(hier_stage_t **stage_p, const hier_stage_bufs_t *bufs, const hier_call_t *call,
                             int rank, int size, hier_stage_chunk_fn_t run_chunk, void *arg, hier_result_t *res);

/* The heap bytes they hold (NULL: 0). */
size_t hier_stage_bytes(const hier_stage_t *stage);
/* Free the host buffers (unpinned first); NULL is a no-op. */
void hier_stage_free(hier_stage_t *stage);

#endif
