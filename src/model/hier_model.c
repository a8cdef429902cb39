/* hier_model.c: the discrete-event simulation behind hier_model_predict (docs/model.md, "What it is").
 *
 * Every rank has threads of time: its main one (copies, reductions, barriers: the steps outside a chunk's
 * network run), which takes the run's plan (exec/hier_plan.h, the same iterator), and one per network run in
 * flight (sends and receives of a chunk; depth D of them). The thread with the earliest clock moves next (a
 * heap), so NICs serve shares in the order they were posted. A chunk's steps are built when its rank reaches it
 * and compacted (runs of local steps one piece of work, consecutive messages to one peer under one tag one
 * message), so a thousand-node ring fits in memory. After max_chunks chunks the rest are extrapolated from the
 * last chunk's increment (the pipeline's steady state). */
#include "model/hier_model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"
#include "base/hier_nic.h"
#include "base/hier_params.h"
#include "exec/hier_exec_ll.h"
#include "exec/hier_plan.h"
#include "model/hier_model_impl.h"
#include "sched/hier_sched_build.h"
#include "select/hier_select_chunk.h"

/* Compacts steps [from, to) onto the chunk's record list. */
static hier_status_t hier_model_compact(hier_model_sim_t *s, hier_model_chunk_t *c, const hier_step_t *st,
                                        size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        const hier_step_t *x = &st[i];
        hier_model_rec_t r = {0};
        switch (x->op) {
        case HIER_STEP_COPY: r = (hier_model_rec_t){.kind = HIER_MODEL_WORK, .cost = x->len / s->copy_Bus}; break;
        case HIER_STEP_REDUCE:
            r = (hier_model_rec_t){.kind = HIER_MODEL_WORK,
                                   .cost = (double)x->len * s->esize * x->nranks / s->reduce_Bus};
            break;
        case HIER_STEP_BARRIER: r.kind = HIER_MODEL_BARRIER; break;
        case HIER_STEP_NET_SEND:
        case HIER_STEP_NET_RECV:
            r = (hier_model_rec_t){.kind = x->op == HIER_STEP_NET_SEND ? HIER_MODEL_SEND : HIER_MODEL_RECV,
                                   .peer = x->peer, .tag = x->tag, .reduce = x->net_reduce,
                                   .bytes = x->net_reduce ? x->len * s->esize : x->len};
            break;
        case HIER_STEP_NET_NOTE_SEND: /* one-sided: only the peer-direct ring has them, which is not modelled */
        case HIER_STEP_NET_NOTE_RECV:
        case HIER_STEP_NET_WRITE:
        case HIER_STEP_NET_WRITES_WAIT: return HIER_ERR_NOT_SUPPORTED;
        }
        hier_model_rec_t *last = c->n ? &c->rec[c->n - 1] : NULL;
        if (last && last->kind == r.kind && r.kind == HIER_MODEL_WORK && c->n > c->range_start) {
            last->cost += r.cost;
            continue;
        }
        if (last && c->n > c->range_start && last->kind == r.kind && r.kind >= HIER_MODEL_SEND &&
            last->peer == r.peer && last->tag == r.tag && last->reduce == r.reduce) {
            last->bytes += r.bytes;
            continue;
        }
        if (c->n == c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 64;
            hier_model_rec_t *n = realloc(c->rec, cap * sizeof(*n));
            if (!n) return HIER_ERR_NO_MEMORY;
            c->rec = n;
            c->cap = cap;
        }
        c->rec[c->n++] = r;
    }
    c->range_start = c->n;
    return HIER_OK;
}

/* Chunk k of rank q, built and cut as the run cuts it (hier_plan_cut), each
 * part compacted on its own: at[i] .. at[i + 1] are part i's records. */
static hier_status_t hier_model_build(hier_model_sim_t *s, hier_model_rank_t *q, size_t k)
{
    hier_model_chunk_t *c = &q->chunk[k % (s->depth + 1)];
    hier_sched_args_t a = s->args;
    a.node = q->node;
    a.me = q->local;
    size_t cut[HIER_PLAN_CUTS];
    size_t n = hier_sched_build(&a, k, (int)(k % (s->depth + 1)), s->steps);
    hier_plan_cut(s->steps, n, hier_sched_is_hier(a.kind), cut);
    c->n = c->range_start = 0;
    for (int i = 0; i < HIER_PLAN_CUT_END; i++) {
        hier_status_t st = hier_model_compact(s, c, s->steps, cut[i], cut[i + 1]);
        if (st != HIER_OK) return st;
        c->at[i + 1] = c->n;
    }
    return HIER_OK;
}

