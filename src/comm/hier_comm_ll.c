/* hier_comm_ll.c: the low-latency path for small messages.
 *
 * Not a schedule of barriers: each rank writes its payload into one of its
 * two low-latency areas and then, with a release store, the call's sequence
 * number into the area's header word, which shares a cache line with the
 * first 56 payload bytes. A reader acquires the header and reads the payload:
 * one cache-line transfer per peer for the smallest messages, where a barrier
 * costs a flag line and then a data line.
 *
 * 1. put: payload into my area of parity seq & 1, then header = seq (release);
 * 2. get: for every peer, wait until its header equals seq (acquire), read.
 *
 * Why an area can be rewritten two calls later: every call waits for every
 * peer's header, and a peer writes its header for call s+1 only after it has
 * finished reading everything of call s. So when I start call s+2 I have seen
 * every peer's s+1 header, and nobody still reads my area of call s. */
#include <string.h>

#include "comm/hier_comm_impl.h"

#define HIER_LL_PAYLOAD (HIER_SHM_LL_AREA - 8)

size_t hier_comm_ll_capacity(void)
{
    return HIER_LL_PAYLOAD;
}

static int hier_comm_ll_ready(uint64_t header, uint64_t seq)
{
    return header == seq;
}

/* 1. put */
static uint64_t hier_comm_ll_put(hier_comm_t *c, const void *data, size_t bytes)
{
    uint64_t seq = ++c->ll_seq;
    _Atomic uint64_t *area = hier_shm_ll_area(c->shm, c->me, (int)(seq & 1));
    memcpy((void *)(area + 1), data, bytes);
    atomic_store_explicit(area, seq, memory_order_release);
    return seq;
}

/* 2. get: rank's payload of call seq, once it is there. */
static hier_status_t hier_comm_ll_get(hier_comm_t *c, int rank, uint64_t seq, const uint8_t **payload_p)
{
    _Atomic uint64_t *area = hier_shm_ll_area(c->shm, rank, (int)(seq & 1));
    hier_status_t st = hier_shm_wait(c->shm, rank, area, hier_comm_ll_ready, seq, &c->wait);
    if (st == HIER_OK) *payload_p = (const uint8_t *)(area + 1);
    return st;
}

/* Fold count elements at byte offset off of every rank's payload, in rank order, into dst. */
static hier_status_t hier_comm_ll_fold(hier_comm_t *c, uint64_t seq, size_t off, size_t count,
                                       hier_reduce_kernel_t kernel, uint8_t *dst)
{
    const uint8_t *a, *b;
    hier_status_t st = hier_comm_ll_get(c, 0, seq, &a);
    if (st != HIER_OK) return st; /* one-rank communicators never get here (path self) */
    if ((st = hier_comm_ll_get(c, 1, seq, &b)) != HIER_OK) return st;
    if (count) kernel.comb(dst, a + off, b + off, count);
    for (int r = 2; r < c->nranks; r++) {
        if ((st = hier_comm_ll_get(c, r, seq, &b)) != HIER_OK) return st;
        if (count) kernel.acc(dst, b + off, count);
    }
    return HIER_OK;
}

hier_status_t hier_comm_ll_allreduce(hier_comm_t *c, const void *sbuf, void *rbuf, size_t count, size_t esize,
                                     hier_reduce_kernel_t kernel)
{
    uint64_t seq = hier_comm_ll_put(c, sbuf ? sbuf : rbuf, count * esize);
    return hier_comm_ll_fold(c, seq, 0, count, kernel, rbuf);
}

hier_status_t hier_comm_ll_allgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t block)
{
    uint8_t *r = rbuf;
    uint64_t seq = hier_comm_ll_put(c, sbuf ? sbuf : r + (size_t)c->me * block, block);
    if (sbuf) memcpy(r + (size_t)c->me * block, sbuf, block);
    for (int i = 1; i < c->nranks; i++) {
        int j = (c->me + i) % c->nranks;
        const uint8_t *p;
        hier_status_t st = hier_comm_ll_get(c, j, seq, &p);
        if (st != HIER_OK) return st;
        memcpy(r + (size_t)j * block, p, block);
    }
    return HIER_OK;
}

hier_status_t hier_comm_ll_reduce_scatter(hier_comm_t *c, const void *sbuf, void *rbuf, const size_t *rcounts,
                                          const size_t *rdispls, size_t total, size_t esize,
                                          hier_reduce_kernel_t kernel)
{
    /* every rank waits for every header, even with nothing to receive: that
     * wait is what makes rewriting the areas two calls later safe */
    uint64_t seq = hier_comm_ll_put(c, sbuf ? sbuf : rbuf, total * esize);
    return hier_comm_ll_fold(c, seq, rdispls[c->me] * esize, rcounts[c->me], kernel, rbuf);
}
