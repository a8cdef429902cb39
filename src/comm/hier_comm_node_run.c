/* hier_comm_node_run.c: a schedule's run over the node level: the tier
 * (small slots or pipeline segment) and memory for its steps, single copy,
 * the run prepared and its verdict (hier_comm_node.h). */
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_node.h"
#include "exec/hier_run.h"
#include "sched/hier_sched_build.h"
#include "select/hier_select_chunk.h"
#include "shm/hier_cma.h"

/* Single copy: every rank reads its peers' probe words (cross-memory
 * attach needs ptrace-level permission); agreed once, at the first call
 * that would use it. */
int hier_node_cma_reads(const hier_comm_t *c)
{
    const hier_node_t *nd = c->node;
    int ok = 1;
    for (int i = 1; ok && i < c->layout.nranks; i++) {
        const hier_shm_ctl_t *peer = hier_shm_ctl(nd->small.seg, (c->layout.me + i) % c->layout.nranks);
        ok = hier_cma_probe(peer->pid, peer->cma_probe_addr, peer->cma_cookie) == HIER_OK;
    }
    return ok;
}

int hier_node_cma(hier_comm_t *c)
{
    hier_node_t *nd = c->node;
    if (nd->cma >= 0) return nd->cma;
    int ok[4] = {hier_node_cma_reads(c)};
    hier_status_t st = hier_node_agree(c, ok, 1);
    if (st != HIER_OK) return st;
    nd->cma = ok[0];
    return ok[0];
}

/* Single copy: read another rank's published buffer through the kernel. */
static hier_status_t hier_node_peer_read(void *ctx, hier_ref_t ref, void *dst, size_t len)
{
    hier_node_t *nd = ctx;
    const hier_shm_ctl_t *peer = hier_shm_ctl(nd->small.seg, (int)ref.rank);
    return hier_cma_read(peer->pid, peer->input_addr + ref.off, dst, len);
}

/* Memory for a chunk's steps (several nodes: as many sends in the network
 * executor's queue) and for the next chunk's when there are several: made
 * at set-up for the kinds that fit HIER_NODE_STEPS_AHEAD, grown here for
 * the others. The need depends on the call's shape alone, the same on every
 * rank, so all grow at the same call and agree that it worked. In-place
 * calls' staging is tried once, agreed with nobody: without it this rank's
 * executor stages on its stack. */
/* Step arrays made (the first `ways` of nd->steps). */
static unsigned hier_node_ways(const hier_node_t *nd)
{
    unsigned w = 0;
    while (w <= HIER_RUN_DEPTH_MAX && nd->steps[w]) w++;
    return w;
}

/* Memory for the steps of args run `depth` chunks in flight, made here (this
 * rank's memory: 1 if it has it): a step array per chunk a run holds at
 * once, min(chunks, depth + 1), and (several nodes) a send queue per run
 * in flight. */
static int hier_node_steps_grow(hier_comm_t *c, const hier_sched_args_t *args, unsigned depth, size_t *need_p)
{
    hier_node_t *nd = c->node;
    size_t need = hier_sched_max_steps(args), nchunks = hier_sched_nchunks(args);
    unsigned ways = nchunks > depth ? depth + 1 : nchunks > 1 ? (unsigned)nchunks : 1;
    unsigned queues = c->layout.nnodes > 1 ? depth : 0;
    if (args->in_place && !nd->scratch_tried) {
        nd->scratch = malloc(HIER_EXEC_SCRATCH_BYTES);
        nd->scratch_tried = 1;
    }
    *need_p = need > nd->nsteps ? need : nd->nsteps;
    if (need <= nd->nsteps && hier_node_ways(nd) >= ways && nd->nqueues >= queues) return -1; /* (enough) */
    hier_node_cache_clear(nd); /* (what it decided assumed the memory as it was) */
    if (need > nd->nsteps) {
        for (unsigned i = 0; i <= HIER_RUN_DEPTH_MAX; i++) {
            free(nd->steps[i]);
            nd->steps[i] = NULL;
        }
        free(nd->sendq);
        nd->sendq = NULL;
        nd->nqueues = 0;
        nd->steps[0] = malloc(need * sizeof(hier_step_t));
    } else {
        need = nd->nsteps;
    }
    if (nd->nqueues < queues) { /* (nothing in them between calls) */
        free(nd->sendq);
        nd->sendq = malloc(need * queues * sizeof(hier_net_send_t));
        nd->nqueues = nd->sendq ? queues : 0;
    }
    int ok = nd->steps[0] && nd->nqueues >= queues;
    for (unsigned i = 1; ok && i < ways; i++)
        if (!nd->steps[i] && !(nd->steps[i] = malloc(need * sizeof(hier_step_t)))) ok = 0;
    nd->nsteps = ok ? need : 0;
    return ok;
}

