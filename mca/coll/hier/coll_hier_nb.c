/* coll_hier_nb.c: MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter(_block) arguments to the core's requests
 * (hier_comm.h), and their MPI requests (docs/design.md, "Nonblocking and persistent calls").
 *
 * An MPI request of hier holds the core's request and what must live as long as it: the communicator
 * (retained: MPI lets the application free it while the call is on; Open MPI's MPI_I* entry points retain the
 * operation and datatypes themselves), a user operation's context, and an allgather's contiguous temporaries
 * (packed at the start, unpacked at the end, with its receive type, retained). The core tells the end
 * (mca_coll_hier_nb_done), from MPI_Test/Wait on any of its requests or from Open MPI's progress loop, where
 * hier registers itself at its first nonblocking call. Persistent calls (coll_hier_pc.c) use the same request. */
#include "coll_hier_nb.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

#include "base/hier_keep.h"
#include "base/hier_lock.h"

static OBJ_CLASS_INSTANCE(mca_coll_hier_nb_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static int mca_coll_hier_nb_progress(void)
{
    return hier_req_progress();
}

/* A watchdog's question from outside Open MPI (tests/mpi/test_requests
 * finds it with dlsym): this process's requests not over, logged. */
__attribute__((visibility("default"))) void mca_coll_hier_report(void);
void mca_coll_hier_report(void)
{
    hier_req_report();
}

static _Atomic int mca_coll_hier_nb_registered;

/* MPI requests over, kept for the next calls (an object's allocation and
 * construction are a good part of a small call), under a lock where
 * threads may call at once. */
static hier_keep_t mca_coll_hier_nb_kept;
static pthread_mutex_t mca_coll_hier_nb_mutex = PTHREAD_MUTEX_INITIALIZER;
/* The persistent request freed last: Open MPI's free of a persistent
 * request that retained its operation reads the request after ours
 * returns (ompi_coll_base_retain_op), so it is kept one free longer. */
static mca_coll_hier_nb_t *mca_coll_hier_nb_parked;

/* Requests the application freed before their end whose run the previous
 * component ended (they cannot go from inside its completion). */
static mca_coll_hier_nb_t *mca_coll_hier_nb_dead;

static mca_coll_hier_nb_t *mca_coll_hier_nb_take(void)
{
    mca_coll_hier_nb_t *r = NULL;
    hier_lock_mutex_take(&mca_coll_hier_nb_mutex);
    mca_coll_hier_nb_t *dead = mca_coll_hier_nb_dead;
    mca_coll_hier_nb_dead = NULL;
    hier_lock_mutex_drop(&mca_coll_hier_nb_mutex);
    while (dead) {
        mca_coll_hier_nb_t *next = dead->dead;
        mca_coll_hier_nb_release(dead);
        dead = next;
    }
    hier_lock_mutex_take(&mca_coll_hier_nb_mutex);
    r = hier_keep_take(&mca_coll_hier_nb_kept);
    hier_lock_mutex_drop(&mca_coll_hier_nb_mutex);
    return r ? r : OBJ_NEW(mca_coll_hier_nb_t);
}

static void mca_coll_hier_nb_keep(mca_coll_hier_nb_t *r)
{
    hier_lock_mutex_take(&mca_coll_hier_nb_mutex);
    if (r->persistent) {
        mca_coll_hier_nb_t *older = mca_coll_hier_nb_parked;
        mca_coll_hier_nb_parked = r;
        r = older;
    }
    if (r && hier_keep_put(&mca_coll_hier_nb_kept, r)) r = NULL;
    hier_lock_mutex_drop(&mca_coll_hier_nb_mutex);
    if (r) OBJ_RELEASE(r);
}

void mca_coll_hier_nb_register(void)
{
    if (!atomic_exchange(&mca_coll_hier_nb_registered, 1)) opal_progress_register(mca_coll_hier_nb_progress);
}

void mca_coll_hier_nb_close(void)
{
    if (atomic_exchange(&mca_coll_hier_nb_registered, 0)) opal_progress_unregister(mca_coll_hier_nb_progress);
    /* (their memory only: at close Open MPI's request classes may be gone
     * already, and construction allocated nothing) */
    for (void *r; (r = hier_keep_take(&mca_coll_hier_nb_kept));) free(r);
    free(mca_coll_hier_nb_parked);
    mca_coll_hier_nb_parked = NULL;
}

void mca_coll_hier_nb_hold(mca_coll_hier_nb_t *r, int hold)
{
    mca_coll_hier_nb_args_t *a = &r->args;
    if (a->op && !ompi_op_is_intrinsic(a->op)) {
        if (hold) {
            OBJ_RETAIN(a->op);
        } else {
            OBJ_RELEASE(a->op);
        }
    }
    ompi_datatype_t **types[] = {&a->dtype, &a->sdtype};
    for (int i = 0; i < 2; i++) {
        if (!*types[i] || *types[i] == MPI_DATATYPE_NULL || ompi_datatype_is_predefined(*types[i])) continue;
        if (hold) {
            OBJ_RETAIN(*types[i]);
        } else {
            OBJ_RELEASE(*types[i]);
        }
    }
    r->held = hold;
}

void mca_coll_hier_nb_prev_free(mca_coll_hier_nb_t *r)
{
    if (r->inner) { /* (its end told ours already; its own completion flag may follow a moment later) */
        while (!REQUEST_COMPLETE(r->inner)) opal_progress();
        ompi_request_free(&r->inner);
    }
    hier_req_free(r->deferred);
    r->deferred = NULL;
}

void mca_coll_hier_nb_release(mca_coll_hier_nb_t *r)
{
    if (r->held) mca_coll_hier_nb_hold(r, 0);
    mca_coll_hier_nb_prev_free(r);
    hier_req_free(r->core);
    free(r->spack);
    free(r->rpack);
    if (r->dtype) OBJ_RELEASE(r->dtype);
    OBJ_RELEASE(r->hm->comm);
    OMPI_REQUEST_FINI(&r->super.super);
    mca_coll_hier_nb_keep(r);
}

/* MPI_Wait/Test after the end, or MPI_Request_free: freeing a nonblocking
 * collective's request before its end is erroneous (MPI 3.1, 5.12), and
 * then the call still runs to its end, which releases the request. A
 * persistent one is freed when not running (else refused, as libnbc does). */
static int mca_coll_hier_nb_free(ompi_request_t **req)
{
    mca_coll_hier_nb_t *r = (mca_coll_hier_nb_t *)*req;
    if (r->persistent && !REQUEST_COMPLETE(&r->super.super)) return MPI_ERR_REQUEST;
    *req = MPI_REQUEST_NULL;
    if (REQUEST_COMPLETE(&r->super.super)) {
        mca_coll_hier_nb_release(r);
    } else {
        r->orphan = 1;
        hier_req_free(r->core); /* (the core's ends with it) */
    }
    return OMPI_SUCCESS;
}

/* The previous component's run ended: so does the request. */
static int mca_coll_hier_nb_prev_done(ompi_request_t *inner)
{
    mca_coll_hier_nb_t *r = inner->req_complete_cb_data;
    r->super.super.req_status.MPI_ERROR = inner->req_status.MPI_ERROR;
    if (r->orphan) {
        hier_lock_mutex_take(&mca_coll_hier_nb_mutex);
        r->dead = mca_coll_hier_nb_dead;
        mca_coll_hier_nb_dead = r;
        hier_lock_mutex_drop(&mca_coll_hier_nb_mutex);
        return 0;
    }
    ompi_request_complete(&r->super.super, true);
    return 0;
}

int mca_coll_hier_nb_prev(mca_coll_hier_nb_t *r, hier_path_t why)
{
    mca_coll_hier_module_t *hm = r->hm;
    const mca_coll_hier_nb_args_t *a = &r->args;
    int rc;
    mca_coll_hier_account(hm, r->coll, &(hier_result_t){.path = why}, r->bytes);
    switch (r->coll) {
    case HIER_COLL_IALLREDUCE:
    case HIER_COLL_ALLREDUCE_INIT:
        rc = hm->prev_iallreduce(a->sbuf, a->rbuf, a->count, a->dtype, a->op, hm->comm, &r->inner,
                                 hm->prev_iallreduce_module);
        break;
    case HIER_COLL_IALLGATHER:
    case HIER_COLL_ALLGATHER_INIT:
        rc = hm->prev_iallgather(a->sbuf, a->scount, a->sdtype, a->rbuf, a->count, a->dtype, hm->comm, &r->inner,
                                 hm->prev_iallgather_module);
        break;
    case HIER_COLL_IREDUCE_SCATTER:
    case HIER_COLL_REDUCE_SCATTER_INIT:
        rc = hm->prev_ireduce_scatter(a->sbuf, a->rbuf, a->rcounts, a->dtype, a->op, hm->comm, &r->inner,
                                      hm->prev_ireduce_scatter_module);
        break;
    default:
        rc = hm->prev_ireduce_scatter_block(a->sbuf, a->rbuf, a->count, a->dtype, a->op, hm->comm, &r->inner,
                                            hm->prev_ireduce_scatter_block_module);
        break;
    }
    if (rc != MPI_SUCCESS) {
        r->inner = NULL;
        return rc;
    }
    ompi_request_set_callback(r->inner, mca_coll_hier_nb_prev_done, r);
    return MPI_SUCCESS;
}

/* The core's request is over: counted, unpacked, and the MPI request
 * complete; or handed back (a busy communicator's call, decided at its
 * turn): the previous component's run, in the order the calls were made. */
void mca_coll_hier_nb_done(hier_req_t *core, hier_status_t st, void *arg)
{
    mca_coll_hier_nb_t *r = arg;
    int rc = MPI_SUCCESS;
    r->path = hier_req_path(core);
    if (r->orphan) r->core = NULL; /* (freed already: the core's request goes with this end) */
    if (st == HIER_ERR_NOT_SUPPORTED && (rc = mca_coll_hier_nb_prev(r, r->path)) == MPI_SUCCESS) return;
    if (st == HIER_OK) {
        hier_stats_count(r->coll, r->path, r->bytes, hier_req_net_bytes(core), hier_req_staged_through_host(core));
        if (r->rpack) rc = mca_coll_hier_nb_unpack(r);
    } else if (st != HIER_ERR_NOT_SUPPORTED) {
        rc = mca_coll_hier_error(r->hm, r->coll, st);
    }
    r->super.super.req_status.MPI_ERROR = rc;
    if (r->orphan) {
        mca_coll_hier_nb_release(r);
        return;
    }
    ompi_request_complete(&r->super.super, true);
}

/* Cancelling a collective is erroneous (MPI 3.1, 3.8.4): refused, as libnbc does. */
static int mca_coll_hier_nb_cancel(ompi_request_t *req, int complete)
{
    (void)req;
    (void)complete;
    return MPI_ERR_REQUEST;
}

mca_coll_hier_nb_t *mca_coll_hier_nb_new(mca_coll_hier_module_t *hm, hier_coll_t coll, size_t bytes, int persistent)
{
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_take();
    if (!r) return NULL;
    OMPI_REQUEST_INIT(&r->super.super, persistent);
    /* what Open MPI's retain of the op and types fills in, empty as its
     * constructor leaves it (its layout differs between the lines) */
    memset((char *)r + sizeof(ompi_request_t), 0, sizeof(ompi_coll_base_nbc_request_t) - sizeof(ompi_request_t));
    r->super.super.req_type = OMPI_REQUEST_COLL;
    r->super.super.req_state = persistent ? OMPI_REQUEST_INACTIVE : OMPI_REQUEST_ACTIVE;
    r->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.super.req_free = mca_coll_hier_nb_free;
    r->super.super.req_cancel = mca_coll_hier_nb_cancel;
    r->super.super.req_start = NULL;
    r->super.super.req_mpi_object.comm = hm->comm;
    r->core = NULL;
    r->hm = hm;
    r->coll = coll;
    r->bytes = bytes;
    r->why = HIER_PATH_SELF;
    r->args = (mca_coll_hier_nb_args_t){0};
    r->dtype = NULL;
    r->spack = r->rpack = NULL;
    r->orphan = 0;
    r->persistent = persistent;
    r->held = 0;
    r->inner = NULL;
    r->deferred = NULL;
    r->dead = NULL;
    OBJ_RETAIN(hm->comm);
    return r;
}

/* A request the core took: *request. Not taken: on a busy communicator,
 * queued to be handed back at its turn (hier_req_defer); else released,
 * and the previous component's turn now (MPI_ERR_PENDING), or an error. */
static int mca_coll_hier_nb_started(mca_coll_hier_nb_t *r, hier_status_t st, hier_path_t path, ompi_request_t **request)
{
    mca_coll_hier_module_t *hm = r->hm;
    if (st == HIER_ERR_NOT_SUPPORTED && hm->core) {
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        hier_status_t deferred = hier_req_defer(hm->core, path, &notify, &r->core);
        if (deferred != HIER_ERR_NOT_SUPPORTED) st = deferred;
    }
    if (st == HIER_OK) {
        mca_coll_hier_nb_register();
        *request = &r->super.super;
        return MPI_SUCCESS;
    }
    hier_coll_t coll = r->coll;
    size_t bytes = r->bytes;
    r->core = NULL;
    mca_coll_hier_nb_release(r);
    if (st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_error(hm, coll, st);
    mca_coll_hier_account(hm, coll, &(hier_result_t){.path = path}, bytes);
    return MPI_ERR_PENDING; /* (the caller's fallback) */
}

int mca_coll_hier_iallreduce(const void *sbuf, void *rbuf, mca_coll_hier_count_t count, ompi_datatype_t *dtype,
                             ompi_op_t *op, ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    hier_path_t path = hm->comm_fallback;
    size_t tsize, per_type = 0;
    hier_dtype_t dt = HIER_DT_COUNT;
    hier_op_t hop = HIER_OP_COUNT;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;

    ompi_datatype_type_size(dtype, &tsize);
    if (path == MCA_COLL_HIER_SERVED) path = mca_coll_hier_map(hm, dtype, op, &dt, &per_type, &hop);
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, HIER_COLL_IALLREDUCE, (size_t)count * tsize, 0);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->args = (mca_coll_hier_nb_args_t){.sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op};
    if (path == MCA_COLL_HIER_SERVED) {
        mca_coll_hier_user_op_begin(&r->user, hop, op, dtype);
        hier_user_op_t user = mca_coll_hier_user_op_core(&r->user);
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        r->path = path;
        st = hier_comm_iallreduce(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : sbuf, rbuf,
                                  (size_t)count * per_type, dt, hop, &user, &notify, HIER_REQ_ONCE, &r->path, &r->core);
        mca_coll_hier_user_op_end(hop);
        path = r->path;
    }
    int rc = mca_coll_hier_nb_started(r, st, path, request);
    if (rc != MPI_ERR_PENDING) return rc;
    return hm->prev_iallreduce(sbuf, rbuf, count, dtype, op, comm, request, hm->prev_iallreduce_module);
}

/* Counts of communicators up to this size live on the stack (the core copies them). */
#define MCA_COLL_HIER_NB_RS_STACK 64

/* Shared by both reduce_scatter entry points: rcounts in MPI datatype units
 * (NULL: block each). */
static int mca_coll_hier_irs(mca_coll_hier_module_t *hm, hier_coll_t coll, const void *sbuf, void *rbuf,
                             const mca_coll_hier_counts_t *rcounts, size_t block, ompi_datatype_t *dtype,
                             ompi_op_t *op, ompi_request_t **request)
{
    int n = ompi_comm_size(hm->comm);
    size_t tsize, per_type = 0, total = 0;
    hier_path_t path = hm->comm_fallback;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;
    hier_dtype_t dt = HIER_DT_COUNT;
    hier_op_t hop = HIER_OP_COUNT;

    ompi_datatype_type_size(dtype, &tsize);
    for (int q = 0; q < n; q++) total += rcounts ? mca_coll_hier_counts_get(*rcounts, q) : block;
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, coll, total * tsize, 0);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->args = (mca_coll_hier_nb_args_t){.sbuf = sbuf, .rbuf = rbuf, .count = (mca_coll_hier_count_t)block,
                                        .dtype = dtype, .op = op};
    if (rcounts) r->args.rcounts = *rcounts;
    if (path == MCA_COLL_HIER_SERVED) path = mca_coll_hier_map(hm, dtype, op, &dt, &per_type, &hop);
    size_t stack[MCA_COLL_HIER_NB_RS_STACK], *counts = NULL;
    if (path == MCA_COLL_HIER_SERVED)
        counts = n <= MCA_COLL_HIER_NB_RS_STACK ? stack : malloc(sizeof(*counts) * (size_t)n);
    if (path == MCA_COLL_HIER_SERVED && !counts) st = HIER_ERR_NO_MEMORY;
    if (counts) {
        for (int q = 0; q < n; q++) counts[q] = (rcounts ? mca_coll_hier_counts_get(*rcounts, q) : block) * per_type;
        mca_coll_hier_user_op_begin(&r->user, hop, op, dtype);
        hier_user_op_t user = mca_coll_hier_user_op_core(&r->user);
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        r->path = path;
        st = hier_comm_ireduce_scatter(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : sbuf, rbuf, counts, dt, hop,
                                       &user, &notify, HIER_REQ_ONCE, &r->path, &r->core);
        mca_coll_hier_user_op_end(hop);
        path = r->path;
        if (counts != stack) free(counts); /* (copied) */
    }
    return mca_coll_hier_nb_started(r, st, path, request);
}

