/* test_stage.c: the staging pipeline (exec/hier_stage.c) without MPI.
 *
 * Each rank's run is simulated alone: a fake chunk runner stands for the
 * host collective. It knows every rank's input (a formula of rank and
 * index), so it checks that the chunk it is handed holds this rank's next
 * slice, in order, on host memory, and writes the collective's result for
 * that slice as the other ranks' chunks would have made it. Swept over 1..8
 * ranks, counts around the chunk sizes, in place or not, chunked or whole,
 * buffers in host memory or in the test backend's "device memory" (which
 * the CPU faults on, its copies asynchronous): the chunks cover the call
 * exactly once and the results land where the collective puts them. Also:
 * the first error is returned while the sequence goes on, and the host
 * buffers are pinned once per size and backend, unpinned when freed. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"
#include "exec/hier_stage.h"
#include "test_dev_backend.h"

#define STAGE_CHUNK 256 /* hier_params.device_stage_chunk here: several chunks at small counts */
#define RS_CHUNK 4096   /* reduce_scatter's smallest chunk, in bytes of the whole vector */
#define MAX_RANKS 8
#define MAX_CHUNKS 64
#define GUARD 64        /* bytes after every receive buffer the pipeline must not write */

/* What rank r holds at element (allreduce, reduce_scatter) or byte
 * (allgather) i of its input. */
static uint32_t val(int r, size_t i)
{
    return (uint32_t)r * 2654435761u + (uint32_t)i * 40503u + 1;
}

static uint8_t byte(int r, size_t i)
{
    return (uint8_t)(r * 37 + i * 11 + 1);
}

/* ---- the backend: the test's device memory, its optional operations
 * counted, and a copy that fails when asked. */

static hier_accel_backend_t be;
static unsigned pins, unpins, copy_starts;
static unsigned copy_fail_at; /* the copy_start (from 1) that fails without copying; 0: none */

static hier_status_t be_pin(int device, void *p, size_t len)
{
    (void)device, (void)p, (void)len;
    pins++;
    return HIER_OK;
}

static void be_unpin(int device, void *p)
{
    (void)device, (void)p;
    unpins++;
}

static hier_status_t be_copy_start(int device, void *dst, const void *src, size_t len)
{
    if (++copy_starts == copy_fail_at) return HIER_ERR_INTERNAL;
    return tdev_backend()->copy_start(device, dst, src, len);
}

static void setup(void)
{
    hier_params_defaults(&hier_params);
    hier_params.device_stage_chunk = STAGE_CHUNK;
    be = *tdev_backend();
    be.host_pin = be_pin;
    be.host_unpin = be_unpin;
    be.copy_start = be_copy_start;
}

TestSuite(stage, .init = setup);

/* ---- the fake host collective */

typedef struct {
    const hier_call_t *call;
    int me, size;
    int lenient;               /* a copy failed on purpose: inputs are not checked */
    size_t done;               /* allreduce: elements, allgather: bytes of a block, handed so far */
    size_t lo[MAX_RANKS];      /* reduce_scatter: of each rank's part, elements handed so far */
    size_t displ[MAX_RANKS];   /* and where that part starts in the vector */
    unsigned chunks;
    size_t counts[MAX_CHUNKS]; /* each chunk's count */
    int fail_at[2];            /* chunks (from 0) that fail, with fail_st; -1: none */
    hier_status_t fail_st[2];
    const char *ctx;           /* the case, for messages */
} fake_t;

static void fake_allreduce(fake_t *f, const hier_call_t *chunk)
{
    const uint32_t *in = chunk->sbuf ? chunk->sbuf : chunk->rbuf;
    uint32_t *out = chunk->rbuf;
    cr_assert_null(chunk->rcounts, "%s", f->ctx);
    cr_assert_leq(f->done + chunk->count, f->call->count, "%s: chunks past the vector's end", f->ctx);
    for (size_t i = 0; i < chunk->count; i++) {
        uint32_t sum = 0;
        if (!f->lenient)
            cr_assert_eq(in[i], val(f->me, f->done + i), "%s: chunk %u element %zu", f->ctx, f->chunks, i);
        for (int r = 0; r < f->size; r++) sum += val(r, f->done + i);
        out[i] = sum;
    }
    f->done += chunk->count;
}

