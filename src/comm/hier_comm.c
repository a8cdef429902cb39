/* hier_comm.c: a communicator's collective calls, blocking and nonblocking, from the entry points to the
 * verdict (docs/design.md, "A call"): host buffers go to select/'s choice and its executor here
 * (hier_comm_host_run); device buffers are staged through host memory (exec/hier_stage.c) or, for allgathers, go
 * NIC to NIC (hier_comm_pd.c); requests are made here and run by hier_comm_req.c. No call agrees with the other
 * ranks on how to run: every rank decides from what every rank knows alike (the staging pipeline and peer
 * direct's one vote: docs/design.md, "Device (accelerator) buffers"). */
#include <string.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm.h"
#include "comm/hier_comm_call.h"
#include "comm/hier_comm_choice.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_pd.h"
#include "comm/hier_comm_req.h"
#include "comm/hier_comm_setup.h"
#include "comm/hier_proc.h"
#include "exec/hier_exec_ll.h"
#include "exec/hier_stage.h"
#include "select/hier_select.h"

const char hier_in_place_marker;

/* ---- host buffers: the signature, select/'s choice, the run, the verdict ------------------ */

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
 * (hier_comm_setup.c; the staging pipeline's chunks come through here too):
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
static hier_status_t hier_comm_host_run(hier_comm_t *c, const hier_call_t *call, hier_result_t *res)
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

/* ---- a blocking call ------------------ */

/* A buffer in device memory nothing here can reach: the previous component. */
static hier_status_t hier_comm_dev_unknown(hier_path_t *path_p)
{
    *path_p = HIER_PATH_FALLBACK_DEVICE;
    return HIER_ERR_NOT_SUPPORTED;
}

/* Whether this call may make the set-up, and so be piggybacked on it (hier_comm_piggyback.c):
 * asked first, so a served communicator's calls never build an offer. */
static int hier_comm_may_piggyback(const hier_comm_t *c)
{
    return c->state == HIER_COMM_NEW;
}

/* A call the set-up's exchange served. */
static hier_status_t hier_comm_piggybacked(hier_result_t *res)
{
    res->path = HIER_PATH_SETUP;
    return HIER_OK;
}

/* The API says in place with HIER_IN_PLACE; inside the core a NULL send
 * buffer means it. A NULL buffer that should hold data is refused here, so
 * it can never be taken for an in-place call. */
static hier_status_t hier_comm_buffer_null(hier_coll_t coll, const void *sbuf, size_t sbytes, size_t rbytes)
{
    HIER_ERROR("%s: a NULL %s buffer for %zu bytes (MPI_IN_PLACE is not NULL)", hier_coll_name(coll),
               sbuf ? "receive" : "send", sbuf ? rbytes : sbytes);
    return HIER_ERR_BUFFER;
}

static inline hier_status_t hier_comm_buffers(hier_coll_t coll, const void **sbuf_p, size_t sbytes,
                                              const void *rbuf, size_t rbytes)
{
    if (*sbuf_p == HIER_IN_PLACE) {
        *sbuf_p = NULL;
        return HIER_OK;
    }
    if ((!*sbuf_p && sbytes) || (!rbuf && rbytes)) return hier_comm_buffer_null(coll, *sbuf_p, sbytes, rbytes);
    return HIER_OK;
}

/* One chunk of the staging pipeline: a host call (exec/hier_stage.c). */
static hier_status_t hier_comm_stage_chunk(void *c, const hier_call_t *chunk, hier_result_t *res)
{
    return hier_comm_host_run(c, chunk, res);
}

/* Steps 2-6 with nothing to do, in one test: the communicator set up and
 * served, no device backend in this process nor on any rank, no request on
 * it, and its collective not forced to the previous component. (Each is
 * fixed for the communicator's life but the first, and a backend loaded in
 * this process later, which hier_accel_any says.) */
static inline int hier_comm_settled(const hier_comm_t *c, hier_coll_t coll)
{
    return c->state == HIER_COMM_READY && (c->served_colls >> coll & 1) && !c->dev_possible &&
           !hier_accel_maybe_device() && !c->req_head;
}

/* One blocking call, whichever collective:
 * 1. its buffers checked; in place said as NULL from here on;
 * 2. the communicator's requests over first (calls run in the order made);
 * 3. device memory or not (a buffer nothing here reaches: the previous
 *    component's);
 * 4. the set-up at the communicator's first call, the call piggybacked on its
 *    exchange when it can (host buffers, few bytes: hier_comm_piggyback.c);
 * 5. device allgathers NIC to NIC when the communicator voted for it;
 * 6. host buffers to the algorithms; device buffers, and every rank's
 *    chunks on a communicator where some rank has a device backend,
 *    through the staging pipeline (the file's comment).
 * Steps 5 and 6 are select/'s route (hier_select_route). Steps 2-6 apart
 * (hier_comm_run_steps); step 1 and the settled lane inlined into each
 * entry (hier_comm_run): the call's description is then constants and the
 * caller's arguments, and the entry's frame small. */
static __attribute__((noinline)) hier_status_t hier_comm_run_steps(hier_comm_t *c, hier_call_t *call,
                                                                    hier_result_t *res)
{
    hier_stage_bufs_t dev;
    hier_status_t st, ready;
    if (hier_req_busy(c)) hier_req_drain(c); /* 2 */
    res->staged = hier_accel_classify_pair(call->sbuf, call->sbytes, call->rbuf, call->rbytes, &dev.sbuf, &dev.rbuf,
                                           &st); /* 3 */
    if (st == HIER_ERR_NOT_SUPPORTED) return hier_comm_dev_unknown(&res->path);
    if (st != HIER_OK) return st;
    hier_piggyback_t pb, /* 4 */
        *pb_p = !res->staged && hier_comm_may_piggyback(c) && hier_piggyback_offer(c, call, &pb) ? &pb : NULL;
    ready = hier_comm_prepare(c, call->coll, call->bytes, pb_p, &res->path);
    if (ready == HIER_ERR_NOT_SUPPORTED) return ready;
    if (pb_p && pb.done) return hier_comm_piggybacked(res);
    hier_select_route_in_t in = {.coll = call->coll, .bytes = call->bytes, .block = call->count,
                                 .size = (uint32_t)c->size, .device_possible = ready == HIER_OK && c->dev_possible,
                                 .peer_direct = hier_comm_pd_voted(c)};
    hier_select_route_t route;
    hier_select_route(&in, &route);
    if (route.peer_direct && hier_comm_pd_allgather(c, &(hier_accel_pair_t){dev.sbuf, dev.rbuf}, call, res, &st))
        return st; /* 5 */
    dev.chunked = route.chunked; /* 6 */
    if (!res->staged && !dev.chunked) return hier_comm_host_run(c, call, res);
    return hier_stage_run(&c->stage, &dev, call, c->rank, c->size, hier_comm_stage_chunk, c, res);
}

static inline __attribute__((always_inline)) hier_status_t hier_comm_run(hier_comm_t *c, hier_call_t *call,
                                                                         hier_result_t *res)
{
    hier_status_t st;
    *res = (hier_result_t){0}; /* (its path set by the step that ends the call) */
    if ((st = hier_comm_buffers(call->coll, &call->sbuf, call->sbytes, call->rbuf, call->rbytes)) != HIER_OK) /* 1 */
        return st;
    if (hier_comm_settled(c, call->coll)) return hier_comm_host_run(c, call, res);
    return hier_comm_run_steps(c, call, res);
}

hier_status_t hier_comm_allreduce(hier_comm_t *c, const void *sbuf, void *rbuf, size_t count, hier_dtype_t dt,
                                  hier_op_t op, hier_result_t *res_p)
{
    size_t es = hier_dtype_size(dt);
    hier_call_t call = {.coll = HIER_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count, .esize = es,
                        .dt = dt, .op = op, .sbytes = count * es, .rbytes = count * es, .bytes = count * es};
    return hier_comm_run(c, &call, res_p);
}

hier_status_t hier_comm_allgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t block_bytes,
                                  hier_result_t *res_p)
{
    size_t total = block_bytes * (size_t)c->size;
    hier_call_t call = {.coll = HIER_COLL_ALLGATHER, .sbuf = sbuf, .rbuf = rbuf, .count = block_bytes, .esize = 1,
                        .sbytes = block_bytes, .rbytes = total, .bytes = total};
    return hier_comm_run(c, &call, res_p);
}

