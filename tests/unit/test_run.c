/* The executor as requests (exec/hier_run.c, hier_exec_ll.c): every rank of
 * a node in this one process, each with its own mapping of a real node
 * segment, advanced without waiting in a seeded random order (a rank may
 * be left behind for many turns, or start its next call while a slow one
 * is still in the last). Results against a reference folded here; a peer
 * that leaves in the middle ends every other rank's request with its
 * reason, none hangs. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/hier_exec_ll.h"
#include "exec/hier_run.h"
#include "shm/hier_shm.h"

#define MAXR 8
#define CALLS 3
#define TURNS_MAX 20000000u

typedef struct {
    int n;
    size_t chunk;
    hier_shm_t *seg[MAXR];           /* rank r's own mapping */
    uint8_t *slots[MAXR][MAXR];      /* slots[r][q]: q's slot as r sees it */
    hier_shm_wait_t wait[MAXR];
    hier_step_t *steps[MAXR][2];
    uint64_t chunk_seq[MAXR];
    uint8_t *scratch[MAXR];
    uint32_t order[MAXR];
    hier_run_t run[MAXR];
} node_t;

static void node_open(node_t *nd, int n, size_t chunk, size_t max_steps)
{
    memset(nd, 0, sizeof(*nd));
    nd->n = n;
    nd->chunk = chunk;
    hier_shm_shape_t shape = {.kind = HIER_SHM_NODE, .nranks = n, .chunk_bytes = chunk};
    cr_assert_eq(hier_shm_create(NULL, &shape, &nd->seg[0]), HIER_OK);
    for (int r = 1; r < n; r++)
        cr_assert_eq(hier_shm_attach(NULL, hier_shm_name(nd->seg[0]), &shape, &nd->seg[r]), HIER_OK);
    for (int r = 0; r < n; r++) cr_assert_eq(hier_shm_claim(nd->seg[r], r), HIER_OK);
    hier_shm_unlink(nd->seg[0]);
    for (int r = 0; r < n; r++) {
        nd->order[r] = (uint32_t)r;
        for (int q = 0; q < n; q++) nd->slots[r][q] = hier_shm_slot(nd->seg[r], q);
        nd->wait[r] = (hier_shm_wait_t){.nranks = n, .me = r, .spin_count = 1};
        for (int p = 0; p < 2; p++) nd->steps[r][p] = malloc(max_steps * sizeof(hier_step_t));
        nd->scratch[r] = malloc(HIER_EXEC_SCRATCH_BYTES);
        nd->run[r] = (hier_run_t){.node = nd->seg[r], .wait = &nd->wait[r], .slots = nd->slots[r],
                                  .buf_stride = hier_shm_buf_stride(nd->seg[r]), .scratch = nd->scratch[r],
                                  .steps = {nd->steps[r][0], nd->steps[r][1]}, .chunk_seq = &nd->chunk_seq[r]};
    }
}

static void node_close(node_t *nd)
{
    for (int r = 0; r < nd->n; r++) {
        free(nd->steps[r][0]);
        free(nd->steps[r][1]);
        free(nd->scratch[r]);
        hier_shm_detach(nd->seg[r]);
    }
}

static double input(int rank, int call, size_t i)
{
    return 1.0 / (double)(rank + 3) + (double)((i + (size_t)call) % 13) * 0.1; /* (the fold order shows) */
}

typedef struct {
    hier_sched_kind_t kind;
    int in_place;
    size_t count;                    /* elements (allgather: bytes per rank) */
    size_t rcounts[MAXR], rdispls[MAXR];
    double *in[MAXR], *out[MAXR];
    uint8_t *gin[MAXR], *gout[MAXR]; /* allgather's */
} call_t;