/* Memory reserved when first needed, agreed: every rank has it, or the call
 * fails on every rank. */
static hier_status_t hier_node_steps_reserve(hier_comm_t *c, const hier_sched_args_t *args, unsigned depth)
{
    size_t need;
    int ok[4] = {hier_node_steps_grow(c, args, depth, &need)};
    if (ok[0] < 0) return HIER_OK;
    hier_status_t st = hier_node_agree(c, ok, 1);
    if (st != HIER_OK || !ok[0]) c->node->nsteps = 0;
    if (st != HIER_OK) return st;
    if (!ok[0]) HIER_ERROR("rank %d: no memory for %zu schedule steps on some rank", c->rank, need);
    return ok[0] ? HIER_OK : HIER_ERR_NO_MEMORY;
}

/* The node's fields of a schedule's arguments. */
static void hier_node_args(const hier_comm_t *c, hier_sched_args_t *args)
{
    const hier_node_t *nd = c->node;
    const hier_layout_t *l = &c->layout;
    args->nranks = l->nranks;
    args->me = l->me;
    args->order = nd->order;
    args->groups = (hier_sched_groups_t){.ngroups = nd->groups.ngroups, .group_of = nd->groups.group_of,
                                         .leader = nd->groups.leader, .first = nd->groups.first,
                                         .members = nd->groups.members};
    args->node = l->node;
    args->nnodes = l->nnodes;
    args->node_first = l->node_first;
    args->node_ranks = l->node_ranks;
}

int hier_node_wants_pipe(const hier_comm_t *c, const hier_sched_args_t *args)
{
    return c->node->pipe_state == HIER_PIPE_NONE && !hier_select_small_serves(args, hier_node_small_for_comm(c));
}

/* The small slots serve every call they hold in one chunk; larger ones
 * the pipeline segment, made when first needed (every rank comes to the
 * same decision: it depends on the call's shape only). */
static hier_status_t hier_node_tier(hier_comm_t *c, hier_sched_args_t *args, hier_tier_t **tier_p)
{
    hier_node_t *nd = c->node;
    size_t small = hier_node_small_for_comm(c), chunk = small;
    if (!hier_select_small_serves(args, small)) {
        hier_status_t st = nd->pipe_state == HIER_PIPE_NONE ? hier_node_pipe_setup(c, 0) : HIER_OK;
        if (st != HIER_OK) return st;
        chunk = hier_select_chunk_past_small(args, small, nd->pipe_state == HIER_PIPE_READY ? nd->pipe_chunk : 0);
    }
    if (!chunk) return HIER_ERR_NOT_SUPPORTED;
    args->chunk_bytes = chunk;
    *tier_p = chunk == small ? &nd->small : &nd->pipe;
    return HIER_OK;
}

/* hier_node_tier's choice without its collective step: without the
 * pipeline segment yet, a large call pipelines through the small slots
 * (every rank alike: the segment is the communicator's state). */
hier_status_t hier_node_fit(hier_comm_t *c, hier_sched_args_t *args)
{
    hier_node_t *nd = c->node;
    hier_node_args(c, args);
    size_t chunk = hier_select_chunk(args, hier_node_small_for_comm(c),
                                          nd->pipe_state == HIER_PIPE_READY ? nd->pipe_chunk : 0);
    if (!chunk) return nd->pipe_state == HIER_PIPE_NONE ? HIER_NOT_READY : HIER_ERR_NOT_SUPPORTED;
    args->chunk_bytes = chunk;
    return HIER_OK;
}

