/* NIC assignment (base/hier_nic.c): balanced, nearest first, deterministic,
 * for the shapes of the instances hier runs on (p4d/dl1 4 NICs, p5 32), and
 * the NIC list filter. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_nic.h"

static hier_nic_plan_t assign(int nnics, const int *nic_numa, int nranks, const int *rank_numa, int max)
{
    hier_nic_problem_t p = {.nnics = nnics, .nic_numa = nic_numa, .nranks = nranks, .rank_numa = rank_numa,
                            .max_per_rank = max};
    hier_nic_plan_t plan;
    cr_assert_eq(hier_nic_assign(&p, &plan), HIER_OK);
    return plan;
}

static int gcd(int a, int b)
{
    return b ? gcd(b, a % b) : a;
}

/* The properties every plan has: each rank its NICs, all different; near
 * recorded truly; and the shape: where NICs / gcd fits in max, every NIC
 * serves exactly ranks / gcd ranks (every NIC the same share of the node's
 * bytes), else NICs / ranks each with the leftovers idle, or one each with
 * loads that differ by one at most. */
static void check_plan(const hier_nic_plan_t *plan, int nnics, const int *nic_numa, int nranks, const int *rank_numa,
                       int max)
{
    int g = gcd(nnics, nranks), balanced = nnics / g <= max;
    int k = balanced ? nnics / g : nranks <= nnics ? (nnics / nranks < max ? nnics / nranks : max) : 1;
    cr_assert_eq(plan->per_rank, k, "%d ranks, %d NICs, max %d: %d per rank", nranks, nnics, max, plan->per_rank);
    int *load = calloc((size_t)nnics, sizeof(int));
    for (int r = 0; r < nranks; r++)
        for (int j = 0; j < k; j++) {
            int n = plan->nic[r * k + j];
            cr_assert(n >= 0 && n < nnics);
            for (int i = 0; i < j; i++) cr_assert_neq(plan->nic[r * k + i], n, "rank %d has NIC %d twice", r, n);
            int near = nic_numa[n] < 0 || rank_numa[r] < 0 || nic_numa[n] == rank_numa[r];
            cr_assert_eq(plan->near[r * k + j], near);
            load[n]++;
        }
    int lo = nranks, hi = 0, used = 0;
    for (int n = 0; n < nnics; n++) {
        if (load[n]) used++;
        if (load[n] && load[n] < lo) lo = load[n];
        if (load[n] > hi) hi = load[n];
    }
    if (balanced) {
        cr_assert_eq(used, nnics, "%d ranks, %d NICs: a NIC idle", nranks, nnics);
        cr_assert_eq(lo, nranks / g, "%d ranks, %d NICs: loads %d..%d", nranks, nnics, lo, hi);
        cr_assert_eq(hi, nranks / g, "%d ranks, %d NICs: loads %d..%d", nranks, nnics, lo, hi);
    } else if (nranks > nnics) {
        cr_assert_eq(used, nnics, "%d ranks, %d NICs: a NIC idle", nranks, nnics);
        cr_assert_leq(hi - lo, 1, "%d ranks, %d NICs: loads %d..%d", nranks, nnics, lo, hi);
    } else {
        cr_assert_eq(hi, 1, "%d ranks, %d NICs: a NIC serves %d ranks", nranks, nnics, hi);
        cr_assert_eq(used, nranks * k);
    }
    free(load);
}

Test(nic, one_rank_drives_up_to_max_nics)
{
    int nic_numa[4] = {0, 0, 1, 1}, rank_numa[1] = {1};
    hier_nic_plan_t plan = assign(4, nic_numa, 1, rank_numa, 4);
    check_plan(&plan, 4, nic_numa, 1, rank_numa, 4);
    /* nearest first: its own socket's NICs lead */
    cr_assert_eq(plan.nic[0], 2);
    cr_assert_eq(plan.nic[1], 3);
    hier_nic_plan_free(&plan);
    plan = assign(4, nic_numa, 1, rank_numa, 2);
    cr_assert_eq(plan.per_rank, 2);
    cr_assert(plan.near[0] && plan.near[1], "with 2 allowed the rank takes the 2 near NICs");
    hier_nic_plan_free(&plan);
}

