/* The algorithm choice: every rule of every table reached at its
 * boundaries, forcing (kept where its hard conditions hold, auto's choice
 * where they do not), and a sweep over shapes and sizes checking that the
 * choice always fits the collective and the level. The expected choices are
 * written here from the parameters' meaning, not read back from the tables. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/hier_params.h"
#include "select/hier_select.h"

static void setup(void)
{
    hier_params_defaults(&hier_params);
}

TestSuite(select, .init = setup);

static hier_select_shape_t one_node(uint32_t ranks)
{
    return (hier_select_shape_t){.size = ranks, .nnodes = 1, .local_ranks = ranks, .numa_groups = 1,
                                 .crowded = 0, .cma = -1, .ll_capacity = 8192};
}

static hier_select_shape_t nodes(uint32_t nnodes, uint32_t per_node)
{
    hier_select_shape_t s = one_node(per_node);
    s.nnodes = nnodes;
    s.size = nnodes * per_node;
    return s;
}

static hier_select_t pick(const hier_select_shape_t *s, hier_coll_t coll, size_t bytes)
{
    hier_select_t out;
    hier_select(s, coll, bytes, &out);
    return out;
}

#define EXPECT_PATH(s, coll, bytes, want)                                                                         \
    do {                                                                                                          \
        hier_select_t got_ = pick(s, coll, bytes);                                                                \
        cr_expect_eq(got_.path, want, "%s of %zu bytes: %s, expected %s", hier_coll_name(coll), (size_t)(bytes), \
                     hier_path_name(got_.path), hier_path_name(want));                                            \
    } while (0)

Test(select, allreduce_one_node)
{
    hier_select_shape_t s = one_node(4);
    hier_params.allreduce_ll_max = 256;
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 0, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 256, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 257, HIER_PATH_SHM_FLAT);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, hier_params.allreduce_flat_max, HIER_PATH_SHM_FLAT);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, hier_params.allreduce_flat_max + 1, HIER_PATH_SHM_RSAG);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, (size_t)1 << 30, HIER_PATH_SHM_RSAG);
    s.numa_groups = 2; /* the tree needs several domains and allreduce_numa_min_ranks (4) ranks */
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 1024, HIER_PATH_SHM_NUMA);
    s.local_ranks = 3;
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 1024, HIER_PATH_SHM_FLAT);
    /* the low-latency area is the hard limit, whatever allreduce_ll_max says */
    hier_params.allreduce_ll_max = 1 << 20;
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 8192, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 8193, HIER_PATH_SHM_RSAG);
}

Test(select, allreduce_forced)
{
    hier_select_shape_t s = one_node(2);
    hier_params.allreduce_algorithm = HIER_ALGO_NUMA; /* no hard condition: even on one domain */
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 8, HIER_PATH_SHM_NUMA);
    hier_params.allreduce_algorithm = HIER_ALGO_FLAT;
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, (size_t)1 << 24, HIER_PATH_SHM_FLAT);
    hier_params.allreduce_algorithm = HIER_ALGO_RSAG;
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 8, HIER_PATH_SHM_RSAG);
    hier_params.allreduce_algorithm = HIER_ALGO_LL; /* fits: kept past allreduce_ll_max */
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 8192, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 8193, HIER_PATH_SHM_RSAG); /* does not: auto's choice */
}

/* Auto: before the probe single copy is chosen above the low-latency
 * path (the caller probes, and measures the window); probed, the node's
 * window holds; the parameters, when set, are the window's bounds. */
