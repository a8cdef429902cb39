/* hier_req_plan.c: a request's plan (step 1 of hier_comm_req.c): whether
 * hier serves it and how (select/'s choice, its schedule's arguments, the
 * node's fit), or why the previous component does. */
#include <stdatomic.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_call.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_req_impl.h"

/* The reason a call falls back; the process's first fallback:nonblocking
 * says why (coll_hier_verbose 1). */
static hier_status_t hier_req_refuse(hier_path_t why, const char *what, hier_path_t *path_p)
{
    static _Atomic unsigned said;
    if (why == HIER_PATH_FALLBACK_NONBLOCKING && !(atomic_fetch_or(&said, 1u) & 1u))
        HIER_LOG(HIER_LOG_COMM, "a nonblocking call falls back: %s (its first blocking calls make what it needs)",
                 what);
    *path_p = why;
    return HIER_ERR_NOT_SUPPORTED;
}

/* The parameters let hier serve this kind of call as a request. */
hier_status_t hier_req_enabled(const hier_comm_t *c, hier_coll_t coll, hier_path_t *path_p)
{
    if (!(c->served_colls >> coll & 1) || !hier_params.nonblocking)
        return hier_req_refuse(HIER_PATH_FALLBACK_FORCED, "", path_p);
    return HIER_OK;
}

/* The communicator can start a call now, without waiting for its peers:
 * decided from what every rank knows alike. */
hier_status_t hier_req_servable(hier_comm_t *c, hier_coll_t coll, hier_path_t *path_p)
{
    if (hier_req_enabled(c, coll, path_p) != HIER_OK) return HIER_ERR_NOT_SUPPORTED;
    if (c->size == 1) return HIER_OK;
    if (c->state == HIER_COMM_REFUSED) return hier_req_refuse(c->refused, "", path_p);
    if (c->state != HIER_COMM_READY && c->state != HIER_COMM_PML)
        return hier_req_refuse(HIER_PATH_FALLBACK_NONBLOCKING, "the communicator is not set up yet", path_p);
    return HIER_OK; /* (device buffers are staged by each rank alone: hier_req_stage.c) */
}

/* A first call, nonblocking, sets the communicator up without waiting. */
int hier_req_sets_up(const hier_comm_t *c)
{
    return c->size > 1 && c->state == HIER_COMM_NEW && hier_params.nonblocking_setup && c->ops.sendrecv;
}

/* The bytes a call's whole vector holds (what the set-up's opening rule asks). */
size_t hier_req_bytes(const hier_comm_t *c, const hier_req_call_t *k)
{
    if (k->coll == HIER_COLL_ALLGATHER) return k->count * (size_t)c->size;
    size_t n = k->count;
    if (k->coll == HIER_COLL_REDUCE_SCATTER)
        for (int r = 0; r < c->size; r++) n += k->rcounts[r];
    return n * hier_dtype_size(k->dt);
}

/* A call on a communicator over the point-to-point (PML) asks, as its
 * blocking calls do, whether every endpoint is open, and moves to
 * libfabric then: without waiting too, when it begins (hier_req_begin). */
int hier_req_switch_due(hier_comm_t *c, const hier_req_call_t *k)
{
    return c->size > 1 && c->state == HIER_COMM_PML && hier_params.nonblocking_setup && c->ops.sendrecv &&
           hier_comm_switch_due(c, hier_req_bytes(c, k));
}

/* Whether the node carries the run without a collective step first
 * (decided alike on every rank; its step memory and tier are bound when it
 * begins); with waits (a persistent init), they are made now. */
static hier_status_t hier_req_fit(hier_req_t *q, int no_wait, hier_path_t *path_p)
{
    hier_status_t st = no_wait ? hier_node_fit(q->c, &q->args) : hier_node_prep(q->c, &q->args, 0, &q->plan);
    if (st == HIER_NOT_READY)
        return hier_req_refuse(HIER_PATH_FALLBACK_NONBLOCKING, "a segment or memory it needs is not made yet", path_p);
    if (st == HIER_ERR_NOT_SUPPORTED) return hier_req_refuse(HIER_PATH_FALLBACK_SHM, "", path_p);
    return st;
}

/* select/'s choice and the schedule's arguments: the plan, or a fallback
 * (no_wait: without a collective step). */
hier_status_t hier_req_plan(hier_req_t *q, int no_wait, hier_path_t *path_p)
{
    hier_comm_t *c = q->c;
    const hier_req_call_t *k = &q->call;
    size_t esize = k->coll == HIER_COLL_ALLGATHER ? 1 : hier_dtype_size(k->dt);
    hier_status_t st = hier_comm_select(c, k->coll, k->count * esize, no_wait, &q->choice);
    if (st != HIER_OK) return st;
    q->llc = (hier_exec_ll_call_t){.sbuf = k->sbuf, .rbuf = k->rbuf, .esize = esize, .kernel = q->kernel};
    if (k->coll == HIER_COLL_ALLGATHER) q->llc.block = k->count;
    else q->llc.total = k->count;
    if (k->coll == HIER_COLL_REDUCE_SCATTER) {
        q->llc.rcounts = q->counts;
        q->llc.rdispls = q->counts + c->size;
    }
    if (q->choice.path == HIER_PATH_SHM_LL) return HIER_OK;
    q->args = hier_comm_args(c, &q->choice, esize, k->count, k->sbuf == NULL);
    if (k->coll == HIER_COLL_REDUCE_SCATTER) {
        q->args.rcounts = q->llc.rcounts;
        q->args.rdispls = q->llc.rdispls;
        if (!c->rs_slices && hier_sched_slices_pay(hier_params.net_chunk_size / esize, c->layout.pieces, c->size,
                                                   c->layout.nnodes, q->args.in_place))
            c->rs_slices = hier_sched_slices_new(c->layout.pieces, c->size, c->layout.nnodes);
        q->args.rs_slices = c->rs_slices;
    }
    return hier_req_fit(q, no_wait, path_p);
}

/* A start's plan: made at init, or at the first start that can (no
 * collective step). The same answer on every rank: from what every rank
 * knows alike. */
hier_status_t hier_req_replan(hier_req_t *q, hier_path_t *path_p)
{
    hier_status_t st = hier_req_servable(q->c, q->call.coll, path_p);
    if (st != HIER_OK) return st;
    if (!q->planned) {
        st = hier_req_plan(q, 1, path_p);
        q->planned = st == HIER_OK;
    }
    if (st == HIER_OK) *path_p = q->choice.path;
    return st;
}

hier_status_t hier_req_kernel(hier_req_t *q, hier_path_t *path_p)
{
    const hier_req_call_t *k = &q->call;
    if (k->coll == HIER_COLL_ALLGATHER || hier_reduce_kernel_get(k->dt, k->op, &q->kernel) == HIER_OK) return HIER_OK;
    return hier_req_refuse(HIER_PATH_FALLBACK_OP, "", path_p);
}
