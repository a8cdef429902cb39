/* hier_comm.c: a communicator's life, and the entry points of its collectives (docs/design.md, "A
 * communicator's life"): host buffers go straight to the algorithms (hier_comm_host.c); device buffers are
 * staged through host memory (exec/hier_stage.c) or, for allgathers, go NIC to NIC (hier_comm_pd.c). No call
 * agrees with the other ranks on how to run: every rank decides from what every rank knows alike (the staging
 * pipeline and peer direct's one vote: docs/design.md, "Device (accelerator) buffers"). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm.h"
#include "comm/hier_comm_host.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_pd.h"
#include "comm/hier_comm_req.h"
#include "comm/hier_proc.h"
#include "exec/hier_reduce.h"
#include "exec/hier_stage.h"
#include "net/hier_fabric.h"
#include "select/hier_select_rules.h"

/* The rules file, read once per process (refused: logged, the built-in rules serve). */
static void hier_comm_rules_once(void)
{
    (void)hier_rules_load(hier_params.rules);
}

hier_status_t hier_comm_create(int size, int rank, const hier_comm_ops_t *ops, hier_comm_t **comm_p)
{
    static pthread_once_t rules = PTHREAD_ONCE_INIT;
    pthread_once(&rules, hier_comm_rules_once);
    if (size < 1 || rank < 0 || rank >= size || !ops || !ops->peer) return HIER_ERR_INVALID_ARG;
    hier_comm_t *c = calloc(1, sizeof(*c));
    if (!c) return HIER_ERR_NO_MEMORY;
    c->size = size;
    c->rank = rank;
    c->ops = *ops;
    for (hier_coll_t k = HIER_COLL_ALLREDUCE; k <= HIER_COLL_REDUCE_SCATTER; k++) /* (parameters: fixed for the job) */
        c->served_colls |= (unsigned)(hier_select_algorithm(k) != HIER_ALGO_FALLBACK) << k;
    hier_proc_set_progress(ops->progress);
    hier_accel_init(); /* (before the first call classifies its buffers; cheap once done) */
    *comm_p = c;
    return HIER_OK;
}

void hier_comm_destroy(hier_comm_t *c)
{
    if (!c) return;
    hier_net_waiting(c, 0);
    hier_req_orphan(c);
    hier_comm_pd_close(c);
    hier_stage_free(c->stage);
    hier_net_free(c);
    hier_node_free(c);
    hier_layout_free(&c->layout);
    free(c->rs_displs);
    free(c->rs_slices);
    free(c);
}

void hier_comm_user_op_set(const hier_user_op_t *user)
{
    hier_reduce_user_set(user);
}

void hier_comm_lend_topology(void *(*get)(void))
{
    hier_proc_lend_topology(get);
}

void hier_proc_finalize(void)
{
    hier_req_thread_stop();
    hier_proc_release();
}

void hier_comm_footprint(const hier_comm_t *c, hier_comm_footprint_t *fp)
{
    const hier_node_t *nd = c->node;
    *fp = (hier_comm_footprint_t){.node = nd != NULL, .net = c->net != NULL, .peer_direct = c->pd != NULL,
                                  .staging = c->stage != NULL,
                                  .heap_bytes = sizeof(*c) + hier_stage_bytes(c->stage)};
    if (c->layout.node_ranks)
        fp->heap_bytes += ((size_t)c->size * 2 + 1) * sizeof(uint32_t) + /* (hier_layout_reserve) */
                          (size_t)c->size * sizeof(size_t);
    if (!nd) return;
    fp->pipeline = nd->pipe_state == HIER_PIPE_READY;
    fp->recycled = nd->recycled;
    fp->mapped_bytes = hier_shm_size(hier_shm_shape(nd->small.seg)) +
                       (nd->pipe.seg ? hier_shm_size(hier_shm_shape(nd->pipe.seg)) : 0);
    fp->heap_bytes += sizeof(*nd) + (size_t)c->layout.nranks * (2 * sizeof(uint8_t *) + 6 * sizeof(uint32_t)) +
                      nd->nsteps * nd->nqueues * sizeof(hier_net_send_t) +
                      (nd->scratch ? HIER_EXEC_SCRATCH_BYTES : 0);
    for (unsigned i = 0; i <= HIER_RUN_DEPTH_MAX && nd->steps[i]; i++) fp->heap_bytes += nd->nsteps * sizeof(hier_step_t);
    if (c->net) fp->heap_bytes += hier_net_bytes(c);
}

/* A buffer in device memory nothing here can reach: the previous component. */
static hier_status_t hier_comm_dev_unknown(hier_path_t *path_p)
{
    *path_p = HIER_PATH_FALLBACK_DEVICE;
    return HIER_ERR_NOT_SUPPORTED;
}

const char hier_in_place_marker;

void hier_comm_fabric_driven(int driven)
{
    hier_proc_set_fabric_driven(driven);
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
