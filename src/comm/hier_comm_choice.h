/* hier_comm_choice.h: a call's choice (hier_comm_choice.c). */
#ifndef HIER_COMM_CHOICE_H
#define HIER_COMM_CHOICE_H

#include "comm/hier_comm_state.h"
#include "sched/hier_sched.h"
#include "select/hier_select.h"

/* What select/ decides from, the same on every rank (one node adds what
 * only it knows). */
hier_select_shape_t hier_comm_shape(const hier_comm_t *c);
/* select/'s choice for a call (single copy probed when a rule first
 * wants it: a collective step, which no_wait does not take: the choice
 * without single copy then). */
hier_status_t hier_comm_select_slow(hier_comm_t *c, hier_coll_t coll, size_t bytes, int no_wait,
                                    hier_select_t *choice_p);
/* (inline: a loop's calls ask for the last choice again, which select/'s
 * cache keeps first, and no probe is due. The cache is empty until the
 * shape is made, and the shape's single copy is the node's: only the
 * slow path probes it, and sets both.) */
static inline hier_status_t hier_comm_select(hier_comm_t *c, hier_coll_t coll, size_t bytes, int no_wait,
                                             hier_select_t *choice_p)
{
    if (hier_select_cached_last(&c->select_cache, c->shape.cma, coll, bytes, choice_p) &&
        choice_p->path != HIER_PATH_CMA_COPY)
        return HIER_OK;
    return hier_comm_select_slow(c, coll, bytes, no_wait, choice_p);
}
/* The low-latency cut-off of `coll` measured on the node's ranks
 * (hier_probe_ll_top), and the shape's. Collective: run after a blocking
 * call the cut-off was due for (hier_comm_ll_due) has succeeded, so every
 * rank made the same call and measures (a call mismatched across ranks
 * fails first, as any call). */
hier_status_t hier_comm_measure_ll(hier_comm_t *c, hier_coll_t coll);
/* Whether a blocking call of this choice leaves the cut-off to measure:
 * low latency, not yet measured, a size the measurement decides. (inline:
 * every low-latency call asks; below 1 KiB the first test answers.) */
static inline int hier_comm_ll_due(const hier_comm_t *c, hier_coll_t coll, size_t bytes,
                                   const hier_select_t *choice)
{
    return choice->path == HIER_PATH_SHM_LL && bytes >= HIER_SELECT_LL_PROBE_MIN && !c->shape.ll_top[coll] &&
           hier_select_ll_due(&c->shape, coll, bytes);
}
/* A schedule's arguments for the choice (the node fills in its own fields
 * and the chunk: hier_node_prep). */
static inline hier_sched_args_t hier_comm_args(const hier_comm_t *c, const hier_select_t *choice, size_t esize,
                                               size_t count, int in_place)
{
    return (hier_sched_args_t){.kind = choice->kind, .net_kind = choice->net_kind, .net_radix = choice->net_radix,
                               .esize = esize, .count = count, .in_place = in_place,
                               .pieces = choice->split ? c->layout.pieces : 1, .chunk_cap = choice->chunk,
                               .depth_cap = choice->depth};
}

#endif
