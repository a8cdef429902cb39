/* test_model.c: the cost model against figures worked out by hand: the
 * link's time for bandwidth-bound calls, rounds x latency for small ones,
 * and the machine description's parser. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/hier_params.h"
#include "select/hier_select_chunk.h"
#include "model/hier_model.h"

static hier_model_machine_t fast_node(int rails, double gbps)
{
    hier_model_machine_t m;
    hier_model_machine_default(&m);
    m.rails = rails;
    m.rail_gbps = gbps;
    m.copy_gbs = m.node_copy_gbs = m.reduce_gbs = 1000; /* the network alone */
    m.cores = 64;
    return m;
}

static double predict(const hier_model_machine_t *m, hier_coll_t coll, int nodes, int ppn, size_t bytes)
{
    hier_model_call_t call = {.coll = coll, .nodes = nodes, .ppn = ppn, .bytes = bytes, .esize = 8};
    hier_model_result_t r;
    cr_assert_eq(hier_model_predict(m, &call, &r), HIER_OK, "%d nodes x %d, %zu bytes", nodes, ppn, bytes);
    return r.time_us;
}

static void setup(void)
{
    hier_params_defaults(&hier_params);
}

TestSuite(model, .init = setup);

Test(model, machine_parse)
{
    hier_model_machine_t m;
    hier_model_machine_default(&m);
    cr_assert_eq(hier_model_machine_parse("# p4d\nname = p4d.24xlarge\n\nrails = 4 # EFA\nrail_gbps=100\n", &m),
                 HIER_OK);
    cr_assert_str_eq(m.name, "p4d.24xlarge");
    cr_assert_str_eq(m.provider, "tcp", "the default machine's provider");
    cr_assert_eq(m.rails, 4);
    cr_assert_float_eq(m.rail_gbps, 100.0, 1e-9);
    hier_model_machine_t before = m;
    cr_assert_eq(hier_model_machine_parse("rails = 4\nbogus = 1\n", &m), HIER_ERR_INVALID_ARG);
    cr_assert_eq(hier_model_machine_parse("rails = 2.5\n", &m), HIER_ERR_INVALID_ARG);
    cr_assert_eq(hier_model_machine_parse("latency_us = -1\n", &m), HIER_ERR_INVALID_ARG);
    cr_assert_eq(hier_model_machine_parse("rails 4\n", &m), HIER_ERR_INVALID_ARG);
    cr_assert_eq(hier_model_machine_parse("provider =\n", &m), HIER_ERR_INVALID_ARG);
    cr_assert_eq(hier_model_machine_parse("provider = a-name-longer-than-thirty-one-bytes\n", &m),
                 HIER_ERR_INVALID_ARG);
    cr_assert_eq(memcmp(&m, &before, sizeof(m)), 0, "a failed parse leaves the machine alone");
    cr_assert_eq(hier_model_machine_parse("provider = efa\n", &m), HIER_OK);
    cr_assert_str_eq(m.provider, "efa");
}

/* Large calls on one rail take the bytes a node must send over the rate. */
Test(model, bandwidth_bound)
{
    hier_model_machine_t m = fast_node(1, 1.0);
    size_t bytes = 64u << 20;
    double bound_ag = bytes / 2.0 * 8 / 1e3; /* us: half the result leaves each of 2 nodes */
    double ag = predict(&m, HIER_COLL_ALLGATHER, 2, 1, bytes);
    cr_assert(ag >= bound_ag * 0.99 && ag <= bound_ag * 1.1, "allgather %.0f us, bound %.0f", ag, bound_ag);
    double ar = predict(&m, HIER_COLL_ALLREDUCE, 2, 1, bytes), bound_ar = 2 * bound_ag;
    cr_assert(ar >= bound_ar * 0.99 && ar <= bound_ar * 1.1, "allreduce %.0f us, bound %.0f", ar, bound_ar);
    double rs = predict(&m, HIER_COLL_REDUCE_SCATTER, 4, 1, bytes), bound_rs = bytes * 3.0 / 4 * 8 / 1e3;
    cr_assert(rs >= bound_rs * 0.99 && rs <= bound_rs * 1.15, "reduce_scatter %.0f us, bound %.0f", rs, bound_rs);
}

/* Twice the rails, half the time, for a call large enough to be cut per lane. */
Test(model, rails_scale)
{
    hier_model_machine_t one = fast_node(1, 1.0), two = fast_node(2, 1.0);
    double t1 = predict(&one, HIER_COLL_ALLREDUCE, 2, 1, 64u << 20);
    double t2 = predict(&two, HIER_COLL_ALLREDUCE, 2, 1, 64u << 20);
    cr_assert(t2 / t1 > 0.45 && t2 / t1 < 0.6, "1 rail %.0f us, 2 rails %.0f", t1, t2);
}

/* Eight bytes on many nodes: recursive doubling's log2 rounds (+ the fold),
 * each a latency and two message costs, not a ring's N. */