hier_status_t hier_comm_reduce_scatter(hier_comm_t *c, const void *sbuf, void *rbuf, const size_t *rcounts,
                                       hier_dtype_t dt, hier_op_t op, hier_result_t *res_p)
{
    size_t es = hier_dtype_size(dt), total = 0;
    for (int r = 0; r < c->size; r++) total += rcounts[r];
    hier_call_t call = {.coll = HIER_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf, .count = total, .esize = es,
                        .dt = dt, .op = op, .rcounts = rcounts, .sbytes = total * es,
                        .rbytes = (sbuf == HIER_IN_PLACE ? total : rcounts[c->rank]) * es, .bytes = total * es};
    return hier_comm_run(c, &call, res_p);
}

/* ---- nonblocking and persistent: requests (hier_comm_req.c) ------------------ */

/* A device buffer nothing here can reach: as the blocking call; one a
 * backend reaches: the call runs on host mirrors of this rank's own
 * (hier_req_stage.c), the request's from now on. */
static hier_status_t hier_comm_req_stage(const hier_req_bufs_t *b, hier_req_stage_t *stage_p, hier_path_t *path_p)
{
    hier_status_t st = hier_req_stage_make(b, stage_p);
    return st == HIER_ERR_NOT_SUPPORTED ? hier_comm_dev_unknown(path_p) : st;
}

/* A nonblocking call's request, made now (its device input copied into its
 * mirrors first: the request may run at once); or a persistent one, made
 * with the collective steps every rank takes alike, its mirrors after them
 * (one rank's buffers must not keep it from its peers' steps). */
