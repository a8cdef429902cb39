/* Several nodes in one process: each node's ranks share simulated slots and
 * meet at node barriers, ranks of the same local index exchange messages
 * across nodes. Steps of all ranks are interleaved at random within what
 * barriers and message arrival allow; no rank able to move before all are
 * done is a deadlock. Sweeps nodes x ranks per node (uneven too) x counts x
 * chunk sizes x in place x inter-node algorithm, and layouts far past any
 * fixed limit (1,024 nodes x 8 ranks) with small payloads.
 *
 * Small layouts interleave one step at a time and keep every rank's chunk
 * program. Large ones ("bursts") run a picked rank until it blocks and then
 * drop its program, rebuilding it (builders are pure) when it resumes: only
 * one program exists at a time, however many ranks there are. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "exec/hier_exec.h"
#include "exec/hier_reduce.h"
#include "sched/hier_sched_build.h"
#include "sched/hier_sched_hier.h"

typedef struct msg {
    struct msg *next;
    int from;
    uint32_t tag;
    size_t len;
    uint8_t data[];
} msg_t;

enum { RK_RUN, RK_BARRIER, RK_WAIT, RK_DONE };

typedef struct {
    int node, local, grank, state, slot_in_runnable;
    hier_sched_args_t args;
    hier_step_t *steps;   /* the current chunk's program, or NULL (bursts: rebuilt on resume) */
    size_t n, pos, chunk, nchunks, cap;
    hier_sched_slices_t *slices; /* its rs_slices */
    uint8_t *sb, *rb;
    msg_t *inbox, **inbox_tail; /* messages from any node, in arrival order */
} rk_t;

typedef struct {
    hier_sched_kind_t kind;
    int nnodes;
    const int *nlocal;
    size_t count;   /* allreduce: elements; allgather: bytes per block; reduce_scatter: elements in all */
    size_t chunk;
    int in_place, net_kind, dbl, round_robin;
    int sliced; /* reduce_scatter: chunks as slices of every rank's block (rs_slices) */
    int pieces;     /* 0: the fewest ranks any node has (the split path); 1: one owner per node */
    int bursts;
    int radix;      /* rabenseifner's radix_max (0: 2) */
} layout_t;

typedef struct {
    const layout_t *L;
    rk_t *rk;
    int total, *node_base, *arrived, *runnable, nrunnable;
    uint8_t ***slots;        /* [node][local] */
    uint32_t *node_first, *node_ranks, *order;
    size_t *rcounts, *rdispls, es, steps_run;
    hier_step_t *scratch;    /* bursts: the one program that exists, rebuilt for each rank that runs */
    size_t scratch_cap;
    hier_reduce_kernel_t k;
    uint8_t fold[HIER_EXEC_SCRATCH_BYTES]; /* the executor's scratch */
} sim_t;

static int64_t val(int grank, size_t i)
{
    return (int64_t)(grank + 1) * 1000003 + (int64_t)i;
}

static uint8_t byte_of(int grank, size_t i)
{
    return (uint8_t)(grank * 37 + i * 11 + 1);
}

/* Reduce_scatter: what communicator rank r receives (some get nothing). */
static size_t rs_count(int r, size_t total, int nranks)
{
    return r % 3 == 1 ? 0 : total / (size_t)nranks + (size_t)(r % 2);
}

static void runnable_add(sim_t *s, int i)
{
    s->rk[i].slot_in_runnable = s->nrunnable;
    s->runnable[s->nrunnable++] = i;
}

static void runnable_remove(sim_t *s, int i)
{
    int at = s->rk[i].slot_in_runnable, last = s->runnable[--s->nrunnable];
    s->runnable[at] = last;
    s->rk[last].slot_in_runnable = at;
    s->rk[i].slot_in_runnable = -1;
}

/* The program of rank i's current chunk, built if it is not there. */
static void program(sim_t *s, rk_t *r)
{
    size_t cap = r->cap;
    if (r->steps) return;
    if (!s->L->bursts) {
        r->steps = malloc(cap * sizeof(*r->steps));
    } else {
        if (cap > s->scratch_cap) {
            free(s->scratch);
            s->scratch = malloc(cap * sizeof(*s->scratch));
            s->scratch_cap = cap;
        }
        r->steps = s->scratch;
    }
    r->n = hier_sched_build(&r->args, r->chunk, (int)(r->chunk & 1), r->steps);
    cr_assert_leq(r->n, cap);
}

