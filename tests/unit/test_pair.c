/* The pair path (exec/hier_exec_pair.c): two nodes of one rank each, one
 * message each way over PML links (net/hier_pml.c) on an in-memory
 * point-to-point, the two ranks in two threads. Every type and op the
 * kernels take, counts from 0 to past a page, in place or not: each rank's
 * result is, bit for bit, what the schedules' steps make of the same
 * inputs (between two participants: this rank's operand folded with the
 * peer's by the kernel's acc, NaN payloads included), and the schedules
 * are checked to fold that way; a few type and op pairs against C's own
 * arithmetic too. Ranks that disagree (count, collective) both get the
 * mismatch; a peer that never calls, the timeout. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"
#include "exec/hier_exec_pair.h"
#include "net/hier_pml.h"
#include "sched/hier_sched_build.h"

/* ---- the point-to-point, in memory, between threads ---- */

typedef struct pmsg {
    struct pmsg *next;
    size_t len;
    uint8_t data[];
} pmsg_t;

typedef struct {
    int send, to, from;
    uint32_t mbox;
    uint8_t *buf;
    size_t len;
} preq_t;

static pthread_mutex_t pml_lock = PTHREAD_MUTEX_INITIALIZER;
static pmsg_t *pml_q[2][2][HIER_PML_MBOXES]; /* [from][to][mailbox], oldest first */
static int rank_ids[2] = {0, 1};

static int f_isend(const void *buf, size_t len, int to, uint32_t mbox, void *arg, void **req_p)
{
    preq_t *r = calloc(1, sizeof(*r));
    pmsg_t *m = malloc(sizeof(*m) + len);
    if (!r || !m) return -1;
    *r = (preq_t){.send = 1};
    *m = (pmsg_t){.len = len};
    memcpy(m->data, buf, len);
    pthread_mutex_lock(&pml_lock);
    pmsg_t **p = &pml_q[*(const int *)arg][to][mbox];
    while (*p) p = &(*p)->next;
    *p = m;
    pthread_mutex_unlock(&pml_lock);
    *req_p = r;
    return 0;
}

static int f_irecv(void *buf, size_t len, int from, uint32_t mbox, void *arg, void **req_p)
{
    preq_t *r = malloc(sizeof(*r));
    if (!r) return -1;
    *r = (preq_t){.to = *(const int *)arg, .from = from, .mbox = mbox, .buf = buf, .len = len};
    *req_p = r;
    return 0;
}

static int f_test(void *req, size_t *len_p)
{
    preq_t *r = req;
    if (r->send) {
        free(r);
        return 1;
    }
    pthread_mutex_lock(&pml_lock);
    pmsg_t *m = pml_q[r->from][r->to][r->mbox];
    if (m) pml_q[r->from][r->to][r->mbox] = m->next;
    pthread_mutex_unlock(&pml_lock);
    if (!m) return 0;
    int ret = m->len > r->len ? HIER_PML_TRUNCATED : 1;
    *len_p = m->len > r->len ? r->len : m->len;
    memcpy(r->buf, m->data, *len_p);
    free(m);
    free(r);
    return ret;
}

static void f_cancel(void *req)
{
    free(req);
}

static void pml_clear(void)
{
    for (int f = 0; f < 2; f++)
        for (int t = 0; t < 2; t++)
            for (int b = 0; b < HIER_PML_MBOXES; b++)
                while (pml_q[f][t][b]) {
                    pmsg_t *m = pml_q[f][t][b];
                    pml_q[f][t][b] = m->next;
                    free(m);
                }
}

/* ---- two ranks ---- */

typedef struct {
    hier_coll_t coll;
    hier_dtype_t dt;
    hier_op_t op;
    size_t count;       /* allreduce: elements; allgather: bytes of a block; reduce_scatter: all elements */
    int in_place;
} shape_t;

typedef struct {
    int me;
    shape_t s;                 /* this rank's call (ranks may be given different ones) */
    hier_pml_ops_t ops;
    hier_pml_t *link;          /* to the other rank */
    void *links[2];
    hier_net_exec_t x;
    uint8_t *in, *out;         /* the inputs (in place: out holds them) and the result */
    size_t rcounts[2], rdispls[2];
    hier_status_t st;
} rk_t;

static size_t es_of(const shape_t *s)
{
    return s->coll == HIER_COLL_ALLGATHER ? 1 : hier_dtype_size(s->dt);
}

static size_t in_bytes(const shape_t *s)
{
    return s->count * es_of(s);
}

static size_t out_bytes(const shape_t *s)
{
    return s->coll == HIER_COLL_ALLGATHER ? 2 * s->count : in_bytes(s);
}