Test(select, allgather_single_copy_window)
{
    hier_select_shape_t s = one_node(2);
    size_t lo = 32 << 10, hi = 128 << 10, ll = HIER_SELECT_LL_PROBE_MIN - 1; /* (the cut-off not measured yet) */
    cr_assert(!hier_params.allgather_cma_min && !hier_params.allgather_cma_max && ll < lo);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, ll, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, ll + 1, HIER_PATH_CMA_COPY); /* not probed yet: the caller probes */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, (size_t)1 << 30, HIER_PATH_CMA_COPY);
    s.cma = 1, s.cma_window = (hier_select_window_t){lo, hi}; /* probed: the window measured */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, lo - 1, HIER_PATH_SHM_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, lo, HIER_PATH_CMA_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, hi, HIER_PATH_CMA_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, hi + 1, HIER_PATH_SHM_COPY);
    s.cma_window = HIER_SELECT_WINDOW_NONE; /* the segment won at every block */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, lo, HIER_PATH_SHM_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, (size_t)1 << 30, HIER_PATH_SHM_COPY);
    hier_params.allgather_cma_min = lo, hier_params.allgather_cma_max = hi; /* the parameters rule */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, lo - 1, HIER_PATH_SHM_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, lo, HIER_PATH_CMA_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, hi, HIER_PATH_CMA_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, hi + 1, HIER_PATH_SHM_COPY);
    s.cma = 0; /* probed: unavailable */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, lo, HIER_PATH_SHM_COPY);
    s.cma = 1;
    s.crowded = 1; /* ranks share cores: pinning pages costs more than the copy saves */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, lo, HIER_PATH_SHM_COPY);
    hier_params.allgather_algorithm = HIER_ALGO_CMA; /* forced: any size, crowded or not, past the window */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, (size_t)1 << 30, HIER_PATH_CMA_COPY);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, 0, HIER_PATH_CMA_COPY);
    s.cma = 0; /* but not without the kernel's permission */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, (size_t)1 << 30, HIER_PATH_SHM_COPY);
}

/* The measured window: from the first probe single copy wins at to the
 * last (a bound between two probes: their geometric mean), all or none. */
Test(select, allgather_single_copy_window_from_times)
{
    hier_select_probe_t p = {.n = 4, .block = {16 << 10, 64 << 10, 1 << 20, 8 << 20}, .t_shm = {4, 70, 800, 9000},
                             .t_cma = {3, 50, 600, 7000}};
    hier_select_window_t w = hier_select_cma_window(&p);
    cr_expect(w.lo == 0 && w.hi == SIZE_MAX, "single copy won at every block");
    p.t_cma[3] = 9500;
    w = hier_select_cma_window(&p);
    cr_expect(w.lo == 0 && w.hi == (size_t)2965820, "to between 1 MiB and 8 MiB: %zu", w.hi);
    p.t_cma[0] = 4; /* a tie is the segment's */
    w = hier_select_cma_window(&p);
    cr_expect(w.lo == 32 << 10 && w.hi == (size_t)2965820, "from between 16 and 64 KiB: %zu", w.lo);
    p.t_cma[2] = 900;
    w = hier_select_cma_window(&p);
    cr_expect(w.lo == 32 << 10 && w.hi == 256 << 10, "to between 64 KiB and 1 MiB");
    p.t_cma[1] = 71;
    w = hier_select_cma_window(&p);
    cr_expect(w.lo > w.hi, "the segment won at every block");
    p.t_cma[3] = 10, p.t_cma[1] = 71;
    w = hier_select_cma_window(&p);
    cr_expect(w.lo == 2965820 && w.hi == SIZE_MAX, "from between 1 and 8 MiB, up");
    p.n = 0;
    w = hier_select_cma_window(&p);
    cr_expect(w.lo == 0 && w.hi == SIZE_MAX, "nothing timed: the rule's bounds alone");
}

/* The low-latency cut-off: before the node measures it, low latency below
 * the sizes it decides, and a call it decides waits for it (due); measured,
 * the node's cut-off; a parameter set, the parameter's, nothing due; never
 * past the area; forced or between nodes, nothing due. */