static void drop_program(sim_t *s, rk_t *r)
{
    if (!s->L->bursts) free(r->steps);
    r->steps = NULL;
}

/* The first message from `from` in rank r's inbox, unlinked, or NULL. */
static msg_t *take(rk_t *r, int from)
{
    for (msg_t **pp = &r->inbox; *pp; pp = &(*pp)->next)
        if ((*pp)->from == from) {
            msg_t *m = *pp;
            *pp = m->next;
            if (!*pp) r->inbox_tail = pp;
            return m;
        }
    return NULL;
}

/* One step of rank i; 0 when it blocked (barrier not complete, message not there) or finished. */
static int step(sim_t *s, int i)
{
    rk_t *r = &s->rk[i];
    if (r->pos == r->n && r->steps) { /* chunk over: the next one, or done */
        drop_program(s, r);
        r->pos = 0;
        if (++r->chunk >= r->nchunks) {
            r->state = RK_DONE;
            runnable_remove(s, i);
            return 0;
        }
    }
    program(s, r);
    if (r->pos == r->n) return 1; /* an empty chunk */
    const hier_step_t *st = &r->steps[r->pos];
    hier_exec_bufs_t bufs = {.sbuf = r->sb, .rbuf = r->rb, .slots = s->slots[r->node], .buf_stride = s->L->chunk,
                             .esize = s->es, .kernel = s->k, .scratch = s->fold};
    s->steps_run++;
    if (st->op == HIER_STEP_BARRIER) {
        r->state = RK_BARRIER;
        runnable_remove(s, i);
        if (++s->arrived[r->node] < s->L->nlocal[r->node]) return 0;
        s->arrived[r->node] = 0;
        for (int l = 0; l < s->L->nlocal[r->node]; l++) {
            rk_t *q = &s->rk[s->node_base[r->node] + l];
            q->state = RK_RUN;
            q->pos++;
            runnable_add(s, s->node_base[r->node] + l);
        }
        return 0;
    }
    if (st->op == HIER_STEP_NET_SEND) {
        int to = s->node_base[st->peer] + r->local;
        cr_assert_lt(r->local, s->L->nlocal[st->peer], "send to a rank that does not exist");
        msg_t *m = malloc(sizeof(*m) + st->len);
        *m = (msg_t){.from = r->node, .tag = st->tag, .len = st->len};
        memcpy(m->data, hier_exec_ref(&bufs, st->src), st->len);
        rk_t *q = &s->rk[to];
        *q->inbox_tail = m;
        q->inbox_tail = &m->next;
        if (q->state == RK_WAIT) {
            q->state = RK_RUN;
            runnable_add(s, to);
        }
        r->pos++;
        return 1;
    }
    if (st->op == HIER_STEP_NET_RECV) {
        msg_t *m = take(r, (int)st->peer);
        if (!m) {
            r->state = RK_WAIT;
            runnable_remove(s, i);
            return 0;
        }
        size_t bytes = st->net_reduce ? st->len * s->es : st->len;
        cr_assert_eq(m->tag, st->tag, "node %d rank %d: message tag %u from node %u, %u expected", r->node, r->local,
                     m->tag, st->peer, st->tag);
        cr_assert_eq(m->len, bytes, "node %d rank %d: %zu bytes arrived, %zu expected", r->node, r->local, m->len,
                     bytes);
        if (st->net_reduce) s->k.acc(hier_exec_ref(&bufs, st->dst), m->data, st->len);
        else memcpy(hier_exec_ref(&bufs, st->dst), m->data, bytes);
        free(m);
        r->pos++;
        return 1;
    }
    cr_assert_eq(hier_exec_step(&bufs, st), HIER_OK);
    r->pos++;
    return 1;
}