/* p4d / dl1: 8 ranks, 4 NICs, 2 sockets: two ranks per NIC, each on its own socket's. */
Test(nic, eight_ranks_four_nics_two_sockets)
{
    int nic_numa[4] = {0, 0, 1, 1}, rank_numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    hier_nic_plan_t plan = assign(4, nic_numa, 8, rank_numa, 4);
    check_plan(&plan, 4, nic_numa, 8, rank_numa, 4);
    for (int r = 0; r < 8; r++) cr_assert(plan.near[r], "rank %d got a far NIC", r);
    cr_assert_eq(plan.nic[0], 0);
    cr_assert_eq(plan.nic[1], 1);
    cr_assert_eq(plan.nic[2], 0);
    cr_assert_eq(plan.nic[4], 2);
    hier_nic_plan_free(&plan);
}

/* p5: 8 GPUs' ranks, 32 NICs (16 per socket): 4 NICs each, all near, none shared. */
Test(nic, eight_ranks_thirty_two_nics)
{
    int nic_numa[32], rank_numa[8];
    for (int n = 0; n < 32; n++) nic_numa[n] = n / 16;
    for (int r = 0; r < 8; r++) rank_numa[r] = r / 4;
    hier_nic_plan_t plan = assign(32, nic_numa, 8, rank_numa, 4);
    check_plan(&plan, 32, nic_numa, 8, rank_numa, 4);
    for (int i = 0; i < 32; i++) cr_assert(plan.near[i]);
    cr_assert_eq(plan.nic[0], 0);
    cr_assert_eq(plan.nic[3], 3);
    cr_assert_eq(plan.nic[4 * 4], 16, "rank 4, the first of socket 1, starts at socket 1's first NIC");
    hier_nic_plan_free(&plan);
}

/* More ranks than NICs, not a multiple: 3 ranks, 2 NICs: loads 2 and 1. */
/* Counts that do not divide: every NIC carries the same share (the
 * issue's shapes: 3 NICs and 2 ranks, 4 and 3, 4 and 6, 2 and 3). Shares are
 * what each NIC carries when each rank stripes its bytes evenly over its
 * NICs: within 20% of each other (here: equal). */
Test(nic, counts_that_do_not_divide_share_every_nic)
{
    static const int shapes[][2] = {{3, 2}, {4, 3}, {4, 6}, {2, 3}, {6, 4}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int nnics = shapes[i][0], nranks = shapes[i][1], nn[8], rn[8];
        for (int n = 0; n < nnics; n++) nn[n] = -1;
        for (int r = 0; r < nranks; r++) rn[r] = -1;
        hier_nic_plan_t plan = assign(nnics, nn, nranks, rn, 4);
        check_plan(&plan, nnics, nn, nranks, rn, 4);
        double share[8] = {0}, lo = 1e9, hi = 0;
        for (int r = 0; r < nranks; r++)
            for (int j = 0; j < plan.per_rank; j++) share[plan.nic[r * plan.per_rank + j]] += 1.0 / plan.per_rank;
        for (int n = 0; n < nnics; n++) {
            lo = share[n] < lo ? share[n] : lo;
            hi = share[n] > hi ? share[n] : hi;
        }
        cr_assert(lo > 0 && hi <= lo * 1.2, "%d NICs, %d ranks: shares %.2f..%.2f", nnics, nranks, lo, hi);
        hier_nic_plan_free(&plan);
    }
}

/* Beyond max_per_rank the closest shape: 5 NICs for 3 ranks at most 4 each
 * leaves two idle, one NIC per rank. */