Test(select, low_latency_cut_off_measured)
{
    hier_select_shape_t s = one_node(4);
    size_t first = HIER_SELECT_LL_PROBE_MIN;
    cr_assert(!hier_params.allreduce_ll_max && !hier_params.allgather_ll_max && !hier_params.reduce_scatter_ll_max);
    for (int coll = 0; coll < 3; coll++) {
        EXPECT_PATH(&s, coll, first - 1, HIER_PATH_SHM_LL);
        cr_expect(!hier_select_ll_due(&s, coll, first - 1), "below the sizes timed: never due");
        cr_expect(hier_select_ll_due(&s, coll, first), "%s: due from the first size timed", hier_coll_name(coll));
        cr_expect(hier_select_ll_due(&s, coll, s.ll_capacity));
        cr_expect(!hier_select_ll_due(&s, coll, s.ll_capacity + 1), "past the area: never due");
        EXPECT_PATH(&s, coll, s.ll_capacity + 1, coll == HIER_COLL_ALLREDUCE   ? HIER_PATH_SHM_RSAG
                                                 : coll == HIER_COLL_ALLGATHER ? HIER_PATH_CMA_COPY
                                                                               : HIER_PATH_SHM_RS);
    }
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, first, HIER_PATH_SHM_FLAT); /* (not measured: below the sizes timed) */
    s.ll_top[HIER_COLL_ALLREDUCE] = 3000; /* measured */
    cr_expect(!hier_select_ll_due(&s, HIER_COLL_ALLREDUCE, first));
    cr_expect(hier_select_ll_due(&s, HIER_COLL_ALLGATHER, first), "each collective measured apart");
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 3000, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, 3001, HIER_PATH_SHM_RSAG);
    s.ll_top[HIER_COLL_ALLREDUCE] = first - 1; /* the schedule won at every size timed */
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, first - 1, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, first, HIER_PATH_SHM_FLAT);
    s.ll_top[HIER_COLL_ALLREDUCE] = SIZE_MAX; /* low latency won at every size: the area bounds it */
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, s.ll_capacity, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLREDUCE, s.ll_capacity + 1, HIER_PATH_SHM_RSAG);
    hier_params.allgather_ll_max = 2048; /* fixed by the parameter: nothing measured */
    cr_expect(!hier_select_ll_due(&s, HIER_COLL_ALLGATHER, first));
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, 2048, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, 2049, HIER_PATH_CMA_COPY);
    s.ll_top[HIER_COLL_ALLGATHER] = 100; /* (a measurement does not override it) */
    EXPECT_PATH(&s, HIER_COLL_ALLGATHER, 2048, HIER_PATH_SHM_LL);
    hier_params.reduce_scatter_algorithm = HIER_ALGO_SHM; /* forced: nothing measured */
    cr_expect(!hier_select_ll_due(&s, HIER_COLL_REDUCE_SCATTER, first));
    hier_select_shape_t two = nodes(2, 4);
    cr_expect(!hier_select_ll_due(&two, HIER_COLL_ALLREDUCE, first), "between nodes: no low latency");
    hier_select_shape_t alone = one_node(1);
    cr_expect(!hier_select_ll_due(&alone, HIER_COLL_ALLREDUCE, first));
}

/* The measured cut-off: up to the size from which the schedule is more
 * than HIER_SELECT_LL_MARGIN percent faster at every size (a bound between
 * two sizes: their geometric mean); none: any; all: below the first size. */
Test(select, low_latency_cut_off_from_times)
{
    hier_select_shape_t s = one_node(2);
    hier_select_ll_probe_t p;
    hier_select_ll_plan(&s, &p);
    cr_assert(p.n == 4 && p.bytes[0] == 1024 && p.bytes[3] == 8192, "1, 2, 4, 8 KiB: %d sizes", p.n);
    s.ll_capacity = 3000;
    hier_select_ll_plan(&s, &p);
    cr_expect(p.n == 2 && p.bytes[1] == 2048, "only sizes the area holds");
    p = (hier_select_ll_probe_t){.n = 4, .bytes = {1024, 2048, 4096, 8192}, .t_ll = {100, 200, 400, 800},
                                 .t_sched = {100, 200, 400, 800}};
    cr_expect_eq(hier_select_ll_top(&p), SIZE_MAX, "a tie is low latency's");
    p.t_sched[2] = 364; /* 10% faster: still low latency's */
    cr_expect_eq(hier_select_ll_top(&p), SIZE_MAX);
    p.t_sched[2] = 363; /* more than 10% faster, but not at 8 KiB */
    cr_expect_eq(hier_select_ll_top(&p), SIZE_MAX, "a win of the schedule followed by a loss: noise");
    p.t_sched[3] = 700;
    cr_expect_eq(hier_select_ll_top(&p), (size_t)2896, "the schedule from 4 KiB on: %zu", hier_select_ll_top(&p));
    p.t_sched[0] = 50, p.t_sched[1] = 100;
    cr_expect_eq(hier_select_ll_top(&p), (size_t)HIER_SELECT_LL_PROBE_MIN - 1, "the schedule at every size");
    p.t_sched[0] = 50, p.t_sched[1] = 200, p.t_sched[2] = 400;
    cr_expect_eq(hier_select_ll_top(&p), (size_t)5792, "the schedule from 8 KiB on, a lone win at 1 KiB aside");
    p.n = 0;
    cr_expect_eq(hier_select_ll_top(&p), SIZE_MAX, "nothing timed: any");
}