static void set_up(sim_t *s, const layout_t *L)
{
    int nn = L->nnodes, g = 0, pieces = L->pieces, most_pieces = L->nlocal[0];
    memset(s, 0, sizeof(*s));
    s->L = L;
    cr_assert_eq(hier_reduce_kernel_get(L->dbl ? HIER_DT_DOUBLE : HIER_DT_INT64, HIER_OP_SUM, &s->k), HIER_OK);
    for (int n = 0; n < nn; n++) g += L->nlocal[n];
    for (int n = 0; n < nn; n++) most_pieces = L->nlocal[n] < most_pieces ? L->nlocal[n] : most_pieces;
    if (!pieces) {
        pieces = L->nlocal[0];
        for (int n = 0; n < nn; n++) pieces = L->nlocal[n] < pieces ? L->nlocal[n] : pieces;
    }
    s->total = g;
    s->rk = calloc((size_t)g, sizeof(*s->rk));
    s->node_base = calloc((size_t)nn, sizeof(int));
    s->arrived = calloc((size_t)nn, sizeof(int));
    s->runnable = calloc((size_t)g, sizeof(int));
    s->slots = calloc((size_t)nn, sizeof(*s->slots));
    s->node_first = calloc((size_t)nn + 1, sizeof(uint32_t));
    s->node_ranks = calloc((size_t)g, sizeof(uint32_t));
    s->order = calloc((size_t)g, sizeof(uint32_t));
    s->rcounts = calloc((size_t)g, sizeof(size_t));
    s->rdispls = calloc((size_t)g, sizeof(size_t));
    for (int r = 0; r < g; r++) s->order[r] = (uint32_t)r;
    /* communicator ranks: node by node, or dealt round-robin across nodes */
    for (int n = 0, i = 0; n < nn; n++) {
        s->node_base[n] = i;
        s->slots[n] = calloc((size_t)L->nlocal[n], sizeof(uint8_t *));
        i += L->nlocal[n];
    }
    for (int n = 0, r = 0; !L->round_robin && n < nn; n++)
        for (int l = 0; l < L->nlocal[n]; l++) s->rk[s->node_base[n] + l].grank = r++;
    for (int l = 0, r = 0; L->round_robin && r < g; l++)
        for (int n = 0; n < nn; n++)
            if (l < L->nlocal[n]) s->rk[s->node_base[n] + l].grank = r++;
    for (int n = 0, i = 0; n < nn; n++) {
        s->node_first[n] = (uint32_t)i;
        for (int l = 0; l < L->nlocal[n]; l++) s->node_ranks[i++] = (uint32_t)s->rk[s->node_base[n] + l].grank;
        s->node_first[n + 1] = (uint32_t)i;
    }
    size_t total = 0;
    for (int r = 0; r < g; r++) {
        s->rcounts[r] = rs_count(r, L->count, g);
        s->rdispls[r] = total;
        total += s->rcounts[r];
    }
    int ag = L->kind == HIER_SCHED_HIER_ALLGATHER, rs = L->kind == HIER_SCHED_HIER_REDUCE_SCATTER;
    s->es = ag ? 1 : 8;
    size_t in_elems = rs ? total : L->count, out_bytes = ag ? L->count * (size_t)g : in_elems * s->es;
    size_t rs_most = 0; /* not in place, a reduce_scatter's result is only what the rank receives */
    for (int r = 0; rs && r < g; r++) rs_most = s->rcounts[r] > rs_most ? s->rcounts[r] : rs_most;
    if (rs && !L->in_place) out_bytes = rs_most * s->es;
    for (int n = 0; n < nn; n++)
        for (int l = 0; l < L->nlocal[n]; l++) {
            rk_t *q = &s->rk[s->node_base[n] + l];
            int r = q->grank;
            q->node = n, q->local = l;
            q->inbox_tail = &q->inbox;
            q->sb = malloc(in_elems * s->es + 8);
            q->rb = malloc(out_bytes + 8);
            memset(q->rb, 0xEE, out_bytes + 8);
            s->slots[n][l] = malloc(2 * L->chunk);
            memset(s->slots[n][l], 0xA5, 2 * L->chunk);
            if (ag) {
                uint8_t *dst = L->in_place ? q->rb + (size_t)r * L->count : q->sb;
                for (size_t i = 0; i < L->count; i++) dst[i] = byte_of(r, i);
            }
            for (size_t i = 0; !ag && i < in_elems; i++) {
                uint8_t *dst = (L->in_place ? q->rb : q->sb) + i * 8;
                if (L->dbl) *(double *)dst = 1.0 / (r + 3) + (double)i * 0.1;
                else *(int64_t *)dst = val(r, i);
            }
            q->slices = hier_sched_slices_new(pieces, g, nn);
            q->args = (hier_sched_args_t){.kind = L->kind, .nranks = L->nlocal[n], .me = l, .esize = s->es,
                                          .count = rs ? total : L->count, .rcounts = s->rcounts,
                                          .rdispls = s->rdispls, .in_place = L->in_place, .chunk_bytes = L->chunk,
                                          .order = s->order, .node = n, .nnodes = nn, .pieces = pieces,
                                          .net_kind = (hier_net_kind_t)L->net_kind, .net_radix = L->radix,
                                          .node_first = s->node_first,
                                          .node_ranks = s->node_ranks, .rs_slices = L->sliced ? q->slices : NULL};
            q->nchunks = hier_sched_nchunks(&q->args);
            q->cap = hier_sched_max_steps(&q->args);
            /* what a communicator of this layout reserves at set-up covers the call (one
             * node: communicators run the one-node kinds, bounded alike; the simulator these) */
            hier_sched_args_t lay = q->args;
            lay.pieces = most_pieces;
            if (nn > 1)
                cr_assert_leq(q->cap, hier_sched_max_steps_within(&lay, SIZE_MAX),
                              "memory reserved ahead is too small: %zu for %zu (kind %d, %d nodes, sliced %d)",
                              hier_sched_max_steps_within(&lay, SIZE_MAX), q->cap, (int)L->kind, nn, L->sliced);
            q->state = q->nchunks ? RK_RUN : RK_DONE;
            q->slot_in_runnable = -1;
            if (q->nchunks) runnable_add(s, s->node_base[n] + l);
        }
}

