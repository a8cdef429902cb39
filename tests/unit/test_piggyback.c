/* test_piggyback: a communicator's first call, small, served by the set-up's
 * exchange (hier_comm_piggyback.c). Forked ranks on one node and on two nodes
 * over tcp: which first calls piggyback (path "setup") and which go the usual
 * way, each result against a reference computed here, and every first
 * call's result bit for bit the same as the same call made again on the
 * communicator (the algorithm's own); the verdict on records, as a pure
 * function. */
#include <criterion/criterion.h>
#include <complex.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "base/hier_params.h"
#include "comm/hier_comm.h"
#include "comm/hier_comm_setup.h"
#include "fork_ranks.h"

static void setup(void)
{
    hier_params_defaults(&hier_params);
    hier_params.shm_chunk_size = 4096;
    hier_params.spin_count = 50;
    fork_ranks_per_node = 0;
}

static void nodes_setup(void)
{
    setup();
    hier_params.fabric_provider = "tcp";
    hier_params.fabric_iface = "lo";
    hier_params.fabric_warmup = 0;
}

TestSuite(pb, .init = setup, .timeout = 60);

/* Values whose sum depends on the order of the additions. */
static double order_sensitive(int me)
{
    static const double v[] = {1e16, 1.0, -1e16, 3.0, 0.5};
    return v[me % 5];
}

/* One first call (allreduce) on a fresh communicator, then the same call
 * again: 0, or why not. want_ride: whether the first must piggyback. */
static int allreduce_twice(int me, int n, const void *x, size_t count, hier_dtype_t dt, hier_op_t op, int want_pb,
                           void *first)
{
    hier_comm_t *c;
    hier_result_t res1, res2;
    unsigned char again[256];
    size_t bytes = count * hier_dtype_size(dt);
    if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 1;
    if (hier_comm_allreduce(c, x, first, count, dt, op, &res1) != HIER_OK) return 2;
    if (want_pb >= 0 && (res1.path == HIER_PATH_SETUP) != want_pb) return 3;
    if (hier_comm_allreduce(c, x, again, count, dt, op, &res2) != HIER_OK || res2.path == HIER_PATH_SETUP) return 4;
    if (memcmp(first, again, bytes)) return 5; /* (the first call's order is the algorithm's) */
    hier_comm_destroy(c);
    return 0;
}

/* Sums in rank order (long double), for a reference with room for rounding. */
static int near(double got, long double want, double scale)
{
    return fabsl((long double)got - want) <= 4 * 2.3e-16 * scale;
}

/* Between nodes, the first communicator of these processes exchanges their
 * addresses (an agreement more): its first call goes the usual way. */
static int warm(int me, int n)
{
    hier_comm_t *c;
    hier_result_t res;
    double x[16] = {0}, y[16];
    if (!fork_ranks_per_node) return 0;
    if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 1;
    int rc =
        hier_comm_allreduce(c, x, y, 16, HIER_DT_DOUBLE, HIER_OP_SUM, &res) != HIER_OK || res.path == HIER_PATH_SETUP;
    hier_comm_destroy(c);
    return rc;
}

/* Whether a floating sum's first call (an allreduce of a few bytes) must
 * piggyback: one node (of one NUMA domain: the NUMA tree folds in another
 * order), two nodes, or more, where recursive doubling carries it; -1:
 * either. */
static int sum_pbs(int n)
{
    int per = fork_ranks_per_node, nodes = per ? (n + per - 1) / per : 1;
    if (nodes == 1 && n > 2 && access("/sys/devices/system/node/node1", F_OK) == 0) return -1;
    return 1;
}

static int pb_body(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    (void)comm, (void)w;
    if (warm(me, n)) return 9;
    int sum_pb = sum_pbs(n);
    int rc;
    { /* integers: exact in any order: always */
        int64_t x[3] = {me + 1, -me, (int64_t)1 << (40 + me)}, y[3];
        if ((rc = allreduce_twice(me, n, x, 3, HIER_DT_INT64, HIER_OP_SUM, 1, y))) return 10 + rc;
        int64_t hi = 0;
        for (int r = 0; r < n; r++) hi += (int64_t)1 << (40 + r);
        if (y[0] != (int64_t)n * (n + 1) / 2 || y[1] != -(int64_t)n * (n - 1) / 2 || y[2] != hi) return 19;
    }
    { /* double SUM: piggybacked only where the order is the algorithm's */
        double x = order_sensitive(me), y;
        long double want = 0;
        for (int r = 0; r < n; r++) want += order_sensitive(r);
        if ((rc = allreduce_twice(me, n, &x, 1, HIER_DT_DOUBLE, HIER_OP_SUM, sum_pb, &y))) return 20 + rc;
        if (!near(y, want, 2e16)) return 29;
    }
    { /* double MAX with -0.0 and +0.0: exact (the kernels order them): always */
        double x[2] = {me % 2 ? 0.0 : -0.0, -(double)me}, y[2];
        if ((rc = allreduce_twice(me, n, x, 2, HIER_DT_DOUBLE, HIER_OP_MAX, 1, y))) return 30 + rc;
        if (y[0] != 0.0 || signbit(y[0]) || y[1] != 0.0) return 39;
    }
    { /* complex PROD: never */
        double complex x = 1.0 + 0.5 * I * (me + 1), y, want = 1;
        for (int r = 0; r < n; r++) want *= 1.0 + 0.5 * I * (r + 1);
        if ((rc = allreduce_twice(me, n, &x, 1, HIER_DT_DOUBLE_COMPLEX, HIER_OP_PROD, 0, &y))) return 40 + rc;
        if (cabs(y - want) > 1e-12 * cabs(want)) return 49;
    }
    { /* 9 doubles (72 bytes): too large to be piggybacked */
        double x[9], y[9];
        for (int i = 0; i < 9; i++) x[i] = me * 10 + i;
        if ((rc = allreduce_twice(me, n, x, 9, HIER_DT_DOUBLE, HIER_OP_MAX, 0, y))) return 50 + rc;
        if (y[8] != (n - 1) * 10 + 8) return 59;
    }
    return 0;
}