static void rank_open(rk_t *r, int me, const shape_t *s, unsigned seed)
{
    *r = (rk_t){.me = me, .s = *s};
    r->ops = (hier_pml_ops_t){.isend = f_isend, .irecv = f_irecv, .test = f_test, .cancel = f_cancel,
                              .arg = &rank_ids[me]};
    cr_assert_not_null(r->link = malloc(hier_pml_size()));
    hier_pml_init(r->link, &r->ops, 1 - me, 512 * 1024);
    r->links[1 - me] = r->link;
    hier_sig_t sig = hier_sig_make(s->coll, s->count, s->dt, s->op, 0, 1);
    r->x = (hier_net_exec_t){.link = &hier_link_pml, .links = r->links, .spin = 16, .progress_every = 1, .sig = sig};
    size_t ib = in_bytes(s), ob = out_bytes(s);
    cr_assert_not_null(r->in = malloc(ib + 1));
    cr_assert_not_null(r->out = malloc(ob + 1));
    memset(r->out, 0xEE, ob + 1);
    uint8_t *src = !s->in_place ? r->in : r->out + (s->coll == HIER_COLL_ALLGATHER ? (size_t)me * s->count : 0);
    for (size_t i = 0; i < ib; i++) src[i] = (uint8_t)rand_r(&seed);
    if (s->dt == HIER_DT_BOOL)
        for (size_t i = 0; i < ib; i++) src[i] &= 1;
    if (s->in_place) memcpy(r->in, src, ib); /* (kept for the reference) */
    size_t half = s->count / 2 + (s->count % 3 == 1); /* (uneven blocks) */
    r->rcounts[0] = half > s->count ? s->count : half;
    r->rcounts[1] = s->count - r->rcounts[0];
    r->rdispls[1] = r->rcounts[0];
}

static void rank_close(rk_t *r)
{
    hier_pml_fini(r->link);
    free(r->link);
    free(r->in);
    free(r->out);
}

static void *rank_run(void *arg)
{
    rk_t *r = arg;
    hier_reduce_kernel_t k = {0};
    const shape_t *s = &r->s;
    const void *sbuf = s->in_place ? NULL : r->in;
    if (s->coll != HIER_COLL_ALLGATHER && hier_reduce_kernel_get(s->dt, s->op, &k) != HIER_OK) {
        r->st = HIER_ERR_NOT_SUPPORTED;
        return NULL;
    }
    switch (s->coll) {
    case HIER_COLL_ALLREDUCE:
        r->st = hier_exec_pair_allreduce(&r->x, r->me, sbuf, r->out, s->count, es_of(s), k);
        break;
    case HIER_COLL_ALLGATHER: r->st = hier_exec_pair_allgather(&r->x, r->me, sbuf, r->out, s->count); break;
    default:
        r->st = hier_exec_pair_reduce_scatter(&r->x, r->me, sbuf, r->out, r->rcounts, r->rdispls, es_of(s), k);
    }
    return NULL;
}

/* Both ranks' calls, in two threads. */
static void run_pair(rk_t r[2])
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, rank_run, &r[1]), 0);
    rank_run(&r[0]);
    pthread_join(t, NULL);
    pml_clear();
}

/* What the schedules make of rank me's and its peer's inputs: the peer's
 * operand folded into a copy of mine by acc (hier_net_exec.c's net_reduce
 * receive; see schedules_fold_mine_first). */
static void reference(const rk_t *r, const rk_t *peer, uint8_t *want)
{
    const shape_t *s = &r->s;
    size_t es = es_of(s);
    hier_reduce_kernel_t k;
    if (s->coll == HIER_COLL_ALLGATHER) {
        memcpy(want + (size_t)r->me * s->count, r->in, s->count);
        memcpy(want + (size_t)peer->me * s->count, peer->in, s->count);
        return;
    }
    cr_assert_eq(hier_reduce_kernel_get(s->dt, s->op, &k), HIER_OK);
    size_t off = s->coll == HIER_COLL_REDUCE_SCATTER ? r->rdispls[r->me] : 0;
    size_t n = s->coll == HIER_COLL_REDUCE_SCATTER ? r->rcounts[r->me] : s->count;
    memcpy(want, r->in + off * es, n * es);
    if (n) k.acc(want, peer->in + off * es, n);
}

static size_t result_bytes(const rk_t *r)
{
    const shape_t *s = &r->s;
    return s->coll == HIER_COLL_REDUCE_SCATTER ? r->rcounts[r->me] * es_of(s) : out_bytes(s);
}