static void fake_allgather(fake_t *f, const hier_call_t *chunk)
{
    size_t len = chunk->count;
    uint8_t *out = chunk->rbuf;
    const uint8_t *in = chunk->sbuf ? chunk->sbuf : out + (size_t)f->me * len;
    cr_assert_null(chunk->rcounts, "%s", f->ctx);
    cr_assert_leq(f->done + len, f->call->count, "%s: chunks past the block's end", f->ctx);
    for (size_t j = 0; j < len && !f->lenient; j++)
        cr_assert_eq(in[j], byte(f->me, f->done + j), "%s: chunk %u byte %zu", f->ctx, f->chunks, j);
    for (int r = 0; r < f->size; r++)
        for (size_t j = 0; j < len; j++) out[(size_t)r * len + j] = byte(r, f->done + j);
    f->done += len;
}

static void fake_reduce_scatter(fake_t *f, const hier_call_t *chunk)
{
    const size_t *sub = chunk->rcounts;
    const uint32_t *in = chunk->sbuf ? chunk->sbuf : chunk->rbuf;
    uint32_t *out = chunk->rbuf;
    size_t sum = 0, at = 0;
    cr_assert_not_null(sub, "%s", f->ctx);
    for (int r = 0; r < f->size; r++) {
        cr_assert_leq(f->lo[r] + sub[r], f->call->rcounts[r], "%s: chunks past rank %d's part", f->ctx, r);
        for (size_t i = 0; i < sub[r] && !f->lenient; i++)
            cr_assert_eq(in[at + i], val(f->me, f->displ[r] + f->lo[r] + i), "%s: chunk %u part %d element %zu",
                         f->ctx, f->chunks, r, i);
        at += sub[r];
        sum += sub[r];
    }
    cr_assert_eq(chunk->count, sum, "%s: a chunk's count is its parts' sum", f->ctx);
    for (size_t i = 0; i < sub[f->me]; i++) { /* (in place: every input read above) */
        uint32_t v = 0;
        for (int q = 0; q < f->size; q++) v += val(q, f->displ[f->me] + f->lo[f->me] + i);
        out[i] = v;
    }
    for (int r = 0; r < f->size; r++) f->lo[r] += sub[r];
}

static hier_status_t fake_chunk(void *arg, const hier_call_t *chunk, hier_result_t *res)
{
    fake_t *f = arg;
    const hier_call_t *call = f->call;
    cr_assert_eq(chunk->coll, call->coll, "%s", f->ctx);
    cr_assert_eq(chunk->esize, call->esize, "%s", f->ctx);
    cr_assert_eq(chunk->dt, call->dt, "%s", f->ctx);
    cr_assert_eq(chunk->op, call->op, "%s", f->ctx);
    cr_assert_eq(chunk->bytes, call->bytes, "%s", f->ctx);
    cr_assert_eq(!chunk->sbuf, !call->sbuf, "%s: a chunk keeps the call's shape (in place or not)", f->ctx);
    cr_assert_lt(f->chunks, MAX_CHUNKS, "%s", f->ctx);
    f->counts[f->chunks] = chunk->count;
    if (call->coll == HIER_COLL_ALLREDUCE) fake_allreduce(f, chunk);
    else if (call->coll == HIER_COLL_ALLGATHER) fake_allgather(f, chunk);
    else fake_reduce_scatter(f, chunk);
    res->net_bytes++; /* (each chunk's result is added to the call's) */
    int k = (int)f->chunks++;
    return k == f->fail_at[0] ? f->fail_st[0] : k == f->fail_at[1] ? f->fail_st[1] : HIER_OK;
}

/* ---- one rank's run */

typedef enum { MEM_HOST, MEM_DEVICE, MEM_SEND_DEVICE, MEM_RECV_DEVICE, MEM_COUNT } mem_t;
static const char *const mem_name[] = {"host", "device", "send on device", "receive on device"};

typedef struct {
    hier_coll_t coll;
    int size, me;
    size_t count;              /* allreduce: elements; allgather: block bytes; reduce_scatter: the vector's */
    int in_place, chunked;
    mem_t mem;
    int fail_at[2];
    hier_status_t fail_st[2];
    unsigned copy_fail_at;
} run_t;

/* Parts of a reduce_scatter vector: uneven, some empty. */
static void rs_counts(size_t total, int size, size_t *rcounts)
{
    size_t w[MAX_RANKS], wsum = 0, given = 0;
    for (int r = 0; r < size; r++) wsum += w[r] = (size_t)(r * 5 + 3) % 7;
    for (int r = 0; r < size; r++) given += rcounts[r] = total * w[r] / wsum;
    rcounts[0] += total - given;
}