static void call_make(call_t *c, const node_t *nd, hier_sched_kind_t kind, size_t count, int in_place, int k)
{
    *c = (call_t){.kind = kind, .in_place = in_place, .count = count};
    size_t total = 0;
    for (int r = 0; r < nd->n; r++) {
        c->rcounts[r] = r % 3 == 1 ? 0 : count / (size_t)nd->n + (size_t)r; /* (uneven, some zero) */
        c->rdispls[r] = total;
        total += c->rcounts[r];
    }
    if (kind == HIER_SCHED_REDUCE_SCATTER) c->count = total;
    for (int r = 0; r < nd->n; r++) {
        size_t elems = c->count + 1;
        c->in[r] = malloc(elems * sizeof(double));
        c->out[r] = malloc(elems * sizeof(double));
        for (size_t i = 0; i < elems; i++) c->out[r][i] = -7;
        for (size_t i = 0; i < c->count; i++) (in_place ? c->out[r] : c->in[r])[i] = input(r, k, i);
        c->gin[r] = malloc(count + 1);
        c->gout[r] = malloc((size_t)nd->n * count + 1);
        memset(c->gout[r], 0xEE, (size_t)nd->n * count);
        uint8_t *src = in_place ? c->gout[r] + (size_t)r * count : c->gin[r];
        for (size_t i = 0; i < count; i++) src[i] = (uint8_t)(r * 37 + i * 11 + (size_t)k);
    }
}

static void call_free(call_t *c, int n)
{
    for (int r = 0; r < n; r++) {
        free(c->in[r]);
        free(c->out[r]);
        free(c->gin[r]);
        free(c->gout[r]);
    }
}

static hier_sched_args_t call_args(const call_t *c, const node_t *nd, int r)
{
    int gather = c->kind == HIER_SCHED_ALLGATHER;
    return (hier_sched_args_t){.kind = c->kind, .nranks = nd->n, .me = r, .esize = gather ? 1 : sizeof(double),
                               .count = c->count, .in_place = c->in_place, .chunk_bytes = nd->chunk,
                               .order = nd->order, .rcounts = c->rcounts, .rdispls = c->rdispls};
}

static void call_check(const call_t *c, const node_t *nd, int k)
{
    for (int r = 0; r < nd->n; r++) {
        if (c->kind == HIER_SCHED_ALLGATHER) {
            for (int j = 0; j < nd->n; j++)
                for (size_t i = 0; i < c->count; i++)
                    cr_assert_eq(c->gout[r][(size_t)j * c->count + i], (uint8_t)(j * 37 + i * 11 + (size_t)k),
                                 "allgather n %d block %zu call %d: rank %d block %d [%zu]", nd->n, c->count, k, r,
                                 j, i);
            continue;
        }
        int rs = c->kind == HIER_SCHED_REDUCE_SCATTER;
        size_t len = rs ? c->rcounts[r] : c->count, off = rs ? c->rdispls[r] : 0;
        for (size_t i = 0; i < len; i++) {
            double want = input(0, k, off + i);
            for (int q = 1; q < nd->n; q++) want += input(q, k, off + i);
            cr_assert(!memcmp(&c->out[r][i], &want, sizeof(want)), "kind %d n %d count %zu call %d rank %d [%zu]: "
                      "%.17g != %.17g", c->kind, nd->n, c->count, k, r, i, c->out[r][i], want);
        }
    }
}

/* CALLS calls of one kind back to back, every rank advanced in a random
 * order: a rank starts its next call as soon as its last is over. cached:
 * every rank's run keeps the shape's schedule (hier_run_cache_t), so a call
 * of one chunk runs the steps an earlier call built over the same pipeline
 * buffer (built once each: the cache's lists stay where they were). */