/* hier_node_tier and hier_node_steps_reserve without their collective steps, for a
 * request: the memory is reserved here alone (a rank without the memory fails its
 * call with the error). HIER_NOT_READY: a call the small slots cannot
 * carry before the segment is made. */
static hier_status_t hier_node_tier_now(hier_comm_t *c, hier_sched_args_t *args, hier_tier_t **tier_p)
{
    hier_node_t *nd = c->node;
    size_t need;
    hier_status_t st = hier_node_fit(c, args);
    if (st != HIER_OK) return st;
    hier_tier_t *tier = args->chunk_bytes == hier_node_small_for_comm(c) ? &nd->small : &nd->pipe;
    if (!hier_node_steps_grow(c, args, hier_select_call_depth(hier_node_tier_depth(tier), args), &need)) {
        HIER_ERROR("rank %d: no memory for %zu schedule steps", c->rank, need);
        return HIER_ERR_NO_MEMORY;
    }
    *tier_p = tier;
    return HIER_OK;
}

/* The run's fields over the tier chosen (several nodes: the network executor, set at the decision, and the
 * tier's registration). */
static inline void hier_node_run_fill(hier_comm_t *c, hier_tier_t *tier, unsigned depth, hier_run_t *run_p)
{
    hier_node_t *nd = c->node;
    int net = c->layout.nnodes > 1;
    hier_fabric_mr_t *mr = net && c->net->fabric ? tier->mr : NULL; /* (the point-to-point copies) */
    *run_p = (hier_run_t){.node = nd->small.seg, .wait = &nd->wait, .slots = tier->slots,
                          .buf_stride = hier_shm_buf_stride(tier->seg), .scratch = nd->scratch,
                          .peer_read = hier_node_peer_read, .peer_ctx = nd, .netx = net ? &c->net->netx : NULL,
                          .mr = mr, .mr_base = mr ? tier->slots[c->layout.me] : NULL,
                          .mr_len = mr ? hier_tier_bytes(tier) : 0, .depth = depth, .chunk_seq = &tier->chunk_seq};
    memcpy(run_p->steps, nd->steps, sizeof(run_p->steps));
}

/* The tier and depth of a run of args (its node fields and chunk filled in), made or reserved as hier_node_prep
 * says. */
static hier_status_t hier_node_decide(hier_comm_t *c, hier_sched_args_t *args, int no_wait, hier_tier_t **tier_p,
                                      unsigned *depth_p)
{
    hier_tier_t *tier;
    hier_node_args(c, args);
    hier_status_t st = no_wait ? hier_node_tier_now(c, args, &tier) : hier_node_tier(c, args, &tier);
    unsigned depth = st == HIER_OK ? hier_select_call_depth(hier_node_tier_depth(tier), args) : 1;
    if (st == HIER_OK && !no_wait) st = hier_node_steps_reserve(c, args, depth);
    if (st != HIER_OK) return st;
    if (c->layout.nnodes > 1) {
        hier_net_tier_register(c, tier);
        hier_net_exec_set(c);
    }
    *tier_p = tier;
    *depth_p = depth;
    return HIER_OK;
}

hier_status_t hier_node_prep(hier_comm_t *c, hier_sched_args_t *args, int no_wait, hier_run_t *run_p)
{
    hier_tier_t *tier;
    unsigned depth;
    hier_status_t st = hier_node_decide(c, args, no_wait, &tier, &depth);
    if (st == HIER_OK) hier_node_run_fill(c, tier, depth, run_p);
    return st;
}

hier_status_t hier_node_ran(hier_comm_t *c, hier_status_t st)
{
    /* after its last barrier (a call of no data has one) every peer has signed this call */
    if (st != HIER_OK) return st;
    return hier_shm_check_peers(c->node->small.seg, &c->node->wait);
}

/* ---- the blocking calls' shapes, cached ---- */
/* What a blocking call's run is decided from, beyond the communicator's layout (a reduce_scatter's counts apart),
 * after its decision (the pipeline segment's state as it left it). */
