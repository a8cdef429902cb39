/* The layout from every rank's node name: numbering, order, my place, the
 * fewest ranks per node, contradictions refused, and sizes far past any
 * fixed limit. Each rank's view is checked against one built here by brute
 * force. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "comm/hier_layout.h"

/* node_of from a node per rank given by any numbering: the lowest rank of each. */
static int32_t *names(const int *node, int size)
{
    int32_t *of = malloc(sizeof(*of) * (size_t)size);
    for (int r = 0; r < size; r++) {
        of[r] = r;
        for (int q = 0; q < r; q++)
            if (node[q] == node[r]) {
                of[r] = q;
                break;
            }
    }
    return of;
}

static void check_all_ranks(const int *node, int size)
{
    int32_t *of = names(node, size);
    for (int rank = 0; rank < size; rank++) {
        hier_layout_t l;
        cr_assert_eq(hier_layout_make(size, rank, of, &l), HIER_OK);
        int nnodes = 0, fewest = size;
        for (int r = 0; r < size; r++) nnodes += of[r] == r;
        cr_assert_eq(l.nnodes, nnodes);
        for (int n = 0, first = 0; n < l.nnodes; n++) { /* node n: its ranks in order, all of one name */
            int cnt = (int)(l.node_first[n + 1] - l.node_first[n]);
            fewest = cnt < fewest ? cnt : fewest;
            while (of[first] != first || (n > 0 && first <= (int)l.node_ranks[l.node_first[n - 1]])) first++;
            cr_assert_eq((int)l.node_ranks[l.node_first[n]], first, "node %d starts with its lowest rank", n);
            for (uint32_t i = l.node_first[n]; i < l.node_first[n + 1]; i++) {
                cr_assert_eq(of[l.node_ranks[i]], first);
                cr_assert(i == l.node_first[n] || l.node_ranks[i - 1] < l.node_ranks[i]);
            }
        }
        cr_assert_eq(l.pieces, fewest);
        cr_assert_eq(hier_layout_rank(&l, l.node, l.me), rank);
        cr_assert_eq(l.nranks, (int)(l.node_first[l.node + 1] - l.node_first[l.node]));
        hier_layout_free(&l);
    }
    free(of);
}

Test(layout, by_node_round_robin_and_uneven)
{
    check_all_ranks((int[]){0, 0, 1, 1}, 4);
    check_all_ranks((int[]){0, 1, 0, 1, 0, 1}, 6);
    check_all_ranks((int[]){5, 5, 2, 9, 2, 5, 9}, 7);
    check_all_ranks((int[]){3}, 1);
}

Test(layout, one_node_without_names)
{
    hier_layout_t l;
    cr_assert_eq(hier_layout_make(5, 3, NULL, &l), HIER_OK);
    cr_assert_eq(l.nnodes, 1);
    cr_assert_eq(l.nranks, 5);
    cr_assert_eq(l.me, 3);
    cr_assert_eq(l.pieces, 5);
    for (int r = 0; r < 5; r++) cr_assert_eq((int)l.node_ranks[r], r);
    hier_layout_free(&l);
}

Test(layout, contradictions_are_refused)
{
    hier_layout_t l;
    int32_t bad1[] = {0, 0, 1, 1}; /* rank 2 names node 1, whose lowest rank names node 0 */
    int32_t bad2[] = {0, 2, 2};    /* rank 1 names a higher rank */
    int32_t bad3[] = {1, 1};       /* rank 0 names rank 1 */
    cr_assert_eq(hier_layout_make(4, 0, bad1, &l), HIER_ERR_INVALID_ARG);
    cr_assert_eq(hier_layout_make(3, 0, bad2, &l), HIER_ERR_INVALID_ARG);
    cr_assert_eq(hier_layout_make(2, 0, bad3, &l), HIER_ERR_INVALID_ARG);
}

/* 1,024 nodes of 96 ranks (past 64 nodes, 1,024 ranks and 256 per node),
 * ranks dealt round-robin: linear work, checked for a few ranks. */
Test(layout, a_hundred_thousand_ranks)
{
    int nodes = 1024, per = 96, size = nodes * per;
    int32_t *of = malloc(sizeof(*of) * (size_t)size);
    for (int r = 0; r < size; r++) of[r] = r % nodes; /* node r % nodes, named by its lowest rank */
    for (int rank = 0; rank < size; rank += 7777) {
        hier_layout_t l;
        cr_assert_eq(hier_layout_make(size, rank, of, &l), HIER_OK);
        cr_assert_eq(l.nnodes, nodes);
        cr_assert_eq(l.node, rank % nodes);
        cr_assert_eq(l.nranks, per);
        cr_assert_eq(l.me, rank / nodes);
        cr_assert_eq(l.pieces, per);
        cr_assert_eq(hier_layout_rank(&l, 17, 5), 5 * nodes + 17);
        hier_layout_free(&l);
    }
    free(of);
}