Test(model, latency_rounds)
{
    hier_model_machine_t m = fast_node(1, 100.0);
    double per_round = m.latency_us + 2 * m.msg_us;
    double t2 = predict(&m, HIER_COLL_ALLREDUCE, 2, 1, 8);
    double t1024 = predict(&m, HIER_COLL_ALLREDUCE, 1024, 1, 8);
    double t1000 = predict(&m, HIER_COLL_ALLREDUCE, 1000, 1, 8);
    cr_assert(t2 >= per_round * 0.9 && t2 <= per_round * 1.5, "2 nodes %.1f us, a round %.1f", t2, per_round);
    cr_assert(t1024 >= 10 * per_round * 0.9 && t1024 <= 10 * per_round * 1.5, "1024 nodes %.1f us", t1024);
    cr_assert(t1000 >= t1024 && t1000 <= 12 * per_round * 1.5, "1000 nodes (folded) %.1f us", t1000);
}

Test(model, deterministic_and_refuses)
{
    hier_model_machine_t m = fast_node(4, 100.0);
    double a = predict(&m, HIER_COLL_REDUCE_SCATTER, 16, 8, 32u << 20);
    double b = predict(&m, HIER_COLL_REDUCE_SCATTER, 16, 8, 32u << 20);
    cr_assert_eq(a, b);
    hier_model_call_t call = {.coll = HIER_COLL_ALLREDUCE, .nodes = 0, .ppn = 8, .bytes = 1024, .esize = 8};
    hier_model_result_t r;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_ERR_INVALID_ARG, "no node");
    call.nodes = 2;
    call.bytes = 0;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_ERR_INVALID_ARG);
}

/* Every machine file shipped parses, names itself after its file, and
 * predicts a call (the sources in its comments are for people). */
Test(model, shipped_machine_files)
{
    static const char *const names[] = {"netns-1g", "p4d", "p5", "trn1", "dl1", "hpc7a"};
    const char *src = getenv("HIER_SRCDIR");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[4096], text[8192];
        snprintf(path, sizeof(path), "%s/contrib/machines/%s.machine", src ? src : ".", names[i]);
        FILE *f = fopen(path, "r");
        cr_assert(f, "%s missing", path);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        hier_model_machine_t m;
        hier_model_machine_default(&m);
        cr_assert_eq(hier_model_machine_parse(text, &m), HIER_OK, "%s", path);
        cr_assert_str_eq(m.name, names[i]);
        cr_assert_gt(predict(&m, HIER_COLL_ALLREDUCE, 2, 2, 1 << 20), 0.0);
    }
}

/* The many-node rules as the model sees them: at 1,000 nodes the ring's
 * 2 x 999 rounds per chunk cost tens of times Rabenseifner's 8. */
Test(model, many_nodes_take_rabenseifner)
{
    hier_model_machine_t m = fast_node(4, 100);
    m.latency_us = 15;
    double automatic = predict(&m, HIER_COLL_ALLREDUCE, 1000, 2, 1 << 20);
    hier_params.net_algorithm = HIER_ALGO_RING;
    double ring = predict(&m, HIER_COLL_ALLREDUCE, 1000, 2, 1 << 20);
    cr_assert_gt(ring, 10 * automatic, "ring %.0f us, auto %.0f us", ring, automatic);
}

/* One node: the node's own rules (low latency while small, then the
 * pipelined schedules), no network. */
Test(model, one_node)
{
    hier_model_machine_t m;
    hier_model_machine_default(&m);
    hier_model_call_t call = {.coll = HIER_COLL_ALLREDUCE, .nodes = 1, .ppn = 2, .bytes = 8, .esize = 4};
    hier_model_result_t r;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_OK);
    cr_assert_eq(r.choice.path, HIER_PATH_SHM_LL);
    cr_assert_gt(r.time_us, 0.0);
    call.bytes = 64 << 20;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_OK);
    cr_assert_eq(r.choice.path, HIER_PATH_SHM_RSAG);
    /* every byte is copied in and out at least once, at one core's rate */
    cr_assert_gt(r.time_us, 2.0 * (64 << 20) / (m.copy_gbs * 1e3));
    /* a cache: a call that fits runs at its rates, one that does not at memory's */
    call.bytes = 1 << 20;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_OK);
    double memory = r.time_us;
    m.cache_mb = 32, m.cache_copy_gbs = 4 * m.copy_gbs, m.cache_reduce_gbs = 4 * m.reduce_gbs;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_OK);
    cr_assert_lt(r.time_us, memory / 2, "in cache %.1f us, from memory %.1f us", r.time_us, memory);
    call.bytes = 64 << 20;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_OK);
    double in_cache_64 = r.time_us;
    m.cache_mb = 0;
    cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_OK);
    cr_assert_float_eq(in_cache_64, r.time_us, 1e-9, "64 MiB x 2 ranks does not fit 32 MiB");
}

