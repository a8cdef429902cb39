/* hier_run.c: a collective's chunks through the executors (hier_run.h). */
#include "exec/hier_run.h"

#include <stdatomic.h>

#include "base/hier_log.h"

static int hier_run_is_net(const hier_step_t *s)
{
    return s->op == HIER_STEP_NET_SEND || s->op == HIER_STEP_NET_RECV;
}

/* A chunk's steps cut for the overlap: [0, b1) before its first barrier
 * (the copy in), [b1, net) up to its network run, [net, tail) the run
 * (net == tail: none on this rank), [tail, n) from its last barrier on (the
 * copy out). Only the inter-node schedules (two barriers per chunk, the run
 * between them) are cut; the others run whole: b1 == net == tail == n. */
typedef struct {
    hier_step_t *steps;
    size_t n, b1, net, tail;
} hier_run_chunk_t;

static void hier_run_build(hier_run_t *r, const hier_sched_args_t *args, size_t k, hier_run_chunk_t *ch)
{
    int cut = hier_sched_is_hier(args->kind);
    ch->n = hier_sched_build(args, k, (int)((*r->chunk_seq)++ & 1), ch->steps);
    ch->b1 = ch->net = ch->tail = ch->n;
    if (!cut) return;
    while (ch->tail > 0 && ch->steps[ch->tail - 1].op != HIER_STEP_BARRIER) ch->tail--;
    if (ch->tail) ch->tail--; /* at the last barrier */
    for (ch->net = ch->tail; ch->net > 0 && hier_run_is_net(&ch->steps[ch->net - 1]);) ch->net--;
    for (ch->b1 = 0; ch->b1 < ch->net && ch->steps[ch->b1].op != HIER_STEP_BARRIER;) ch->b1++;
}

/* My error flag holds the status that failed here (minus it). */
static void hier_run_flag(hier_run_t *r, hier_status_t failed)
{
    if (failed != HIER_OK)
        atomic_store_explicit(&hier_shm_ctl(r->node, r->wait->me)->error, (uint32_t)-failed, memory_order_relaxed);
}

/* A failure that abandons the call (hier_status_abandons: a dead or stuck
 * peer, another call) ends it here at once, as a barrier's error does. */
static hier_status_t hier_run_fatal(hier_status_t failed)
{
    return hier_status_abandons(failed) ? failed : HIER_OK;
}

static hier_status_t hier_run_net_poll(hier_run_t *r)
{
    return r->netx && r->netx->active ? hier_net_exec_poll(r->netx) : HIER_OK;
}

/* Finish the network run in flight (nothing in flight: HIER_OK), counting its bytes. */
static hier_status_t hier_run_net_finish(hier_run_t *r, uint64_t *net_bytes)
{
    if (!r->netx || (!r->netx->active && !r->netx->steps)) return HIER_OK;
    hier_status_t st = hier_net_exec_finish(r->netx);
    *net_bytes += r->netx->net_bytes;
    r->netx->net_bytes = 0;
    r->netx->steps = NULL;
    return st;
}

/* Steps [from, to) of a chunk: local ones here, barriers through the
 * segment (network steps lie in [net, tail), started apart: a builder that
 * put one here fails the call through hier_exec_step); the run in flight
 * is polled between steps. A barrier's error (a dead peer) is returned; a
 * step's goes to *failed (see hier_run). */
static hier_status_t hier_run_local(hier_run_t *r, const hier_exec_bufs_t *bufs, const hier_run_chunk_t *ch,
                                    size_t from, size_t to, hier_status_t *failed)
{
    for (size_t i = from; i < to; i++) {
        const hier_step_t *s = &ch->steps[i];
        if (s->op == HIER_STEP_BARRIER) {
            hier_status_t st = hier_shm_barrier(r->node, r->wait);
            if (st != HIER_OK) return st; /* every rank finds out */
        } else if (*failed == HIER_OK) {
            *failed = hier_exec_step(bufs, s);
        }
        if (*failed == HIER_OK) *failed = hier_run_net_poll(r);
        hier_run_flag(r, *failed);
        if (hier_run_fatal(*failed) != HIER_OK) return *failed;
    }
    return HIER_OK;
}

static hier_status_t hier_run_start(hier_run_t *r, const hier_run_chunk_t *ch, hier_status_t *failed)
{
    if (*failed != HIER_OK || ch->net == ch->tail) return HIER_OK;
    *failed = hier_net_exec_start(r->netx, ch->steps + ch->net, ch->tail - ch->net);
    hier_run_flag(r, *failed);
    return hier_run_fatal(*failed);
}

static hier_status_t hier_run_finish(hier_run_t *r, hier_status_t *failed, uint64_t *net_bytes)
{
    hier_status_t st = hier_run_net_finish(r, net_bytes);
    if (*failed == HIER_OK) *failed = st;
    hier_run_flag(r, *failed);
    return hier_run_fatal(*failed);
}