static void tear_down(sim_t *s)
{
    for (int i = 0; i < s->total; i++) {
        rk_t *q = &s->rk[i];
        while (q->inbox) {
            msg_t *m = q->inbox;
            q->inbox = m->next;
            free(m);
        }
        drop_program(s, q);
        free(q->sb);
        free(q->rb);
        free(q->slices);
        free(s->slots[q->node][q->local]);
    }
    for (int n = 0; n < s->L->nnodes; n++) free(s->slots[n]);
    free(s->slots), free(s->rk), free(s->node_base), free(s->arrived), free(s->runnable);
    free(s->node_first), free(s->node_ranks), free(s->order), free(s->rcounts), free(s->rdispls);
    free(s->scratch);
}

/* Every rank's result against references computed here (the sum of every
 * rank's input element, once per element: the layouts are large). */
static void check(const sim_t *s)
{
    const layout_t *L = s->L;
    int ag = L->kind == HIER_SCHED_HIER_ALLGATHER, rs = L->kind == HIER_SCHED_HIER_REDUCE_SCATTER;
    size_t total = rs ? s->rdispls[s->total - 1] + s->rcounts[s->total - 1] : L->count;
    int64_t *want = ag ? NULL : calloc(total + 1, sizeof(*want));
    const rk_t *first = NULL;
    for (int i = 0; i < s->total && !first; i++) first = s->rk[i].grank == 0 ? &s->rk[i] : NULL;
    for (size_t x = 0; want && !L->dbl && x < total; x++)
        for (int b = 0; b < s->total; b++) want[x] += val(b, x);
    for (int i = 0; i < s->total; i++) {
        const rk_t *q = &s->rk[i];
        int r = q->grank;
        if (ag) {
            for (int b = 0; b < s->total; b++)
                for (size_t x = 0; x < L->count; x++)
                    if (q->rb[(size_t)b * L->count + x] != byte_of(b, x))
                        cr_assert_fail("allgather nodes %d rr %d count %zu chunk %zu inplace %d: rank %d block %d "
                                       "[%zu]", L->nnodes, L->round_robin, L->count, L->chunk, L->in_place, r, b, x);
            continue;
        }
        size_t lo = rs ? s->rdispls[r] : 0, cnt = rs ? s->rcounts[r] : L->count;
        for (size_t x = 0; x < cnt; x++) {
            const uint8_t *got = q->rb + x * 8;
            if (L->dbl) { /* bitwise equal to rank 0's (allreduce) */
                if (!rs) cr_assert(!memcmp(got, first->rb + x * 8, 8), "node %d rank %d [%zu] differs", q->node,
                                   q->local, x);
                continue;
            }
            cr_assert_eq(*(int64_t *)got, want[lo + x],
                         "kind %d nodes %d rr %d count %zu chunk %zu inplace %d net %d: rank %d [%zu]: %lld, "
                         "want %lld", (int)L->kind, L->nnodes, L->round_robin, L->count, L->chunk, L->in_place,
                         L->net_kind, r, x, (long long)*(int64_t *)got, (long long)want[lo + x]);
        }
    }
    free(want);
}