/* ---- the network: shares on NICs ---- */

/* A message of `bytes` from q to participant `peer`, posted at t: cut in a
 * share per lane from half a slot (hier_chan_segment), else on the next
 * lane; each share takes the sender's NIC, then the link, then the
 * receiver's NIC. Returns when its last byte is there. */
static double hier_model_wire(hier_model_sim_t *s, hier_model_rank_t *q, int to_node, double t, size_t bytes)
{
    int lanes = s->plan.per_rank, cut = lanes > 1 && bytes >= s->slot / 2;
    int shares = cut ? lanes : 1;
    double done = t;
    for (int j = 0; j < shares; j++) {
        int lane = cut ? j : (int)(q->next_lane++ % (unsigned)lanes);
        int rail = s->plan.nic[q->local * lanes + lane];
        double *tx = &s->tx_free[q->node * s->rails + rail], *rx = &s->rx_free[to_node * s->rails + rail];
        double wire = (double)bytes / shares / s->rail_Bus;
        double start = t > *tx ? t : *tx, tx_end = start + wire;
        double rx_start = start + s->m.latency_us > *rx ? start + s->m.latency_us : *rx;
        double rx_end = rx_start + wire > tx_end + s->m.latency_us ? rx_start + wire : tx_end + s->m.latency_us;
        *tx = tx_end;
        *rx = rx_end;
        if (rx_end > done) done = rx_end;
    }
    return done;
}

/* ---- threads ---- */

/* Thread ids: a rank's main thread, then its network runs'. */
static int hier_model_tid(const hier_model_sim_t *s, int rank, int net_run)
{
    return rank * (int)(s->depth + 1) + net_run;
}

static void hier_model_wake(hier_model_sim_t *s, int id, double t)
{
    if (hier_model_heap_push(&s->heap, t, id) != HIER_OK) s->oom = 1;
}

/* The node barrier: the last rank to arrive lets every one go. */
static void hier_model_barrier(hier_model_sim_t *s, hier_model_rank_t *q)
{
    hier_model_node_t *nd = &s->nodes[q->node];
    if (q->t > nd->bar_t) nd->bar_t = q->t;
    q->blocked = 1;
    if (++nd->bar_n < s->ppn) return;
    double t = nd->bar_t + s->m.barrier_us;
    for (int l = 0; l < s->ppn; l++) {
        hier_model_rank_t *r = &s->ranks[q->node * s->ppn + l];
        r->t = t;
        r->blocked = 0;
        hier_model_wake(s, hier_model_tid(s, q->node * s->ppn + l, 0), t);
    }
    nd->bar_n = 0;
    nd->bar_t = 0;
}

/* One record of network run d; 0 when the run waits for a message. */
static int hier_model_net_step(hier_model_sim_t *s, hier_model_rank_t *q, int qi, unsigned d)
{
    hier_model_net_t *nr = &q->net[d];
    hier_model_chunk_t *c = &q->chunk[nr->k % (s->depth + 1)];
    const hier_model_rec_t *r = &c->rec[nr->pos];
    int peer_rank = (int)r->peer * s->ppn + q->local;
    if (r->kind == HIER_MODEL_SEND) {
        double at = hier_model_wire(s, q, (int)r->peer, nr->t, r->bytes);
        int waiter;
        if (hier_model_msgs_post(&s->msgs, peer_rank, qi, nr->k, r->tag, at, &waiter) != HIER_OK) return -1;
        if (waiter) { /* (the peer's run of the same chunk) */
            hier_model_net_t *w = &s->ranks[peer_rank].net[d];
            w->t = (w->t > at ? w->t : at);
            hier_model_wake(s, hier_model_tid(s, peer_rank, 1 + (int)d), w->t);
        }
        nr->t += s->m.msg_us;
    } else {
        double at;
        int got = hier_model_msgs_take(&s->msgs, qi, peer_rank, nr->k, r->tag, &at);
        if (got <= 0) return got;
        if (at > nr->t) nr->t = at;
        nr->t += s->m.msg_us + (r->reduce ? 2.0 * r->bytes / s->reduce_Bus : r->bytes / s->copy_Bus);
    }
    nr->pos++;
    return 1;
}