Test(select, reduce_scatter_one_node)
{
    hier_select_shape_t s = one_node(3);
    size_t ll = HIER_SELECT_LL_PROBE_MIN - 1;
    EXPECT_PATH(&s, HIER_COLL_REDUCE_SCATTER, ll, HIER_PATH_SHM_LL);
    EXPECT_PATH(&s, HIER_COLL_REDUCE_SCATTER, ll + 1, HIER_PATH_SHM_RS);
    hier_params.reduce_scatter_algorithm = HIER_ALGO_SHM;
    EXPECT_PATH(&s, HIER_COLL_REDUCE_SCATTER, 8, HIER_PATH_SHM_RS);
    hier_select_t c = pick(&s, HIER_COLL_REDUCE_SCATTER, 8);
    cr_expect_eq(c.kind, HIER_SCHED_REDUCE_SCATTER);
}

static void expect_net(const hier_select_shape_t *s, hier_coll_t coll, size_t bytes, hier_path_t path,
                       hier_net_kind_t net)
{
    hier_select_t c = pick(s, coll, bytes);
    cr_expect_eq(c.path, path, "%u nodes, %s of %zu: %s", s->nnodes, hier_coll_name(coll), bytes,
                 hier_path_name(c.path));
    cr_expect_eq(c.net_kind, net, "%u nodes, %s of %zu: net kind %d, expected %d", s->nnodes, hier_coll_name(coll),
                 bytes, (int)c.net_kind, (int)net);
}

