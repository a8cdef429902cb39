/* coll_hier_allgather.c: MPI_Allgather arguments to hier_comm_allgather.
 * Allgather moves bytes only, so any contiguous datatype qualifies, and the
 * send and receive types may differ as long as the byte counts agree. */
#include "coll_hier.h"

int mca_coll_hier_allgather(const void *sbuf, int scount, ompi_datatype_t *sdtype, void *rbuf, int rcount,
                            ompi_datatype_t *rdtype, ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    hier_path_t path = hm->comm_fallback;
    int in_place = sbuf == MPI_IN_PLACE;
    size_t rsize, ssize = 0;
    ptrdiff_t slb = 0, rlb = 0;

    ompi_datatype_type_size(rdtype, &rsize);
    size_t block = (size_t)rcount * rsize;
    if (path == MCA_COLL_HIER_SERVED)
        path = mca_coll_hier_map_bytes(rdtype, (size_t)rcount * (size_t)ompi_comm_size(comm), &rlb);
    if (path == MCA_COLL_HIER_SERVED && !in_place) {
        ompi_datatype_type_size(sdtype, &ssize);
        path = mca_coll_hier_map_bytes(sdtype, (size_t)scount, &slb);
        /* MPI requires matching signatures; a mismatch is the fallback's error to report */
        if (path == MCA_COLL_HIER_SERVED && (size_t)scount * ssize != block) path = HIER_PATH_FALLBACK_DATATYPE;
    }
    if (path == MCA_COLL_HIER_SERVED) {
        hier_status_t st = hier_comm_allgather(hm->core, in_place ? NULL : (const char *)sbuf + slb,
                                               (char *)rbuf + rlb, block, &path);
        if (st == HIER_OK) {
            mca_coll_hier_account(hm, HIER_COLL_ALLGATHER, path, block);
            return MPI_SUCCESS;
        }
        if (st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_error(hm, HIER_COLL_ALLGATHER, st);
    }
    mca_coll_hier_account(hm, HIER_COLL_ALLGATHER, path, block);
    return hm->prev_allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, hm->prev_allgather_module);
}