static hier_status_t hier_comm_req(hier_comm_t *c, hier_req_call_t *call, hier_req_bufs_t *b,
                                   const hier_req_notify_t *notify, hier_path_t *path_p, hier_req_t **req_p)
{
    hier_req_t *q;
    hier_req_stage_t stage;
    hier_status_t st = hier_comm_buffers(call->sig_coll, &call->sbuf, b->sbytes, call->rbuf, b->rbytes);
    if (st != HIER_OK) return st;
    b->sbuf = call->sbuf;
    if (!b->sbuf) b->in_len = b->in_len ? b->in_len : b->rbytes; /* (in place: the input's bytes of rbuf) */
    else b->in_off = b->in_len = 0;
    if (!call->persistent && !hier_accel_maybe_device()) /* (no device memory here: nothing to stage) */
        return hier_req_make(c, call, notify, path_p, req_p);
    if (!call->persistent) {
        if ((st = hier_comm_req_stage(b, &call->stage, path_p)) != HIER_OK) return st;
        if (call->sbuf) call->sbuf = hier_accel_mirror_at(&call->stage.s, (void *)call->sbuf);
        call->rbuf = hier_accel_mirror_at(&call->stage.r, call->rbuf);
        if ((st = hier_req_stage_in(&call->stage)) == HIER_OK) st = hier_req_make(c, call, notify, path_p, req_p);
        if (st != HIER_OK) hier_req_stage_free(&call->stage);
        return st;
    }
    if ((st = hier_req_init(c, call, notify, path_p, &q)) != HIER_OK) return st;
    if ((st = hier_comm_req_stage(b, &stage, path_p)) != HIER_OK) {
        hier_req_free(q);
        return st;
    }
    hier_req_restage(q, &stage);
    *req_p = q;
    return HIER_OK;
}

hier_status_t hier_comm_iallreduce(hier_comm_t *c, const void *sbuf, void *rbuf, size_t count, hier_dtype_t dt,
                                   hier_op_t op, const hier_user_op_t *user, const hier_req_notify_t *notify,
                                   hier_req_kind_t kind, hier_path_t *path_p, hier_req_t **req_p)
{
    size_t bytes = count * hier_dtype_size(dt);
    int persistent = kind == HIER_REQ_PERSISTENT;
    hier_req_call_t call = {.coll = HIER_COLL_ALLREDUCE,
                            .sig_coll = persistent ? HIER_COLL_ALLREDUCE_INIT : HIER_COLL_IALLREDUCE,
                            .sbuf = sbuf, .rbuf = rbuf, .count = count, .dt = dt, .op = op,
                            .user = user ? *user : (hier_user_op_t){0}, .persistent = persistent};
    hier_req_bufs_t b = {.sbuf = sbuf, .rbuf = rbuf, .sbytes = bytes, .rbytes = bytes, .out_len = bytes};
    return hier_comm_req(c, &call, &b, notify, path_p, req_p);
}

hier_status_t hier_comm_iallgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t block_bytes,
                                   const hier_req_notify_t *notify, hier_req_kind_t kind, hier_path_t *path_p,
                                   hier_req_t **req_p)
{
    int persistent = kind == HIER_REQ_PERSISTENT;
    hier_req_call_t call = {.coll = HIER_COLL_ALLGATHER,
                            .sig_coll = persistent ? HIER_COLL_ALLGATHER_INIT : HIER_COLL_IALLGATHER,
                            .sbuf = sbuf, .rbuf = rbuf, .count = block_bytes, .persistent = persistent};
    hier_req_bufs_t b = {.sbuf = sbuf, .rbuf = rbuf, .sbytes = block_bytes, .rbytes = block_bytes * (size_t)c->size,
                         .in_off = block_bytes * (size_t)c->rank, .in_len = block_bytes,
                         .out_len = block_bytes * (size_t)c->size};
    return hier_comm_req(c, &call, &b, notify, path_p, req_p);
}

hier_status_t hier_comm_ireduce_scatter(hier_comm_t *c, const void *sbuf, void *rbuf, const size_t *rcounts,
                                        hier_dtype_t dt, hier_op_t op, const hier_user_op_t *user,
                                        const hier_req_notify_t *notify, hier_req_kind_t kind, hier_path_t *path_p,
                                        hier_req_t **req_p)
{
    size_t es = hier_dtype_size(dt), total = 0;
    int persistent = kind == HIER_REQ_PERSISTENT;
    for (int r = 0; r < c->size; r++) total += rcounts[r];
    hier_req_call_t call = {.coll = HIER_COLL_REDUCE_SCATTER,
                            .sig_coll = persistent ? HIER_COLL_REDUCE_SCATTER_INIT : HIER_COLL_IREDUCE_SCATTER,
                            .sbuf = sbuf, .rbuf = rbuf, .dt = dt, .op = op,
                            .user = user ? *user : (hier_user_op_t){0}, .rcounts = rcounts, .persistent = persistent};
    hier_req_bufs_t b = {.sbuf = sbuf, .rbuf = rbuf, .sbytes = total * es,
                         .rbytes = (sbuf == HIER_IN_PLACE ? total : rcounts[c->rank]) * es,
                         .out_len = rcounts[c->rank] * es};
    return hier_comm_req(c, &call, &b, notify, path_p, req_p);
}