/* allgather and reduce_scatter first calls, and in place. */
static int pb_more_body(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    (void)comm, (void)w;
    hier_comm_t *c;
    hier_result_t res;
    if (warm(me, n)) return 9;
    { /* allgather, 8 bytes each, then in place */
        int64_t x = 100 + me, y[64];
        if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 1;
        if (hier_comm_allgather(c, &x, y, sizeof(x), &res) != HIER_OK || res.path != HIER_PATH_SETUP) return 2;
        for (int r = 0; r < n; r++)
            if (y[r] != 100 + r) return 3;
        hier_comm_destroy(c);
        memset(y, 0, sizeof(y));
        y[me] = 200 + me;
        if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 4;
        if (hier_comm_allgather(c, HIER_IN_PLACE, y, sizeof(x), &res) != HIER_OK || res.path != HIER_PATH_SETUP)
            return 5;
        for (int r = 0; r < n; r++)
            if (y[r] != 200 + r) return 6;
        hier_comm_destroy(c);
    }
    { /* reduce_scatter, uneven counts (rank r gets 1 + r % 2 ints: 48 bytes at most), in place, then again */
        size_t rcounts[8], total = 0, displ = 0;
        int32_t x[64], first[64], again[64];
        for (int r = 0; r < n; r++) total += rcounts[r] = 1 + (size_t)r % 2;
        for (int r = 0; r < me; r++) displ += rcounts[r];
        for (size_t i = 0; i < total; i++) x[i] = (int32_t)(i * 7 + (size_t)me);
        if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 10;
        memcpy(first, x, sizeof(x));
        if (hier_comm_reduce_scatter(c, HIER_IN_PLACE, first, rcounts, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_OK ||
            res.path != HIER_PATH_SETUP)
            return 11;
        for (size_t i = 0; i < rcounts[me]; i++)
            if (first[i] != (int32_t)((displ + i) * 7 * (size_t)n + (size_t)n * (size_t)(n - 1) / 2)) return 12;
        if (hier_comm_reduce_scatter(c, x, again, rcounts, HIER_DT_INT32, HIER_OP_SUM, &res) != HIER_OK ||
            res.path == HIER_PATH_SETUP || memcmp(first, again, rcounts[me] * sizeof(int32_t)))
            return 13;
        hier_comm_destroy(c);
    }
    { /* in-place allreduce of doubles */
        double y = order_sensitive(me), first;
        if (hier_comm_create(n, me, &fork_ops, &c) != HIER_OK) return 20;
        int want = sum_pbs(n);
        if (hier_comm_allreduce(c, HIER_IN_PLACE, &y, 1, HIER_DT_DOUBLE, HIER_OP_SUM, &res) != HIER_OK ||
            (want >= 0 && (res.path == HIER_PATH_SETUP) != want))
            return 21;
        first = y;
        y = order_sensitive(me);
        if (hier_comm_allreduce(c, HIER_IN_PLACE, &y, 1, HIER_DT_DOUBLE, HIER_OP_SUM, &res) != HIER_OK ||
            memcmp(&first, &y, sizeof(y)))
            return 22;
        hier_comm_destroy(c);
    }
    return 0;
}

static void run(int n, int per_node, rank_body_t body)
{
    int st[64];
    if (per_node) nodes_setup();
    fork_ranks_per_node = per_node;
    int ok = run_ranks(n, body, st);
    fork_ranks_per_node = 0;
    cr_assert_eq(ok, n, "%d ranks (%d per node): statuses %d %d %d %d", n, per_node, st[0], st[1], st[2], st[3]);
}

Test(pb, one_node_two_ranks) { run(2, 0, pb_body); run(2, 0, pb_more_body); }
Test(pb, one_node_three_ranks) { run(3, 0, pb_body); run(3, 0, pb_more_body); }
Test(pb, two_nodes_of_two_over_tcp) { run(4, 2, pb_body); run(4, 2, pb_more_body); }
Test(pb, two_nodes_two_and_one_over_tcp) { run(3, 2, pb_body); run(3, 2, pb_more_body); }
Test(pb, two_nodes_of_three_over_tcp) { run(6, 3, pb_body); run(6, 3, pb_more_body); }
Test(pb, three_nodes_of_two_over_tcp) { run(6, 2, pb_body); run(6, 2, pb_more_body); }
Test(pb, one_node_five_ranks) { run(5, 0, pb_body); run(5, 0, pb_more_body); }
Test(pb, four_nodes_of_one_over_tcp) { run(4, 1, pb_body); run(4, 1, pb_more_body); }
Test(pb, five_nodes_of_one_over_tcp) { run(5, 1, pb_body); run(5, 1, pb_more_body); }
Test(pb, seven_ranks_on_nodes_of_two_over_tcp) { run(7, 2, pb_body); run(7, 2, pb_more_body); }

/* The verdict from the records alone: the same call everywhere, and an
 * order that cannot differ from the algorithm's. */
static int no_peer(int rank, uint64_t *proc_p, void *arg)
{
    (void)arg;
    *proc_p = (uint64_t)rank;
    return 0;
}

/* An allreduce's call as hier_comm_allreduce makes it, offered to be piggybacked. */
static int offer_allreduce(const hier_comm_t *c, const void *in, void *out, size_t count, hier_dtype_t dt,
                           hier_op_t op, hier_piggyback_t *pb)
{
    size_t es = hier_dtype_size(dt);
    hier_call_t call = {.coll = HIER_COLL_ALLREDUCE, .sbuf = in, .rbuf = out, .count = count, .esize = es, .dt = dt,
                        .op = op, .sbytes = count * es, .rbytes = count * es, .bytes = count * es};
    return hier_piggyback_offer(c, &call, pb);
}

Test(pb, verdict_on_records)
{
    int32_t two_nodes[4] = {0, 0, 2, 2}, three_nodes[4] = {0, 0, 2, 3};
    hier_comm_t *c;
    hier_comm_ops_t ops = {.peer = no_peer};
    hier_piggyback_rec_t recs[4];
    double x = 1.0, out;
    hier_piggyback_t pb;
    cr_assert_eq(hier_comm_create(4, 0, &ops, &c), HIER_OK);
    cr_assert_eq(hier_layout_make(4, 0, two_nodes, &c->layout), HIER_OK);
    cr_assert(offer_allreduce(c, &x, &out, 1, HIER_DT_DOUBLE, HIER_OP_SUM, &pb));
    for (int r = 0; r < 4; r++) hier_piggyback_pack(&pb, &recs[r]);
    cr_assert(hier_piggyback_agreed(c, &pb, recs, sizeof(recs[0])), "the same double sum on 2 x 2");
    recs[3].count = 2;
    cr_assert(!hier_piggyback_agreed(c, &pb, recs, sizeof(recs[0])), "a count differs");
    hier_piggyback_pack(NULL, &recs[3]);
    cr_assert(!hier_piggyback_agreed(c, &pb, recs, sizeof(recs[0])), "one rank offers nothing");
    hier_layout_free(&c->layout);
    cr_assert_eq(hier_layout_make(4, 0, three_nodes, &c->layout), HIER_OK);
    for (int r = 0; r < 4; r++) hier_piggyback_pack(&pb, &recs[r]);
    cr_assert(!hier_piggyback_agreed(c, &pb, recs, sizeof(recs[0])),
              "three nodes and no network level to say how they combine: the sum's order may differ");
    cr_assert(offer_allreduce(c, &x, &out, 1, HIER_DT_DOUBLE, HIER_OP_MAX, &pb));
    for (int r = 0; r < 4; r++) hier_piggyback_pack(&pb, &recs[r]);
    cr_assert(hier_piggyback_agreed(c, &pb, recs, sizeof(recs[0])), "MAX is exact on any layout");
    cr_assert(!offer_allreduce(c, &x, &out, 1, HIER_DT_DOUBLE, HIER_OP_USER, &pb), "a user's op");
    hier_params.allreduce_algorithm = HIER_ALGO_FLAT;
    cr_assert(!offer_allreduce(c, &x, &out, 1, HIER_DT_DOUBLE, HIER_OP_MAX, &pb), "a forced algorithm");
    hier_params.allreduce_algorithm = HIER_ALGO_AUTO;
    double big[9] = {0};
    cr_assert(!offer_allreduce(c, big, big, 9, HIER_DT_DOUBLE, HIER_OP_SUM, &pb), "72 bytes");
    hier_comm_destroy(c);
}