static inline void hier_node_key(const hier_comm_t *c, const hier_sched_args_t *a, uint64_t key[HIER_NODE_KEY_WORDS])
{
    const uint64_t k[HIER_NODE_KEY_WORDS] = {
        (uint64_t)a->kind + 1, a->net_kind, (uint64_t)a->net_radix, a->esize, a->count, a->in_place,
        (uint64_t)a->pieces, a->chunk_cap, a->depth_cap, c->node->pipe_state, (uint64_t)(uintptr_t)a->rs_slices};
    memcpy(key, k, sizeof(k));
}

/* The counts a schedule of this kind reads (a reduce_scatter's, by local rank on one node and by communicator rank
 * between nodes): part of its shape. 0: none, whatever args->rcounts points to. */
static size_t hier_node_ncounts(const hier_comm_t *c, const hier_sched_args_t *a)
{
    return a->kind == HIER_SCHED_REDUCE_SCATTER ? (size_t)a->nranks
           : a->kind == HIER_SCHED_HIER_REDUCE_SCATTER ? (size_t)c->size
                                                        : 0;
}

static hier_node_cached_t *hier_node_cache_find(hier_comm_t *c, const hier_sched_args_t *a,
                                                const uint64_t key[HIER_NODE_KEY_WORDS])
{
    size_t n = hier_node_ncounts(c, a);
    for (unsigned i = 0; i < HIER_NODE_CACHED; i++) {
        hier_node_cached_t *e = &c->node->cached[i];
        if (memcmp(e->key, key, sizeof(e->key))) continue; /* (the kind is in the key: n counts kept) */
        if (!n || !memcmp(e->rcounts, a->rcounts, n * sizeof(size_t))) return e;
    }
    return NULL;
}

/* The shape just decided, cached over the oldest entry (NULL: no memory for its counts; nothing cached). */
static hier_node_cached_t *hier_node_cache_add(hier_comm_t *c, const hier_sched_args_t *a, hier_tier_t *tier,
                                               unsigned depth)
{
    hier_node_t *nd = c->node;
    hier_node_cached_t *e = &nd->cached[nd->cached_next++ % HIER_NODE_CACHED];
    hier_node_cached_drop(e);
    size_t n = hier_node_ncounts(c, a), *rcounts = NULL;
    if (n && !(rcounts = malloc(n * sizeof(size_t)))) return NULL;
    if (n) memcpy(rcounts, a->rcounts, n * sizeof(size_t));
    *e = (hier_node_cached_t){.rcounts = rcounts, .tier = tier, .chunk_bytes = a->chunk_bytes, .depth = depth,
                              .run = {.nchunks = hier_sched_nchunks(a)}};
    hier_node_key(c, a, e->key);
    return e;
}

/* A shape seen before takes its decision from the cache (no collective step: a rank that missed it, its copy of
 * the counts not made, decides the same without one, its tiers and memory as they were); a new one is decided and
 * cached. */
hier_status_t hier_node_run(hier_comm_t *c, hier_sched_args_t *args, const void *sbuf, void *rbuf,
                            hier_reduce_kernel_t kernel, uint64_t *net_bytes_p)
{
    uint64_t key[HIER_NODE_KEY_WORDS];
    hier_tier_t *tier;
    unsigned depth;
    hier_run_t run;
    hier_run_req_t q;
    uint64_t sent = 0;
    hier_status_t st = HIER_OK;
    hier_node_args(c, args);
    hier_node_key(c, args, key);
    hier_node_cached_t *e = hier_node_cache_find(c, args, key);
    if (e) {
        args->chunk_bytes = e->chunk_bytes;
        tier = e->tier;
        depth = e->depth;
    } else if ((st = hier_node_decide(c, args, 0, &tier, &depth)) == HIER_OK) {
        e = hier_node_cache_add(c, args, tier, depth);
    }
    if (st != HIER_OK) return st;
    hier_node_run_fill(c, tier, depth, &run);
    run.cache = e ? &e->run : NULL;
    hier_run_begin(&q, &run, args, sbuf, rbuf, kernel);
    st = hier_run_advance(&q, 1, &sent);
    *net_bytes_p += sent; /* (a staged call's chunks add up) */
    return hier_node_ran(c, st);
}
