/* hier_comm_host.h: the collectives on host buffers (hier_comm_host.c). */
#ifndef HIER_COMM_HOST_H
#define HIER_COMM_HOST_H

#include "comm/hier_comm_choice.h"
#include "comm/hier_comm_setup.h"
#include "comm/hier_comm_state.h"
#include "exec/hier_exec_ll.h"
#include "select/hier_select.h"

/* A call on host buffers, after hier_comm_prepare said HIER_OK or HIER_ALONE (a one-rank communicator: its input
 * copied); the staging pipeline's chunks are such calls too. */
hier_status_t hier_comm_host_run(hier_comm_t *c, const hier_call_t *call, hier_result_t *res);
/* Common entry: HIER_OK to go on, HIER_ALONE for a one-rank communicator (the caller copies), or a fallback with
 * its reason. bytes: the call's whole vector, the same on every rank (it may start opening libfabric). pb (may be
 * NULL): the call, offered to the set-up if this call makes one (pb->done: served, HIER_OK). */
hier_status_t hier_comm_prepare(hier_comm_t *c, hier_coll_t coll, size_t bytes, hier_piggyback_t *pb,
                                hier_path_t *path_p);
/* A PML communicator's call of `bytes` (the whole vector): counted, the opening started when due; whether it is
 * time to ask every rank whether its endpoint is open (the same answer on every rank). */
int hier_comm_switch_due(hier_comm_t *c, size_t bytes);

/* Shared with the requests (hier_comm_req.c): a failed call fails the communicator (its later calls fall back)
 * and says so to the node's ranks waiting for it; a call's signature goes where the peers look; the low-latency
 * executor over the node segment. */
hier_status_t hier_comm_failed(hier_comm_t *c, hier_status_t st);
/* A path as the communicator's transport carries it now (net_rd, or pml_rd over Open MPI's point-to-point). */
hier_path_t hier_comm_path(const hier_comm_t *c, hier_path_t path);
void hier_comm_sign(hier_comm_t *c, hier_coll_t coll, uint64_t count, hier_dtype_t dt, hier_op_t op, uint32_t digest);
hier_exec_ll_t hier_comm_ll(hier_comm_t *c);

#endif
