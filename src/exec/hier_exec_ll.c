/* hier_exec_ll.c: the low-latency path for small messages: no barrier,
 * the payload carries its ready flag (docs/design.md, "Inside a node"):
 * 1. put: payload and the call's signature into my area of parity seq & 1,
 *    then header = seq (release);
 * 2. get: for every peer, wait until its header reaches seq (acquire), check
 *    its signature is mine (ranks in different calls: an error on each), read.
 * An area is rewritten two calls later: a peer writes its header of call
 * s + 1 only once it has read all of call s, and I start s + 2 only once
 * I have seen every peer's s + 1; so the header I wait on holds s - 2 until
 * it holds s (reaching s is being s). */
#include "exec/hier_exec_ll.h"

#include <string.h>

size_t hier_exec_ll_capacity(void)
{
    return HIER_SHM_LL_HEAD + HIER_SHM_LL_TAIL;
}

/* A rank's payload: its head, in the header's line, and its tail. */
typedef struct {
    const uint8_t *head, *tail;
} hier_ll_view_t;

/* The part of payload bytes [off, off + len) in the head (part 0) or the
 * tail (part 1): where, and how many bytes. */
static const uint8_t *hier_ll_part(const hier_ll_view_t *v, int part, size_t off, size_t len, size_t *n_p)
{
    size_t end = off + len, h = HIER_SHM_LL_HEAD;
    if (part == 0) {
        *n_p = off < h ? (end < h ? end : h) - off : 0;
        return v->head + off;
    }
    size_t from = off > h ? off : h;
    *n_p = end > from ? end - from : 0;
    return v->tail + (from - h);
}

/* The payload's head, in the header's line. */
static uint8_t *hier_ll_head(_Atomic uint64_t *line)
{
    return (uint8_t *)(void *)line + HIER_SHM_LL_HEAD_OFF;
}

/* The call's signature, beside the head (published with it). */
static hier_sig_t *hier_ll_sig(_Atomic uint64_t *line)
{
    return (hier_sig_t *)(void *)((uint8_t *)(void *)line + HIER_SHM_LL_SIG_OFF);
}

/* 1. put */
static uint64_t hier_ll_put(const hier_exec_ll_t *c, const void *data, size_t bytes)
{
    uint64_t seq = ++*hier_shm_ll_seq(c->shm);
    _Atomic uint64_t *line = hier_shm_ll_line(c->shm, c->wait->me, (int)(seq & 1));
    size_t head = bytes < HIER_SHM_LL_HEAD ? bytes : HIER_SHM_LL_HEAD;
    *hier_ll_sig(line) = c->wait->sig;
    memcpy(hier_ll_head(line), data, head);
    if (bytes > head) memcpy(hier_shm_ll_tail(c->shm, c->wait->me, (int)(seq & 1)), (const uint8_t *)data + head,
                             bytes - head);
    atomic_store_explicit(line, seq, memory_order_release);
    return seq;
}

/* 2. get: rank's payload of call seq, once it is there, if it is of the same call. */
static hier_status_t hier_ll_get(const hier_exec_ll_t *c, int rank, uint64_t seq, hier_ll_view_t *v)
{
    _Atomic uint64_t *line = hier_shm_ll_line(c->shm, rank, (int)(seq & 1));
    hier_status_t st = hier_shm_wait(c->shm, rank, line, seq, c->wait);
    if (st == HIER_OK) st = hier_shm_sig_compare(c->wait, rank, *hier_ll_sig(line));
    if (st == HIER_OK)
        *v = (hier_ll_view_t){.head = hier_ll_head(line),
                              .tail = hier_shm_ll_tail(c->shm, rank, (int)(seq & 1))};
    return st;
}

/* Payload bytes [off, off + len) of rank's call seq into dst. */
static void hier_ll_copy(const hier_ll_view_t *v, size_t off, size_t len, uint8_t *dst)
{
    for (int part = 0; part < 2; part++) {
        size_t n;
        const uint8_t *p = hier_ll_part(v, part, off, len, &n);
        memcpy(dst, p, n);
        dst += n;
    }
}

/* Fold count elements at byte offset off of every rank's payload, in rank
 * order, into dst (no element straddles head and tail: HIER_SHM_LL_HEAD is
 * a multiple of every element size). */
static hier_status_t hier_ll_fold(const hier_exec_ll_t *c, uint64_t seq, size_t off, size_t count, size_t esize,
                                  hier_reduce_kernel_t kernel, uint8_t *dst)
{
    hier_ll_view_t a, b;
    hier_status_t st = hier_ll_get(c, 0, seq, &a);
    if (st != HIER_OK) return st; /* one-rank communicators never get here (path self) */
    if ((st = hier_ll_get(c, 1, seq, &b)) != HIER_OK) return st;
    for (int r = 1; r < c->wait->nranks; r++) {
        if (r > 1 && (st = hier_ll_get(c, r, seq, &b)) != HIER_OK) return st;
        uint8_t *out = dst;
        for (int part = 0; part < 2; part++) {
            size_t n;
            const uint8_t *x = hier_ll_part(&a, part, off, count * esize, &n), *y = hier_ll_part(&b, part, off,
                                                                                                 count * esize, &n);
            if (!n) continue;
            if (r == 1) kernel.comb(out, x, y, n / esize);
            else kernel.acc(out, y, n / esize);
            out += n;
        }
    }
    return HIER_OK;
}

