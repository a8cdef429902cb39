/* hier_stage.c: collectives on device buffers, staged through host memory in a pipeline the CPU never touches
 * device memory in: chunks copied into host mirrors by the backend, the host collective (the caller's
 * run_chunk) on each, the result copied back; chunk k in host buffer k % 3 (docs/design.md, "Device
 * (accelerator) buffers"):
 * 1. start copying chunk k + 1 in, once chunk k - 2's copy out of that buffer is done;
 * 2. wait for chunk k's copy in; 3. run the host collective on chunk k;
 * 4. start copying chunk k's result out; 5. at the end, wait for every copy out.
 * A failed copy does not stop the sequence (the other ranks run it too): the call returns the first error once
 * it is over. */
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "exec/hier_stage.h"

struct hier_stage {
    uint8_t *host;
    size_t len;
    const hier_accel_backend_t *pin; /* the backend that pinned it, if any */
    int pin_device;                  /* for which device */
};

#define HIER_STAGE_DEPTH 3

size_t hier_stage_bytes(const hier_stage_t *s)
{
    return s ? sizeof(*s) + s->len : 0;
}

typedef struct hier_stage_pipe hier_stage_pipe_t;
/* Copy chunk k in or out, or run it, with `host` its host buffer. */
typedef hier_status_t (*hier_stage_step_fn_t)(hier_stage_pipe_t *p, size_t k, uint8_t *host);

struct hier_stage_pipe {
    hier_stage_t **stage_p;
    const hier_stage_bufs_t *d;
    int rank, size;
    hier_stage_chunk_fn_t run_chunk;
    void *arg;
    const hier_accel_backend_t *dev; /* the device side's backend: its fences order the copies (NULL: host buffers) */
    int device;
    size_t nchunks, stride;          /* chunks, and host bytes per chunk buffer */
    hier_stage_step_fn_t in, run, out;
    const hier_call_t *call;         /* the chunks are calls of its kind (hier_stage_chunk) */
    hier_result_t *res;
    const uint8_t *sbuf;             /* NULL: in place */
    uint8_t *rbuf;
    size_t esize, count, chunk;      /* allreduce: elements, per chunk; allgather: block bytes, per chunk */
    const size_t *rcounts;           /* reduce_scatter: the call's, then per rank per chunk (q) */
    size_t *q, *sub;                 /* and one chunk's counts */
};

/* Start one copy between a call buffer `b` and host memory. */
static hier_status_t hier_stage_copy(const hier_stage_pipe_t *p, const hier_accel_buf_t *b, void *dst,
                                     const void *src, size_t len, int to_host)
{
    if (!len) return HIER_OK;
    if (!hier_accel_is_device(b)) {
        memcpy(dst, src, len);
        return HIER_OK;
    }
    if (b->backend != p->dev || b->range.device != p->device) /* copies our fences do not cover */
        return to_host ? b->backend->to_host(dst, src, len) : b->backend->from_host(dst, src, len);
    return hier_accel_copy_start(b->backend, b->range.device, dst, src, len, to_host);
}

static void hier_stage_unpin(hier_stage_t *s)
{
    if (s->pin && s->pin->host_unpin) s->pin->host_unpin(s->pin_device, s->host);
    s->pin = NULL;
}

void hier_stage_free(hier_stage_t *stage)
{
    if (!stage) return;
    hier_stage_unpin(stage);
    free(stage->host);
    free(stage);
}

/* The host buffers, at least len bytes (whole pages), pinned for `dev`'s
 * device when it can. */
static uint8_t *hier_stage_host(hier_stage_t **stage_p, const hier_accel_backend_t *dev, int device, size_t len)
{
    len = (len + 4095) & ~(size_t)4095;
    if (!*stage_p && !(*stage_p = calloc(1, sizeof(**stage_p)))) return NULL;
    hier_stage_t *s = *stage_p;
    if (len > s->len) {
        hier_stage_unpin(s);
        free(s->host);
        s->len = 0;
        if (!(s->host = aligned_alloc(4096, len))) {
            HIER_ERROR("no %zu bytes of host memory to stage device buffers", len);
            return NULL;
        }
        s->len = len;
    }
    if (dev && (s->pin != dev || s->pin_device != device) && dev->host_pin) {
        hier_stage_unpin(s);
        if (dev->host_pin(device, s->host, s->len) == HIER_OK) {
            s->pin = dev;
            s->pin_device = device;
        }
    }
    return s->host;
}