/* Network run d's turn. */
static hier_status_t hier_model_net_turn(hier_model_sim_t *s, int qi, unsigned d)
{
    hier_model_rank_t *q = &s->ranks[qi];
    hier_model_net_t *nr = &q->net[d];
    const hier_model_chunk_t *c = &q->chunk[nr->k % (s->depth + 1)];
    if (!nr->active) return HIER_OK;
    if (nr->pos < c->at[HIER_PLAN_CUT_TAIL]) {
        int moved = hier_model_net_step(s, q, qi, d);
        if (moved < 0) return HIER_ERR_NO_MEMORY;
        if (moved) hier_model_wake(s, hier_model_tid(s, qi, 1 + (int)d), nr->t);
        return HIER_OK;
    }
    nr->active = 0;
    if (q->main_waits_net && q->plan.k == nr->k) {
        q->main_waits_net = 0;
        if (nr->t > q->t) q->t = nr->t;
        hier_model_wake(s, hier_model_tid(s, qi, 0), q->t);
    }
    return HIER_OK;
}

static void hier_model_net_start(hier_model_sim_t *s, hier_model_rank_t *q, int qi, size_t k)
{
    unsigned d = (unsigned)(k % s->depth);
    q->net[d] = (hier_model_net_t){.k = k, .pos = q->chunk[k % (s->depth + 1)].at[HIER_PLAN_CUT_NET], .t = q->t,
                                   .active = 1};
    hier_model_wake(s, hier_model_tid(s, qi, 1 + (int)d), q->t);
}

/* ---- the main thread ---- */

static void hier_model_range(hier_model_sim_t *s, hier_model_rank_t *q, size_t k, int from, int to)
{
    q->buf = (int)(k % (s->depth + 1));
    q->pos = q->chunk[q->buf].at[from];
    q->end = q->chunk[q->buf].at[to];
}

/* The plan's action at hand, as the run takes it (hier_plan.h): 0 in
 * *go_p when the thread waits (for its network run) or is done. A chunk is
 * done when its copy out's records are. */
static hier_status_t hier_model_advance(hier_model_sim_t *s, hier_model_rank_t *q, int qi, int *go_p)
{
    hier_plan_act_t a = hier_plan_act(&q->plan);
    hier_status_t st = HIER_OK;
    *go_p = 1;
    if (q->copied_out) {
        size_t k = q->copied_out - 1;
        if (q->t > s->chunk_done[k]) s->chunk_done[k] = q->t;
        q->copied_out = 0;
    }
    switch (a.op) {
    case HIER_PLAN_BUILD: st = hier_model_build(s, q, a.chunk); break;
    case HIER_PLAN_LOCAL:
        hier_model_range(s, q, a.chunk, a.from, a.to);
        if (a.from == HIER_PLAN_CUT_TAIL) q->copied_out = a.chunk + 1;
        break;
    case HIER_PLAN_NET_START: hier_model_net_start(s, q, qi, a.chunk); break;
    case HIER_PLAN_NET_FINISH: {
        const hier_model_net_t *nr = &q->net[a.chunk % s->depth];
        if (nr->active && nr->k == a.chunk) {
            q->main_waits_net = 1;
            *go_p = 0;
            return HIER_OK;
        }
        if (nr->k == a.chunk && nr->t > q->t) q->t = nr->t;
        break;
    }
    default: /* (over; a call of no data is not modelled: its count is refused) */
        q->finished = 1;
        *go_p = 0;
        return HIER_OK;
    }
    hier_plan_next(&q->plan);
    return st;
}

/* The main thread runs until it waits: its steps touch no NIC, so no other
 * thread's order depends on it. */
static hier_status_t hier_model_main_turn(hier_model_sim_t *s, int qi)
{
    hier_model_rank_t *q = &s->ranks[qi];
    for (int go = 1; go && !q->blocked;) {
        if (q->pos < q->end) {
            const hier_model_rec_t *r = &q->chunk[q->buf].rec[q->pos++];
            if (r->kind == HIER_MODEL_WORK) {
                q->t += r->cost;
                continue;
            }
            hier_model_barrier(s, q); /* (the heap wakes this thread when it lets it go) */
            return HIER_OK;
        }
        hier_status_t st = hier_model_advance(s, q, qi, &go);
        if (st != HIER_OK) return st;
    }
    return HIER_OK;
}

/* ---- set-up ---- */

/* The call as the communicator would make it (hier_comm.c); the chunk
 * comes once the arrays are there (hier_model_predict, hier_node_tier's rule). */
