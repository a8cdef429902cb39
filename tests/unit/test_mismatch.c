/* Never hang, never guess, with forked ranks on one node: calls that differ
 * between ranks fail on every rank (signatures), the communicator falls
 * back for good; a rank stuck inside a call makes the others fail within
 * the timeout; and the signatures themselves. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fork_ranks.h"
#include "base/hier_params.h"
#include "base/hier_sig.h"
#include "comm/hier_comm_state.h" /* (white mailbox: a rank that signs a call and stops inside it) */
#include "shm/hier_shm.h"

Test(sig, names_what_differs)
{
    size_t a[3] = {4, 4, 4}, b[3] = {6, 2, 4};
    hier_sig_t x = hier_sig_make(HIER_COLL_ALLREDUCE, 600, HIER_DT_INT32, HIER_OP_SUM, 0, 17);
    hier_sig_t y = hier_sig_make(HIER_COLL_ALLREDUCE, 300, HIER_DT_INT32, HIER_OP_SUM, 0, 17);
    hier_sig_t z = hier_sig_make(HIER_COLL_ALLREDUCE, 600, HIER_DT_INT32, HIER_OP_SUM, 0, 17 + 65536);
    char line[320];
    cr_assert(hier_sig_valid(x) && !hier_sig_valid((hier_sig_t){0}));
    cr_assert(!hier_sig_same(x, y) && hier_sig_same(x, z), "the call number wraps at 2^16");
    cr_assert_eq(hier_sig_ahead(x, hier_sig_make(HIER_COLL_ALLREDUCE, 1, 0, 0, 0, 18)), 1);
    cr_assert_eq(hier_sig_ahead(x, hier_sig_make(HIER_COLL_ALLREDUCE, 1, 0, 0, 0, 16)), -1);
    hier_sig_explain(3, x, 0, y, line, sizeof(line));
    cr_assert_str_eq(line, "rank 3 called allreduce of 600 int32 (sum), call 17; rank 0 allreduce of 300 int32 (sum), "
                           "call 17");
    cr_assert_neq(hier_sig_digest(a, 3), hier_sig_digest(b, 3), "same total, other counts");
    cr_assert(hier_sig_same(hier_sig_make(HIER_COLL_ALLGATHER, 8, HIER_DT_INT32, HIER_OP_SUM, 0, 1),
                            hier_sig_make(HIER_COLL_ALLGATHER, 8, HIER_DT_DOUBLE, HIER_OP_MAX, 0, 1)),
              "allgather moves bytes: type and op do not count");
    cr_assert(hier_sig_same(hier_sig_make(HIER_COLL_REDUCE_SCATTER_BLOCK, 8, 0, 0, 9, 1),
                            hier_sig_make(HIER_COLL_REDUCE_SCATTER, 8, 0, 0, 9, 1)));
}

static void setup(void)
{
    hier_params_defaults(&hier_params);
    hier_params.shm_chunk_size = 4096;
    hier_params.spin_count = 50;
    hier_params.timeout = 5;
}

/* Rank 0 calls with count `odd`, the others with `even` (int32 sum), after
 * one matched call; every rank must get HIER_ERR_MISMATCH, then the
 * previous component (path fallback:mismatch) for the next call. */