int mca_coll_hier_ireduce_scatter(const void *sbuf, void *rbuf, mca_coll_hier_counts_t rcounts,
                                  ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                  ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    int rc = mca_coll_hier_irs(hm, HIER_COLL_IREDUCE_SCATTER, sbuf, rbuf, &rcounts, 0, dtype, op, request);
    if (rc != MPI_ERR_PENDING) return rc;
    return hm->prev_ireduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, request, hm->prev_ireduce_scatter_module);
}

int mca_coll_hier_ireduce_scatter_block(const void *sbuf, void *rbuf, mca_coll_hier_count_t rcount,
                                        ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    int rc = mca_coll_hier_irs(hm, HIER_COLL_IREDUCE_SCATTER_BLOCK, sbuf, rbuf, NULL, (size_t)rcount, dtype, op,
                               request);
    if (rc != MPI_ERR_PENDING) return rc;
    return hm->prev_ireduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, request,
                                          hm->prev_ireduce_scatter_block_module);
}

int mca_coll_hier_nb_layout(mca_coll_hier_nb_t *r, const char **s_p, char **r_p)
{
    const mca_coll_hier_nb_args_t *a = &r->args;
    size_t rsize, items = (size_t)a->count * (size_t)ompi_comm_size(r->hm->comm);
    ptrdiff_t slb = 0, rlb = 0;

    ompi_datatype_type_size(a->dtype, &rsize);
    if (mca_coll_hier_layout(r->hm, a->dtype, items, &rlb) == MCA_COLL_HIER_SERVED) {
        *r_p = (char *)a->rbuf + rlb;
    } else {
        if (!(*r_p = r->rpack = malloc(items * rsize + 1))) return OMPI_ERR_OUT_OF_RESOURCE;
        r->dtype = a->dtype; /* (retained: the end unpacks with it) */
        OBJ_RETAIN(a->dtype);
    }
    *s_p = NULL;
    if (a->sbuf == MPI_IN_PLACE) return OMPI_SUCCESS;
    if (mca_coll_hier_layout(r->hm, a->sdtype, (size_t)a->scount, &slb) == MCA_COLL_HIER_SERVED) {
        *s_p = (const char *)a->sbuf + slb;
    } else {
        if (!(r->spack = malloc(r->bytes ? r->bytes : 1))) return OMPI_ERR_OUT_OF_RESOURCE;
        *s_p = r->spack;
    }
    return OMPI_SUCCESS;
}