Test(nic, balance_needing_more_than_max_falls_back)
{
    int nn[5] = {-1, -1, -1, -1, -1}, rn[3] = {-1, -1, -1};
    hier_nic_plan_t plan = assign(5, nn, 3, rn, 4);
    check_plan(&plan, 5, nn, 3, rn, 4);
    cr_assert_eq(plan.per_rank, 1);
    hier_nic_plan_free(&plan);
}

/* The default set: the management NIC (default route) and slower NICs go
 * when others stay; unknown speeds stay; never none. */
Test(nic, default_set_leaves_out_management_and_slower_nics)
{
    unsigned char keep[4];
    const char *why[4];
    hier_nic_fact_t bed[4] = {{10000, 1}, {10000, 0}, {10000, 0}, {10000, 0}}; /* mgmt + 3 rails */
    hier_nic_default_set(bed, 4, keep, why);
    cr_assert(!keep[0] && keep[1] && keep[2] && keep[3]);
    cr_assert_str_eq(why[0], "carries the default route (management)");
    cr_assert_null(why[1]);
    hier_nic_fact_t mixed[4] = {{1000, 1}, {100000, 0}, {25000, 0}, {-1, 0}}; /* 1G mgmt, 100G, 25G, EFA */
    hier_nic_default_set(mixed, 4, keep, why);
    cr_assert(!keep[0] && keep[1] && !keep[2] && keep[3]);
    cr_assert_str_eq(why[2], "slower than the fastest NIC");
    hier_nic_fact_t alone[1] = {{1000, 1}}; /* the one NIC carries the default route: it stays */
    hier_nic_default_set(alone, 1, keep, why);
    cr_assert(keep[0]);
    hier_nic_fact_t two[2] = {{1000, 1}, {1000, 1}}; /* (two default routes: nothing else to use) */
    hier_nic_default_set(two, 2, keep, why);
    cr_assert(keep[0] && keep[1]);
}

/* A NIC without a location is near everything; an unbound rank never takes
 * a bound rank's near NIC from it (bound ranks choose first). */
Test(nic, unknown_locations)
{
    int nic_numa[2] = {0, 1}, rank_numa[2] = {-1, 1};
    hier_nic_plan_t plan = assign(2, nic_numa, 2, rank_numa, 4);
    cr_assert_eq(plan.nic[1], 1, "the rank bound to NUMA 1 gets NIC 1");
    cr_assert_eq(plan.nic[0], 0);
    hier_nic_plan_free(&plan);
    int unknown[4] = {-1, -1, -1, -1}, bound[4] = {0, 0, 1, 1};
    plan = assign(4, unknown, 4, bound, 4);
    check_plan(&plan, 4, unknown, 4, bound, 4);
    hier_nic_plan_free(&plan);
}