/* Steps 1-5 of the file comment. */
static hier_status_t hier_stage_pipe_run(hier_stage_pipe_t *p)
{
    hier_accel_fence_t in[HIER_STAGE_DEPTH] = {{0}}, out[HIER_STAGE_DEPTH] = {{0}};
    hier_status_t first = HIER_OK, st;
    size_t nbufs = p->nchunks < HIER_STAGE_DEPTH ? p->nchunks : HIER_STAGE_DEPTH;
    uint8_t *host = hier_stage_host(p->stage_p, p->dev, p->device, nbufs * p->stride + 1);
    if (!host) return HIER_ERR_NO_MEMORY; /* every rank's host memory is alike: all fail here together, or none */

#define HIER_STAGE_KEEP(expr)                                                                                        \
    do {                                                                                                             \
        st = (expr);                                                                                                 \
        if (first == HIER_OK) first = st;                                                                            \
    } while (0)
    HIER_STAGE_KEEP(p->in(p, 0, host));                                                                      /* 1 */
    HIER_STAGE_KEEP(hier_accel_fence(p->dev, p->device, &in[0]));
    for (size_t k = 0; k < p->nchunks; k++) {
        size_t b = k % HIER_STAGE_DEPTH, nb = (k + 1) % HIER_STAGE_DEPTH;
        if (k + 1 < p->nchunks) {                                                                            /* 1 */
            HIER_STAGE_KEEP(hier_accel_fence_wait(p->dev, &out[nb]));
            HIER_STAGE_KEEP(p->in(p, k + 1, host + nb * p->stride));
            HIER_STAGE_KEEP(hier_accel_fence(p->dev, p->device, &in[nb]));
        }
        HIER_STAGE_KEEP(hier_accel_fence_wait(p->dev, &in[b]));                                             /* 2 */
        HIER_STAGE_KEEP(p->run(p, k, host + b * p->stride));                                                /* 3 */
        HIER_STAGE_KEEP(p->out(p, k, host + b * p->stride));                                                /* 4 */
        HIER_STAGE_KEEP(hier_accel_fence(p->dev, p->device, &out[b]));
    }
    for (size_t b = 0; b < HIER_STAGE_DEPTH; b++) HIER_STAGE_KEEP(hier_accel_fence_wait(p->dev, &out[b])); /* 5 */
#undef HIER_STAGE_KEEP
    return first;
}

/* One chunk: a call of the pipeline's kind on host (or mirror) buffers, run
 * by the caller. */
static hier_status_t hier_stage_chunk(hier_stage_pipe_t *p, const void *sbuf, void *rbuf, size_t count,
                                      const size_t *rcounts)
{
    hier_call_t chunk = *p->call;
    chunk.sbuf = sbuf;
    chunk.rbuf = rbuf;
    chunk.count = count;
    chunk.rcounts = rcounts;
    return p->run_chunk(p->arg, &chunk, p->res);
}

static size_t hier_stage_div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* ---- allreduce: chunk k is elements [k * chunk, ...) of the vector. */

static size_t hier_stage_ar_len(const hier_stage_pipe_t *p, size_t k)
{
    size_t first = k * p->chunk;
    return (p->count - first < p->chunk ? p->count - first : p->chunk) * p->esize;
}

static hier_status_t hier_stage_ar_in(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    size_t off = k * p->chunk * p->esize, len = hier_stage_ar_len(p, k);
    if (p->sbuf) return hier_stage_copy(p, &p->d->sbuf, host, p->sbuf + off, len, 1);
    return hier_stage_copy(p, &p->d->rbuf, host, p->rbuf + off, len, 1);
}

static hier_status_t hier_stage_ar_run(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    size_t send_area = p->sbuf ? p->chunk * p->esize : 0;
    return hier_stage_chunk(p, p->sbuf ? host : NULL, host + send_area, hier_stage_ar_len(p, k) / p->esize, NULL);
}

static hier_status_t hier_stage_ar_out(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    size_t send_area = p->sbuf ? p->chunk * p->esize : 0;
    return hier_stage_copy(p, &p->d->rbuf, p->rbuf + k * p->chunk * p->esize, host + send_area,
                           hier_stage_ar_len(p, k), 0);
}

