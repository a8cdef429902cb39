/* hier_comm_host.h: the collectives on host buffers (hier_comm_host.c). */
#ifndef HIER_COMM_HOST_H
#define HIER_COMM_HOST_H

#include "comm/hier_comm_setup.h"
#include "comm/hier_comm_state.h"
#include "exec/hier_exec_ll.h"
#include "select/hier_select.h"

/* A call on host buffers, after hier_comm_prepare said HIER_OK or
 * HIER_IN_PROGRESS (a one-rank communicator: its input copied); the
 * staging pipeline's chunks are such calls too (exec/hier_stage.c). */
hier_status_t hier_comm_host_run(hier_comm_t *c, const hier_call_t *call, hier_result_t *res);
/* What select/ decides from, the same on every rank (one node adds what
 * only it knows). */
hier_select_shape_t hier_comm_shape(const hier_comm_t *c);
/* Common entry: HIER_OK to go on, HIER_IN_PROGRESS for a one-rank
 * communicator (the caller copies), or a fallback with its reason. bytes:
 * the call's whole vector, the same on every rank (it may start opening
 * libfabric: fabric_open_min). ride (may be NULL): the call, offered to the
 * set-up if this call makes one (ride->done: served, HIER_OK). */
hier_status_t hier_comm_prepare(hier_comm_t *c, hier_coll_t coll, size_t bytes, hier_ride_t *ride,
                                hier_path_t *path_p);
/* A PML communicator's call of `bytes` (the whole vector): counted, the
 * opening started when due, and whether it is time to ask every rank
 * whether its endpoint is open (the same answer on every rank). */
int hier_comm_switch_due(hier_comm_t *c, size_t bytes);

/* What the host calls and the requests (hier_comm_req.c) share: a call
 * that failed fails the communicator (its later calls fall back), and says
 * so to the node's ranks waiting for it; a call's signature goes where the
 * peers look; the low-latency executor over the node segment; a
 * schedule's arguments for a choice. */
hier_status_t hier_comm_failed(hier_comm_t *c, hier_status_t st);
/* A path as the communicator's transport carries it now (net_rd, or pml_rd
 * over Open MPI's point-to-point). */
hier_path_t hier_comm_path(const hier_comm_t *c, hier_path_t path);
void hier_comm_sign(hier_comm_t *c, hier_coll_t coll, uint64_t count, hier_dtype_t dt, hier_op_t op, uint32_t digest);
hier_exec_ll_t hier_comm_ll(hier_comm_t *c);
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
hier_sched_args_t hier_comm_args(const hier_comm_t *c, const hier_select_t *choice, size_t esize, size_t count,
                                 int in_place);

#endif
