/* hier_run.c: a collective's chunks through the executors (hier_run.h).
 *
 * One executor for blocking calls and requests: a run stops wherever it
 * would wait (a barrier a peer has not entered, a network run not over) and
 * goes on from there at the next advance; a blocking call advances once,
 * waiting at those points instead. */
#include "exec/hier_run.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"

/* Where chunk j's steps are (chunks k .. k + depth are in use at once). */
static hier_run_chunk_t *hier_run_chunk(hier_run_req_t *q, size_t j)
{
    return &q->ch[j % (q->r.depth + 1)];
}

void hier_run_cache_clear(hier_run_cache_t *cache)
{
    for (unsigned i = 0; i <= HIER_RUN_DEPTH_MAX; i++) free(cache->steps[i]);
    *cache = (hier_run_cache_t){0};
}

/* Chunks are built in order, each taking the tier's next pipeline buffer: depth + 1
 * of them, so the one being copied in is none of the depth in flight. A call of
 * one chunk takes its steps from the cache, or builds them and keeps a copy there
 * (none kept without the memory: built again next time). */
static void hier_run_build(hier_run_req_t *q, size_t k, hier_run_chunk_t *ch)
{
    unsigned buf = (unsigned)((*q->r.chunk_seq)++ % (q->r.depth + 1));
    hier_run_cache_t *cache = q->plan.nchunks == 1 ? q->r.cache : NULL;
    if (cache && cache->steps[buf]) {
        ch->steps = cache->steps[buf];
        memcpy(ch->cut, cache->cut[buf], sizeof(ch->cut));
        return;
    }
    size_t n = hier_sched_build(&q->args, k, (int)buf, ch->steps);
    hier_plan_cut(ch->steps, n, hier_sched_is_hier(q->args.kind), ch->cut);
    if (cache && n && (cache->steps[buf] = malloc(n * sizeof(hier_step_t)))) {
        memcpy(cache->steps[buf], ch->steps, n * sizeof(hier_step_t));
        memcpy(cache->cut[buf], ch->cut, sizeof(ch->cut));
    }
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

/* The network runs in flight move on (none: nothing); a step failed
 * before keeps them as they are. */
static hier_status_t hier_run_net_poll(hier_run_req_t *q)
{
    hier_net_exec_t *x = q->r.netx;
    if (q->failed == HIER_OK && x && q->plan.started > q->plan.k) q->failed = hier_net_exec_poll(x);
    hier_run_flag(&q->r, q->failed);
    return hier_run_fatal(q->failed);
}

/* A barrier, entered at the first look; HIER_IN_PROGRESS until passed
 * (block 0). */
static hier_status_t hier_run_barrier(hier_run_req_t *q, int block)
{
    if (!q->target) {
        q->target = hier_shm_barrier_arrive(q->r.node, q->r.wait);
        q->probe = (hier_shm_probe_t){0};
    }
    hier_status_t st = hier_shm_barrier_pass(q->r.node, q->r.wait, q->target, &q->probe, block);
    if (st != HIER_IN_PROGRESS) q->target = 0;
    return st;
}

/* The steps left in the chunk's range: local ones here, barriers through
 * the segment (network steps lie in [net, tail), started apart: a builder
 * that put one here fails the call through hier_exec_step); the run in
 * flight is polled between steps and while a barrier is not passed. A
 * barrier's error (a dead peer) is returned; a step's goes to q->failed
 * (see hier_run). HIER_IN_PROGRESS: stopped at a barrier (block 0). */
static hier_status_t hier_run_local(hier_run_req_t *q, const hier_run_chunk_t *ch, int block)
{
    for (; q->pos < q->to; q->pos++) {
        const hier_step_t *s = &ch->steps[q->pos];
        if (s->op == HIER_STEP_BARRIER) {
            hier_status_t st = hier_run_barrier(q, block);
            if (st == HIER_IN_PROGRESS) {
                hier_status_t fatal = hier_run_net_poll(q);
                return fatal != HIER_OK ? fatal : st;
            }
            if (st != HIER_OK) return st; /* every rank finds out */
        } else if (q->failed == HIER_OK) {
            q->failed = hier_exec_step(&q->bufs, s);
        }
        hier_status_t fatal = hier_run_net_poll(q);
        if (fatal != HIER_OK) return fatal;
    }
    return HIER_OK;
}

/* Chunk j's network run starts, run j % depth of the executor (the chunks
 * in flight are j - depth + 1 .. j). */
static hier_status_t hier_run_start(hier_run_req_t *q, size_t j)
{
    const hier_run_chunk_t *ch = hier_run_chunk(q, j);
    size_t net = ch->cut[HIER_PLAN_CUT_NET], tail = ch->cut[HIER_PLAN_CUT_TAIL];
    if (q->failed != HIER_OK || net == tail) return HIER_OK;
    q->failed = hier_net_exec_start(q->r.netx, (unsigned)(j % q->r.depth), ch->steps + net, tail - net);
    hier_run_flag(&q->r, q->failed);
    return hier_run_fatal(q->failed);
}

/* Chunk k's network run over (none: HIER_OK), the executor's bytes
 * counted; HIER_IN_PROGRESS while it is not (block 0: the others in flight
 * move on meanwhile, as they do while a blocking finish waits). */
static hier_status_t hier_run_finish(hier_run_req_t *q, size_t k, int block)
{
    hier_net_exec_t *x = q->r.netx;
    unsigned d = (unsigned)(k % q->r.depth);
    if (!x || !hier_net_exec_busy(x, d)) return HIER_OK;
    hier_status_t st = block ? hier_net_exec_finish(x, d) : hier_net_exec_test(x, d);
    if (st == HIER_IN_PROGRESS) return st;
    q->net_bytes += x->net_bytes;
    x->net_bytes = 0;
    if (q->failed == HIER_OK) q->failed = st;
    hier_run_flag(&q->r, q->failed);
    return hier_run_fatal(q->failed);
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

void hier_run_begin(hier_run_req_t *q, const hier_run_t *r, const hier_sched_args_t *args, const void *sbuf,
                    void *rbuf, hier_reduce_kernel_t kernel)
{
    *q = (hier_run_req_t){.r = *r, .args = *args};
    if (q->r.depth < 1 || q->r.depth > HIER_RUN_DEPTH_MAX) q->r.depth = 1;
    hier_plan_begin(&q->plan, r->cache ? r->cache->nchunks : hier_sched_nchunks(args), q->r.depth);
    for (unsigned i = 0; i <= q->r.depth; i++) q->ch[i].steps = r->steps[i];
    q->bufs = (hier_exec_bufs_t){.sbuf = sbuf, .rbuf = rbuf, .slots = r->slots, .buf_stride = r->buf_stride,
                                 .esize = args->esize, .kernel = kernel, .peer_read = r->peer_read,
                                 .peer_ctx = r->peer_ctx, .scratch = r->scratch};
    if (r->netx) {
        r->netx->bufs = &q->bufs;
        r->netx->mr = r->mr;
        r->netx->mr_base = r->mr_base;
        r->netx->mr_len = r->mr_len;
    }
    if (hier_sched_is_cma(args->kind)) hier_run_publish(&q->r, args, sbuf, rbuf);
}

/* A failed data step must not make this rank skip barriers its peers wait
 * at: it keeps to the barriers, skips further data, and raises its error
 * flag; after the last barrier every rank sees every flag, so all return
 * the error together. The order is hier_plan.c's: up to depth (D) chunks'
 * network runs in flight while the next chunk copies its input in;
 * barriers keep their order (every rank, owner or not, alike). A call of
 * no data meets its node at one barrier (0): a rank that waited for no one
 * could run on to the call after next and sign it over this call's
 * signature (its parity) before a peer has checked it (hier_node_ran).
 * Safe with D + 1 pipeline buffers per slot: k + D's copy in (2) writes the buffer of
 * k - 1, last read by k - 1's copy out (3), which every rank finished
 * before chunk k - 1 + D's first barrier (its step 4); it reads only this
 * rank's input, which the copies out write elsewhere (in place, below:
 * reading first is the safe order); the runs in flight touch their own
 * buffers. HIER_OK: the run is over; any other status stops it where it
 * is, to go on from there. */
static hier_status_t hier_run_go(hier_run_req_t *q, int block)
{
    for (;;) {
        hier_plan_act_t a = hier_plan_act(&q->plan);
        hier_run_chunk_t *ch = hier_run_chunk(q, a.chunk);
        hier_status_t st = HIER_OK;
        switch (a.op) {
        case HIER_PLAN_BUILD: hier_run_build(q, a.chunk, ch); break;
        case HIER_PLAN_LOCAL:
            if (!q->ranged) q->pos = ch->cut[a.from], q->to = ch->cut[a.to], q->ranged = 1;
            st = hier_run_local(q, ch, block);
            break;
        case HIER_PLAN_NET_START: st = hier_run_start(q, a.chunk); break;
        case HIER_PLAN_NET_FINISH: st = hier_run_finish(q, a.chunk, block); break;
        case HIER_PLAN_MEET: return hier_run_barrier(q, block);
        case HIER_PLAN_OVER: return HIER_OK;
        }
        if (st != HIER_OK) return st;
        q->ranged = 0;
        hier_plan_next(&q->plan);
    }
}

hier_status_t hier_run_advance(hier_run_req_t *q, int block, uint64_t *net_bytes_p)
{
    hier_status_t st = q->done ? HIER_OK : hier_run_go(q, block);
    if (st == HIER_IN_PROGRESS) return st;
    hier_net_exec_t *x = q->r.netx;
    if (st != HIER_OK && x) { /* a dead or stuck peer, another call: the runs are abandoned with the call */
        q->net_bytes += x->net_bytes;
        x->net_bytes = 0;
        hier_net_exec_abandon(x);
    }
    q->done = 1;
    *net_bytes_p = q->net_bytes;
    return st != HIER_OK ? st : hier_run_verdict(&q->r, &q->args, q->failed);
}

void hier_run_describe(const hier_run_req_t *q)
{
    char phases[160];
    hier_shm_phases(q->r.node, q->r.wait->nranks, phases, sizeof(phases));
    HIER_ERROR("run at step %s: chunk %zu of %zu, %zu started, steps [%zu, %zu) of the chunk left; barrier "
               "awaited: phase %llu (0: none); barrier phases by local rank:%s",
               q->done ? "over" : hier_plan_where(&q->plan), q->plan.k, q->plan.nchunks, q->plan.started, q->pos,
               q->to, (unsigned long long)q->target, phases);
    if (q->r.netx) hier_net_exec_describe(q->r.netx);
}
