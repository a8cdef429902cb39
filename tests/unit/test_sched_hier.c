/* Several nodes in one process: each node's ranks share simulated slots and
 * meet at node barriers, ranks of the same local index exchange messages
 * across nodes. Steps of all ranks are interleaved at random within what
 * barriers and message arrival allow; no rank able to move before all are
 * done is a deadlock. Sweeps nodes x ranks per node (uneven too) x counts x
 * chunk sizes x in place x inter-node algorithm. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "hier_exec.h"
#include "hier_reduce.h"
#include "hier_sched.h"

#define MAXN 5
#define MAXL 4
#define MAXQ 4096

typedef struct {
    size_t len;
    uint8_t *data;
} msg_t;

typedef struct {
    msg_t q[MAXQ];
    int head, tail;
} queue_t;

typedef struct {
    hier_step_t *steps;
    size_t n, cap, pos;
    int at_barrier;
} prog_t;

static queue_t queues[MAXL][MAXN][MAXN]; /* [local index][from node][to node] */
static uint16_t order[MAXL] = {0, 1, 2, 3};

static int64_t val(int grank, size_t i)
{
    return (int64_t)(grank + 1) * 1000003 + (int64_t)i;
}

static void append(prog_t *p, const hier_step_t *s, size_t n)
{
    if (p->n + n > p->cap) {
        p->cap = (p->n + n) * 2 + 16;
        p->steps = realloc(p->steps, p->cap * sizeof(*p->steps));
    }
    memcpy(p->steps + p->n, s, n * sizeof(*s));
    p->n += n;
}

typedef struct {
    hier_sched_kind_t kind;
    int nnodes;
    const int *nlocal;
    size_t count;   /* allreduce: elements; allgather: bytes per block; reduce_scatter: elements in all */
    size_t chunk;
    int in_place, net_kind, dbl, round_robin;
} layout_t;

static uint8_t byte_of(int grank, size_t i)
{
    return (uint8_t)(grank * 37 + i * 11 + 1);
}

/* Reduce_scatter: what communicator rank r receives (some get nothing). */
static size_t rs_count(int r, size_t total, int nranks)
{
    return r % 3 == 1 ? 0 : total / (size_t)nranks + (size_t)(r % 2);
}