static hier_status_t hier_model_shape(hier_model_sim_t *s, const hier_model_call_t *call, hier_model_result_t *out)
{
    int size = call->nodes * call->ppn;
    size_t elems = call->bytes / call->esize, block = elems / (size_t)size;
    hier_select_shape_t shape = {.size = (uint32_t)size, .nnodes = (uint32_t)call->nodes};
    if (call->nodes == 1) /* one node: its own rules (one NUMA domain, single copy available) */
        shape = (hier_select_shape_t){.size = (uint32_t)size, .nnodes = 1, .local_ranks = (uint32_t)call->ppn,
                                      .numa_groups = 1, .crowded = call->ppn > s->m.cores, .cma = 1,
                                      .cma_window = HIER_SELECT_WINDOW_NONE, /* (the segment's copies modelled) */
                                      .ll_capacity = hier_exec_ll_capacity(),
                                      .ll_top = {SIZE_MAX, SIZE_MAX, SIZE_MAX}}; /* (as hier-info shows it) */
    size_t sel_bytes = call->coll == HIER_COLL_ALLGATHER ? block * call->esize : call->bytes;
    hier_select(&shape, call->coll, sel_bytes, &out->choice);
    out->pieces = out->choice.split ? call->ppn : 1;
    hier_sched_args_t *a = &s->args;
    *a = (hier_sched_args_t){.kind = out->choice.kind, .net_kind = out->choice.net_kind,
                             .net_radix = out->choice.net_radix, .nranks = call->ppn,
                             .esize = call->esize, .count = elems, .pieces = out->pieces, .nnodes = call->nodes,
                             .chunk_cap = out->choice.chunk, .depth_cap = out->choice.depth};
    if (call->coll == HIER_COLL_ALLGATHER) {
        a->esize = 1;
        a->count = block * call->esize;
    } else if (call->coll == HIER_COLL_REDUCE_SCATTER) {
        a->count = block * (size_t)size;
    }
    return a->count ? HIER_OK : HIER_ERR_INVALID_ARG;
}

/* The arrays the shape refers to: fold order, node ranks, one NUMA domain
 * per node (a forced NUMA tree has one group), reduce_scatter's counts and
 * slices. */
static hier_status_t hier_model_arrays(hier_model_sim_t *s, int size, void **mem_p)
{
    hier_sched_args_t *a = &s->args;
    size_t P = (size_t)s->ppn, N = (size_t)s->nnodes, T = (size_t)size;
    size_t bytes = 2 * P * 4 + (N + 1) * 4 + T * 4 + 2 * T * sizeof(size_t);
    uint8_t *mem = calloc(1, bytes);
    if (!mem) return HIER_ERR_NO_MEMORY;
    /* the size_t arrays first: they need 8-byte alignment, the uint32_t ones follow */
    size_t *rcounts = (size_t *)(void *)mem, *rdispls = rcounts + T;
    uint32_t *order = (uint32_t *)(void *)(rdispls + T), *first = order + P, *ranks = first + N + 1;
    uint32_t *group_of = ranks + T; /* (every rank in group 0, zeroed) */
    for (size_t i = 0; i < P; i++) order[i] = (uint32_t)i;
    for (size_t n = 0; n <= N; n++) first[n] = (uint32_t)(n * P);
    for (size_t r = 0; r < T; r++) {
        ranks[r] = (uint32_t)r;
        rcounts[r] = a->count / T;
        rdispls[r] = r * (a->count / T);
    }
    a->order = order, a->node_first = first, a->node_ranks = ranks, a->rcounts = rcounts, a->rdispls = rdispls;
    /* (group 0: members 0 .. P - 1 = order, first {0, P} = the node's first two, leader rank 0 = order[0]) */
    a->groups = (hier_sched_groups_t){.ngroups = 1, .group_of = group_of, .leader = order, .first = first,
                                      .members = order};
    if (a->kind == HIER_SCHED_HIER_REDUCE_SCATTER &&
        hier_sched_slices_pay(hier_params.net_chunk_size / a->esize, s->ppn, size, s->nnodes, 0) &&
        !(a->rs_slices = hier_sched_slices_new(s->ppn, size, s->nnodes))) {
        free(mem);
        return HIER_ERR_NO_MEMORY;
    }
    *mem_p = mem;
    return HIER_OK;
}

