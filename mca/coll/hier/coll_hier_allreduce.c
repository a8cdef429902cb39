/* coll_hier_allreduce.c: MPI_Allreduce arguments to hier_comm_allreduce. */
#include "coll_hier.h"

int mca_coll_hier_allreduce(const void *sbuf, void *rbuf, mca_coll_hier_count_t count, ompi_datatype_t *dtype,
                            ompi_op_t *op, ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    hier_result_t res = {.path = hm->comm_fallback};
    size_t tsize, per_type = 0;
    hier_dtype_t dt = HIER_DT_COUNT;
    hier_op_t hop = HIER_OP_COUNT;

    ompi_datatype_type_size(dtype, &tsize);
    if (res.path == MCA_COLL_HIER_SERVED) res.path = mca_coll_hier_map(hm, dtype, op, &dt, &per_type, &hop);
    if (res.path == MCA_COLL_HIER_SERVED) {
        mca_coll_hier_user_op_t user;
        mca_coll_hier_user_op_begin(&user, hop, op, dtype);
        hier_status_t st = hier_comm_allreduce(hm->core, sbuf == MPI_IN_PLACE ? HIER_IN_PLACE : sbuf, rbuf,
                                               (size_t)count * per_type, dt, hop, &res);
        mca_coll_hier_user_op_end(hop);
        if (st == HIER_OK) {
            mca_coll_hier_account(hm, HIER_COLL_ALLREDUCE, &res, (size_t)count * tsize);
            return MPI_SUCCESS;
        }
        if (st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_error(hm, HIER_COLL_ALLREDUCE, st);
    }
    mca_coll_hier_account(hm, HIER_COLL_ALLREDUCE, &res, (size_t)count * tsize);
    return hm->prev_allreduce(sbuf, rbuf, count, dtype, op, comm, hm->prev_allreduce_module);
}
