/* coll_hier_pc.c: persistent collectives (MPI_Allreduce_init, MPI_Allgather_init, MPI_Reduce_scatter_init,
 * MPI_Reduce_scatter_block_init; MPIX_*_init on Open MPI 4.1) as the core's persistent requests
 * (docs/design.md, "Nonblocking and persistent calls").
 *
 * The init is collective (MPI 4.0, 6.13): the core takes the communicator's set-up and what the plan needs
 * there, on every rank alike, whatever this rank's buffers; MPI_Start then queues the plan and never waits for
 * the peers. A start the core cannot serve (its communicator refused since, or still warming up; a call hier
 * never serves) is the previous component's nonblocking call, counted like any fallback, whose end ends ours
 * (on a busy communicator at its turn: hier_req_busy): every start is served or counted, and the request
 * stays ours. */
#include "coll_hier_nb.h"

/* A start that ends at once with an error. */
static int mca_coll_hier_pc_failed(mca_coll_hier_nb_t *r, int rc)
{
    r->super.super.req_status.MPI_ERROR = rc;
    ompi_request_complete(&r->super.super, true);
    return rc;
}

static int mca_coll_hier_pc_start_one(mca_coll_hier_nb_t *r)
{
    ompi_request_t *req = &r->super.super;
    if (!REQUEST_COMPLETE(req)) return MPI_ERR_REQUEST; /* (running: MPI_Start checks that first, when it checks) */
    mca_coll_hier_nb_prev_free(r); /* (the last start's, over) */
    req->req_complete = REQUEST_PENDING;
    req->req_state = OMPI_REQUEST_ACTIVE;
    req->req_status.MPI_ERROR = MPI_SUCCESS;
    hier_path_t path = r->why;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;
    if (r->core) {
        if ((r->spack || r->rpack) && mca_coll_hier_nb_pack(r) != OMPI_SUCCESS)
            return mca_coll_hier_pc_failed(r, OMPI_ERROR);
        st = hier_req_start(r->core, &r->path); /* (its end may be told before it returns) */
        path = r->path;
    }
    if (st == HIER_ERR_NOT_SUPPORTED && r->hm->core) { /* (a busy communicator: at its turn) */
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        hier_status_t deferred = hier_req_defer(r->hm->core, path, &notify, &r->deferred);
        if (deferred != HIER_ERR_NOT_SUPPORTED) st = deferred;
    }
    if (st == HIER_OK) return MPI_SUCCESS;
    if (st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_pc_failed(r, mca_coll_hier_error(r->hm, r->coll, st));
    int rc = mca_coll_hier_nb_prev(r, path);
    return rc == MPI_SUCCESS ? MPI_SUCCESS : mca_coll_hier_pc_failed(r, rc);
}

/* MPI_Start and MPI_Startall (Open MPI hands us runs of our own requests). */
static int mca_coll_hier_pc_start(size_t n, ompi_request_t **reqs)
{
    for (size_t i = 0; i < n; i++) {
        int rc = mca_coll_hier_pc_start_one((mca_coll_hier_nb_t *)reqs[i]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* The request made: the core's (HIER_OK), or none, every start the
 * previous component's (HIER_ERR_NOT_SUPPORTED, path: why); or an error. */
static int mca_coll_hier_pc_made(mca_coll_hier_nb_t *r, hier_status_t st, hier_path_t path, ompi_request_t **request)
{
    if (st != HIER_OK && st != HIER_ERR_NOT_SUPPORTED) {
        int rc = mca_coll_hier_error(r->hm, r->coll, st);
        r->core = NULL;
        mca_coll_hier_nb_release(r);
        return rc;
    }
    if (st != HIER_OK) r->core = NULL;
    r->why = path;
    r->super.super.req_start = mca_coll_hier_pc_start;
    mca_coll_hier_nb_register();
    *request = &r->super.super;
    return MPI_SUCCESS;
}

int mca_coll_hier_allreduce_init(const void *sbuf, void *rbuf, mca_coll_hier_count_t count, ompi_datatype_t *dtype,
                                 ompi_op_t *op, ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    hier_path_t path = hm->comm_fallback;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;
    size_t tsize, per_type = 0;
    hier_dtype_t dt = HIER_DT_COUNT;
    hier_op_t hop = HIER_OP_COUNT;
    (void)comm;
    (void)info;

    ompi_datatype_type_size(dtype, &tsize);
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, HIER_COLL_ALLREDUCE_INIT, (size_t)count * tsize, 1);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->args = (mca_coll_hier_nb_args_t){.sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op};
    mca_coll_hier_nb_hold(r, 1);
    if (path == MCA_COLL_HIER_SERVED) path = mca_coll_hier_map(hm, dtype, op, &dt, &per_type, &hop);
    if (path == MCA_COLL_HIER_SERVED) {
        mca_coll_hier_user_op_begin(&r->user, hop, op, dtype);
        hier_user_op_t user = mca_coll_hier_user_op_core(&r->user);
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        st = hier_comm_iallreduce(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : sbuf, rbuf,
                                  (size_t)count * per_type, dt, hop, &user, &notify, HIER_REQ_PERSISTENT, &path,
                                  &r->core);
        mca_coll_hier_user_op_end(hop);
    }
    return mca_coll_hier_pc_made(r, st, path, request);
}

/* Both reduce_scatter kinds: rcounts in MPI datatype units (NULL: block each). */
static int mca_coll_hier_pc_rs(mca_coll_hier_nb_t *r, const size_t *block, ompi_request_t **request)
{
    mca_coll_hier_module_t *hm = r->hm;
    const mca_coll_hier_nb_args_t *a = &r->args;
    int n = ompi_comm_size(hm->comm);
    size_t per_type = 0;
    hier_path_t path = hm->comm_fallback;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;
    hier_dtype_t dt = HIER_DT_COUNT;
    hier_op_t hop = HIER_OP_COUNT;

    mca_coll_hier_nb_hold(r, 1);
    if (path == MCA_COLL_HIER_SERVED) path = mca_coll_hier_map(hm, a->dtype, a->op, &dt, &per_type, &hop);
    if (path == MCA_COLL_HIER_SERVED) {
        size_t *counts = malloc(sizeof(*counts) * (size_t)n);
        if (!counts) {
            mca_coll_hier_nb_release(r);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        for (int q = 0; q < n; q++) counts[q] = (block ? *block : mca_coll_hier_counts_get(a->rcounts, q)) * per_type;
        mca_coll_hier_user_op_begin(&r->user, hop, a->op, a->dtype);
        hier_user_op_t user = mca_coll_hier_user_op_core(&r->user);
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        st = hier_comm_ireduce_scatter(hm->core, a->sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : a->sbuf, a->rbuf, counts,
                                       dt, hop, &user, &notify, HIER_REQ_PERSISTENT, &path, &r->core);
        mca_coll_hier_user_op_end(hop);
        free(counts); /* (copied) */
    }
    return mca_coll_hier_pc_made(r, st, path, request);
}

int mca_coll_hier_reduce_scatter_init(const void *sbuf, void *rbuf, mca_coll_hier_counts_t rcounts,
                                      ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                      struct ompi_info_t *info, ompi_request_t **request,
                                      mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    size_t tsize, total = 0;
    (void)info;
    ompi_datatype_type_size(dtype, &tsize);
    for (int q = 0; q < ompi_comm_size(comm); q++) total += mca_coll_hier_counts_get(rcounts, q);
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, HIER_COLL_REDUCE_SCATTER_INIT, total * tsize, 1);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->args = (mca_coll_hier_nb_args_t){.sbuf = sbuf, .rbuf = rbuf, .dtype = dtype, .op = op, .rcounts = rcounts};
    return mca_coll_hier_pc_rs(r, NULL, request);
}

int mca_coll_hier_reduce_scatter_block_init(const void *sbuf, void *rbuf, mca_coll_hier_count_t rcount,
                                            ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                            struct ompi_info_t *info, ompi_request_t **request,
                                            mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    size_t tsize, block = (size_t)rcount;
    (void)info;
    ompi_datatype_type_size(dtype, &tsize);
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(
        hm, HIER_COLL_REDUCE_SCATTER_BLOCK_INIT, block * (size_t)ompi_comm_size(comm) * tsize, 1);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->args = (mca_coll_hier_nb_args_t){.sbuf = sbuf, .rbuf = rbuf, .count = rcount, .dtype = dtype, .op = op};
    return mca_coll_hier_pc_rs(r, &block, request);
}

/* Allgather: contiguous layouts go straight through; others through
 * temporaries the request keeps, packed at each start (so that every rank
 * takes the init's collective steps, whatever its datatypes). */
int mca_coll_hier_allgather_init(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype, void *rbuf,
                                 mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype, ompi_communicator_t *comm,
                                 struct ompi_info_t *info, ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    hier_path_t path = hm->comm_fallback;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;
    size_t rsize;
    const char *s;
    char *rr;
    (void)comm;
    (void)info;

    ompi_datatype_type_size(rdtype, &rsize);
    mca_coll_hier_nb_t *r = mca_coll_hier_nb_new(hm, HIER_COLL_ALLGATHER_INIT, (size_t)rcount * rsize, 1);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->args = (mca_coll_hier_nb_args_t){.sbuf = sbuf, .rbuf = rbuf, .scount = scount, .count = rcount,
                                        .sdtype = sdtype, .dtype = rdtype};
    mca_coll_hier_nb_hold(r, 1);
    if (path == MCA_COLL_HIER_SERVED) {
        if (mca_coll_hier_nb_layout(r, &s, &rr) != OMPI_SUCCESS) {
            mca_coll_hier_nb_release(r);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        hier_req_notify_t notify = {mca_coll_hier_nb_done, r};
        st = hier_comm_iallgather(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : s, rr, r->bytes, &notify,
                                  HIER_REQ_PERSISTENT, &path, &r->core);
    }
    return mca_coll_hier_pc_made(r, st, path, request);
}