/* Packing and unpacking walk the application's layout on the host: a
 * device buffer's span goes through a host mirror (copied in first, and a
 * receive buffer's back after), as the blocking allgather does. */
int mca_coll_hier_nb_pack(mca_coll_hier_nb_t *r)
{
    const mca_coll_hier_nb_args_t *a = &r->args;
    size_t n = (size_t)ompi_comm_size(r->hm->comm), rank = (size_t)ompi_comm_rank(r->hm->comm);
    hier_accel_mirror_t m;
    ptrdiff_t ext_lb, ext;
    int rc = OMPI_SUCCESS;
    if (r->spack && (rc = mca_coll_hier_mirror_in(a->sbuf, (size_t)a->scount, a->sdtype, &m)) == OMPI_SUCCESS) {
        rc = mca_coll_hier_sndrcv(hier_accel_mirror_at(&m, (void *)a->sbuf), (size_t)a->scount, a->sdtype, r->spack,
                                  r->bytes, MPI_BYTE);
        hier_accel_mirror_free(&m);
    }
    if (rc != OMPI_SUCCESS || !r->rpack || a->sbuf != MPI_IN_PLACE) return rc;
    if ((rc = mca_coll_hier_mirror_in(a->rbuf, (size_t)a->count * n, a->dtype, &m)) != OMPI_SUCCESS) return rc;
    ompi_datatype_get_extent(a->dtype, &ext_lb, &ext);
    rc = mca_coll_hier_sndrcv((char *)hier_accel_mirror_at(&m, a->rbuf) + (ptrdiff_t)rank * (ptrdiff_t)a->count * ext,
                              (size_t)a->count, a->dtype, r->rpack + rank * r->bytes, r->bytes, MPI_BYTE);
    hier_accel_mirror_free(&m);
    return rc;
}