/* Crowded on one socket: near NICs first while they have room, then the far ones. */
Test(nic, far_nics_only_for_balance)
{
    int nic_numa[4] = {0, 0, 1, 1}, rank_numa[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    hier_nic_plan_t plan = assign(4, nic_numa, 8, rank_numa, 4);
    check_plan(&plan, 4, nic_numa, 8, rank_numa, 4);
    int near = 0;
    for (int r = 0; r < 8; r++) near += plan.near[r];
    cr_assert_eq(near, 4, "the two near NICs take two ranks each, the rest go far");
    hier_nic_plan_free(&plan);
}

Test(nic, every_shape_is_balanced_and_deterministic)
{
    for (int nnics = 1; nnics <= 33; nnics++)
        for (int nranks = 1; nranks <= 40; nranks++)
            for (int max = 1; max <= 8; max *= 2) {
                int *nn = malloc(sizeof(int) * (size_t)nnics), *rn = malloc(sizeof(int) * (size_t)nranks);
                for (int n = 0; n < nnics; n++) nn[n] = n % 3 == 2 ? -1 : n * 2 / nnics;
                for (int r = 0; r < nranks; r++) rn[r] = r % 5 == 4 ? -1 : r * 2 / nranks;
                hier_nic_plan_t a = assign(nnics, nn, nranks, rn, max), b = assign(nnics, nn, nranks, rn, max);
                check_plan(&a, nnics, nn, nranks, rn, max);
                cr_assert(!memcmp(a.nic, b.nic, sizeof(int) * (size_t)(nranks * a.per_rank)), "not deterministic");
                hier_nic_plan_free(&a);
                hier_nic_plan_free(&b);
                free(nn);
                free(rn);
            }
}

Test(nic, bad_problems_are_refused)
{
    int one[1] = {0};
    hier_nic_problem_t p = {.nnics = 0, .nic_numa = one, .nranks = 1, .rank_numa = one, .max_per_rank = 1};
    hier_nic_plan_t plan;
    cr_assert_eq(hier_nic_assign(&p, &plan), HIER_ERR_INVALID_ARG);
    p.nnics = 1;
    p.nranks = 0;
    cr_assert_eq(hier_nic_assign(&p, &plan), HIER_ERR_INVALID_ARG);
    p.nranks = 1;
    p.max_per_rank = 0;
    cr_assert_eq(hier_nic_assign(&p, &plan), HIER_ERR_INVALID_ARG);
}

Test(nic, filter_lists_prefixes_and_exclusion)
{
    cr_assert(hier_nic_filter_pass(NULL, "eth0"));
    cr_assert(hier_nic_filter_pass("", "eth0"));
    cr_assert(hier_nic_filter_pass("rail0,rail1", "rail1"));
    cr_assert(!hier_nic_filter_pass("rail0,rail1", "rail10"));
    cr_assert(!hier_nic_filter_pass("rail0,rail1", "rail"));
    cr_assert(hier_nic_filter_pass("rdmap*", "rdmap16s27-rdm"));
    cr_assert(!hier_nic_filter_pass("rdmap*", "eth0"));
    cr_assert(!hier_nic_filter_pass("^lo,docker*", "docker0"));
    cr_assert(!hier_nic_filter_pass("^lo,docker*", "lo"));
    cr_assert(hier_nic_filter_pass("^lo,docker*", "eth0"));
    cr_assert(hier_nic_filter_pass("eth0", "eth0"));
    cr_assert(!hier_nic_filter_pass("eth0,", "eth"));
}

/* What coll_hier_verbose 1 says on a p4d-like node (4 EFA NICs, 2 sockets,
 * 8 ranks), the lines the README quotes: each rank its socket's NIC. */
Test(nic, verbose_lines_of_a_four_nic_two_socket_node)
{
    static const char *const names[] = {"rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"};
    int nic_numa[4] = {0, 0, 1, 1}, rank_numa[8] = {0, 0, 0, 0, 1, 1, 1, 1}, crowded[2] = {0, 0};
    char line[256];
    hier_nic_plan_t plan = assign(4, nic_numa, 8, rank_numa, 4);
    static const char *const want[] = {"rdmap16s27 (near)", "rdmap32s27 (near)", "rdmap16s27 (near)",
                                       "rdmap32s27 (near)", "rdmap144s27 (near)", "rdmap160s27 (near)",
                                       "rdmap144s27 (near)", "rdmap160s27 (near)"};
    for (int r = 0; r < 8; r++) {
        hier_nic_plan_describe(&plan, names, nic_numa, r, line, sizeof(line));
        cr_expect_str_eq(line, want[r], "rank %d", r);
    }
    hier_nic_plan_free(&plan);
    /* 2 ranks, both on socket 0: 2 NICs each, the second rank's far (balance) */
    plan = assign(4, nic_numa, 2, crowded, 4);
    hier_nic_plan_describe(&plan, names, nic_numa, 0, line, sizeof(line));
    cr_expect_str_eq(line, "rdmap16s27 (near), rdmap32s27 (near)");
    hier_nic_plan_describe(&plan, names, nic_numa, 1, line, sizeof(line));
    cr_expect_str_eq(line, "rdmap144s27 (far: balance), rdmap160s27 (far: balance)");
    hier_nic_plan_free(&plan);
}
