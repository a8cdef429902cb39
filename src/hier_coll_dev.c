/* hier_coll_dev.c: collectives on device (accelerator) buffers, by staging.
 *
 * The CPU never touches device memory: the call's buffers are mirrored in
 * host memory, the host collective runs on the mirrors, and the result is
 * copied back. The mirrors keep the call's shape — a separate send area
 * unless the caller passed MPI_IN_PLACE — because algorithm choices may
 * depend on it, and every rank must choose alike whatever its memory:
 * 1. copy the input (send buffer, or the receive buffer when in place) into
 *    its host mirror;
 * 2. run the host collective on the mirrors;
 * 3. copy this rank's result out to the receive buffer.
 * Host buffers of a mixed call (one side on the device) are copied with
 * memcpy. The mirrors live in one host buffer per communicator, grown to the
 * largest call seen. */
#include <stdlib.h>
#include <string.h>

#include "hier_accel.h"
#include "hier_coll_dev.h"
#include "hier_comm_impl.h"
#include "hier_log.h"

static hier_status_t hier_dev_copy_in(void *host, const void *src, const hier_accel_buf_t *b, size_t len)
{
    if (!len) return HIER_OK;
    if (!hier_accel_is_device(b)) {
        memcpy(host, src, len);
        return HIER_OK;
    }
    return b->backend->to_host(host, src, len);
}

static hier_status_t hier_dev_copy_out(void *dst, const void *host, const hier_accel_buf_t *b, size_t len)
{
    if (!len) return HIER_OK;
    if (!hier_accel_is_device(b)) {
        memcpy(dst, host, len);
        return HIER_OK;
    }
    return b->backend->from_host(dst, host, len);
}

static uint8_t *hier_dev_host(hier_comm_t *c, size_t len)
{
    if (len <= c->dev_host_len) return c->dev_host;
    uint8_t *p = realloc(c->dev_host, len);
    if (!p) {
        HIER_ERROR("no %zu bytes of host memory to stage a device buffer", len);
        return NULL;
    }
    c->dev_host = p;
    c->dev_host_len = len;
    return p;
}

int hier_coll_dev_classify(const void *sbuf, size_t slen, const void *rbuf, size_t rlen, hier_accel_buf_t *sb,
                           hier_accel_buf_t *rb, hier_status_t *st_p)
{
    hier_status_t st = hier_accel_classify(sbuf, slen, sb);
    if (st == HIER_OK) st = hier_accel_classify(rbuf, rlen, rb);
    *st_p = st;
    return st != HIER_OK || hier_accel_is_device(sb) || hier_accel_is_device(rb);
}

hier_status_t hier_coll_dev_allreduce(hier_comm_t *c, const hier_coll_dev_call_t *d, const void *sbuf, void *rbuf,
                                      size_t count, hier_dtype_t dt, hier_op_t op, hier_path_t *path_p)
{
    size_t bytes = count * hier_dtype_size(dt), send_area = sbuf ? bytes : 0;
    uint8_t *host = hier_dev_host(c, send_area + bytes + 1);
    if (!host) return HIER_ERR_NO_MEMORY;
    uint8_t *hr = host + send_area;
    hier_status_t st = sbuf ? hier_dev_copy_in(host, sbuf, &d->sbuf, bytes) /* 1 */
                            : hier_dev_copy_in(hr, rbuf, &d->rbuf, bytes);
    if (st == HIER_OK) st = hier_coll_host_allreduce(c, sbuf ? host : NULL, hr, count, dt, op, path_p); /* 2 */
    if (st == HIER_OK) st = hier_dev_copy_out(rbuf, hr, &d->rbuf, bytes);                              /* 3 */
    return st;
}

hier_status_t hier_coll_dev_allgather(hier_comm_t *c, const hier_coll_dev_call_t *d, const void *sbuf, void *rbuf,
                                      size_t block_bytes, hier_path_t *path_p)
{
    size_t total = block_bytes * (size_t)c->size, mine = block_bytes * (size_t)c->rank;
    size_t send_area = sbuf ? block_bytes : 0;
    uint8_t *host = hier_dev_host(c, send_area + total + 1);
    if (!host) return HIER_ERR_NO_MEMORY;
    uint8_t *hr = host + send_area;
    hier_status_t st = sbuf ? hier_dev_copy_in(host, sbuf, &d->sbuf, block_bytes) /* 1 */
                            : hier_dev_copy_in(hr + mine, (const uint8_t *)rbuf + mine, &d->rbuf, block_bytes);
    if (st == HIER_OK) st = hier_coll_host_allgather(c, sbuf ? host : NULL, hr, block_bytes, path_p); /* 2 */
    if (st == HIER_OK) st = hier_dev_copy_out(rbuf, hr, &d->rbuf, total);                              /* 3 */
    return st;
}

hier_status_t hier_coll_dev_reduce_scatter(hier_comm_t *c, const hier_coll_dev_call_t *d, const void *sbuf,
                                           void *rbuf, const size_t *rcounts, hier_dtype_t dt, hier_op_t op,
                                           hier_path_t *path_p)
{
    size_t es = hier_dtype_size(dt), total = 0;
    for (int r = 0; r < c->size; r++) total += rcounts[r];
    size_t send_area = sbuf ? total * es : 0, recv_area = sbuf ? rcounts[c->rank] * es : total * es;
    uint8_t *host = hier_dev_host(c, send_area + recv_area + 1);
    if (!host) return HIER_ERR_NO_MEMORY;
    uint8_t *hr = host + send_area;
    hier_status_t st = sbuf ? hier_dev_copy_in(host, sbuf, &d->sbuf, total * es) /* 1 */
                            : hier_dev_copy_in(hr, rbuf, &d->rbuf, total * es);
    if (st == HIER_OK) st = hier_coll_host_reduce_scatter(c, sbuf ? host : NULL, hr, rcounts, dt, op, path_p); /* 2 */
    if (st == HIER_OK) st = hier_dev_copy_out(rbuf, hr, &d->rbuf, rcounts[c->rank] * es);                      /* 3 */
    return st;
}