/* Runs one collective over the layout; returns 0, or -1 on deadlock. */
static int run_layout(const layout_t *L, unsigned seed)
{
    prog_t prog[MAXN][MAXL] = {{{0}}};
    uint8_t *sb[MAXN][MAXL], *rb[MAXN][MAXL], *slots[MAXN][MAXL];
    uint16_t node_first[MAXN + 1], node_ranks[MAXN * MAXL];
    size_t rcounts[MAXN * MAXL], rdispls[MAXN * MAXL], total = 0;
    int pieces = MAXL, grank[MAXN][MAXL], g = 0, rc = 0, nn = L->nnodes;
    hier_reduce_kernel_t k;
    cr_assert_eq(hier_reduce_kernel_get(L->dbl ? HIER_DT_DOUBLE : HIER_DT_INT64, HIER_OP_SUM, &k), HIER_OK);
    memset(queues, 0, sizeof(queues));
    for (int n = 0; n < nn; n++) pieces = L->nlocal[n] < pieces ? L->nlocal[n] : pieces;
    for (int n = 0; n < nn; n++) g += L->nlocal[n];
    /* communicator ranks: node by node, or dealt round-robin across nodes */
    for (int n = 0, r = 0; !L->round_robin && n < nn; n++)
        for (int l = 0; l < L->nlocal[n]; l++) grank[n][l] = r++;
    for (int l = 0, r = 0; L->round_robin && r < g; l++)
        for (int n = 0; n < nn; n++)
            if (l < L->nlocal[n]) grank[n][l] = r++;
    for (int n = 0, i = 0; n < nn; n++) {
        node_first[n] = (uint16_t)i;
        for (int l = 0; l < L->nlocal[n]; l++) node_ranks[i++] = (uint16_t)grank[n][l];
        node_first[n + 1] = (uint16_t)i;
    }
    for (int r = 0; r < g; r++) {
        rcounts[r] = rs_count(r, L->count, g);
        rdispls[r] = total;
        total += rcounts[r];
    }
    int ag = L->kind == HIER_SCHED_HIER_ALLGATHER, rs = L->kind == HIER_SCHED_HIER_REDUCE_SCATTER;
    size_t es = ag ? 1 : 8, in_elems = rs ? total : L->count, out_bytes = ag ? L->count * (size_t)g : in_elems * es;

    for (int n = 0; n < nn; n++)
        for (int l = 0; l < L->nlocal[n]; l++) {
            int r = grank[n][l];
            sb[n][l] = malloc(in_elems * es + 8);
            rb[n][l] = malloc(out_bytes + 8);
            memset(rb[n][l], 0xEE, out_bytes + 8);
            slots[n][l] = malloc(2 * L->chunk);
            memset(slots[n][l], 0xA5, 2 * L->chunk);
            if (ag) {
                uint8_t *dst = L->in_place ? rb[n][l] + (size_t)r * L->count : sb[n][l];
                for (size_t i = 0; i < L->count; i++) dst[i] = byte_of(r, i);
            }
            for (size_t i = 0; !ag && i < in_elems; i++) {
                uint8_t *dst = (L->in_place ? rb : sb)[n][l] + i * 8;
                if (L->dbl) *(double *)dst = 1.0 / (r + 3) + (double)i * 0.1;
                else *(int64_t *)dst = val(r, i);
            }
            hier_sched_args_t a = {.kind = L->kind, .nranks = L->nlocal[n], .me = l, .esize = es,
                                   .count = rs ? total : L->count, .rcounts = rcounts, .rdispls = rdispls,
                                   .in_place = L->in_place, .chunk_bytes = L->chunk, .order = order, .node = n,
                                   .nnodes = nn, .pieces = pieces, .net_kind = L->net_kind,
                                   .node_first = node_first, .node_ranks = node_ranks};
            size_t nch = hier_sched_nchunks(&a), cap = hier_sched_hier_max_steps(g, nn, pieces);
            hier_step_t *steps = malloc(cap * sizeof(*steps));
            for (size_t c = 0; c < nch; c++) {
                size_t m = hier_sched_build(&a, c, (int)(c & 1), steps);
                cr_assert_leq(m, cap);
                append(&prog[n][l], steps, m);
            }
            free(steps);
        }

    for (;;) {
        int ready[MAXN * MAXL][2], nready = 0, done = 0, all_ranks = 0;
        for (int n = 0; n < nn; n++)
            for (int l = 0; l < L->nlocal[n]; l++) {
                prog_t *p = &prog[n][l];
                all_ranks++;
                if (p->pos == p->n) {
                    done++;
                    continue;
                }
                if (p->at_barrier) continue;
                const hier_step_t *s = &p->steps[p->pos];
                if (s->op == HIER_STEP_NET_RECV) {
                    queue_t *q = &queues[l][s->peer][n];
                    if (q->head == q->tail) continue;
                }
                ready[nready][0] = n;
                ready[nready++][1] = l;
            }
        if (done == all_ranks) break;
        if (!nready) {
            rc = -1;
            break;
        }
        int pick = rand_r(&seed) % nready, n = ready[pick][0], l = ready[pick][1];
        prog_t *p = &prog[n][l];
        const hier_step_t *s = &p->steps[p->pos];
        if (s->op == HIER_STEP_BARRIER) {
            p->at_barrier = 1;
            int all = 1;
            for (int j = 0; j < L->nlocal[n]; j++) all &= prog[n][j].at_barrier;
            if (all)
                for (int j = 0; j < L->nlocal[n]; j++) {
                    prog[n][j].at_barrier = 0;
                    prog[n][j].pos++;
                }
            continue;
        }
        p->pos++;
        hier_exec_bufs_t bufs = {.sbuf = sb[n][l], .rbuf = rb[n][l], .slots = slots[n], .parity_stride = L->chunk,
                                 .esize = es, .kernel = k};
        if (s->op == HIER_STEP_NET_SEND) {
            queue_t *q = &queues[l][n][s->peer];
            cr_assert_lt(q->tail, MAXQ);
            q->q[q->tail].data = malloc(s->len);
            memcpy(q->q[q->tail].data, hier_exec_ref(&bufs, s->src), s->len);
            q->q[q->tail++].len = s->len;
        } else if (s->op == HIER_STEP_NET_RECV) {
            queue_t *q = &queues[l][s->peer][n];
            msg_t *m = &q->q[q->head++];
            size_t bytes = s->net_reduce ? s->len * es : s->len;
            cr_assert_eq(m->len, bytes, "node %d rank %d: %zu bytes arrived, %zu expected", n, l, m->len, bytes);
            if (s->net_reduce) k.acc(hier_exec_ref(&bufs, s->dst), m->data, s->len);
            else memcpy(hier_exec_ref(&bufs, s->dst), m->data, bytes);
            free(m->data);
        } else {
            bufs.stage = malloc(HIER_EXEC_STAGE_BYTES);
            cr_assert_eq(hier_exec_step(&bufs, s), HIER_OK);
            free(bufs.stage);
        }
    }

    for (int n = 0; rc == 0 && n < nn; n++)
        for (int l = 0; l < L->nlocal[n]; l++) {
            int r = grank[n][l];
            if (ag) {
                for (int q = 0; q < g; q++)
                    for (size_t i = 0; i < L->count; i++)
                        cr_assert_eq(rb[n][l][(size_t)q * L->count + i], byte_of(q, i),
                                     "allgather nodes %d rr %d count %zu chunk %zu inplace %d: rank %d block %d [%zu]",
                                     nn, L->round_robin, L->count, L->chunk, L->in_place, r, q, i);
                continue;
            }
            size_t lo = rs ? rdispls[r] : 0, cnt = rs ? rcounts[r] : L->count;
            for (size_t i = 0; i < cnt; i++) {
                const uint8_t *got = rb[n][l] + i * 8;
                if (L->dbl) { /* bitwise equal to rank 0's (allreduce) */
                    if (!rs) cr_assert(!memcmp(got, rb[0][0] + i * 8, 8), "node %d rank %d [%zu] differs", n, l, i);
                    continue;
                }
                int64_t want = 0;
                for (int q = 0; q < g; q++) want += val(q, lo + i);
                cr_assert_eq(*(int64_t *)got, want,
                             "kind %d nodes %d rr %d count %zu chunk %zu inplace %d net %d: rank %d [%zu]: %lld, "
                             "want %lld", (int)L->kind, nn, L->round_robin, L->count, L->chunk, L->in_place,
                             L->net_kind, r, i, (long long)*(int64_t *)got, (long long)want);
            }
        }
    for (int n = 0; n < nn; n++)
        for (int l = 0; l < L->nlocal[n]; l++) {
            free(sb[n][l]);
            free(rb[n][l]);
            free(slots[n][l]);
            free(prog[n][l].steps);
        }
    return rc;
}

