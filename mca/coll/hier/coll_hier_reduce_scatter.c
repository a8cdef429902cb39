/* coll_hier_reduce_scatter.c: MPI_Reduce_scatter(_block) arguments to
 * hier_comm_reduce_scatter. */
#include "coll_hier.h"

#include <stdlib.h>

/* Counts of communicators up to this size live on the stack; larger ones are allocated per call. */
#define MCA_COLL_HIER_RS_STACK 64

/* Shared by both entry points: rcounts in MPI datatype units; HIER_OK
 * (served), HIER_ERR_NOT_SUPPORTED (res->path: why) or an error. */
static hier_status_t mca_coll_hier_rs(mca_coll_hier_module_t *hm, const void *sbuf, void *rbuf,
                                      const mca_coll_hier_counts_t *rcounts, size_t block, ompi_datatype_t *dtype,
                                      ompi_op_t *op, size_t *bytes_p, hier_result_t *res)
{
    int n = ompi_comm_size(hm->comm);
    size_t tsize, per_type = 0, stack[MCA_COLL_HIER_RS_STACK], *counts = stack, total = 0;
    hier_status_t st;
    hier_dtype_t dt = HIER_DT_COUNT;
    hier_op_t hop = HIER_OP_COUNT;

    ompi_datatype_type_size(dtype, &tsize);
    for (int r = 0; r < n; r++) total += rcounts ? mca_coll_hier_counts_get(*rcounts, r) : block;
    *bytes_p = total * tsize;
    *res = (hier_result_t){.path = hm->comm_fallback};
    if (res->path != MCA_COLL_HIER_SERVED) return HIER_ERR_NOT_SUPPORTED;
    res->path = mca_coll_hier_map(hm, dtype, op, &dt, &per_type, &hop);
    if (res->path != MCA_COLL_HIER_SERVED) return HIER_ERR_NOT_SUPPORTED;
    if (n > MCA_COLL_HIER_RS_STACK && !(counts = malloc(sizeof(*counts) * (size_t)n))) return HIER_ERR_NO_MEMORY;
    for (int r = 0; r < n; r++) counts[r] = (rcounts ? mca_coll_hier_counts_get(*rcounts, r) : block) * per_type;
    mca_coll_hier_user_op_t user;
    mca_coll_hier_user_op_begin(&user, hop, op, dtype);
    st = hier_comm_reduce_scatter(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : sbuf, rbuf, counts, dt, hop, res);
    mca_coll_hier_user_op_end(hop);
    if (counts != stack) free(counts);
    return st;
}

int mca_coll_hier_reduce_scatter(const void *sbuf, void *rbuf, mca_coll_hier_counts_t rcounts, ompi_datatype_t *dtype,
                                 ompi_op_t *op, ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    size_t bytes;
    hier_result_t res;
    hier_status_t st = mca_coll_hier_rs(hm, sbuf, rbuf, &rcounts, 0, dtype, op, &bytes, &res);

    if (st != HIER_OK && st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_error(hm, HIER_COLL_REDUCE_SCATTER, st);
    mca_coll_hier_account(hm, HIER_COLL_REDUCE_SCATTER, &res, bytes);
    if (st == HIER_OK) return MPI_SUCCESS;
    return hm->prev_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, hm->prev_reduce_scatter_module);
}

int mca_coll_hier_reduce_scatter_block(const void *sbuf, void *rbuf, mca_coll_hier_count_t rcount,
                                       ompi_datatype_t *dtype, ompi_op_t *op, ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    size_t bytes;
    hier_result_t res;
    hier_status_t st = mca_coll_hier_rs(hm, sbuf, rbuf, NULL, (size_t)rcount, dtype, op, &bytes, &res);

    if (st != HIER_OK && st != HIER_ERR_NOT_SUPPORTED)
        return mca_coll_hier_error(hm, HIER_COLL_REDUCE_SCATTER_BLOCK, st);
    mca_coll_hier_account(hm, HIER_COLL_REDUCE_SCATTER_BLOCK, &res, bytes);
    if (st == HIER_OK) return MPI_SUCCESS;
    return hm->prev_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, hm->prev_reduce_scatter_block_module);
}