static void check_shape(const shape_t *s, unsigned seed)
{
    rk_t r[2];
    for (int me = 0; me < 2; me++) rank_open(&r[me], me, s, seed + (unsigned)me * 7919u);
    run_pair(r);
    for (int me = 0; me < 2; me++) {
        size_t n = result_bytes(&r[me]);
        uint8_t *want = malloc(out_bytes(s) + 1);
        cr_assert_not_null(want);
        cr_assert_eq(r[me].st, HIER_OK, "coll %d dt %d op %d count %zu in place %d: rank %d status %d", s->coll, s->dt,
                     s->op, s->count, s->in_place, me, r[me].st);
        reference(&r[me], &r[1 - me], want);
        cr_assert(!memcmp(r[me].out, want, n), "coll %d dt %d op %d count %zu in place %d: rank %d differs",
                  s->coll, s->dt, s->op, s->count, s->in_place, me);
        if (!s->in_place) cr_assert_eq(r[me].out[out_bytes(s)], 0xEE, "rank %d wrote past its result", me);
        free(want);
    }
    for (int me = 0; me < 2; me++) rank_close(&r[me]);
}

static const size_t counts[] = {0, 1, 3, 17, 64, 1000, 4099};

/* Every type and op the kernels take, every count, in place or not. */
static void sweep_reductions(hier_coll_t coll, unsigned seed)
{
    for (int dt = 0; dt < HIER_DT_COUNT; dt++)
        for (int op = 0; op < HIER_OP_COUNT; op++) {
            hier_reduce_kernel_t k;
            if (hier_reduce_kernel_get((hier_dtype_t)dt, (hier_op_t)op, &k) != HIER_OK) continue;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (int ip = 0; ip < 2; ip++)
                    check_shape(&(shape_t){coll, (hier_dtype_t)dt, (hier_op_t)op, counts[c], ip}, seed++);
        }
}

Test(pair, allreduce_every_type_and_op_bit_for_bit_the_schedules, .timeout = 120)
{
    sweep_reductions(HIER_COLL_ALLREDUCE, 1);
}

Test(pair, reduce_scatter_every_type_and_op_bit_for_bit_the_schedules, .timeout = 120)
{
    sweep_reductions(HIER_COLL_REDUCE_SCATTER, 100);
}

Test(pair, allgather_blocks_in_rank_order)
{
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
        for (int ip = 0; ip < 2; ip++) check_shape(&(shape_t){HIER_COLL_ALLGATHER, 0, 0, counts[c], ip}, (unsigned)c);
}

/* C's own arithmetic, without the kernels: wrapping 8-bit sums (the
 * previous component's op/avx saturates them), float sums, double maxima. */
Test(pair, results_against_c_arithmetic)
{
    shape_t s = {HIER_COLL_ALLREDUCE, HIER_DT_UINT8, HIER_OP_SUM, 300, 0};
    rk_t r[2];
    for (int me = 0; me < 2; me++) {
        rank_open(&r[me], me, &s, 1);
        for (size_t i = 0; i < s.count; i++) r[me].in[i] = (uint8_t)(140 + i + (size_t)me);
    }
    run_pair(r);
    for (int me = 0; me < 2; me++)
        for (size_t i = 0; i < s.count; i++)
            cr_assert_eq(r[me].out[i], (uint8_t)(280 + 2 * i + 1), "rank %d [%zu]: %u", me, i, r[me].out[i]);
    for (int me = 0; me < 2; me++) rank_close(&r[me]);

    s = (shape_t){HIER_COLL_ALLREDUCE, HIER_DT_FLOAT, HIER_OP_SUM, 100, 1};
    for (int me = 0; me < 2; me++) {
        rank_open(&r[me], me, &s, 1);
        for (size_t i = 0; i < s.count; i++) ((float *)r[me].out)[i] = (float)i * 0.25f + (float)me * 1e6f;
    }
    run_pair(r);
    for (int me = 0; me < 2; me++)
        for (size_t i = 0; i < s.count; i++) {
            float a = (float)i * 0.25f, b = (float)i * 0.25f + 1e6f;
            cr_assert_eq(((float *)r[me].out)[i], a + b, "rank %d [%zu]", me, i);
        }
    for (int me = 0; me < 2; me++) rank_close(&r[me]);

    s = (shape_t){HIER_COLL_REDUCE_SCATTER, HIER_DT_DOUBLE, HIER_OP_MAX, 10, 0};
    for (int me = 0; me < 2; me++) {
        rank_open(&r[me], me, &s, 1);
        for (size_t i = 0; i < s.count; i++) ((double *)r[me].in)[i] = me ? (double)i : 5.0 - (double)i;
    }
    run_pair(r);
    for (int me = 0; me < 2; me++)
        for (size_t i = 0; i < r[me].rcounts[me]; i++) {
            double a = 5.0 - (double)(r[me].rdispls[me] + i), b = (double)(r[me].rdispls[me] + i);
            cr_assert_eq(((double *)r[me].out)[i], a > b ? a : b, "rank %d [%zu]", me, i);
        }
    for (int me = 0; me < 2; me++) rank_close(&r[me]);
}

