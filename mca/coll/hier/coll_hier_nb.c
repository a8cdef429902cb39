/* coll_hier_nb.c: MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter(_block)
 * arguments to the core's requests (hier_comm.h), and their MPI requests.
 *
 * An MPI request of hier holds the core's request, and what must live as
 * long as it: the communicator (retained: MPI lets the application free it
 * while the call is on; Open MPI's MPI_I* entry points retain the
 * operation and datatypes themselves), a user operation's context, and an
 * allgather's contiguous temporaries (packed at the start, unpacked at the
 * end, with its receive type, retained). The core tells the end (mca_coll_hier_nb_done),
 * from MPI_Test/Wait on any of its requests or from Open MPI's progress
 * loop, where hier registers itself at its first nonblocking call. */
#include "coll_hier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"
#include "opal/runtime/opal_progress.h"

#include "base/hier_lock.h"


/* Open MPI's MPI_I* entry points take every nonblocking collective's
 * request for its base type (ompi_coll_base_retain_op writes the operation
 * and datatype it retains into it): so is ours. */
typedef struct {
    ompi_coll_base_nbc_request_t super;
    hier_req_t *core;
    mca_coll_hier_module_t *hm;
    hier_coll_t coll;
    size_t bytes;                 /* for the counters */
    hier_path_t path;
    ompi_datatype_t *dtype;       /* allgather's receive type, retained for the unpacking (NULL: none) */
    mca_coll_hier_user_op_t user; /* the user operation's context, as long as the request */
    char *spack, *rpack;          /* allgather's temporaries; rpack is unpacked into rbuf at the end */
    int orphan;                   /* freed by the application before its end (erroneous, but no crash): released then */
    void *rbuf;
    size_t ritems;
} mca_coll_hier_nb_t;