/* Host buffers on a chunked call: the same chunks, in place. */
static hier_status_t hier_stage_ar_host(hier_stage_pipe_t *p)
{
    hier_status_t first = HIER_OK;
    for (size_t k = 0; k < p->nchunks; k++) {
        size_t off = k * p->chunk * p->esize;
        hier_status_t st = hier_stage_chunk(p, p->sbuf ? p->sbuf + off : NULL, p->rbuf + off,
                                            hier_stage_ar_len(p, k) / p->esize, NULL);
        if (first == HIER_OK) first = st;
    }
    return first;
}

static hier_status_t hier_stage_allreduce(hier_stage_pipe_t *p)
{
    size_t count = p->call->count;
    p->count = count;
    p->chunk = hier_params.device_stage_chunk / p->esize ? hier_params.device_stage_chunk / p->esize : 1;
    if (p->chunk > count || !p->d->chunked) p->chunk = count ? count : 1;
    p->nchunks = count ? hier_stage_div_up(count, p->chunk) : 1;
    if (!p->dev) return hier_stage_ar_host(p);
    p->stride = (p->sbuf ? 2 : 1) * p->chunk * p->esize;
    p->in = hier_stage_ar_in;
    p->run = hier_stage_ar_run;
    p->out = hier_stage_ar_out;
    return hier_stage_pipe_run(p);
}

/* ---- allgather: chunk k is bytes [k * chunk, ...) of every block. */

static size_t hier_stage_ag_len(const hier_stage_pipe_t *p, size_t k)
{
    size_t first = k * p->chunk;
    return p->count - first < p->chunk ? p->count - first : p->chunk;
}

static hier_status_t hier_stage_ag_in(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    size_t len = hier_stage_ag_len(p, k), off = k * p->chunk, me = (size_t)p->rank;
    if (p->sbuf) return hier_stage_copy(p, &p->d->sbuf, host, p->sbuf + off, len, 1);
    return hier_stage_copy(p, &p->d->rbuf, host + me * len, p->rbuf + me * p->count + off, len, 1);
}

static hier_status_t hier_stage_ag_run(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    size_t send_area = p->sbuf ? p->chunk : 0;
    return hier_stage_chunk(p, p->sbuf ? host : NULL, host + send_area, hier_stage_ag_len(p, k), NULL);
}

static hier_status_t hier_stage_ag_out(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    size_t len = hier_stage_ag_len(p, k), send_area = p->sbuf ? p->chunk : 0;
    hier_status_t first = HIER_OK;
    for (size_t r = 0; r < (size_t)p->size; r++) {
        hier_status_t st = hier_stage_copy(p, &p->d->rbuf, p->rbuf + r * p->count + k * p->chunk,
                                           host + send_area + r * len, len, 0);
        if (first == HIER_OK) first = st;
    }
    return first;
}

static hier_status_t hier_stage_allgather(hier_stage_pipe_t *p)
{
    size_t block_bytes = p->call->count;
    p->count = block_bytes;
    p->chunk = (hier_params.device_stage_chunk / (size_t)p->size) & ~(size_t)63;
    if (p->chunk < 64) p->chunk = 64;
    if (p->chunk > block_bytes || !p->d->chunked) p->chunk = block_bytes ? block_bytes : 1;
    p->nchunks = block_bytes ? hier_stage_div_up(block_bytes, p->chunk) : 1;
    p->stride = (p->sbuf ? p->chunk : 0) + (size_t)p->size * p->chunk;
    p->in = hier_stage_ag_in;
    p->run = hier_stage_ag_run;
    p->out = hier_stage_ag_out;
    return hier_stage_pipe_run(p);
}

/* ---- reduce_scatter: chunk k is elements [k * q_r, ...) of every rank r's
 * part (q_r = its count over the number of chunks, rounded up). In place the
 * results land over inputs of later chunks: one chunk then. */

static size_t hier_stage_rs_lo(const hier_stage_pipe_t *p, int r, size_t k)
{
    size_t lo = k * p->q[r];
    return lo < p->rcounts[r] ? lo : p->rcounts[r];
}

