/* hier_coll_dev.h: collectives whose buffers are device memory (internal;
 * hier_coll_dev.c). */
#ifndef HIER_COLL_DEV_H
#define HIER_COLL_DEV_H

#include "accel/hier_accel.h"
#include "comm/hier_comm_state.h"

typedef struct {
    hier_accel_buf_t sbuf;
    hier_accel_buf_t rbuf;
    int chunked; /* every rank runs this call as the pipeline's chunks (hier_comm.c) */
} hier_coll_dev_call_t;

/* 1 when either buffer is device memory (or classifying failed: *st_p). */
int hier_coll_dev_classify(const void *sbuf, size_t slen, const void *rbuf, size_t rlen, hier_accel_buf_t *sb,
                           hier_accel_buf_t *rb, hier_status_t *st_p);

/* A call run as the staging pipeline's chunks (the file's comment), each
 * a host call (hier_comm_host_run); after hier_comm_prepare said HIER_OK
 * or HIER_IN_PROGRESS. */
hier_status_t hier_coll_dev_run(hier_comm_t *c, const hier_coll_dev_call_t *d, const hier_call_t *call,
                               hier_result_t *res);

/* Peer-direct allgather (hier_coll_pd.c). Every rank calls it for every
 * allgather, host buffers too: 1 when it served the call (status in
 * *st_p), 0 when the caller goes on — the same answer on every rank. */
int hier_coll_pd_allgather(hier_comm_t *c, const hier_coll_dev_call_t *d, const hier_call_t *call,
                           hier_result_t *res, hier_status_t *st_p);
void hier_coll_pd_close(hier_comm_t *c);

/* Free the communicator's staging memory (unpinned first). */
void hier_coll_dev_release(hier_comm_t *c);

#endif