/* A whole chunk, in units of the call's count: device_stage_chunk bytes of
 * the vector for allreduce; device_stage_chunk / size bytes of every block
 * for allgather, rounded down to 64 (at least 64); for reduce_scatter
 * RS_CHUNK bytes of the vector (the smallest it takes). */
static size_t chunk_unit(hier_coll_t coll, int size)
{
    if (coll == HIER_COLL_ALLREDUCE) return STAGE_CHUNK / sizeof(uint32_t);
    if (coll == HIER_COLL_REDUCE_SCATTER) return RS_CHUNK / sizeof(uint32_t);
    size_t unit = STAGE_CHUNK / (size_t)size / 64 * 64;
    return unit < 64 ? 64 : unit;
}

/* The chunks a call is cut into, and the count of all but the last (0:
 * they differ, reduce_scatter). One chunk when not chunked, or for
 * reduce_scatter in place (its results would land over later inputs). */
static size_t chunks_of(const run_t *t, size_t *unit_p)
{
    size_t unit = chunk_unit(t->coll, t->size);
    if (t->coll == HIER_COLL_REDUCE_SCATTER) {
        *unit_p = 0;
        return t->chunked && !t->in_place && t->count ? (t->count + unit - 1) / unit : 1;
    }
    if (!t->chunked || unit > t->count) unit = t->count ? t->count : 1;
    *unit_p = unit;
    return t->count ? (t->count + unit - 1) / unit : 1;
}

static hier_accel_buf_t buf_of(int device, const void *p, size_t len)
{
    if (!device) return (hier_accel_buf_t){.backend = NULL};
    return (hier_accel_buf_t){.backend = &be, .range = {.base = (uintptr_t)p, .len = len, .device = 0, .id = 1}};
}

/* Run one rank's call through the pipeline with *stage_p, check it, and
 * return what hier_stage_run returned. */
static hier_status_t run_rank(const run_t *t, hier_stage_t **stage_p, const char *ctx)
{
    size_t rcounts[MAX_RANKS] = {0}, es = t->coll == HIER_COLL_ALLGATHER ? 1 : sizeof(uint32_t);
    size_t n = t->count, sbytes, rbytes, out_bytes;
    if (t->coll == HIER_COLL_REDUCE_SCATTER) rs_counts(n, t->size, rcounts);
    if (t->coll == HIER_COLL_ALLGATHER) {
        sbytes = n;
        rbytes = out_bytes = n * (size_t)t->size;
    } else if (t->coll == HIER_COLL_ALLREDUCE) {
        sbytes = rbytes = out_bytes = n * es;
    } else {
        sbytes = n * es;
        out_bytes = rcounts[t->me] * es;
        rbytes = t->in_place ? n * es : out_bytes;
    }
    int sdev = t->mem == MEM_DEVICE || t->mem == MEM_SEND_DEVICE;
    int rdev = t->mem == MEM_DEVICE || t->mem == MEM_RECV_DEVICE;
    tdev_buf_t s = tdev_buf_alloc(sdev, sbytes + 1), r = tdev_buf_alloc(rdev, rbytes + GUARD);

    /* the input, in the send buffer or (in place) where the collective reads it in the receive buffer */
    uint8_t *in = t->in_place ? (uint8_t *)r.h : (uint8_t *)s.h;
    memset(r.h, 0xa5, rbytes + GUARD);
    if (t->coll == HIER_COLL_ALLGATHER)
        for (size_t j = 0; j < n; j++) in[(t->in_place ? (size_t)t->me * n : 0) + j] = byte(t->me, j);
    else
        for (size_t i = 0; i < n; i++) ((uint32_t *)in)[i] = val(t->me, i);

    hier_call_t call = {.coll = t->coll, .sbuf = t->in_place ? NULL : s.p, .rbuf = r.p, .count = n, .esize = es,
                        .dt = es == 1 ? HIER_DT_UINT8 : HIER_DT_UINT32, .op = HIER_OP_SUM,
                        .rcounts = t->coll == HIER_COLL_REDUCE_SCATTER ? rcounts : NULL, .sbytes = sbytes,
                        .rbytes = rbytes, .bytes = t->coll == HIER_COLL_ALLGATHER ? rbytes : n * es};
    hier_stage_bufs_t bufs = {.sbuf = buf_of(sdev && !t->in_place, s.p, sbytes + 1),
                              .rbuf = buf_of(rdev, r.p, rbytes + GUARD), .chunked = t->chunked};
    fake_t f = {.call = &call, .me = t->me, .size = t->size, .lenient = t->copy_fail_at != 0,
                .fail_at = {t->fail_at[0], t->fail_at[1]}, .fail_st = {t->fail_st[0], t->fail_st[1]}, .ctx = ctx};
    for (int q = 1; q < t->size; q++) f.displ[q] = f.displ[q - 1] + rcounts[q - 1];
    hier_result_t res = {0};
    copy_starts = 0;
    copy_fail_at = t->copy_fail_at;

    hier_status_t st = hier_stage_run(stage_p, &bufs, &call, t->me, t->size, fake_chunk, &f, &res);

    size_t unit, nchunks = chunks_of(t, &unit);
    cr_assert_eq(f.chunks, nchunks, "%s: %u chunks run, %zu expected", ctx, f.chunks, nchunks);
    cr_assert_eq(res.net_bytes, nchunks, "%s: every chunk's result added", ctx);
    for (unsigned k = 0; unit && k + 1 < f.chunks; k++)
        cr_assert_eq(f.counts[k], unit, "%s: chunk %u has %zu, not %zu", ctx, k, f.counts[k], unit);
    if (t->coll == HIER_COLL_REDUCE_SCATTER)
        for (int q = 0; q < t->size; q++)
            cr_assert_eq(f.lo[q], rcounts[q], "%s: %zu of rank %d's %zu handed", ctx, f.lo[q], q, rcounts[q]);
    else
        cr_assert_eq(f.done, n, "%s: %zu of %zu handed", ctx, f.done, n);

    if (!t->copy_fail_at) { /* the results where the collective puts them */
        const uint8_t *o8 = (const uint8_t *)r.h;
        const uint32_t *o32 = (const uint32_t *)r.h;
        size_t first = t->coll == HIER_COLL_REDUCE_SCATTER ? f.displ[t->me] : 0; /* (of the vector) */
        for (size_t i = 0; t->coll == HIER_COLL_ALLGATHER && i < out_bytes; i++)
            cr_assert_eq(o8[i], byte((int)(i / n), i % n), "%s: byte %zu of the result", ctx, i);
        for (size_t i = 0; t->coll != HIER_COLL_ALLGATHER && i < out_bytes / es; i++) {
            uint32_t want = 0;
            for (int q = 0; q < t->size; q++) want += val(q, first + i);
            cr_assert_eq(o32[i], want, "%s: element %zu of the result", ctx, i);
        }
    }
    for (size_t i = rbytes; i < rbytes + GUARD; i++)
        cr_assert_eq((uint8_t)r.h[i], 0xa5, "%s: byte %zu past the receive buffer written", ctx, i - rbytes);
    tdev_buf_free(sdev, s);
    tdev_buf_free(rdev, r);
    return st;
}