/* The schedules between two nodes of one rank each fold the peer's
 * operand into this rank's own, by acc (a NET_RECV with net_reduce over
 * the bytes its REDUCE or COPY filled with this rank's input): what the
 * pair path does and the references above assume. */
Test(pair, schedules_fold_mine_first)
{
    static const struct {
        hier_sched_kind_t kind;
        hier_net_kind_t net;
    } kinds[] = {{HIER_SCHED_HIER_ALLREDUCE, HIER_NET_RD_ALLREDUCE},
                 {HIER_SCHED_HIER_REDUCE_SCATTER, HIER_NET_RING_REDUCE_SCATTER},
                 {HIER_SCHED_HIER_REDUCE_SCATTER, HIER_NET_RH_REDUCE_SCATTER}};
    uint32_t first[3] = {0, 1, 2}, ranks[2] = {0, 1}, order[1] = {0};
    size_t rc[2] = {8, 9}, rd[2] = {0, 8};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (int me = 0; me < 2; me++) {
            int rs = kinds[k].kind == HIER_SCHED_HIER_REDUCE_SCATTER;
            hier_sched_args_t a = {.kind = kinds[k].kind, .nranks = 1, .esize = 8, .count = 17, .rcounts = rc,
                                   .rdispls = rd, .chunk_bytes = 65536, .order = order, .node = me, .nnodes = 2,
                                   .pieces = 1, .net_kind = kinds[k].net, .node_first = first, .node_ranks = ranks};
            cr_assert_eq(hier_sched_nchunks(&a), 1);
            hier_step_t *s = calloc(hier_sched_max_steps(&a), sizeof(*s));
            cr_assert_not_null(s);
            size_t n = hier_sched_build(&a, 0, 0, s), folds = 0;
            hier_ref_t mine = {0};
            int have_mine = 0;
            for (size_t i = 0; i < n; i++) {
                if (s[i].op == HIER_STEP_REDUCE && s[i].nranks == 1) {
                    mine = s[i].dst, have_mine = 1; /* (my input, copied into my slot) */
                } else if (s[i].op == HIER_STEP_NET_RECV) {
                    cr_assert(s[i].net_reduce, "kind %zu rank %d: the peer's operand is not folded on arrival", k, me);
                    cr_assert(have_mine && s[i].dst.kind == mine.kind && s[i].dst.buf == mine.buf,
                              "kind %zu rank %d: the fold lands elsewhere than my operand", k, me);
                    size_t at = rs ? mine.off + rd[me] * 8 : mine.off;
                    cr_assert_eq(s[i].dst.off, at, "kind %zu rank %d: folded at %zu, my operand at %zu", k, me,
                                 s[i].dst.off, at);
                    folds++;
                }
            }
            cr_assert_eq(folds, 1, "kind %zu rank %d: %zu folds", k, me, folds);
            free(s);
        }
}

Test(pair, ranks_that_disagree_both_get_the_mismatch, .timeout = 60)
{
    rk_t r[2];
    shape_t a = {HIER_COLL_ALLREDUCE, HIER_DT_INT32, HIER_OP_SUM, 16, 0};
    shape_t b[] = {{HIER_COLL_ALLREDUCE, HIER_DT_INT32, HIER_OP_SUM, 32, 0},
                   {HIER_COLL_ALLREDUCE, HIER_DT_INT32, HIER_OP_SUM, 8, 0},
                   {HIER_COLL_ALLGATHER, 0, 0, 64, 0},
                   {HIER_COLL_ALLREDUCE, HIER_DT_FLOAT, HIER_OP_SUM, 16, 0},
                   {HIER_COLL_REDUCE_SCATTER, HIER_DT_INT32, HIER_OP_SUM, 32, 0}};
    for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
        rank_open(&r[0], 0, &a, 1);
        rank_open(&r[1], 1, &b[i], 2);
        run_pair(r);
        for (int me = 0; me < 2; me++)
            cr_assert_eq(r[me].st, HIER_ERR_MISMATCH, "case %zu: rank %d status %d", i, me, r[me].st);
        for (int me = 0; me < 2; me++) rank_close(&r[me]);
    }
}

Test(pair, a_peer_that_never_calls_times_out, .timeout = 60)
{
    int saved = hier_params.timeout;
    hier_params.timeout = 1;
    rk_t r;
    rank_open(&r, 0, &(shape_t){HIER_COLL_ALLREDUCE, HIER_DT_INT32, HIER_OP_SUM, 16, 0}, 1);
    rank_run(&r);
    cr_assert_eq(r.st, HIER_ERR_TIMEOUT, "status %d", r.st);
    rank_close(&r);
    pml_clear();
    hier_params.timeout = saved;
}