static int mismatched(hier_comm_t *comm, int me, size_t even, size_t odd)
{
    size_t n = even > odd ? even : odd;
    int32_t *x = calloc(n, sizeof(*x)), *y = calloc(n, sizeof(*y));
    hier_result_t res;
    int rc = 0;
    if (hier_comm_allreduce(comm, x, y, 8, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_OK) rc = 2;
    else if (hier_comm_allreduce(comm, x, y, me ? even : odd, HIER_DT_INT32, HIER_OP_SUM, &res) !=
             HIER_ERR_MISMATCH)
        rc = 3;
    else if (hier_comm_allreduce(comm, x, y, 8, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_ERR_NOT_SUPPORTED ||
             res.path != HIER_PATH_FALLBACK_MISMATCH)
        rc = 4;
    free(x);
    free(y);
    return rc;
}

static int small_counts(hier_comm_t *c, int me, int n, fork_world_t *w)
{
    (void)n, (void)w;
    return mismatched(c, me, 300, 600);
}
static int large_counts(hier_comm_t *c, int me, int n, fork_world_t *w)
{
    (void)n, (void)w;
    return mismatched(c, me, 1 << 18, 1 << 19);
}
static int small_and_large(hier_comm_t *c, int me, int n, fork_world_t *w)
{
    (void)n, (void)w;
    return mismatched(c, me, 1 << 18, 100);
}

Test(mismatch, small_counts_fail_on_every_rank, .init = setup)
{
    int st[64];
    cr_assert_eq(run_ranks(3, small_counts, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

Test(mismatch, large_counts_fail_on_every_rank, .init = setup)
{
    int st[64];
    cr_assert_eq(run_ranks(3, large_counts, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

Test(mismatch, a_small_call_against_large_ones_fails_on_every_rank, .init = setup)
{
    int st[64];
    cr_assert_eq(run_ranks(2, small_and_large, st), 2, "statuses %d %d", st[0], st[1]);
}

/* reduce_scatter: the same total, split differently on rank 1 */
static int rs_counts(hier_comm_t *c, int me, int n, fork_world_t *w)
{
    size_t counts[3] = {4096, 4096, 4096};
    int32_t *x = calloc(3 * 4096, sizeof(*x)), *y = calloc(3 * 4096, sizeof(*y));
    hier_result_t res;
    (void)n, (void)w;
    if (me == 1) counts[0] += 100, counts[2] -= 100;
    hier_status_t st = hier_comm_reduce_scatter(c, x, y, counts, HIER_DT_INT32, HIER_OP_SUM, &res);
    free(x);
    free(y);
    return st == HIER_ERR_MISMATCH ? 0 : 3;
}

Test(mismatch, reduce_scatter_counts_fail_on_every_rank, .init = setup)
{
    int st[64];
    cr_assert_eq(run_ranks(3, rs_counts, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

/* A rank stuck inside a call (it signed the call, then stops: a stopped
 * process, a hung device copy): after one matched call, rank 1 signs the
 * next allreduce and sleeps past the timeout (2 s); the others must fail
 * with HIER_ERR_TIMEOUT after about the timeout, not hang, not fail early,
 * and the communicator falls back for good. */
#define STUCK_TIMEOUT_S 2

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int stuck_inside(hier_comm_t *c, int me, size_t count)
{
    int32_t *x = calloc(count, sizeof(*x)), *y = calloc(count, sizeof(*y));
    hier_result_t res;
    int rc = 0;
    if (hier_comm_allreduce(c, x, y, count, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_OK) {
        rc = 2;
    } else if (me == 1) {
        hier_shm_sign(c->node->small.seg, &c->node->wait,
                      hier_sig_make(HIER_COLL_ALLREDUCE, count, HIER_DT_INT32, HIER_OP_SUM, 0, c->calls + 1));
        sleep(STUCK_TIMEOUT_S + 3);
    } else {
        double t0 = now_s();
        hier_status_t st = hier_comm_allreduce(c, x, y, count, HIER_DT_INT32, HIER_OP_SUM, &res);
        double took = now_s() - t0;
        if (st != HIER_ERR_TIMEOUT) rc = 3;
        else if (took < STUCK_TIMEOUT_S - 0.5 || took > STUCK_TIMEOUT_S + 2) rc = 4;
        else if (hier_comm_allreduce(c, x, y, count, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_ERR_NOT_SUPPORTED)
            rc = 5;
    }
    free(x);
    free(y);
    return rc;
}

static int stuck_small(hier_comm_t *c, int me, int n, fork_world_t *w)
{
    (void)n, (void)w;
    return stuck_inside(c, me, 64); /* the low-latency path: waits for rank 1's header */
}
static int stuck_large(hier_comm_t *c, int me, int n, fork_world_t *w)
{
    (void)n, (void)w;
    return stuck_inside(c, me, 1 << 18); /* the segment's barriers */
}

static void stuck_setup(void)
{
    setup();
    hier_params.timeout = STUCK_TIMEOUT_S;
}

Test(stuck, a_rank_stuck_in_a_small_call_fails_the_others_within_the_timeout, .init = stuck_setup, .timeout = 30)
{
    int st[64];
    cr_assert_eq(run_ranks(3, stuck_small, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

Test(stuck, a_rank_stuck_in_a_large_call_fails_the_others_within_the_timeout, .init = stuck_setup, .timeout = 30)
{
    int st[64];
    cr_assert_eq(run_ranks(3, stuck_large, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

/* Calls of no data through the segment (flat forced) run no barrier, so
 * there is no point after which every peer must have signed: a slow peer
 * is not a mismatch. Rank 1 comes late to each; all must succeed. */
static int empty_calls(hier_comm_t *c, int me, int n, fork_world_t *w)
{
    int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    hier_result_t res;
    (void)w;
    for (int i = 0; i < 4; i++) {
        if (me == 1) usleep(50000);
        if (hier_comm_allreduce(c, x, y, 0, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_OK) return 2 + i;
    }
    if (hier_comm_allreduce(c, x, y, 8, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_OK) return 10;
    for (int i = 0; i < 8; i++)
        if (y[i] != n * x[i]) return 11;
    return 0;
}

Test(mismatch, calls_of_no_data_are_not_mismatches, .init = setup)
{
    int st[64];
    hier_params.allreduce_algorithm = HIER_ALGO_FLAT;
    cr_assert_eq(run_ranks(3, empty_calls, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}
