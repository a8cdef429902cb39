/* hier_layout.c: see hier_layout.h. Linear in the communicator's size: a
 * node's name is its lowest rank, so nodes come out numbered in rank order
 * by a prefix count, without sorting. */
#include "comm/hier_layout.h"

#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"

/* node_first and node_ranks, kept, are one block (node_first its start);
 * the scratch is freed once the layout is made. */
hier_status_t hier_layout_reserve(int size, hier_layout_reserved_t *reserved)
{
    size_t n = (size_t)size;
    hier_layout_reserved_t r = {.scratch = malloc(2 * n * sizeof(uint32_t)),
                            .node_first = malloc((2 * n + 1) * sizeof(uint32_t))};
    if (!r.scratch || !r.node_first) {
        hier_layout_reserved_free(&r);
        return HIER_ERR_NO_MEMORY;
    }
    r.node_ranks = r.node_first + n + 1;
    *reserved = r;
    return HIER_OK;
}

void hier_layout_reserved_free(hier_layout_reserved_t *reserved)
{
    free(reserved->scratch);
    free(reserved->node_first);
    *reserved = (hier_layout_reserved_t){0};
}

hier_status_t hier_layout_make(int size, int rank, const int32_t *node_of, hier_layout_t *layout_p)
{
    hier_layout_reserved_t reserved;
    hier_status_t st = hier_layout_reserve(size, &reserved);
    return st == HIER_OK ? hier_layout_make_in(size, rank, node_of, &reserved, layout_p) : st;
}

/* 1. check the names: each is a rank that names itself, at or below the ranks naming it;
 * 2. number the nodes (the ranks that name themselves, in rank order);
 * 3. count each node's ranks, then place them, in rank order. */
hier_status_t hier_layout_make_in(int size, int rank, const int32_t *node_of, hier_layout_reserved_t *reserved,
                                  hier_layout_t *layout_p)
{
    hier_layout_t l = {.size = size, .rank = rank, .pieces = size};
    size_t n = (size_t)size;
    for (int r = 0; node_of && r < size; r++) /* 1 */
        if (node_of[r] < 0 || node_of[r] > r || node_of[node_of[r]] != node_of[r]) {
            HIER_ERROR("rank %d: rank %d names node %d, which does not name itself: the ranks disagree about "
                       "the nodes", rank, r, (int)node_of[r]);
            hier_layout_reserved_free(reserved);
            return HIER_ERR_INVALID_ARG;
        }
    uint32_t *index = reserved->scratch, *next = index + n; /* name -> number; number -> next place */
    l.node_ranks = reserved->node_ranks;
    l.node_first = reserved->node_first;
    memset(l.node_first, 0, (n + 1) * sizeof(*l.node_first));
    for (int r = 0; r < size; r++) /* 2 */
        if (node_of ? node_of[r] == r : r == 0) index[r] = (uint32_t)l.nnodes++;
    for (int r = 0; r < size; r++) l.node_first[index[node_of ? node_of[r] : 0] + 1]++; /* 3 */
    for (int k = 0; k < l.nnodes; k++) {
        if ((int)l.node_first[k + 1] < l.pieces) l.pieces = (int)l.node_first[k + 1];
        l.node_first[k + 1] += l.node_first[k];
        next[k] = l.node_first[k];
    }
    for (int r = 0; r < size; r++) {
        uint32_t k = index[node_of ? node_of[r] : 0];
        if (r == rank) l.me = (int)(next[k] - l.node_first[k]);
        l.node_ranks[next[k]++] = (uint32_t)r;
    }
    l.node = (int)index[node_of ? node_of[rank] : 0];
    l.nranks = (int)(l.node_first[l.node + 1] - l.node_first[l.node]);
    free(index);
    *reserved = (hier_layout_reserved_t){0};
    *layout_p = l;
    return HIER_OK;
}

void hier_layout_free(hier_layout_t *l)
{
    free(l->node_first); /* (node_ranks with it: hier_layout_reserve) */
    l->node_first = l->node_ranks = NULL;
}