/* Every rank of every size, every count, in place or not, chunked or not,
 * every kind of memory; each rank keeps its host buffers across the sweep,
 * as a communicator does. Counts are in units of the collective's chunk. */
static void sweep(hier_coll_t coll)
{
    hier_stage_t *stage[MAX_RANKS] = {NULL};
    unsigned runs = 0;
    for (int size = 1; size <= MAX_RANKS; size++) {
        size_t unit = chunk_unit(coll, size);
        const size_t counts[] = {0, 1, unit - 1, unit, unit + 1, 3 * unit + 5};
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int in_place = 0; in_place < 2; in_place++)
                for (int chunked = 0; chunked < 2; chunked++)
                    for (int mem = 0; mem < MEM_COUNT; mem++)
                        for (int me = 0; me < size; me++) {
                            run_t t = {.coll = coll, .size = size, .me = me, .count = counts[c], .in_place = in_place,
                                       .chunked = chunked, .mem = (mem_t)mem, .fail_at = {-1, -1}};
                            char ctx[160];
                            snprintf(ctx, sizeof(ctx), "%s, rank %d of %d, count %zu, %s, %s, %s",
                                     hier_coll_name(coll), me, size, counts[c], in_place ? "in place" : "not in place",
                                     chunked ? "chunked" : "whole", mem_name[mem]);
                            cr_assert_eq(run_rank(&t, &stage[me], ctx), HIER_OK, "%s", ctx);
                            runs++;
                        }
    }
    for (int r = 0; r < MAX_RANKS; r++) hier_stage_free(stage[r]);
    cr_assert_eq(unpins, pins, "every pinning undone at free");
    cr_log_info("%s: %u rank runs", hier_coll_name(coll), runs);
}

Test(stage, allreduce_sweep)
{
    sweep(HIER_COLL_ALLREDUCE);
}

Test(stage, allgather_sweep)
{
    sweep(HIER_COLL_ALLGATHER);
}