/* 1 for a call: my payload (allgather: my block, which goes to my place in
 * rbuf too); the call's sequence number. */
static uint64_t hier_ll_start(const hier_exec_ll_t *c, const hier_exec_ll_call_t *call)
{
    uint8_t *r = call->rbuf;
    if (!call->block) return hier_ll_put(c, call->sbuf ? call->sbuf : r, call->total * call->esize);
    uint8_t *mine = r + (size_t)c->wait->me * call->block;
    uint64_t seq = hier_ll_put(c, call->sbuf ? call->sbuf : mine, call->block);
    if (call->sbuf) memcpy(mine, call->sbuf, call->block);
    return seq;
}

/* 2 for a call: every peer's payload read (waiting for it where it is not
 * there yet), folded or copied into place. */
static hier_status_t hier_ll_end(const hier_exec_ll_t *c, const hier_exec_ll_call_t *call, uint64_t seq)
{
    int me = c->wait->me, n = c->wait->nranks;
    if (call->block) {
        for (int i = 1; i < n; i++) {
            int j = (me + i) % n;
            hier_ll_view_t v;
            hier_status_t st = hier_ll_get(c, j, seq, &v);
            if (st != HIER_OK) return st;
            hier_ll_copy(&v, 0, call->block, (uint8_t *)call->rbuf + (size_t)j * call->block);
        }
        return HIER_OK;
    }
    /* (reduce_scatter: every rank waits for every header, even with nothing
     * to receive: that wait is what makes rewriting the areas two calls
     * later safe) */
    size_t off = call->rcounts ? call->rdispls[me] * call->esize : 0;
    size_t count = call->rcounts ? call->rcounts[me] : call->total;
    return hier_ll_fold(c, seq, off, count, call->esize, call->kernel, call->rbuf);
}

/* A request's looks at its peers' headers, until every one is there: 2's
 * waits as looks (then 2 runs as the blocking call's does, its waits
 * finding the words ready). */
static hier_status_t hier_ll_look(const hier_exec_ll_t *c, hier_exec_ll_req_t *q)
{
    for (; q->probe.next < c->wait->nranks; q->probe.next++) {
        int r = q->probe.next;
        if (r == c->wait->me) continue;
        _Atomic uint64_t *line = hier_shm_ll_line(c->shm, r, (int)(q->seq & 1));
        hier_status_t st = hier_shm_test(c->shm, r, line, q->seq, c->wait, &q->probe);
        if (st != HIER_OK) return st;
    }
    return HIER_OK;
}

void hier_exec_ll_post(const hier_exec_ll_t *c, const hier_exec_ll_call_t *call, hier_exec_ll_req_t *q)
{
    *q = (hier_exec_ll_req_t){.seq = hier_ll_start(c, call)};
}

hier_status_t hier_exec_ll_test(const hier_exec_ll_t *c, const hier_exec_ll_call_t *call, hier_exec_ll_req_t *q)
{
    hier_status_t st = hier_ll_look(c, q);
    return st != HIER_OK ? st : hier_ll_end(c, call, q->seq);
}

/* The blocking calls: 1 then 2, waiting. */
hier_status_t hier_exec_ll_allreduce(const hier_exec_ll_t *c, const void *sbuf, void *rbuf, size_t count, size_t esize,
                                     hier_reduce_kernel_t kernel)
{
    hier_exec_ll_call_t call = {.sbuf = sbuf, .rbuf = rbuf, .total = count, .esize = esize, .kernel = kernel};
    return hier_ll_end(c, &call, hier_ll_start(c, &call));
}

hier_status_t hier_exec_ll_allgather(const hier_exec_ll_t *c, const void *sbuf, void *rbuf, size_t block)
{
    hier_exec_ll_call_t call = {.sbuf = sbuf, .rbuf = rbuf, .block = block};
    return hier_ll_end(c, &call, hier_ll_start(c, &call));
}

hier_status_t hier_exec_ll_reduce_scatter(const hier_exec_ll_t *c, const void *sbuf, void *rbuf, const size_t *rcounts,
                                          const size_t *rdispls, size_t total, size_t esize,
                                          hier_reduce_kernel_t kernel)
{
    hier_exec_ll_call_t call = {.sbuf = sbuf, .rbuf = rbuf, .total = total, .esize = esize, .rcounts = rcounts,
                                .rdispls = rdispls, .kernel = kernel};
    return hier_ll_end(c, &call, hier_ll_start(c, &call));
}
