/* hier_comm_host.c: the collectives on host buffers: the start, the
 * signature, select/'s choice (hier_comm_choice.c), the run, the verdict. */
#include <string.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_choice.h"
#include "comm/hier_comm_host.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_setup.h"
#include "comm/hier_proc.h"
#include "exec/hier_exec_ll.h"
#include "select/hier_select.h"

/* A communicator over Open MPI's point-to-point while libfabric may still
 * open (HIER_COMM_PML): small calls before the 65,536th neither start the
 * opening (fabric_open_min) nor ask: over the point-to-point they cost
 * within 0.1-0.6 us of libfabric's up to 4 KiB, which the opening's 0.15 s
 * of CPU repays only after some 500,000 of them (docs/performance.md,
 * *Between nodes from the first call*). The question, whether every rank's
 * endpoint is open (hier_net_switch), is a small agreement: asked at the
 * 1st, 2nd, 4th, ... 64th call that may open, then every 64th (every rank
 * counts the same calls), so a long opening (a busy node) costs few. */
#define HIER_COMM_PML_CALLS 65536

int hier_comm_switch_due(hier_comm_t *c, size_t bytes)
{
    if (++c->pml_calls < HIER_COMM_PML_CALLS && bytes < hier_params.fabric_open_min) return 0;
    hier_proc_fabric_warm();
    uint64_t n = ++c->pml_asks;
    return !(n & (n - 1)) || n % 64 == 0;
}

/* Common entry: the set-up at the first call, a forced fallback (the
 * communicator's served bit, hier_comm_create), or one rank. */