int mca_coll_hier_nb_unpack(mca_coll_hier_nb_t *r)
{
    size_t n = (size_t)ompi_comm_size(r->hm->comm), items = (size_t)r->args.count * n;
    hier_accel_mirror_t m;
    int rc = mca_coll_hier_mirror_in(r->args.rbuf, items, r->dtype, &m);
    if (rc != OMPI_SUCCESS) return rc;
    rc = mca_coll_hier_sndrcv(r->rpack, r->bytes * n, MPI_BYTE, hier_accel_mirror_at(&m, r->args.rbuf), items,
                              r->dtype);
    if (rc == OMPI_SUCCESS && hier_accel_mirror_out(&m) != HIER_OK) rc = OMPI_ERROR;
    hier_accel_mirror_free(&m);
    return rc;
}

/* Allgather: contiguous layouts go straight through; others are packed
 * into contiguous temporaries the request keeps (whether hier serves a
 * call must not depend on one rank's datatypes: mca_coll_hier_allgather). */
int mca_coll_hier_iallgather(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype, void *rbuf,
                             mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype, ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    size_t rsize;
    hier_path_t path = hm->comm_fallback;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;
    const char *s;
    char *rr;

    ompi_datatype_type_size(rdtype, &rsize);
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, HIER_COLL_IALLGATHER, (size_t)rcount * rsize, 0);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->args = (mca_coll_hier_nb_args_t){.sbuf = sbuf, .rbuf = rbuf, .scount = scount, .count = rcount,
                                        .sdtype = sdtype, .dtype = rdtype};
    if (path == MCA_COLL_HIER_SERVED && hier_req_ready(hm->core, HIER_COLL_ALLGATHER, &path) == HIER_OK)
        path = MCA_COLL_HIER_SERVED;
    if (path == MCA_COLL_HIER_SERVED) {
        int rc = mca_coll_hier_nb_layout(r, &s, &rr);
        if (rc == OMPI_SUCCESS) rc = mca_coll_hier_nb_pack(r);
        if (rc != OMPI_SUCCESS) {
            mca_coll_hier_nb_release(r);
            return rc;
        }
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        r->path = path;
        st = hier_comm_iallgather(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : s, rr, r->bytes, &notify,
                                  HIER_REQ_ONCE, &r->path, &r->core);
        path = r->path;
    }
    int rc = mca_coll_hier_nb_started(r, st, path, request);
    if (rc != MPI_ERR_PENDING) return rc;
    return hm->prev_iallgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, request,
                               hm->prev_iallgather_module);
}