static void sweep_one(hier_sched_kind_t kind, int n, size_t count, size_t chunk, int in_place, unsigned seed,
                      int cached)
{
    hier_run_cache_t cache[MAXR] = {0};
    hier_step_t *built[MAXR][2] = {{0}};
    node_t nd;
    call_t calls[CALLS];
    hier_run_req_t q[MAXR];
    hier_sched_args_t args[MAXR];
    hier_reduce_kernel_t kernel = {0};
    int at[MAXR] = {0}, started[MAXR] = {0};
    if (kind != HIER_SCHED_ALLGATHER) cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kernel), HIER_OK);
    for (int k = 0; k < CALLS; k++) call_make(&calls[k], &(node_t){.n = n}, kind, count, in_place, k);
    hier_sched_args_t probe = call_args(&calls[0], &(node_t){.n = n, .chunk = chunk}, 0);
    node_open(&nd, n, chunk, hier_sched_max_steps(&probe) + 1);
    for (int r = 0; cached && r < n; r++) {
        hier_sched_args_t a = call_args(&calls[0], &nd, r);
        cache[r].nchunks = hier_sched_nchunks(&a);
        nd.run[r].cache = &cache[r];
    }
    srand(seed);
    int left = n * CALLS;
    for (unsigned turn = 0; left && turn < TURNS_MAX; turn++) {
        int r = rand() % n;
        if (at[r] == CALLS) continue;
        call_t *c = &calls[at[r]];
        if (!started[r]) {
            args[r] = call_args(c, &nd, r);
            const void *s = kind == HIER_SCHED_ALLGATHER ? (void *)c->gin[r] : (void *)c->in[r];
            void *o = kind == HIER_SCHED_ALLGATHER ? (void *)c->gout[r] : (void *)c->out[r];
            hier_run_begin(&q[r], &nd.run[r], &args[r], in_place ? NULL : s, o, kernel);
            started[r] = 1;
        }
        uint64_t net = 0;
        hier_status_t st = hier_run_advance(&q[r], 0, &net);
        if (st == HIER_IN_PROGRESS) continue;
        cr_assert_eq(st, HIER_OK, "kind %d n %d count %zu: rank %d's call %d ended with %d", kind, n, count, r, at[r],
                     st);
        started[r] = 0;
        at[r]++;
        left--;
        for (int b = 0; b < 2; b++) { /* (built once: never replaced) */
            cr_assert(!built[r][b] || cache[r].steps[b] == built[r][b], "rank %d: buffer %d's steps built again", r, b);
            built[r][b] = cache[r].steps[b];
        }
    }
    cr_assert_eq(left, 0, "kind %d n %d count %zu chunk %zu: calls not over after %u turns (a hang)", kind, n, count,
                 chunk, TURNS_MAX);
    for (int k = 0; k < CALLS; k++) {
        call_check(&calls[k], &nd, k);
        call_free(&calls[k], n);
    }
    for (int r = 0; r < n; r++) {
        cr_assert(!cached || cache[r].nchunks != 1 || !count || cache[r].steps[0],
                  "rank %d: a call of one chunk kept no steps", r);
        hier_run_cache_clear(&cache[r]);
    }
    node_close(&nd);
}

Test(run, requests_in_random_order_every_kind)
{
    static const hier_sched_kind_t kinds[] = {HIER_SCHED_ALLREDUCE_FLAT, HIER_SCHED_ALLREDUCE_RSAG,
                                              HIER_SCHED_ALLGATHER, HIER_SCHED_REDUCE_SCATTER};
    static const size_t counts[] = {0, 1, 7, 64, 1031, 20000};
    static const size_t chunks[] = {256, 4096};
    unsigned seed = 1;
    for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++)
        for (int n = 2; n <= 5; n++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                for (size_t hi = 0; hi < sizeof(chunks) / sizeof(chunks[0]); hi++)
                    for (int ip = 0; ip < 2; ip++) sweep_one(kinds[ki], n, counts[ci], chunks[hi], ip, seed++, 0);
}

/* The same, each rank's run keeping the shape's schedule between calls
 * (hier_node_run's cache of blocking calls): the results stay right where
 * a call takes steps built by an earlier one. */
