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
#define MAXQ 256

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

/* Runs one allreduce of `count` int64 (or doubles) over the layout; returns
 * 0, or -1 on deadlock. */
static int run(int nnodes, const int *nlocal, size_t count, size_t chunk, int in_place, int net_kind, int dbl,
               unsigned seed)
{
    static hier_step_t steps[HIER_SCHED_MAX_STEPS];
    prog_t prog[MAXN][MAXL] = {{{0}}};
    uint8_t *sb[MAXN][MAXL], *rb[MAXN][MAXL], *slots[MAXN][MAXL];
    int pieces = MAXL, grank[MAXN][MAXL], g = 0, rc = 0;
    hier_reduce_kernel_t k;
    cr_assert_eq(hier_reduce_kernel_get(dbl ? HIER_DT_DOUBLE : HIER_DT_INT64, HIER_OP_SUM, &k), HIER_OK);
    memset(queues, 0, sizeof(queues));
    for (int n = 0; n < nnodes; n++) pieces = nlocal[n] < pieces ? nlocal[n] : pieces;

    for (int n = 0; n < nnodes; n++)
        for (int l = 0; l < nlocal[n]; l++) {
            grank[n][l] = g++;
            sb[n][l] = malloc(count * 8 + 8);
            rb[n][l] = malloc(count * 8 + 8);
            slots[n][l] = malloc(2 * chunk);
            memset(slots[n][l], 0xA5, 2 * chunk);
            for (size_t i = 0; i < count; i++) {
                uint8_t *dst = (in_place ? rb : sb)[n][l] + i * 8;
                if (dbl) *(double *)dst = 1.0 / (grank[n][l] + 3) + (double)i * 0.1;
                else *(int64_t *)dst = val(grank[n][l], i);
            }
            hier_sched_args_t a = {.kind = HIER_SCHED_HIER_ALLREDUCE, .nranks = nlocal[n], .me = l, .esize = 8,
                                   .count = count, .in_place = in_place, .chunk_bytes = chunk, .order = order,
                                   .node = n, .nnodes = nnodes, .pieces = pieces, .net_kind = net_kind};
            size_t nch = hier_sched_nchunks(&a);
            for (size_t c = 0; c < nch; c++) append(&prog[n][l], steps, hier_sched_build(&a, c, (int)(c & 1), steps));
        }

    for (;;) {
        int ready[MAXN * MAXL][2], nready = 0, done = 0, total = 0;
        for (int n = 0; n < nnodes; n++)
            for (int l = 0; l < nlocal[n]; l++) {
                prog_t *p = &prog[n][l];
                total++;
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
        if (done == total) break;
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
            for (int j = 0; j < nlocal[n]; j++) all &= prog[n][j].at_barrier;
            if (all)
                for (int j = 0; j < nlocal[n]; j++) {
                    prog[n][j].at_barrier = 0;
                    prog[n][j].pos++;
                }
            continue;
        }
        p->pos++;
        if (s->op == HIER_STEP_NET_SEND) {
            queue_t *q = &queues[l][n][s->peer];
            cr_assert_lt(q->tail, MAXQ);
            q->q[q->tail].data = malloc(s->len);
            memcpy(q->q[q->tail].data, rb[n][l] + s->src.off, s->len);
            q->q[q->tail++].len = s->len;
        } else if (s->op == HIER_STEP_NET_RECV) {
            queue_t *q = &queues[l][s->peer][n];
            msg_t *m = &q->q[q->head++];
            size_t bytes = s->net_reduce ? s->len * 8 : s->len;
            cr_assert_eq(m->len, bytes, "node %d rank %d: %zu bytes arrived, %zu expected", n, l, m->len, bytes);
            if (s->net_reduce) k.acc(rb[n][l] + s->dst.off, m->data, s->len);
            else memcpy(rb[n][l] + s->dst.off, m->data, bytes);
            free(m->data);
        } else {
            hier_exec_bufs_t bufs = {.sbuf = sb[n][l], .rbuf = rb[n][l], .slots = slots[n], .parity_stride = chunk,
                                     .esize = 8, .kernel = k, .stage = malloc(HIER_EXEC_STAGE_BYTES)};
            cr_assert_eq(hier_exec_step(&bufs, s), HIER_OK);
            free(bufs.stage);
        }
    }

    for (int n = 0; rc == 0 && n < nnodes; n++)
        for (int l = 0; l < nlocal[n]; l++)
            for (size_t i = 0; i < count; i++) {
                if (dbl) {
                    cr_assert(!memcmp(rb[n][l] + i * 8, rb[0][0] + i * 8, 8),
                              "node %d rank %d [%zu] differs from node 0 rank 0", n, l, i);
                    continue;
                }
                int64_t want = 0;
                for (int j = 0; j < g; j++) want += val(j, i);
                cr_assert_eq(*(int64_t *)(rb[n][l] + i * 8), want,
                             "nodes %d count %zu chunk %zu inplace %d net %d: node %d rank %d [%zu]: %lld, want %lld",
                             nnodes, count, chunk, in_place, net_kind, n, l, i,
                             (long long)*(int64_t *)(rb[n][l] + i * 8), (long long)want);
            }
    for (int n = 0; n < nnodes; n++)
        for (int l = 0; l < nlocal[n]; l++) {
            free(sb[n][l]);
            free(rb[n][l]);
            free(slots[n][l]);
            free(prog[n][l].steps);
        }
    return rc;
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
                    for (int net = 0; net < 2; net++) {
                        int kind = net ? HIER_NET_RD_ALLREDUCE : HIER_NET_RING_ALLREDUCE;
                        unsigned seed = (unsigned)(li * 131 + ci * 17 + hi * 5 + (size_t)ip);
                        cr_assert_eq(run(layouts[li][0], &layouts[li][1], counts[ci], chunks[hi], ip, kind, 0, seed),
                                     0, "deadlock: layout %zu count %zu", li, counts[ci]);
                        cr_assert_eq(run(layouts[li][0], &layouts[li][1], counts[ci], chunks[hi], ip, kind, 1, seed),
                                     0, "deadlock (double)");
                    }
}