Test(stage, reduce_scatter_sweep)
{
    sweep(HIER_COLL_REDUCE_SCATTER);
}

/* Host buffers of a chunked allreduce run as the same chunks in place:
 * nothing staged, no host buffers made. */
Test(stage, host_allreduce_runs_in_place_without_host_buffers)
{
    hier_stage_t *stage = NULL;
    for (int in_place = 0; in_place < 2; in_place++) {
        run_t t = {.coll = HIER_COLL_ALLREDUCE, .size = 3, .me = 1, .count = 200, .in_place = in_place,
                   .chunked = 1, .mem = MEM_HOST, .fail_at = {-1, -1}};
        cr_assert_eq(run_rank(&t, &stage, "host allreduce"), HIER_OK);
    }
    cr_assert_null(stage, "no host buffers for host memory");
}

/* A failing chunk, or copy, stops nothing: every chunk runs (the other
 * ranks run theirs too) and the first error is the call's. */
Test(stage, the_first_error_is_returned_and_the_sequence_goes_on)
{
    static const hier_coll_t colls[] = {HIER_COLL_ALLREDUCE, HIER_COLL_ALLGATHER, HIER_COLL_REDUCE_SCATTER};
    hier_stage_t *stage = NULL;
    for (int c = 0; c < 3; c++)
        for (int mem = 0; mem < MEM_COUNT; mem++) {
            size_t count = colls[c] == HIER_COLL_REDUCE_SCATTER ? 4 * RS_CHUNK / sizeof(uint32_t) : 4 * 64 + 3;
            run_t t = {.coll = colls[c], .size = 4, .me = 2, .count = count, .chunked = 1, .mem = (mem_t)mem,
                       .fail_at = {1, 3}, .fail_st = {HIER_ERR_TIMEOUT, HIER_ERR_INTERNAL}};
            char ctx[96];
            snprintf(ctx, sizeof(ctx), "%s, %s, chunks 1 and 3 fail", hier_coll_name(colls[c]), mem_name[mem]);
            cr_assert_eq(run_rank(&t, &stage, ctx), HIER_ERR_TIMEOUT, "%s: the first chunk's error", ctx);
            if (mem != MEM_DEVICE) continue;
            /* the second asynchronous copy (chunk 1's copy in) fails before chunk 3 does */
            t.fail_at[0] = -1;
            t.fail_st[1] = HIER_ERR_PEER_DEAD;
            t.copy_fail_at = 2;
            snprintf(ctx, sizeof(ctx), "%s, the second copy and chunk 3 fail", hier_coll_name(colls[c]));
            cr_assert_eq(run_rank(&t, &stage, ctx), HIER_ERR_INTERNAL, "%s: the copy's error", ctx);
            cr_assert_geq(copy_starts, 4, "%s: copies went on after the failed one", ctx);
        }
    hier_stage_free(stage);
}

/* The host buffers are pinned for the device's backend once, kept while
 * they are large enough, pinned anew when they grow, unpinned when freed;
 * host memory pins nothing. */
Test(stage, host_buffers_are_pinned_once_and_unpinned_when_freed)
{
    hier_stage_t *stage = NULL;
    run_t t = {.coll = HIER_COLL_ALLGATHER, .size = 8, .me = 0, .count = 1000, .chunked = 1, .mem = MEM_HOST,
               .fail_at = {-1, -1}};
    cr_assert_eq(run_rank(&t, &stage, "allgather, host"), HIER_OK);
    cr_assert_eq(pins, 0, "host memory pins nothing");
    t.mem = MEM_DEVICE;
    cr_assert_eq(run_rank(&t, &stage, "allgather, device"), HIER_OK);
    cr_assert_eq(run_rank(&t, &stage, "allgather, device, again"), HIER_OK);
    cr_assert_eq(pins, 1, "pinned once for its backend");
    t = (run_t){.coll = HIER_COLL_ALLREDUCE, .size = 2, .count = 1 << 14, .mem = MEM_DEVICE, .fail_at = {-1, -1}};
    cr_assert_eq(run_rank(&t, &stage, "allreduce, whole, larger"), HIER_OK);
    cr_assert_eq(pins, 2, "pinned anew when grown");
    cr_assert_eq(unpins, 1, "the smaller buffers unpinned");
    cr_assert_geq(hier_stage_bytes(stage), 2 * ((size_t)1 << 14) * sizeof(uint32_t),
                  "its footprint counts the host buffers (a send and a receive area of the whole call)");
    hier_stage_free(stage);
    cr_assert_eq(unpins, 2, "unpinned when freed");
}
