/* hier_layout.h: where a communicator's ranks are: which node each is on,
 * in what order, and this rank's place. Pure; made once, at set-up, from
 * every rank's node name (the lowest communicator rank on its node), with
 * arrays as large as the communicator and nothing else. */
#ifndef HIER_LAYOUT_H
#define HIER_LAYOUT_H

#include <stdint.h>

#include "base/hier_status.h"

typedef struct {
    int size, rank;
    int nnodes, node;     /* nodes are numbered by their lowest rank; mine */
    int nranks, me;       /* ranks on my node, my index among them (in rank order) */
    int pieces;           /* the fewest ranks any node has */
    uint32_t *node_first; /* nnodes + 1: node n holds node_ranks[node_first[n] .. node_first[n + 1]) */
    uint32_t *node_ranks; /* size: the communicator's ranks grouped by node, each node's in rank order */
} hier_layout_t;

/* From node_of[r], the lowest rank on r's node, for every rank (NULL: all
 * on one node). HIER_ERR_INVALID_ARG when the names contradict each other
 * (a rank names a node whose lowest rank names another). */
hier_status_t hier_layout_make(int size, int rank, const int32_t *node_of, hier_layout_t *layout_p);
/* The arrays a layout of `size` ranks needs, made before the node names are
 * known (a set-up makes them before its exchange: nothing after it can
 * fail for want of memory). */
typedef struct {
    uint32_t *scratch, *node_first, *node_ranks;
} hier_layout_reserved_t;
hier_status_t hier_layout_reserve(int size, hier_layout_reserved_t *reserved);
void hier_layout_reserved_free(hier_layout_reserved_t *reserved);
/* hier_layout_make in the reserved memory, which it empties (made or not). */
hier_status_t hier_layout_make_in(int size, int rank, const int32_t *node_of, hier_layout_reserved_t *reserved,
                                  hier_layout_t *layout_p);
void hier_layout_free(hier_layout_t *layout);
/* Communicator rank of local index l on node n. */
static inline int hier_layout_rank(const hier_layout_t *l, int node, int local)
{
    return (int)l->node_ranks[l->node_first[node] + (uint32_t)local];
}

#endif