hier_status_t hier_comm_prepare(hier_comm_t *c, hier_coll_t coll, size_t bytes, hier_piggyback_t *pb,
                                hier_path_t *path_p)
{
    if (!(c->served_colls >> coll & 1)) {
        *path_p = HIER_PATH_FALLBACK_FORCED;
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (c->size == 1) { /* (no segment for a communicator of one) */
        *path_p = HIER_PATH_SELF;
        return HIER_ALONE; /* (the caller copies) */
    }
    if (c->state == HIER_COMM_PML && hier_comm_switch_due(c, bytes) && hier_net_switch(c) == HIER_OK) {
        hier_node_pipe_redepth(c);
        c->state = HIER_COMM_READY;
    }
    if (c->state == HIER_COMM_NEW) hier_comm_setup(c, pb);
    if (c->state == HIER_COMM_PML && !c->pml_calls && bytes >= hier_params.fabric_open_min)
        hier_proc_fabric_warm(); /* (the call that set it up may start the opening too) */
    if (c->state == HIER_COMM_REFUSED) {
        *path_p = c->refused;
        return HIER_ERR_NOT_SUPPORTED;
    }
    return HIER_OK;
}

/* A call that failed on the node (or the network) fails on every rank, and
 * the communicator uses the previous component from then on; a rank that
 * cannot wait for its peers any more (dead, stuck, in another call) says so
 * on its control line, so the node's ranks still waiting for it stop too. */
hier_status_t hier_comm_failed(hier_comm_t *c, hier_status_t st)
{
    if (st == HIER_OK || st == HIER_ERR_NOT_SUPPORTED) return st;
    if (hier_status_abandons(st)) hier_shm_leave(c->node->small.seg, &c->node->wait, st);
    hier_comm_refuse(c, st == HIER_ERR_MISMATCH ? HIER_PATH_FALLBACK_MISMATCH : HIER_PATH_FALLBACK_SHM);
    return st;
}


hier_path_t hier_comm_path(const hier_comm_t *c, hier_path_t path)
{
    return c->net && !c->net->fabric ? hier_path_over_pml(path) : path;
}

/* A call starts on the node: its signature goes where the peers look (my
 * control line; the network's message headers). */
void hier_comm_sign(hier_comm_t *c, hier_coll_t coll, uint64_t count, hier_dtype_t dt, hier_op_t op,
                           uint32_t digest)
{
    hier_sig_t sig = hier_sig_make(coll, count, dt, op, digest, ++c->calls);
    hier_shm_sign(c->node->small.seg, &c->node->wait, sig);
    if (c->net) c->net->netx.sig = sig;
}

hier_exec_ll_t hier_comm_ll(hier_comm_t *c)
{
    return (hier_exec_ll_t){.shm = c->node->small.seg, .wait = &c->node->wait};
}

/* A reduce_scatter's displacements, into the communicator's array (made at
 * set-up), and its signature's digest of the counts. */
static uint32_t hier_comm_host_rs_displs(hier_comm_t *c, const size_t *rcounts)
{
    size_t total = 0;
    for (int r = 0; r < c->size; r++) {
        c->rs_displs[r] = total;
        total += rcounts[r];
    }
    return hier_sig_digest(rcounts, c->size);
}

/* The low-latency executor, each collective's. */
static hier_status_t hier_comm_host_ll(hier_comm_t *c, const hier_call_t *call, hier_reduce_kernel_t kernel)
{
    hier_exec_ll_t ll = hier_comm_ll(c);
    switch (call->coll) {
    case HIER_COLL_ALLREDUCE:
        return hier_exec_ll_allreduce(&ll, call->sbuf, call->rbuf, call->count, call->esize, kernel);
    case HIER_COLL_ALLGATHER:
        return hier_exec_ll_allgather(&ll, call->sbuf, call->rbuf, call->count);
    default:
        return hier_exec_ll_reduce_scatter(&ll, call->sbuf, call->rbuf, call->rcounts, c->rs_displs, call->count,
                                           call->esize, kernel);
    }
}

/* A schedule of the choice, run over the node (and the network). */
static hier_status_t hier_comm_host_sched(hier_comm_t *c, const hier_call_t *call, const hier_select_t *choice,
                                          hier_reduce_kernel_t kernel, uint64_t *net_bytes_p)
{
    hier_sched_args_t args = hier_comm_args(c, choice, call->esize, call->count, call->sbuf == NULL);
    if (call->coll == HIER_COLL_REDUCE_SCATTER) {
        args.rcounts = call->rcounts;
        args.rdispls = c->rs_displs;
        /* the slice layout, made for the most pieces, when a call with the largest chunk would be
         * sliced (hier_sched_hier_sliced; none: chunks stay contiguous). (The node fills in the rest
         * of args, and the chunk, as the call runs.) */
        if (!c->rs_slices && hier_sched_slices_pay(hier_params.net_chunk_size / call->esize, c->layout.pieces,
                                                   c->size, c->layout.nnodes, args.in_place))
            c->rs_slices = hier_sched_slices_new(c->layout.pieces, c->size, c->layout.nnodes);
        args.rs_slices = c->rs_slices;
    }
    return hier_node_run(c, &args, call->sbuf, call->rbuf, kernel, net_bytes_p);
}

/* A call on host buffers, whichever collective, after hier_comm_prepare
 * (hier_comm.c; the staging pipeline's chunks come through here too):
 * 1. the reduction's kernel (an allgather has none; an op without one is
 *    the previous component's);
 * 2. a one-rank communicator's result is its input; a communicator refused
 *    since (a failed chunk) falls back;
 * 3. the call's signature where the peers look (a reduce_scatter's with
 *    its displacements' digest);
 * 4. select/'s choice;
 * 5. the run: low latency on one node, the pair path between two nodes of
 *    one rank each, otherwise a schedule;
 * 6. a low-latency call that the node's cut-off was due for: the cut-off
 *    measured now, every rank having made this call;
 * 7. the verdict: a failure fails the communicator (hier_comm_failed); the
 *    path that served, or the previous component's when the node refused
 *    the run (a call no buffer within the budget carries). */
hier_status_t hier_comm_host_run(hier_comm_t *c, const hier_call_t *call, hier_result_t *res)
{
    hier_reduce_kernel_t kernel = {0};
    hier_select_t choice;
    hier_status_t st;
    if (call->coll != HIER_COLL_ALLGATHER && hier_reduce_kernel_get(call->dt, call->op, &kernel) != HIER_OK) { /* 1 */
        res->path = HIER_PATH_FALLBACK_OP;
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (c->size == 1 || c->state == HIER_COMM_REFUSED) {                                              /* 2 */
        if (c->size == 1 && call->sbuf) memcpy(call->rbuf, call->sbuf, call->count * call->esize);
        res->path = c->size == 1 ? HIER_PATH_SELF : c->refused;
        return c->size == 1 ? HIER_OK : HIER_ERR_NOT_SUPPORTED;
    }
    uint32_t digest = call->coll == HIER_COLL_REDUCE_SCATTER ? hier_comm_host_rs_displs(c, call->rcounts) : 0;
    hier_comm_sign(c, call->coll, call->count, call->dt, call->op, digest);                         /* 3 */
    st = hier_comm_select(c, call->coll, call->count * call->esize, 0, &choice);                     /* 4 */
    if (st == HIER_OK && choice.path == HIER_PATH_SHM_LL)                                             /* 5 */
        st = hier_comm_host_ll(c, call, kernel);
    else if (st == HIER_OK && c->net && hier_select_pair(&c->shape, call->coll, call->bytes, &choice))
        st = hier_net_pair(c, call, kernel, &res->net_bytes);
    else if (st == HIER_OK)
        st = hier_comm_host_sched(c, call, &choice, kernel, &res->net_bytes);
    if (st == HIER_OK && hier_comm_ll_due(c, call->coll, call->count * call->esize, &choice))        /* 6 */
        st = hier_comm_measure_ll(c, call->coll);
    if (st != HIER_OK) st = hier_comm_failed(c, st);                                                 /* 7 */
    if (st == HIER_OK || st == HIER_ERR_NOT_SUPPORTED)
        res->path = hier_comm_path(c, st == HIER_OK ? choice.path : HIER_PATH_FALLBACK_SHM);
    return st;
}