static int run(int nnodes, const int *nlocal, size_t count, size_t chunk, int in_place, int net_kind, int dbl,
               unsigned seed)
{
    layout_t L = {.kind = HIER_SCHED_HIER_ALLREDUCE, .nnodes = nnodes, .nlocal = nlocal, .count = count,
                  .chunk = chunk, .in_place = in_place, .net_kind = net_kind, .dbl = dbl, .round_robin = (int)(seed & 1)};
    return run_layout(&L, seed);
}

Test(sched_hier, allreduce_over_nodes_sweep)
{
    static const int layouts[][MAXN + 1] = {
        {1, 1}, {1, 3}, {2, 1, 1}, {2, 2, 2}, {3, 2, 1, 1}, {2, 1, 3}, {4, 2, 2, 2, 2}, {3, 3, 1, 2}, {5, 1, 2, 1, 1, 2},
    };
    static const size_t counts[] = {0, 1, 3, 17, 100, 1000};
    static const size_t chunks[] = {64, 256, 4096};
    for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (size_t hi = 0; hi < 3; hi++)
                for (int ip = 0; ip < 2; ip++)
                    for (int net = 0; net < 3; net++) {
                        int kind = net == 2 ? HIER_NET_RH_ALLREDUCE : net ? HIER_NET_RD_ALLREDUCE
                                                                         : HIER_NET_RING_ALLREDUCE;
                        unsigned seed = (unsigned)(li * 131 + ci * 17 + hi * 5 + (size_t)ip);
                        cr_assert_eq(run(layouts[li][0], &layouts[li][1], counts[ci], chunks[hi], ip, kind, 0, seed),
                                     0, "deadlock: layout %zu count %zu", li, counts[ci]);
                        cr_assert_eq(run(layouts[li][0], &layouts[li][1], counts[ci], chunks[hi], ip, kind, 1, seed),
                                     0, "deadlock (double)");
                    }
}

static const int sweep_layouts[][MAXN + 1] = {
    {1, 1}, {1, 3}, {2, 1, 1}, {2, 2, 2}, {3, 2, 1, 1}, {2, 1, 3}, {4, 2, 2, 2, 2}, {3, 3, 1, 2}, {5, 1, 2, 1, 1, 2},
};

/* Allgather and reduce_scatter: every layout, both rank mappings, counts
 * that leave owners empty pieces, chunks that cut blocks. */
static void sweep(hier_sched_kind_t kind, const size_t *counts, size_t ncounts)
{
    static const size_t chunks[] = {256, 1024, 8192};
    for (size_t li = 0; li < sizeof(sweep_layouts) / sizeof(sweep_layouts[0]); li++)
        for (size_t ci = 0; ci < ncounts; ci++)
            for (size_t hi = 0; hi < 3; hi++)
                for (int ip = 0; ip < 2; ip++)
                    for (int rr = 0; rr < 4; rr++) { /* by node / round-robin x ring / recursive doubling */
                        int rd = kind == HIER_SCHED_HIER_ALLGATHER ? HIER_NET_RD_ALLGATHER : HIER_NET_RD_ALLREDUCE;
                        layout_t L = {.kind = kind, .nnodes = sweep_layouts[li][0], .nlocal = &sweep_layouts[li][1],
                                      .count = counts[ci], .chunk = chunks[hi], .in_place = ip, .round_robin = rr & 1,
                                      .net_kind = rr & 2 ? rd : 0};
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