/* Chunks in flight (coll_hier_pipeline_depth): on 16 nodes x 8, four rails
 * of 100 Gbit/s, 1 MiB chunks and host memory taken as free, a chunk's
 * rounds one after another reach a fraction of the link; depth 4 keeps the
 * link busy. The bound: what each node sends, 2 (N - 1) / N of the vector,
 * over rails x rate. Schedules so long that depth chunks of them would pass
 * the memory bound run fewer (1,024 nodes x 8, reduce_scatter). */
Test(model, chunks_in_flight_reach_the_link)
{
    hier_model_machine_t m = fast_node(4, 100.0);
    m.latency_us = 15;
    m.msg_us = 1;
    size_t bytes = 64u << 20;
    double bound = 2.0 * 15 / 16 * (double)bytes * 8 / (4 * 100e3), t[5];
    for (int d = 1; d <= 4; d++) {
        hier_params.pipeline_depth = d;
        hier_model_call_t call = {.coll = HIER_COLL_ALLREDUCE, .nodes = 16, .ppn = 8, .bytes = bytes, .esize = 4};
        hier_model_result_t r;
        cr_assert_eq(hier_model_predict(&m, &call, &r), HIER_OK);
        cr_assert_eq(r.depth, (unsigned)d, "depth %d asked, %u used", d, r.depth);
        t[d] = r.time_us;
    }
    cr_assert(bound / t[1] < 0.5, "depth 1: %.2f of the bound (%.0f us of %.0f)", bound / t[1], t[1], bound);
    cr_assert(bound / t[4] >= 0.8, "depth 4: %.2f of the bound (%.0f us of %.0f)", bound / t[4], t[4], bound);
    cr_assert(t[2] < t[1] && t[4] <= t[2], "depth 1..4: %.0f %.0f %.0f %.0f us", t[1], t[2], t[3], t[4]);
    hier_params.pipeline_depth = 4;
    hier_model_call_t rs = {.coll = HIER_COLL_REDUCE_SCATTER, .nodes = 1024, .ppn = 8, .bytes = bytes, .esize = 4,
                            .max_chunks = 3};
    hier_model_result_t r;
    cr_assert_eq(hier_model_predict(&m, &rs, &r), HIER_OK);
    cr_assert_eq(r.depth, 1u, "a reduce_scatter chunk on 1,024 nodes x 8 ran %u in flight", r.depth);
}

/* The default depth (0) is the provider's: on efa the 4 that reaches 0.8 of
 * the link above, without a parameter set; on tcp 2, as before; one node
 * has no rounds to overlap. The runtime asks the same function with the
 * open fabric's provider (hier_node_pipe_shape). */
Test(model, default_depth_by_provider)
{
    hier_model_machine_t m = fast_node(4, 100.0);
    m.latency_us = 15;
    m.msg_us = 1;
    size_t bytes = 64u << 20;
    double bound = 2.0 * 15 / 16 * (double)bytes * 8 / (4 * 100e3);
    cr_assert_eq(hier_params.pipeline_depth, 0, "the default is by the provider");
    hier_model_call_t call = {.coll = HIER_COLL_ALLREDUCE, .nodes = 16, .ppn = 8, .bytes = bytes, .esize = 4};
    hier_model_result_t efa, tcp;
    snprintf(m.provider, sizeof(m.provider), "%s", "efa");
    cr_assert_eq(hier_model_predict(&m, &call, &efa), HIER_OK);
    snprintf(m.provider, sizeof(m.provider), "%s", "tcp;ofi_rxm");
    cr_assert_eq(hier_model_predict(&m, &call, &tcp), HIER_OK);
    cr_assert_eq(efa.depth, 4u, "efa: %u in flight", efa.depth);
    cr_assert_eq(tcp.depth, 2u, "tcp: %u in flight", tcp.depth);
    cr_assert(bound / efa.time_us >= 0.8, "efa by default: %.2f of the bound", bound / efa.time_us);
    cr_assert(bound / tcp.time_us < 0.8, "tcp's depth on these links: %.2f of the bound", bound / tcp.time_us);
    cr_assert_eq(hier_select_pipe_depth(16, "efa-direct"), 4u);
    cr_assert_eq(hier_select_pipe_depth(16, "shm"), 2u);
    cr_assert_eq(hier_select_pipe_depth(16, NULL), 2u);
    cr_assert_eq(hier_select_pipe_depth(1, "efa"), 1u, "one node");
    hier_params.pipeline_depth = 3;
    cr_assert_eq(hier_select_pipe_depth(16, "efa"), 3u, "a depth asked for is kept");
    hier_params.pipeline_depth = 9;
    cr_assert_eq(hier_select_pipe_depth(16, "tcp"), 4u, "past the most: the most");
    hier_params.pipeline_depth = -1;
    cr_assert_eq(hier_select_pipe_depth(16, "efa"), 1u, "below 1: 1");
}