Test(run, cached_schedules_every_kind)
{
    static const hier_sched_kind_t kinds[] = {HIER_SCHED_ALLREDUCE_FLAT, HIER_SCHED_ALLREDUCE_RSAG,
                                              HIER_SCHED_ALLGATHER, HIER_SCHED_REDUCE_SCATTER};
    static const size_t counts[] = {0, 1, 7, 64, 1031, 20000};
    unsigned seed = 1000;
    for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++)
        for (int n = 2; n <= 5; n++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                for (int ip = 0; ip < 2; ip++) sweep_one(kinds[ki], n, counts[ci], 4096, ip, seed++, 1);
}

/* A call of no data waits for its node's ranks at one barrier: without
 * it, a rank ran on to the call after next and signed it over the
 * signature (same parity) a late peer had yet to check after the call
 * before: a mismatch reported where there was none. Rank 1 finishes call
 * 1's run but has not checked it; rank 0 checks, signs call 2 (no data)
 * and must wait there; rank 1's check of call 1 still sees call 1. */
static void sign(node_t *nd, int r, size_t count, uint16_t call)
{
    hier_shm_sign(nd->seg[r], &nd->wait[r], hier_sig_make(HIER_COLL_ALLREDUCE, count, HIER_DT_DOUBLE, HIER_OP_SUM, 0, call));
}

static hier_status_t advance_to_end(hier_run_req_t *q)
{
    uint64_t net;
    hier_status_t st = HIER_IN_PROGRESS;
    for (unsigned turn = 0; st == HIER_IN_PROGRESS && turn < 1000; turn++) st = hier_run_advance(q, 0, &net);
    return st;
}

Test(run, a_call_of_no_data_meets_its_node)
{
    enum { N = 2 };
    node_t nd;
    call_t one, none;
    hier_run_req_t q[N];
    hier_sched_args_t args[N], empty[N];
    hier_reduce_kernel_t kernel;
    uint64_t net;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kernel), HIER_OK);
    call_make(&one, &(node_t){.n = N}, HIER_SCHED_ALLREDUCE_FLAT, 64, 0, 0);
    call_make(&none, &(node_t){.n = N}, HIER_SCHED_ALLREDUCE_FLAT, 0, 0, 1);
    args[0] = call_args(&one, &(node_t){.n = N, .chunk = 1024}, 0);
    node_open(&nd, N, 1024, hier_sched_max_steps(&args[0]) + 1);
    for (int r = 0; r < N; r++) { /* call 1, run by both */
        args[r] = call_args(&one, &nd, r);
        empty[r] = call_args(&none, &nd, r);
        sign(&nd, r, one.count, 1);
        hier_run_begin(&q[r], &nd.run[r], &args[r], one.in[r], one.out[r], kernel);
    }
    for (unsigned turn = 0; turn < 1000; turn++)
        for (int r = 0; r < N; r++) (void)hier_run_advance(&q[r], 0, &net);
    cr_assert_eq(advance_to_end(&q[0]), HIER_OK);
    cr_assert_eq(advance_to_end(&q[1]), HIER_OK);
    call_check(&one, &nd, 0);
    cr_assert_eq(hier_shm_check_peers(nd.seg[0], &nd.wait[0]), HIER_OK);
    sign(&nd, 0, 0, 2); /* rank 0: call 2, no data: it waits for rank 1 */
    hier_run_begin(&q[0], &nd.run[0], &empty[0], NULL, none.out[0], kernel);
    cr_assert_eq(advance_to_end(&q[0]), HIER_IN_PROGRESS, "a call of no data returned before its peer came");
    cr_assert_eq(hier_shm_check_peers(nd.seg[1], &nd.wait[1]), HIER_OK, "rank 1's check of call 1");
    sign(&nd, 1, 0, 2);
    hier_run_begin(&q[1], &nd.run[1], &empty[1], NULL, none.out[1], kernel);
    cr_assert_eq(advance_to_end(&q[1]), HIER_OK);
    cr_assert_eq(advance_to_end(&q[0]), HIER_OK);
    for (int r = 0; r < N; r++) cr_assert_eq(hier_shm_check_peers(nd.seg[r], &nd.wait[r]), HIER_OK);
    call_free(&one, N);
    call_free(&none, N);
    node_close(&nd);
}