static OBJ_CLASS_INSTANCE(mca_coll_hier_nb_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static int mca_coll_hier_nb_progress(void)
{
    return hier_req_progress();
}

static _Atomic int mca_coll_hier_nb_registered;

/* MPI requests over, kept for the next calls (an object's allocation and
 * construction are a good part of a small call), under a lock where
 * threads may call at once. */
#define MCA_COLL_HIER_NB_KEEP 16
static mca_coll_hier_nb_t *mca_coll_hier_nb_kept[MCA_COLL_HIER_NB_KEEP];
static int mca_coll_hier_nb_nkept;
static pthread_mutex_t mca_coll_hier_nb_mutex = PTHREAD_MUTEX_INITIALIZER;

static mca_coll_hier_nb_t *mca_coll_hier_nb_take(void)
{
    mca_coll_hier_nb_t *r = NULL;
    if (hier_lock_threaded()) pthread_mutex_lock(&mca_coll_hier_nb_mutex);
    if (mca_coll_hier_nb_nkept) r = mca_coll_hier_nb_kept[--mca_coll_hier_nb_nkept];
    if (hier_lock_threaded()) pthread_mutex_unlock(&mca_coll_hier_nb_mutex);
    return r ? r : OBJ_NEW(mca_coll_hier_nb_t);
}

static void mca_coll_hier_nb_keep(mca_coll_hier_nb_t *r)
{
    if (hier_lock_threaded()) pthread_mutex_lock(&mca_coll_hier_nb_mutex);
    if (mca_coll_hier_nb_nkept < MCA_COLL_HIER_NB_KEEP) {
        mca_coll_hier_nb_kept[mca_coll_hier_nb_nkept++] = r;
        r = NULL;
    }
    if (hier_lock_threaded()) pthread_mutex_unlock(&mca_coll_hier_nb_mutex);
    if (r) OBJ_RELEASE(r);
}

/* Open MPI's progress loop advances hier's requests from the first one on. */
static void mca_coll_hier_nb_register(void)
{
    if (!atomic_exchange(&mca_coll_hier_nb_registered, 1)) opal_progress_register(mca_coll_hier_nb_progress);
}

void mca_coll_hier_nb_close(void)
{
    if (atomic_exchange(&mca_coll_hier_nb_registered, 0)) opal_progress_unregister(mca_coll_hier_nb_progress);
    /* (their memory only: at close Open MPI's request classes may be gone
     * already, and construction allocated nothing) */
    while (mca_coll_hier_nb_nkept) free(mca_coll_hier_nb_kept[--mca_coll_hier_nb_nkept]);
}

static void mca_coll_hier_nb_release(mca_coll_hier_nb_t *r)
{
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
 * then the call still runs to its end, which releases the request. */
static int mca_coll_hier_nb_free(ompi_request_t **req)
{
    mca_coll_hier_nb_t *r = (mca_coll_hier_nb_t *)*req;
    *req = MPI_REQUEST_NULL;
    if (REQUEST_COMPLETE(&r->super.super)) {
        mca_coll_hier_nb_release(r);
    } else {
        r->orphan = 1;
        hier_req_free(r->core); /* (the core's ends with it) */
    }
    return OMPI_SUCCESS;
}

/* The core's request is over: counted, unpacked, and the MPI request complete. */
static void mca_coll_hier_nb_done(hier_req_t *core, hier_status_t st, void *arg)
{
    mca_coll_hier_nb_t *r = arg;
    int rc = MPI_SUCCESS;
    if (st == HIER_OK) {
        hier_stats_count(r->coll, r->path, r->bytes, hier_req_net_bytes(core), 0);
        if (r->rpack)
            rc = ompi_datatype_sndrcv(r->rpack, (mca_coll_hier_count_t)(r->bytes * (size_t)ompi_comm_size(r->hm->comm)),
                                      MPI_BYTE, r->rbuf, (mca_coll_hier_count_t)r->ritems, r->dtype) == MPI_SUCCESS
                     ? MPI_SUCCESS
                     : OMPI_ERROR;
    } else {
        rc = mca_coll_hier_error(r->hm, r->coll, st);
    }
    r->super.super.req_status.MPI_ERROR = rc;
    if (r->orphan) { /* (the core's request goes with this call's end) */
        r->core = NULL;
        mca_coll_hier_nb_release(r);
        return;
    }
    ompi_request_complete(&r->super.super, true);
}

static mca_coll_hier_nb_t *mca_coll_hier_nb_new(mca_coll_hier_module_t *hm, hier_coll_t coll, size_t bytes)
{
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_take();
    if (!r) return NULL;
    OMPI_REQUEST_INIT(&r->super.super, false);
    /* what Open MPI's retain of the op and types fills in, empty as its
     * constructor leaves it (its layout differs between the lines) */
    memset((char *)r + sizeof(ompi_request_t), 0, sizeof(ompi_coll_base_nbc_request_t) - sizeof(ompi_request_t));
    r->super.super.req_type = OMPI_REQUEST_COLL;
    r->super.super.req_state = OMPI_REQUEST_ACTIVE;
    r->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.super.req_free = mca_coll_hier_nb_free;
    r->super.super.req_mpi_object.comm = hm->comm;
    r->core = NULL;
    r->hm = hm;
    r->coll = coll;
    r->bytes = bytes;
    r->dtype = NULL;
    r->spack = r->rpack = NULL;
    r->orphan = 0;
    OBJ_RETAIN(hm->comm);
    return r;
}

/* A request the core took: *request; not taken: released, and the
 * previous component's turn (HIER_ERR_NOT_SUPPORTED) or an error. */
static int mca_coll_hier_nb_started(mca_coll_hier_nb_t *r, hier_status_t st, hier_path_t path, ompi_request_t **request)
{
    if (st == HIER_OK) {
        mca_coll_hier_nb_register();
        *request = &r->super.super;
        return MPI_SUCCESS;
    }
    mca_coll_hier_module_t *hm = r->hm;
    hier_coll_t coll = r->coll;
    size_t bytes = r->bytes;
    r->core = NULL;
    mca_coll_hier_nb_release(r);
    if (st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_error(hm, coll, st);
    mca_coll_hier_account(hm, coll, path, bytes);
    return MPI_ERR_PENDING; /* (the caller's fallback) */
}

int mca_coll_hier_iallreduce(const void *sbuf, void *rbuf, mca_coll_hier_count_t count, ompi_datatype_t *dtype,
                             ompi_op_t *op, ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    hier_path_t path = hm->comm_fallback;
    size_t tsize, per_type = 0;
    hier_dtype_t dt;
    hier_op_t hop;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;

    ompi_datatype_type_size(dtype, &tsize);
    if (path == MCA_COLL_HIER_SERVED) path = mca_coll_hier_map_reduction(dtype, op, &dt, &per_type, &hop);
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, HIER_COLL_IALLREDUCE, (size_t)count * tsize);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    if (path == MCA_COLL_HIER_SERVED) {
        mca_coll_hier_user_op_begin(&r->user, hop, op, dtype);
        hier_user_op_t user = mca_coll_hier_user_op_core(&r->user);
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        r->path = path;
        st = hier_comm_iallreduce(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : sbuf, rbuf,
                                  (size_t)count * per_type, dt, hop, &user, &notify, &r->path, &r->core);
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
    hier_dtype_t dt;
    hier_op_t hop;

    ompi_datatype_type_size(dtype, &tsize);
    for (int q = 0; q < n; q++) total += rcounts ? mca_coll_hier_counts_get(*rcounts, q) : block;
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, coll, total * tsize);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    if (path == MCA_COLL_HIER_SERVED) path = mca_coll_hier_map_reduction(dtype, op, &dt, &per_type, &hop);
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
                                       &user, &notify, &r->path, &r->core);
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

/* Allgather: contiguous layouts go straight through; others are packed
 * into contiguous temporaries the request keeps (whether hier serves a
 * call must not depend on one rank's datatypes: mca_coll_hier_allgather). */
int mca_coll_hier_iallgather(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype, void *rbuf,
                             mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype, ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    int n = ompi_comm_size(comm), rank = ompi_comm_rank(comm), in_place = sbuf == MPI_IN_PLACE;
    size_t rsize;
    ptrdiff_t slb = 0, rlb = 0, ext_lb, ext;
    hier_path_t path = hm->comm_fallback;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;
    const char *s = NULL;
    char *rr;

    ompi_datatype_type_size(rdtype, &rsize);
    size_t items = (size_t)rcount * (size_t)n, block = (size_t)rcount * rsize;
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, HIER_COLL_IALLGATHER, block);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    /* (asked before packing: a communicator that may hold device buffers never gets here) */
    if (path == MCA_COLL_HIER_SERVED && hier_req_ready(hm->core, HIER_COLL_ALLGATHER, &path) == HIER_OK)
        path = MCA_COLL_HIER_SERVED;
    if (path != MCA_COLL_HIER_SERVED) goto start;
    if (mca_coll_hier_map_bytes(rdtype, items, &rlb) == MCA_COLL_HIER_SERVED) {
        rr = (char *)rbuf + rlb;
    } else {
        if (!(rr = r->rpack = malloc(items * rsize + 1))) goto nomem;
        r->dtype = rdtype; /* (retained: the end unpacks with it) */
        OBJ_RETAIN(rdtype);
        r->rbuf = rbuf;
        r->ritems = items;
        ompi_datatype_get_extent(rdtype, &ext_lb, &ext);
        if (in_place && ompi_datatype_sndrcv((char *)rbuf + (ptrdiff_t)rank * (ptrdiff_t)rcount * ext, rcount, rdtype,
                                             rr + (size_t)rank * block, (mca_coll_hier_count_t)block,
                                             MPI_BYTE) != MPI_SUCCESS)
            goto fail;
    }
    if (!in_place && mca_coll_hier_map_bytes(sdtype, (size_t)scount, &slb) == MCA_COLL_HIER_SERVED) {
        s = (const char *)sbuf + slb;
    } else if (!in_place) {
        if (!(r->spack = malloc(block ? block : 1))) goto nomem;
        if (ompi_datatype_sndrcv(sbuf, scount, sdtype, r->spack, (mca_coll_hier_count_t)block, MPI_BYTE) !=
            MPI_SUCCESS)
            goto fail;
        s = r->spack;
    }
    hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
    r->path = path;
    st = hier_comm_iallgather(hm->core, in_place ? HIER_IN_PLACE : s, rr, block, &notify, &r->path, &r->core);
    path = r->path;
start:;
    int rc = mca_coll_hier_nb_started(r, st, path, request);
    if (rc != MPI_ERR_PENDING) return rc;
    return hm->prev_iallgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, request,
                               hm->prev_iallgather_module);
nomem:
    mca_coll_hier_nb_release(r);
    return OMPI_ERR_OUT_OF_RESOURCE;
fail:
    mca_coll_hier_nb_release(r);
    return OMPI_ERROR;
}
