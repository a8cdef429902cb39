/* hier_comm_choice.c: a call's choice: the communicator's shape for
 * select/, and select/'s answer, single copy probed when first wanted. */
#include "comm/hier_comm_choice.h"

#include <stdint.h>
#include <string.h>

#include "base/hier_params.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_probe.h"
#include "exec/hier_exec_ll.h"

/* What select/ decides from: the same on every rank of the communicator.
 * What only this node knows (its ranks, NUMA domains, crowding, single
 * copy) is given on one node only: nodes may differ there, and between
 * nodes every node must choose alike. */
hier_select_shape_t hier_comm_shape(const hier_comm_t *c)
{
    hier_select_shape_t s = {.size = (uint32_t)c->size, .nnodes = (uint32_t)c->layout.nnodes,
                             .ll_capacity = hier_exec_ll_capacity(), .cma = 0};
    if (c->layout.nnodes == 1) {
        s.local_ranks = (uint32_t)c->layout.nranks;
        s.numa_groups = (uint32_t)c->node->groups.ngroups;
        s.crowded = c->node->crowded;
        s.cma = c->node->cma;
        s.cma_window = c->node->cma_window;
        memcpy(s.ll_top, c->node->ll_top, sizeof(s.ll_top));
    }
    return s;
}

hier_status_t hier_comm_measure_ll(hier_comm_t *c, hier_coll_t coll)
{
    hier_status_t st = hier_probe_ll_top(c, coll, &c->node->ll_top[coll]);
    if (st == HIER_OK) c->shape.ll_top[coll] = c->node->ll_top[coll];
    return st;
}

/* The choice for a call; single copy is probed, and its allgather window
 * measured, the first time a rule wants it (collectively: every rank
 * reaches the same choice); with no_wait (a request: no collective step),
 * not: the choice without single copy, the segment's. A call that the
 * low-latency cut-off decides before the node has measured it gets low
 * latency wherever the area holds it (what the area was made for; the
 * measurement only trims it), not kept (every rank's shape is alike: only
 * the measurements, collective, change it). */
hier_status_t hier_comm_select_slow(hier_comm_t *c, hier_coll_t coll, size_t bytes, int no_wait,
                                    hier_select_t *choice_p)
{
    hier_select_shape_t *shape = &c->shape;
    if (!shape->size) *shape = hier_comm_shape(c); /* (made once: only the measurements change it since) */
    if (c->layout.nnodes == 1) { /* (a set-up run as a fiber may have given them since) */
        shape->cma = c->node->cma, shape->cma_window = c->node->cma_window;
        memcpy(shape->ll_top, c->node->ll_top, sizeof(shape->ll_top));
    }
    if (hier_select_ll_due(shape, coll, bytes)) {
        hier_select_shape_t unmeasured = *shape;
        unmeasured.ll_top[coll] = SIZE_MAX;
        hier_select(&unmeasured, coll, bytes, choice_p);
        return HIER_OK;
    }
    hier_select_cached(&c->select_cache, shape, coll, bytes, choice_p);
    if (choice_p->path == HIER_PATH_CMA_COPY && shape->cma < 0) {
        if (no_wait) {
            hier_select_shape_t without = *shape;
            without.cma = 0;
            hier_select(&without, coll, bytes, choice_p);
            return HIER_OK;
        }
        int cma = hier_node_cma(c);
        if (cma < 0) return (hier_status_t)cma;
        int window_wanted = hier_params.allgather_algorithm == HIER_ALGO_AUTO && /* (forced: no window) */
                            (!hier_params.allgather_cma_min || !hier_params.allgather_cma_max);
        if (cma && window_wanted) {
            hier_status_t st = hier_probe_cma_window(c, &c->node->cma_window);
            if (st != HIER_OK) return st;
        }
        shape->cma = cma, shape->cma_window = c->node->cma_window;
        hier_select_cached(&c->select_cache, shape, coll, bytes, choice_p);
    }
    return HIER_OK;
}