/* The blocking call is the same executor advanced with waits: it and
 * requests on the other ranks meet at the same barriers. Rank 0 blocks in
 * a thread while the others are advanced here. */
typedef struct {
    hier_run_t *run;
    hier_sched_args_t *args;
    const void *s;
    void *o;
    hier_reduce_kernel_t kernel;
    hier_status_t st;
} blocker_t;

static void *blocker_main(void *arg)
{
    blocker_t *b = arg;
    uint64_t net;
    hier_run_req_t q;
    hier_run_begin(&q, b->run, b->args, b->s, b->o, b->kernel);
    b->st = hier_run_advance(&q, 1, &net);
    return NULL;
}

Test(run, a_blocking_call_meets_requests)
{
    enum { N = 3 };
    node_t nd;
    call_t c;
    hier_run_req_t q[N];
    hier_sched_args_t args[N];
    hier_reduce_kernel_t kernel;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kernel), HIER_OK);
    call_make(&c, &(node_t){.n = N}, HIER_SCHED_ALLREDUCE_RSAG, 5000, 0, 0);
    args[0] = call_args(&c, &(node_t){.n = N, .chunk = 1024}, 0); /* (for the reserved memory only) */
    node_open(&nd, N, 1024, hier_sched_max_steps(&args[0]) + 1);
    for (int r = 0; r < N; r++) args[r] = call_args(&c, &nd, r);
    blocker_t b = {.run = &nd.run[0], .args = &args[0], .s = c.in[0], .o = c.out[0], .kernel = kernel};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, blocker_main, &b), 0);
    int left = N - 1, over[N] = {0};
    for (int r = 1; r < N; r++) hier_run_begin(&q[r], &nd.run[r], &args[r], c.in[r], c.out[r], kernel);
    for (unsigned turn = 0; left && turn < TURNS_MAX; turn++) {
        int r = 1 + (int)(turn % (N - 1));
        uint64_t net;
        if (over[r]) continue;
        hier_status_t st = hier_run_advance(&q[r], 0, &net);
        if (st == HIER_IN_PROGRESS) continue;
        cr_assert_eq(st, HIER_OK);
        over[r] = 1;
        left--;
    }
    pthread_join(t, NULL);
    cr_assert_eq(left, 0);
    cr_assert_eq(b.st, HIER_OK);
    call_check(&c, &nd, 0);
    call_free(&c, N);
    node_close(&nd);
}

/* A rank that leaves in the middle of a call (what a rank does when it
 * cannot wait for its peers any more): every other rank's request ends
 * with its reason, on its own looks, not waiting. */