Test(select, allreduce_between_nodes)
{
    hier_select_shape_t two = nodes(2, 4), three = nodes(3, 4), four = nodes(4, 4), eleven = nodes(11, 4);
    size_t rd2 = hier_params.net_rd_max_two_nodes, rd = hier_params.net_rd_max;
    expect_net(&two, HIER_COLL_ALLREDUCE, rd2, HIER_PATH_NET_RD, HIER_NET_RD_ALLREDUCE);
    expect_net(&two, HIER_COLL_ALLREDUCE, rd2 + 1, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    expect_net(&three, HIER_COLL_ALLREDUCE, rd, HIER_PATH_NET_RD, HIER_NET_RD_ALLREDUCE);
    expect_net(&three, HIER_COLL_ALLREDUCE, rd + 1, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE); /* radix 3 */
    expect_net(&four, HIER_COLL_ALLREDUCE, rd + 1, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    /* 11 needs a fold at radix 8: the ring while there are few nodes */
    expect_net(&eleven, HIER_COLL_ALLREDUCE, rd + 1, HIER_PATH_NET_RING, HIER_NET_RING_ALLREDUCE);
    hier_params.net_ring_max_nodes = 10;
    expect_net(&eleven, HIER_COLL_ALLREDUCE, rd + 1, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    hier_params.net_ring_max_nodes = 16;
    hier_params.net_radix_max = 2; /* classic: only powers of two are served without a fold */
    expect_net(&three, HIER_COLL_ALLREDUCE, rd + 1, HIER_PATH_NET_RING, HIER_NET_RING_ALLREDUCE);
    expect_net(&four, HIER_COLL_ALLREDUCE, rd + 1, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    hier_params.net_radix_max = 8;
    hier_select_shape_t big = nodes(1000, 8), prime = nodes(1021, 8); /* 8 x 5 x 5 x 5; needs a fold */
    expect_net(&big, HIER_COLL_ALLREDUCE, 8, HIER_PATH_NET_RD, HIER_NET_RD_ALLREDUCE);
    expect_net(&big, HIER_COLL_ALLREDUCE, (size_t)1 << 26, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    expect_net(&prime, HIER_COLL_ALLREDUCE, (size_t)1 << 26, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    cr_expect_eq(pick(&big, HIER_COLL_ALLREDUCE, (size_t)1 << 26).net_radix, 8);
    hier_params.net_algorithm = HIER_ALGO_RING;
    expect_net(&four, HIER_COLL_ALLREDUCE, 8, HIER_PATH_NET_RING, HIER_NET_RING_ALLREDUCE);
    expect_net(&prime, HIER_COLL_ALLREDUCE, 8, HIER_PATH_NET_RING, HIER_NET_RING_ALLREDUCE);
    hier_params.net_algorithm = HIER_ALGO_RD;
    expect_net(&four, HIER_COLL_ALLREDUCE, (size_t)1 << 30, HIER_PATH_NET_RD, HIER_NET_RD_ALLREDUCE);
    hier_params.net_algorithm = HIER_ALGO_RH;
    expect_net(&three, HIER_COLL_ALLREDUCE, 8, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    expect_net(&eleven, HIER_COLL_ALLREDUCE, 8, HIER_PATH_NET_RH, HIER_NET_RH_ALLREDUCE);
    /* the per-collective algorithm speaks of one node only */
    hier_params.net_algorithm = HIER_ALGO_AUTO;
    hier_params.allreduce_algorithm = HIER_ALGO_FLAT;
    expect_net(&three, HIER_COLL_ALLREDUCE, 8, HIER_PATH_NET_RD, HIER_NET_RD_ALLREDUCE);
}

Test(select, allgather_and_reduce_scatter_between_nodes)
{
    hier_select_shape_t two = nodes(2, 4), three = nodes(3, 4), pair = nodes(2, 1), eleven = nodes(11, 4);
    hier_select_shape_t big = nodes(1021, 4);
    size_t rd = hier_params.net_rd_max;
    expect_net(&two, HIER_COLL_ALLGATHER, (size_t)1 << 30, HIER_PATH_NET_COPY, HIER_NET_RD_ALLGATHER);
    expect_net(&three, HIER_COLL_ALLGATHER, 8, HIER_PATH_NET_COPY, HIER_NET_RH_ALLGATHER); /* radix 3: no fold */
    hier_select_shape_t four = nodes(4, 4); /* a power of two: recursive doubling while small */
    expect_net(&four, HIER_COLL_ALLGATHER, rd / 16, HIER_PATH_NET_COPY, HIER_NET_RD_ALLGATHER);
    expect_net(&four, HIER_COLL_ALLGATHER, rd / 16 + 1, HIER_PATH_NET_COPY, HIER_NET_RH_ALLGATHER);
    expect_net(&three, HIER_COLL_ALLGATHER, (size_t)1 << 30, HIER_PATH_NET_COPY, HIER_NET_RH_ALLGATHER);
    /* a fold: cheap while small, then the ring on few nodes, folded Rabenseifner on many; the rules
     * see the result (block x 44 ranks) */
    expect_net(&eleven, HIER_COLL_ALLGATHER, rd / 44, HIER_PATH_NET_COPY, HIER_NET_RH_ALLGATHER);
    expect_net(&eleven, HIER_COLL_ALLGATHER, rd / 44 + 1, HIER_PATH_NET_COPY, HIER_NET_RING_ALLGATHER);
    expect_net(&big, HIER_COLL_ALLGATHER, rd, HIER_PATH_NET_COPY, HIER_NET_RH_ALLGATHER);
    /* reduce_scatter: the rules see the send buffer */
    expect_net(&three, HIER_COLL_REDUCE_SCATTER, 96, HIER_PATH_NET_RS, HIER_NET_RH_REDUCE_SCATTER);
    expect_net(&three, HIER_COLL_REDUCE_SCATTER, (size_t)1 << 30, HIER_PATH_NET_RS, HIER_NET_RH_REDUCE_SCATTER);
    expect_net(&eleven, HIER_COLL_REDUCE_SCATTER, rd, HIER_PATH_NET_RS, HIER_NET_RH_REDUCE_SCATTER);
    expect_net(&eleven, HIER_COLL_REDUCE_SCATTER, rd + 44, HIER_PATH_NET_RS, HIER_NET_RING_REDUCE_SCATTER);
    expect_net(&big, HIER_COLL_REDUCE_SCATTER, rd + 4084, HIER_PATH_NET_RS, HIER_NET_RH_REDUCE_SCATTER);
    /* two nodes: the ring's one round sends half of what recursive doubling's does */
    expect_net(&pair, HIER_COLL_REDUCE_SCATTER, 16, HIER_PATH_NET_RS, HIER_NET_RING_REDUCE_SCATTER);
    expect_net(&two, HIER_COLL_REDUCE_SCATTER, 16, HIER_PATH_NET_RS, HIER_NET_RING_REDUCE_SCATTER);
    hier_params.net_algorithm = HIER_ALGO_RH;
    expect_net(&two, HIER_COLL_ALLGATHER, 8, HIER_PATH_NET_COPY, HIER_NET_RH_ALLGATHER);
    expect_net(&two, HIER_COLL_REDUCE_SCATTER, 64, HIER_PATH_NET_RS, HIER_NET_RH_REDUCE_SCATTER);
    hier_params.net_algorithm = HIER_ALGO_RING;
    expect_net(&big, HIER_COLL_ALLGATHER, 8, HIER_PATH_NET_COPY, HIER_NET_RING_ALLGATHER);
    expect_net(&big, HIER_COLL_REDUCE_SCATTER, 64, HIER_PATH_NET_RS, HIER_NET_RING_REDUCE_SCATTER);
    hier_params.net_algorithm = HIER_ALGO_RD;
    expect_net(&pair, HIER_COLL_REDUCE_SCATTER, 16, HIER_PATH_NET_RS, HIER_NET_RD_ALLREDUCE);
    expect_net(&big, HIER_COLL_REDUCE_SCATTER, 1 << 30, HIER_PATH_NET_RS, HIER_NET_RD_ALLREDUCE);
    expect_net(&big, HIER_COLL_ALLGATHER, 1 << 30, HIER_PATH_NET_COPY, HIER_NET_RD_ALLGATHER);
}

Test(select, split_from_net_split_min_per_rank)
{
    hier_select_shape_t three = nodes(3, 4);
    size_t m = hier_params.net_split_min;
    cr_expect(!pick(&three, HIER_COLL_ALLREDUCE, m - 1).split);
    cr_expect(pick(&three, HIER_COLL_ALLREDUCE, m).split);
    /* allgather: the result (block x 12 ranks), reduce_scatter: the send buffer */
    cr_expect(!pick(&three, HIER_COLL_ALLGATHER, m / 12 - 1).split);
    cr_expect(pick(&three, HIER_COLL_ALLGATHER, (m + 11) / 12).split);
    cr_expect(!pick(&three, HIER_COLL_REDUCE_SCATTER, m - 1).split);
    cr_expect(pick(&three, HIER_COLL_REDUCE_SCATTER, m).split);
    hier_select_shape_t s = one_node(4);
    cr_expect(!pick(&s, HIER_COLL_ALLREDUCE, (size_t)1 << 30).split);
}

/* Whatever the shape and size, the choice belongs to the collective and the level. */
static int fits(hier_coll_t coll, int net, const hier_select_t *c)
{
    if (net) {
        switch (coll) {
        case HIER_COLL_ALLREDUCE:
            return c->kind == HIER_SCHED_HIER_ALLREDUCE &&
                   (c->path == HIER_PATH_NET_RD || c->path == HIER_PATH_NET_RH || c->path == HIER_PATH_NET_RING);
        case HIER_COLL_ALLGATHER: return c->kind == HIER_SCHED_HIER_ALLGATHER && c->path == HIER_PATH_NET_COPY;
        default: return c->kind == HIER_SCHED_HIER_REDUCE_SCATTER && c->path == HIER_PATH_NET_RS;
        }
    }
    if (c->path == HIER_PATH_SHM_LL) return 1;
    switch (coll) {
    case HIER_COLL_ALLREDUCE:
        return (c->path == HIER_PATH_SHM_FLAT && c->kind == HIER_SCHED_ALLREDUCE_FLAT) ||
               (c->path == HIER_PATH_SHM_NUMA && c->kind == HIER_SCHED_ALLREDUCE_NUMA) ||
               (c->path == HIER_PATH_SHM_RSAG && c->kind == HIER_SCHED_ALLREDUCE_RSAG);
    case HIER_COLL_ALLGATHER:
        return (c->path == HIER_PATH_SHM_COPY && c->kind == HIER_SCHED_ALLGATHER) ||
               (c->path == HIER_PATH_CMA_COPY && c->kind == HIER_SCHED_CMA_ALLGATHER);
    default: return c->path == HIER_PATH_SHM_RS && c->kind == HIER_SCHED_REDUCE_SCATTER;
    }
}

Test(select, sweep_choices_fit)
{
    static const int algos[] = {HIER_ALGO_AUTO, HIER_ALGO_LL, HIER_ALGO_FLAT, HIER_ALGO_NUMA, HIER_ALGO_RSAG,
                                HIER_ALGO_SHM, HIER_ALGO_CMA, HIER_ALGO_RING, HIER_ALGO_RD, HIER_ALGO_RH};
    static const uint32_t nn[] = {1, 2, 3, 4, 7, 64, 1024};
    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
        for (size_t n = 0; n < sizeof(nn) / sizeof(nn[0]); n++)
            for (uint32_t per = 1; per <= 9; per += 4)
                for (int cma = -1; cma <= 1; cma++)
                    for (size_t b = 0; b <= ((size_t)1 << 32); b = b ? b * 4 : 1) {
                        hier_params.allreduce_algorithm = hier_params.allgather_algorithm =
                            hier_params.reduce_scatter_algorithm = hier_params.net_algorithm = algos[a];
                        hier_select_shape_t s = nodes(nn[n], per);
                        s.cma = cma;
                        s.numa_groups = per > 4 ? 2 : 1;
                        for (int coll = HIER_COLL_ALLREDUCE; coll <= HIER_COLL_REDUCE_SCATTER; coll++) {
                            hier_select_t c = pick(&s, (hier_coll_t)coll, b);
                            cr_assert(fits((hier_coll_t)coll, nn[n] > 1, &c),
                                      "%u x %u, %s forced %s, %zu bytes: path %s, kind %d", nn[n], per,
                                      hier_coll_name((hier_coll_t)coll), hier_algo_name(algos[a]), b,
                                      hier_path_name(c.path), (int)c.kind);
                            cr_assert(c.path != HIER_PATH_SHM_LL || b <= s.ll_capacity);
                            cr_assert(c.path != HIER_PATH_CMA_COPY || cma != 0);
                        }
                    }
}

/* A communicator's cache gives what hier_select gives, for sizes that share
 * its slots and for every collective; a shape whose single copy is probed
 * since (cma -1, then 0 or 1) is chosen for anew, never from the choices
 * made before the probe. */
Test(select, cache_gives_what_select_gives)
{
    hier_select_shape_t shapes[] = {one_node(4), nodes(2, 2), nodes(16, 8)};
    static const hier_coll_t colls[] = {HIER_COLL_ALLREDUCE, HIER_COLL_ALLGATHER, HIER_COLL_REDUCE_SCATTER};
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        hier_select_cache_t cache = {0};
        for (int cma = -1; cma <= 1; cma++) {
            shapes[si].cma = si ? 0 : cma; /* (between nodes the rules never read it) */
            for (int round = 0; round < 2; round++) /* (the second from the cache, where the slot still holds it) */
                for (size_t b = 0; b < ((size_t)1 << 26); b = b * 3 + 1)
                    for (size_t ci = 0; ci < 3; ci++) {
                        hier_select_t want, got;
                        hier_select(&shapes[si], colls[ci], b, &want);
                        hier_select_cached(&cache, &shapes[si], colls[ci], b, &got);
                        cr_assert(!memcmp(&want, &got, sizeof(want)), "shape %zu cma %d %s of %zu bytes: %s, want %s",
                                  si, cma, hier_coll_name(colls[ci]), b, hier_path_name(got.path),
                                  hier_path_name(want.path));
                    }
        }
    }
    /* the single-copy choice made unprobed is not kept once it is known unavailable */
    hier_select_shape_t s = one_node(4);
    hier_select_cache_t cache = {0};
    hier_select_t got;
    size_t block = 65536;
    hier_params.allgather_algorithm = HIER_ALGO_CMA;
    hier_select_cached(&cache, &s, HIER_COLL_ALLGATHER, block, &got);
    cr_assert_eq(got.path, HIER_PATH_CMA_COPY);
    s.cma = 0;
    hier_select_cached(&cache, &s, HIER_COLL_ALLGATHER, block, &got);
    cr_assert_eq(got.path, HIER_PATH_SHM_COPY, "%s after the probe said no single copy", hier_path_name(got.path));
}

static hier_select_route_t route(hier_coll_t coll, size_t block, uint32_t size, int device_possible, int voted)
{
    hier_select_route_t out;
    size_t bytes = coll == HIER_COLL_ALLGATHER ? block * size : block;
    hier_select_route(&(hier_select_route_in_t){.coll = coll, .bytes = bytes, .block = block, .size = size,
                                                .device_possible = device_possible, .peer_direct = voted},
                      &out);
    return out;
}

/* How a call's data travels: host calls never chunk nor vote; device
 * allgathers from device_peer_direct_min go NIC to NIC unless voted down,
 * switched off or forced to staging, or alone; calls above
 * device_stage_chunk run as chunks where some rank has a backend. */
Test(select, route_peer_direct_and_chunks)
{
    size_t min = hier_params.device_peer_direct_min, chunk = hier_params.device_stage_chunk;
    hier_select_route_t r = route(HIER_COLL_ALLGATHER, 1u << 24, 8, 0, -1);
    cr_expect(!r.peer_direct && !r.chunked, "no device backend anywhere: the host call, whole");
    r = route(HIER_COLL_ALLGATHER, min, 8, 1, -1);
    cr_expect(r.peer_direct, "a block of device_peer_direct_min, not voted yet: vote");
    cr_expect(route(HIER_COLL_ALLGATHER, min, 8, 1, 1).peer_direct, "voted on");
    cr_expect(!route(HIER_COLL_ALLGATHER, min, 8, 1, 0).peer_direct, "voted down: staged for good");
    cr_expect(!route(HIER_COLL_ALLGATHER, min - 1, 8, 1, 1).peer_direct, "a block under the minimum");
    cr_expect(!route(HIER_COLL_ALLGATHER, min, 1, 1, 1).peer_direct, "one rank: no ring");
    cr_expect(!route(HIER_COLL_ALLREDUCE, min, 8, 1, 1).peer_direct, "only allgathers");
    cr_expect(!route(HIER_COLL_REDUCE_SCATTER, min, 8, 1, 1).peer_direct, "only allgathers");
    hier_params.device_force_staging = 1;
    cr_expect(!route(HIER_COLL_ALLGATHER, min, 8, 1, 1).peer_direct, "device_force_staging");
    hier_params.device_force_staging = 0;
    hier_params.device_peer_direct = 0;
    cr_expect(!route(HIER_COLL_ALLGATHER, min, 8, 1, 1).peer_direct, "device_peer_direct 0");
    for (hier_coll_t coll = HIER_COLL_ALLREDUCE; coll <= HIER_COLL_REDUCE_SCATTER; coll++) {
        size_t per = coll == HIER_COLL_ALLGATHER ? 4 : 1; /* (allgather: the whole vector is block x 4) */
        cr_expect(!route(coll, chunk / per, 4, 1, -1).chunked, "%s: device_stage_chunk bytes run whole",
                  hier_coll_name(coll));
        cr_expect(route(coll, chunk / per + 1, 4, 1, -1).chunked, "%s: one byte more runs as chunks",
                  hier_coll_name(coll));
        cr_expect(!route(coll, chunk / per + 1, 4, 0, -1).chunked, "%s: no backend: whole", hier_coll_name(coll));
    }
}

/* The pair path: two nodes of one rank each, within net_pair_max, and only
 * for choices whose folds it reproduces (an allreduce's recursive doubling,
 * not its Rabenseifner, whose second half copies the peer's fold). */
Test(select, pair_path_two_nodes_of_one_rank)
{
    hier_select_shape_t pair = nodes(2, 1), two_by_two = nodes(2, 2), three = nodes(3, 1), one = one_node(2);
    size_t max = hier_params.net_pair_max;
    hier_select_t ar = pick(&pair, HIER_COLL_ALLREDUCE, 64), ag = pick(&pair, HIER_COLL_ALLGATHER, 32),
                  rs = pick(&pair, HIER_COLL_REDUCE_SCATTER, 64);
    cr_expect(hier_select_pair(&pair, HIER_COLL_ALLREDUCE, 64, &ar));
    cr_expect(hier_select_pair(&pair, HIER_COLL_ALLGATHER, 64, &ag));
    cr_expect(hier_select_pair(&pair, HIER_COLL_REDUCE_SCATTER, 64, &rs));
    cr_expect(hier_select_pair(&pair, HIER_COLL_ALLREDUCE, max, &ar));
    cr_expect(!hier_select_pair(&pair, HIER_COLL_ALLREDUCE, max + 1, &ar));
    hier_select_t ar22 = pick(&two_by_two, HIER_COLL_ALLREDUCE, 64), ar3 = pick(&three, HIER_COLL_ALLREDUCE, 64),
                  ar1 = pick(&one, HIER_COLL_ALLREDUCE, 64);
    cr_expect(!hier_select_pair(&two_by_two, HIER_COLL_ALLREDUCE, 64, &ar22));
    cr_expect(!hier_select_pair(&three, HIER_COLL_ALLREDUCE, 64, &ar3));
    cr_expect(!hier_select_pair(&one, HIER_COLL_ALLREDUCE, 64, &ar1));
    hier_params.net_algorithm = HIER_ALGO_RH;
    hier_select_t rh = pick(&pair, HIER_COLL_ALLREDUCE, 64);
    cr_expect_eq(rh.path, HIER_PATH_NET_RH);
    cr_expect(!hier_select_pair(&pair, HIER_COLL_ALLREDUCE, 64, &rh));
    hier_params.net_algorithm = HIER_ALGO_AUTO;
    hier_params.net_pair_max = 0;
    cr_expect(!hier_select_pair(&pair, HIER_COLL_ALLREDUCE, 8, &ar));
}