/* Chunk k's count per rank into p->sub (shared by the steps, which
 * interleave across chunks: each step fills it for its own chunk); their sum. */
static size_t hier_stage_rs_counts(hier_stage_pipe_t *p, size_t k)
{
    size_t sum = 0;
    for (int r = 0; r < p->size; r++) {
        size_t lo = hier_stage_rs_lo(p, r, k), hi = lo + p->q[r];
        p->sub[r] = (hi < p->rcounts[r] ? hi : p->rcounts[r]) - lo;
        sum += p->sub[r];
    }
    return sum;
}

static hier_status_t hier_stage_rs_in(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    hier_status_t first = HIER_OK;
    size_t es = p->esize, displ = 0, at = 0;
    const uint8_t *in = p->sbuf ? p->sbuf : p->rbuf;
    const hier_accel_buf_t *b = p->sbuf ? &p->d->sbuf : &p->d->rbuf;
    hier_stage_rs_counts(p, k);
    for (int r = 0; r < p->size; r++) {
        hier_status_t st = hier_stage_copy(p, b, host + at * es, in + (displ + hier_stage_rs_lo(p, r, k)) * es,
                                           p->sub[r] * es, 1);
        if (first == HIER_OK) first = st;
        displ += p->rcounts[r];
        at += p->sub[r];
    }
    return first;
}

static hier_status_t hier_stage_rs_run(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    size_t sum = hier_stage_rs_counts(p, k), send_area = p->sbuf ? sum * p->esize : 0;
    return hier_stage_chunk(p, p->sbuf ? host : NULL, host + send_area, sum, p->sub);
}

static hier_status_t hier_stage_rs_out(hier_stage_pipe_t *p, size_t k, uint8_t *host)
{
    int me = p->rank;
    size_t sum = hier_stage_rs_counts(p, k), send_area = p->sbuf ? sum * p->esize : 0;
    return hier_stage_copy(p, &p->d->rbuf, p->rbuf + hier_stage_rs_lo(p, me, k) * p->esize, host + send_area,
                           p->sub[me] * p->esize, 0);
}

static hier_status_t hier_stage_reduce_scatter(hier_stage_pipe_t *p)
{
    const size_t *rcounts = p->rcounts;
    size_t total = p->call->count, width = 0;
    size_t chunk = hier_params.device_stage_chunk < 4096 ? 4096 : hier_params.device_stage_chunk;
    p->nchunks = p->sbuf && total && p->d->chunked ? hier_stage_div_up(total * p->esize, chunk) : 1;
    if (!(p->q = malloc(2 * (size_t)p->size * sizeof(size_t)))) return HIER_ERR_NO_MEMORY; /* (before any step) */
    p->sub = p->q + p->size;
    for (int r = 0; r < p->size; r++) width += p->q[r] = hier_stage_div_up(rcounts[r], p->nchunks);
    p->stride = (p->sbuf ? width + p->q[p->rank] : width) * p->esize;
    p->in = hier_stage_rs_in;
    p->run = hier_stage_rs_run;
    p->out = hier_stage_rs_out;
    hier_status_t st = hier_stage_pipe_run(p);
    free(p->q);
    return st;
}

/* The backend whose fences order the copies: the receive side's if it is
 * device memory, else the send side's (neither: host buffers, none). */
hier_status_t hier_stage_run(hier_stage_t **stage_p, const hier_stage_bufs_t *bufs, const hier_call_t *call,
                             int rank, int size, hier_stage_chunk_fn_t run_chunk, void *arg, hier_result_t *res)
{
    const hier_accel_buf_t *b = hier_accel_is_device(&bufs->rbuf) ? &bufs->rbuf : &bufs->sbuf;
    hier_stage_pipe_t p = {.stage_p = stage_p, .d = bufs, .rank = rank, .size = size, .run_chunk = run_chunk,
                           .arg = arg, .dev = b->backend, .device = b->range.device, .call = call, .res = res,
                           .sbuf = call->sbuf, .rbuf = call->rbuf, .esize = call->esize, .rcounts = call->rcounts};
    switch (call->coll) {
    case HIER_COLL_ALLREDUCE:
        return hier_stage_allreduce(&p);
    case HIER_COLL_ALLGATHER:
        return hier_stage_allgather(&p);
    default:
        return hier_stage_reduce_scatter(&p);
    }
}