/* Runs one collective over the layout and checks it; returns 0, or -1 on deadlock. */
static int run_layout(const layout_t *L, unsigned seed)
{
    static sim_t s;
    int rc = 0;
    set_up(&s, L);
    while (s.nrunnable) {
        int i = s.runnable[rand_r(&seed) % (unsigned)s.nrunnable];
        if (!L->bursts) {
            step(&s, i);
            continue;
        }
        while (step(&s, i)) {}
        drop_program(&s, &s.rk[i]); /* (the scratch is the next rank's: rebuilt when this one resumes) */
    }
    for (int i = 0; i < s.total; i++)
        if (s.rk[i].state != RK_DONE) rc = -1;
    if (rc == 0) check(&s);
    tear_down(&s);
    return rc;
}

static int run(int nnodes, const int *nlocal, size_t count, size_t chunk, int in_place, int net_kind, int radix,
               int dbl, unsigned seed)
{
    layout_t L = {.kind = HIER_SCHED_HIER_ALLREDUCE, .nnodes = nnodes, .nlocal = nlocal, .count = count,
                  .chunk = chunk, .in_place = in_place, .net_kind = net_kind, .dbl = dbl, .round_robin = (int)(seed & 1),
                  .radix = radix};
    return run_layout(&L, seed);
}

#define MAXN 5
static const int sweep_layouts[][MAXN + 1] = {
    {1, 1}, {1, 3}, {2, 1, 1}, {2, 2, 2}, {3, 2, 1, 1}, {2, 1, 3}, {4, 2, 2, 2, 2}, {3, 3, 1, 2}, {5, 1, 2, 1, 1, 2},
};