static hier_status_t hier_model_alloc(hier_model_sim_t *s, int size)
{
    size_t nr = (size_t)s->nnodes * (size_t)s->rails;
    s->ranks = calloc((size_t)size, sizeof(*s->ranks));
    s->nodes = calloc((size_t)s->nnodes, sizeof(*s->nodes));
    s->tx_free = calloc(nr, sizeof(double));
    s->rx_free = calloc(nr, sizeof(double));
    s->chunk_done = calloc(s->simulate, sizeof(double));
    s->steps = malloc(hier_sched_max_steps(&s->args) * sizeof(hier_step_t));
    if (!s->ranks || !s->nodes || !s->tx_free || !s->rx_free || !s->chunk_done || !s->steps)
        return HIER_ERR_NO_MEMORY;
    hier_nic_problem_t p = {.nnics = s->rails, .nranks = s->ppn, .max_per_rank = (int)hier_params.fabric_rails_max};
    int *numa = malloc(((size_t)s->rails + (size_t)s->ppn) * sizeof(int));
    if (!numa) return HIER_ERR_NO_MEMORY;
    for (int i = 0; i < s->rails + s->ppn; i++) numa[i] = -1;
    p.nic_numa = numa;
    p.rank_numa = numa + s->rails;
    hier_status_t st = hier_nic_assign(&p, &s->plan);
    free(numa);
    for (int r = 0; r < size; r++) {
        s->ranks[r] = (hier_model_rank_t){.node = r / s->ppn, .local = r % s->ppn};
        hier_plan_begin(&s->ranks[r].plan, s->simulate, s->depth);
    }
    return st;
}

static void hier_model_free(hier_model_sim_t *s, int size)
{
    for (int r = 0; s->ranks && r < size; r++) {
        for (unsigned i = 0; i <= HIER_RUN_DEPTH_MAX; i++) free(s->ranks[r].chunk[i].rec);
    }
    free(s->ranks);
    free(s->nodes);
    free(s->tx_free);
    free(s->rx_free);
    free(s->chunk_done);
    free(s->steps);
    free(s->args.rs_slices);
    if (s->plan.nic) hier_nic_plan_free(&s->plan);
    hier_model_heap_free(&s->heap);
    hier_model_msgs_free(&s->msgs);
}

/* The low-latency path (hier_exec_ll.c) runs no schedule: every rank
 * writes its input beside its flag, waits for everyone's (a barrier's
 * worth), and reads what it needs: all of every input for allreduce (each
 * rank reduces the whole vector), the other blocks for allgather, its own
 * block of every input for reduce_scatter. */
static double hier_model_ll(const hier_model_sim_t *s, const hier_model_call_t *call)
{
    double bytes = (double)call->bytes, P = call->ppn;
    switch (call->coll) {
    case HIER_COLL_ALLREDUCE: return bytes / s->copy_Bus + s->m.barrier_us + P * bytes / s->reduce_Bus;
    case HIER_COLL_ALLGATHER: return bytes / P / s->copy_Bus + s->m.barrier_us + (P - 1) * bytes / P / s->copy_Bus;
    default: return bytes / s->copy_Bus + s->m.barrier_us + bytes / s->reduce_Bus;
    }
}

/* Every thread until none can move; a rank left unfinished is a schedule
 * whose messages do not match (a bug of a builder, reported). */
static hier_status_t hier_model_run(hier_model_sim_t *s, int size)
{
    hier_status_t st = HIER_OK;
    int per = (int)s->depth + 1;
    for (int r = 0; r < size && st == HIER_OK; r++) st = hier_model_heap_push(&s->heap, 0.0, hier_model_tid(s, r, 0));
    double t;
    int id;
    while (st == HIER_OK && hier_model_heap_pop(&s->heap, &t, &id)) {
        st = id % per ? hier_model_net_turn(s, id / per, (unsigned)(id % per - 1)) : hier_model_main_turn(s, id / per);
        if (s->oom) st = HIER_ERR_NO_MEMORY;
    }
    for (int r = 0; r < size && st == HIER_OK; r++)
        if (!s->ranks[r].finished) {
            HIER_ERROR("model: rank %d stopped in chunk %zu (step %s): its schedule waits for a message "
                       "nobody sends", r, s->ranks[r].plan.k, hier_plan_where(&s->ranks[r].plan));
            st = HIER_ERR_INTERNAL;
        }
    return st;
}