/* Single copy: where my input is, published before the first barrier,
 * which makes it visible. */
static void hier_run_publish(hier_run_t *r, const hier_sched_args_t *args, const void *sbuf, void *rbuf)
{
    hier_shm_ctl_t *mine = hier_shm_ctl(r->node, r->wait->me);
    const uint8_t *in = args->in_place ? (const uint8_t *)rbuf + hier_sched_input_offset(args, r->wait->me) : sbuf;
    mine->input_addr = (uint64_t)(uintptr_t)in;
}

/* After the last barrier every rank sees every flag: a step that failed on
 * any rank fails the call on all. Only schedules that can fail are checked
 * (single copy reads other processes; the network). */
static hier_status_t hier_run_verdict(hier_run_t *r, const hier_sched_args_t *args, hier_status_t failed)
{
    if (!hier_sched_is_cma(args->kind) && !hier_sched_is_hier(args->kind)) return failed;
    for (int q = 0; q < r->wait->nranks; q++) {
        uint32_t theirs = atomic_load_explicit(&hier_shm_ctl(r->node, q)->error, memory_order_relaxed);
        if (!theirs) continue;
        if (failed == HIER_OK) HIER_ERROR("local rank %d: a step failed on local rank %d: %s", r->wait->me, q,
                                          hier_status_str((hier_status_t) - (int)theirs));
        return failed != HIER_OK ? failed : (hier_status_t) - (int)theirs;
    }
    return failed;
}

hier_status_t hier_run(hier_run_t *r, const hier_sched_args_t *args, const void *sbuf, void *rbuf,
                       hier_reduce_kernel_t kernel, uint64_t *net_bytes_p)
{
    hier_exec_bufs_t bufs = {.sbuf = sbuf, .rbuf = rbuf, .slots = r->slots, .parity_stride = r->parity_stride,
                             .esize = args->esize, .kernel = kernel, .peer_read = r->peer_read,
                             .peer_ctx = r->peer_ctx, .stage = r->stage};
    uint64_t net_bytes = 0;
    if (r->netx) r->netx->bufs = &bufs;
    if (hier_sched_is_cma(args->kind)) hier_run_publish(r, args, sbuf, rbuf);

    /* A failed data step must not make this rank skip barriers its peers wait
     * at: it keeps to the barriers, skips further data, and raises its error
     * flag; after the last barrier every rank sees every flag, so all return
     * the error together. */
    hier_status_t failed = HIER_OK, st = HIER_OK;
    size_t nchunks = hier_sched_nchunks(args);
    hier_run_chunk_t ch[2] = {{.steps = r->steps[0]}, {.steps = r->steps[1]}};
    /* Chunk k's network run is in flight while chunk k+1 copies its input
     * in; barriers keep their order (every rank, owner or not, alike):
     * 1. chunk 0 up to its network run, which starts;
     * 2. for each chunk k: chunk k+1's copy in (polling k's run);
     * 3. k's run finished, then k's part from its last barrier (copy out);
     * 4. chunk k+1 from its first barrier up to its run, which starts.
     * Safe with the slot parities: k+1's copy in writes parity k+1, last read
     * by k-1's copy out, which every rank finished before k's first barrier;
     * it reads only this rank's input, which k's copy out writes elsewhere
     * (in place, below: reading first is the safe order). */
    if (nchunks) {                                                                              /* 1 */
        hier_run_build(r, args, 0, &ch[0]);
        st = hier_run_local(r, &bufs, &ch[0], 0, ch[0].net, &failed);
        if (st == HIER_OK) st = hier_run_start(r, &ch[0], &failed);
    }
    for (size_t k = 0; k < nchunks && st == HIER_OK; k++) {
        hier_run_chunk_t *cur = &ch[k % 2], *nxt = &ch[(k + 1) % 2];
        if (k + 1 < nchunks) {                                                                  /* 2 */
            hier_run_build(r, args, k + 1, nxt);
            st = hier_run_local(r, &bufs, nxt, 0, nxt->b1, &failed);
        }
        if (st != HIER_OK) break;
        if ((st = hier_run_finish(r, &failed, &net_bytes)) != HIER_OK) break;                  /* 3 */
        st = hier_run_local(r, &bufs, cur, cur->tail, cur->n, &failed);
        if (st != HIER_OK || k + 1 == nchunks) break;
        st = hier_run_local(r, &bufs, nxt, nxt->b1, nxt->net, &failed);                   /* 4 */
        if (st == HIER_OK) st = hier_run_start(r, nxt, &failed);
    }
    if (st != HIER_OK && r->netx) { /* a dead or stuck peer, another call: the run is abandoned with the call */
        net_bytes += r->netx->net_bytes;
        r->netx->net_bytes = 0;
        r->netx->active = 0;
        r->netx->steps = NULL;
    }
    *net_bytes_p = net_bytes;
    return st != HIER_OK ? st : hier_run_verdict(r, args, failed);
}