Test(sched_hier, allreduce_over_nodes_sweep)
{
    static const size_t counts[] = {0, 1, 3, 17, 100, 1000};
    static const size_t chunks[] = {64, 256, 4096};
    for (size_t li = 0; li < sizeof(sweep_layouts) / sizeof(sweep_layouts[0]); li++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (size_t hi = 0; hi < 3; hi++)
                for (int ip = 0; ip < 2; ip++)
                    for (int net = 0; net < 4; net++) { /* ring, rd, rabenseifner in radix 2 and 3 */
                        int kind = net >= 2 ? HIER_NET_RH_ALLREDUCE : net ? HIER_NET_RD_ALLREDUCE
                                                                          : HIER_NET_RING_ALLREDUCE;
                        unsigned seed = (unsigned)(li * 131 + ci * 17 + hi * 5 + (size_t)ip);
                        const int *lay = sweep_layouts[li];
                        cr_assert_eq(run(lay[0], &lay[1], counts[ci], chunks[hi], ip, kind, net == 3 ? 3 : 2, 0,
                                         seed), 0, "deadlock: layout %zu count %zu", li, counts[ci]);
                        cr_assert_eq(run(lay[0], &lay[1], counts[ci], chunks[hi], ip, kind, net == 3 ? 3 : 2, 1,
                                         seed), 0, "deadlock (double)");
                    }
}

/* Allgather and reduce_scatter: every layout, both rank mappings, counts
 * that leave owners empty pieces, chunks that cut blocks. */
static void sweep(hier_sched_kind_t kind, const size_t *counts, size_t ncounts)
{
    static const size_t chunks[] = {256, 1024, 8192};
    for (size_t li = 0; li < sizeof(sweep_layouts) / sizeof(sweep_layouts[0]); li++)
        for (size_t ci = 0; ci < ncounts; ci++)
            for (size_t hi = 0; hi < 3; hi++)
                for (int ip = 0; ip < 2; ip++)
                    for (int rr = 0; rr < (kind == HIER_SCHED_HIER_REDUCE_SCATTER ? 12 : 6); rr++) {
                        /* by node / round-robin x ring / recursive doubling / rabenseifner (x contiguous /
                         * sliced chunks) */
                        int ag = kind == HIER_SCHED_HIER_ALLGATHER, net = (rr >> 1) % 3;
                        int nets[3] = {ag ? HIER_NET_RING_ALLGATHER : HIER_NET_RING_REDUCE_SCATTER,
                                       ag ? HIER_NET_RD_ALLGATHER : HIER_NET_RD_ALLREDUCE,
                                       ag ? HIER_NET_RH_ALLGATHER : HIER_NET_RH_REDUCE_SCATTER};
                        layout_t L = {.kind = kind, .nnodes = sweep_layouts[li][0], .nlocal = &sweep_layouts[li][1],
                                      .count = counts[ci], .chunk = chunks[hi], .in_place = ip, .round_robin = rr & 1,
                                      .net_kind = nets[net], .pieces = (int)(ci % 2), .sliced = rr >= 6,
                                      .radix = 2 + (int)(hi % 2)};
                        unsigned seed = (unsigned)(li * 131 + ci * 17 + hi * 5 + (size_t)ip * 3 + (size_t)rr);
                        cr_assert_eq(run_layout(&L, seed), 0, "deadlock: kind %d layout %zu count %zu", (int)kind, li,
                                     counts[ci]);
                    }
}

Test(sched_hier, allgather_over_nodes_sweep)
{
    static const size_t counts[] = {0, 1, 5, 64, 200, 1000};
    sweep(HIER_SCHED_HIER_ALLGATHER, counts, sizeof(counts) / sizeof(counts[0]));
}

Test(sched_hier, reduce_scatter_over_nodes_sweep)
{
    static const size_t counts[] = {0, 1, 7, 40, 300, 2000};
    sweep(HIER_SCHED_HIER_REDUCE_SCATTER, counts, sizeof(counts) / sizeof(counts[0]));
}

/* Far past the old fixed limits (64 nodes, 1,024 ranks, 256 per node):
 * nodes x ranks per node with small payloads, every collective, the
 * algorithms auto picks for small messages (recursive doubling, one owner
 * per node) and the split path with Rabenseifner; uneven nodes too. */
static int *uniform(int nnodes, int per, int uneven)
{
    int *nlocal = malloc(sizeof(int) * (size_t)nnodes);
    for (int n = 0; n < nnodes; n++) nlocal[n] = uneven && n % 3 == 2 ? per - 1 : per;
    return nlocal;
}

static void big(hier_sched_kind_t kind, int nnodes, int per, int uneven, size_t count, int net_kind, int pieces)
{
    int *nlocal = uniform(nnodes, per, uneven);
    layout_t L = {.kind = kind, .nnodes = nnodes, .nlocal = nlocal, .count = count, .chunk = 16384,
                  .net_kind = net_kind, .pieces = pieces, .bursts = 1, .round_robin = nnodes % 2,
                  .sliced = count >= 100000, .radix = 8};
    cr_assert_eq(run_layout(&L, (unsigned)(nnodes * 7 + per)), 0, "deadlock: kind %d, %d nodes x %d", (int)kind,
                 nnodes, per);
    free(nlocal);
}

/* The memory a communicator reserves at set-up: every kind's most within the
 * cap; kinds past it are left to their first call (0: none fits). */
Test(sched_hier, room_made_ahead_keeps_to_its_cap)
{
    uint32_t first[3] = {0, 4, 8}, ranks[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    hier_sched_args_t lay = {.nranks = 4, .nnodes = 2, .node_first = first, .node_ranks = ranks, .pieces = 4,
                             .net_radix = 2};
    size_t kinds[3], most = 0, least = SIZE_MAX;
    hier_sched_kind_t k[3] = {HIER_SCHED_HIER_ALLREDUCE, HIER_SCHED_HIER_ALLGATHER, HIER_SCHED_HIER_REDUCE_SCATTER};
    for (int i = 0; i < 3; i++) {
        hier_sched_args_t a = lay;
        a.kind = k[i];
        kinds[i] = hier_sched_hier_max_steps_any(&a);
        most = kinds[i] > most ? kinds[i] : most;
        least = kinds[i] < least ? kinds[i] : least;
    }
    cr_assert_lt(kinds[0], kinds[2], "the allreduce's bound is the smallest here");
    cr_assert_eq(hier_sched_max_steps_within(&lay, SIZE_MAX), most);
    cr_assert_eq(hier_sched_max_steps_within(&lay, least), least);
    cr_assert_eq(hier_sched_max_steps_within(&lay, least - 1), 0);
    lay.nnodes = 1; /* one node: every kind takes nranks + 8 at most */
    cr_assert_eq(hier_sched_max_steps_within(&lay, SIZE_MAX), 12);
    cr_assert_eq(hier_sched_max_steps_within(&lay, 11), 0);
}

Test(sched_hier, allreduce_on_1024_nodes_of_8, .timeout = 300)
{
    big(HIER_SCHED_HIER_ALLREDUCE, 1024, 8, 0, 40, HIER_NET_RD_ALLREDUCE, 1);
    big(HIER_SCHED_HIER_ALLREDUCE, 1024, 8, 0, 300, HIER_NET_RH_ALLREDUCE, 0);
    big(HIER_SCHED_HIER_ALLREDUCE, 1000, 8, 1, 300, HIER_NET_RH_ALLREDUCE, 0);
    big(HIER_SCHED_HIER_ALLREDUCE, 9, 300, 1, 16, HIER_NET_RD_ALLREDUCE, 1); /* more than 256 ranks per node */
    big(HIER_SCHED_HIER_ALLREDUCE, 130, 2, 0, 50, HIER_NET_RING_ALLREDUCE, 0);
}

Test(sched_hier, reduce_scatter_on_1024_nodes_of_8, .timeout = 300)
{
    big(HIER_SCHED_HIER_REDUCE_SCATTER, 1024, 8, 0, 8192, HIER_NET_RD_ALLREDUCE, 1);
    big(HIER_SCHED_HIER_REDUCE_SCATTER, 1000, 8, 1, 4096, HIER_NET_RD_ALLREDUCE, 0);
    big(HIER_SCHED_HIER_REDUCE_SCATTER, 130, 3, 0, 1000, HIER_NET_RING_REDUCE_SCATTER, 0);
    big(HIER_SCHED_HIER_REDUCE_SCATTER, 130, 3, 1, 100000, HIER_NET_RING_REDUCE_SCATTER, 0); /* sliced chunks */
    big(HIER_SCHED_HIER_REDUCE_SCATTER, 1000, 8, 0, 64000, HIER_NET_RH_REDUCE_SCATTER, 0);
    big(HIER_SCHED_HIER_REDUCE_SCATTER, 1021, 2, 1, 100000, HIER_NET_RH_REDUCE_SCATTER, 0); /* folded, sliced */
}

Test(sched_hier, allgather_on_1024_nodes_of_8, .timeout = 300)
{
    big(HIER_SCHED_HIER_ALLGATHER, 1024, 8, 0, 2, HIER_NET_RD_ALLGATHER, 1);
    big(HIER_SCHED_HIER_ALLGATHER, 1000, 8, 1, 1, HIER_NET_RD_ALLGATHER, 1);
    big(HIER_SCHED_HIER_ALLGATHER, 130, 2, 0, 3, HIER_NET_RING_ALLGATHER, 0);
    big(HIER_SCHED_HIER_ALLGATHER, 1000, 8, 0, 8, HIER_NET_RH_ALLGATHER, 0);
    big(HIER_SCHED_HIER_ALLGATHER, 1021, 2, 1, 5, HIER_NET_RH_ALLGATHER, 0); /* folded */
}