hier_status_t hier_model_predict(const hier_model_machine_t *m, const hier_model_call_t *call,
                                 hier_model_result_t *out_p)
{
    hier_model_result_t out = {0};
    hier_model_sim_t s = {.m = *m, .nnodes = call->nodes, .ppn = call->ppn, .rails = m->rails};
    int64_t ranks = (int64_t)call->nodes * call->ppn;
    if (call->nodes < 1 || call->ppn < 1 || call->esize == 0 || ranks >= HIER_MODEL_MAX_RANKS ||
        2 * call->nodes + 2 > HIER_MODEL_MAX_TAG || m->rails < 1)
        return HIER_ERR_INVALID_ARG;
    int size = (int)ranks;
    hier_status_t st = hier_model_shape(&s, call, &out);
    if (st != HIER_OK) return st;
    void *arrays = NULL;
    if ((st = hier_model_arrays(&s, size, &arrays)) != HIER_OK) return st;
    s.args.chunk_bytes = hier_select_chunk(&s.args, hier_select_small_chunk(call->ppn),
                                                hier_select_pipe_chunk(call->nodes));
    if (!s.args.chunk_bytes) {
        free(s.args.rs_slices);
        free(arrays);
        return HIER_ERR_INVALID_ARG;
    }
    /* a rank's share of the node's memory bandwidth, and of a core when crowded */
    double core = call->ppn > m->cores ? (double)m->cores / call->ppn : 1.0;
    double node = m->node_copy_gbs / call->ppn;
    s.copy_Bus = 1e3 * fmin(m->copy_gbs * core, node);
    s.reduce_Bus = 1e3 * fmin(m->reduce_gbs * core, node);
    /* a node's inputs, outputs and pipeline segment all in its cache (a call repeated, as benchmarks and
     * training steps do): the cache's rates */
    double footprint = (double)call->ppn * (2.0 * (double)call->bytes + 2.0 * (double)s.args.chunk_bytes);
    if (m->cache_mb > 0 && footprint <= m->cache_mb * 1048576.0) {
        s.copy_Bus = 1e3 * m->cache_copy_gbs * core;
        s.reduce_Bus = 1e3 * m->cache_reduce_gbs * core;
    }
    s.rail_Bus = m->rail_gbps * 1e3 / 8.0;
    s.esize = s.args.esize;
    s.slot = hier_params.fabric_slot_size;
    if (out.choice.path == HIER_PATH_SHM_LL) { /* no schedule: hier_model_ll */
        out.time_us = hier_model_ll(&s, call);
        free(s.args.rs_slices);
        free(arrays);
        *out_p = out;
        return HIER_OK;
    }
    out.chunk_bytes = s.args.chunk_bytes;
    out.nchunks = hier_sched_nchunks(&s.args);
    /* the depth hier_node_prep gives the call: the pipeline segment's (its pipeline buffers less one, fewer for
     * very long chunk schedules); the small slots carry one chunk at a time */
    s.depth = s.args.chunk_bytes == hier_select_small_chunk(call->ppn)
                  ? 1
                  : hier_select_call_depth(hier_select_pipe_depth(call->nodes, m->provider), &s.args);
    out.depth = s.depth;
    /* (enough chunks for the pipeline's steady state past its fill, and two groups before its drain) */
    size_t most = call->max_chunks > 0 ? (size_t)call->max_chunks : 2 + 4 * (size_t)s.depth;
    s.simulate = out.nchunks < most ? out.nchunks : most;
    if ((st = hier_model_alloc(&s, size)) == HIER_OK && (st = hier_model_run(&s, size)) == HIER_OK) {
        /* once the pipeline is full, chunks end in groups of depth; the last group drains faster
         * (nothing behind it): the steady increment is the group's before it (against whole simulations of
         * 64 chunks, 2, 16 and 128 nodes x 8, depth 1-4, every collective: within 1.1% in 35 of 36, the
         * allgather on 16 nodes at depth 2 8% short) */
        size_t S = s.simulate, D = s.depth, to = S > 2 * D ? S - 1 - D : S - 1, back = S > 2 * D ? D : S - 1;
        double last = s.chunk_done[S - 1];
        double step = back ? (s.chunk_done[to] - s.chunk_done[to - back]) / (double)back : last;
        for (int r = 0; r < size; r++) last = fmax(last, s.ranks[r].t);
        out.time_us = last + (double)(out.nchunks - S) * step;
        out.simulated = S;
    }
    hier_model_free(&s, size);
    free(arrays);
    if (st == HIER_OK) *out_p = out;
    return st;
}