Test(run, a_peer_that_leaves_ends_every_request)
{
    enum { N = 4 };
    node_t nd;
    call_t c;
    hier_run_req_t q[N];
    hier_sched_args_t args[N];
    hier_reduce_kernel_t kernel;
    hier_status_t st[N];
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kernel), HIER_OK);
    call_make(&c, &(node_t){.n = N}, HIER_SCHED_ALLREDUCE_RSAG, 200000, 0, 0);
    args[0] = call_args(&c, &(node_t){.n = N, .chunk = 512}, 0); /* (for the reserved memory only) */
    node_open(&nd, N, 512, hier_sched_max_steps(&args[0]) + 1);
    for (int r = 0; r < N; r++) args[r] = call_args(&c, &nd, r);
    for (int r = 0; r < N; r++) {
        hier_run_begin(&q[r], &nd.run[r], &args[r], c.in[r], c.out[r], kernel);
        st[r] = HIER_IN_PROGRESS;
    }
    uint64_t net;
    for (int turn = 0; turn < 50; turn++) /* (a few chunks in) */
        for (int r = 0; r < N; r++) st[r] = hier_run_advance(&q[r], 0, &net);
    for (int r = 0; r < N; r++) cr_assert_eq(st[r], HIER_IN_PROGRESS, "rank %d's call over too soon", r);
    hier_shm_leave(nd.seg[N - 1], &nd.wait[N - 1], HIER_ERR_TIMEOUT);
    int left = N - 1;
    for (unsigned turn = 0; left && turn < TURNS_MAX; turn++)
        for (int r = 0; r < N - 1; r++) {
            if (st[r] != HIER_IN_PROGRESS) continue;
            st[r] = hier_run_advance(&q[r], 0, &net);
            if (st[r] != HIER_IN_PROGRESS) left--;
        }
    cr_assert_eq(left, 0, "a request still waits for a peer that left");
    for (int r = 0; r < N - 1; r++) cr_assert_eq(st[r], HIER_ERR_TIMEOUT, "rank %d ended with %d", r, st[r]);
    call_free(&c, N);
    node_close(&nd);
}

/* The low-latency path's requests: post, then looks until every peer's
 * payload is there; allreduce, allgather and reduce_scatter, calls back
 * to back (the areas alternate by parity). */
Test(run, low_latency_requests)
{
    enum { N = 5, C = 6 };
    node_t nd;
    hier_reduce_kernel_t kernel;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kernel), HIER_OK);
    node_open(&nd, N, 256, 8);
    double in[N][C], out[N][C * N];
    size_t rcounts[N] = {2, 0, 1, 3, 0}, rdispls[N] = {0, 2, 2, 3, 6};
    for (int k = 0; k < 9; k++) {
        int kind = k % 3; /* allreduce, allgather, reduce_scatter */
        hier_exec_ll_call_t call[N];
        hier_exec_ll_req_t q[N];
        hier_status_t st[N];
        for (int r = 0; r < N; r++) {
            for (int i = 0; i < C; i++) in[r][i] = input(r, k, (size_t)i);
            call[r] = (hier_exec_ll_call_t){.sbuf = in[r], .rbuf = out[r], .esize = sizeof(double),
                                            .kernel = kernel};
            if (kind == 0) call[r].total = C;
            if (kind == 1) call[r].block = C * sizeof(double);
            if (kind == 2) call[r].total = C, call[r].rcounts = rcounts, call[r].rdispls = rdispls;
        }
        for (int r = N - 1; r >= 0; r--) { /* (posted in reverse, looked at in turn) */
            hier_exec_ll_t ll = {.shm = nd.seg[r], .wait = &nd.wait[r]};
            hier_exec_ll_post(&ll, &call[r], &q[r]);
            st[r] = r == 0 ? HIER_IN_PROGRESS : hier_exec_ll_test(&ll, &call[r], &q[r]);
        }
        for (int r = 0; r < N; r++) {
            hier_exec_ll_t ll = {.shm = nd.seg[r], .wait = &nd.wait[r]};
            if (st[r] == HIER_IN_PROGRESS) st[r] = hier_exec_ll_test(&ll, &call[r], &q[r]);
            cr_assert_eq(st[r], HIER_OK, "call %d rank %d: %d", k, r, st[r]);
            for (int i = 0; i < (kind == 1 ? C * N : kind == 2 ? (int)rcounts[r] : C); i++) {
                double want = 0;
                if (kind == 1) want = input(i / C, k, (size_t)(i % C));
                else
                    for (int p = 0; p < N; p++) want += input(p, k, (kind == 2 ? rdispls[r] : 0) + (size_t)i);
                cr_assert(!memcmp(&out[r][i], &want, sizeof(want)), "ll kind %d call %d rank %d [%d]: %.17g != %.17g",
                          kind, k, r, i, out[r][i], want);
            }
        }
    }
    node_close(&nd);
}
