/* coll_hier_allgather.c: MPI_Allgather arguments to hier_comm_allgather.
 * Allgather moves bytes only. Ranks may describe their blocks with different
 * datatypes of the same signature, so whether hier serves a call must not
 * depend on them (a rank that fell back alone would hang the others): a
 * non-contiguous layout is packed into, or unpacked from, a contiguous
 * temporary instead. Device buffers are never packed by the CPU: such a call
 * goes to the previous component, on every rank alike only if every rank's
 * layout is non-contiguous (the same rule Open MPI's own device support has). */
#include "coll_hier.h"

#include <stdlib.h>

#include "hier_accel.h"

static int mca_coll_hier_on_device(const void *p, size_t len)
{
    hier_accel_buf_t b;
    return hier_accel_classify(p, len, &b) != HIER_OK || hier_accel_is_device(&b);
}

int mca_coll_hier_allgather(const void *sbuf, int scount, ompi_datatype_t *sdtype, void *rbuf, int rcount,
                            ompi_datatype_t *rdtype, ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    int n = ompi_comm_size(comm), rank = ompi_comm_rank(comm), in_place = sbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
    size_t rsize, ssize;
    ptrdiff_t slb = 0, rlb = 0, rext_lb, rext;
    char *spack = NULL, *rpack = NULL;
    const char *s = NULL;
    char *r;

    ompi_datatype_type_size(rdtype, &rsize);
    size_t block = (size_t)rcount * rsize, total = block * (size_t)n;
    hier_path_t path = hm->comm_fallback;
    if (path != MCA_COLL_HIER_SERVED) goto fallback;

    /* 1. the receive side: straight into rbuf, or through a contiguous temporary */
    if (mca_coll_hier_map_bytes(rdtype, (size_t)rcount * (size_t)n, &rlb) == MCA_COLL_HIER_SERVED) {
        r = (char *)rbuf + rlb;
    } else {
        if (mca_coll_hier_on_device(rbuf, 1)) {
            path = HIER_PATH_FALLBACK_DATATYPE;
            goto fallback;
        }
        if (!(r = rpack = malloc(total ? total : 1))) return OMPI_ERR_OUT_OF_RESOURCE;
        ompi_datatype_get_extent(rdtype, &rext_lb, &rext);
        if (in_place) /* my block sits in rbuf in the receive layout */
            ompi_datatype_sndrcv((char *)rbuf + (ptrdiff_t)rank * rcount * rext, rcount, rdtype,
                                 rpack + (size_t)rank * block, (int32_t)block, MPI_BYTE);
    }
    /* 2. the send side: straight from sbuf, or packed */
    if (!in_place) {
        ompi_datatype_type_size(sdtype, &ssize);
        if (mca_coll_hier_map_bytes(sdtype, (size_t)scount, &slb) == MCA_COLL_HIER_SERVED) {
            s = (const char *)sbuf + slb;
        } else if (mca_coll_hier_on_device(sbuf, 1)) {
            free(rpack);
            path = HIER_PATH_FALLBACK_DATATYPE;
            goto fallback;
        } else {
            if (!(spack = malloc(block ? block : 1))) {
                rc = OMPI_ERR_OUT_OF_RESOURCE;
                goto free_rpack;
            }
            ompi_datatype_sndrcv(sbuf, scount, sdtype, spack, (int32_t)block, MPI_BYTE);
            s = spack;
        }
    } else if (rpack) {
        s = NULL; /* in place in the temporary */
    }
    /* 3. the exchange, then 4. unpacking */
    hier_status_t st = hier_comm_allgather(hm->core, s, r, block, &path);
    if (st == HIER_OK && rpack) ompi_datatype_sndrcv(rpack, (int32_t)total, MPI_BYTE, rbuf, rcount * n, rdtype);
    free(spack);
free_rpack:
    free(rpack);
    if (rc != MPI_SUCCESS) return rc;
    if (st == HIER_OK) {
        mca_coll_hier_account(hm, HIER_COLL_ALLGATHER, path, block);
        return MPI_SUCCESS;
    }
    if (st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_error(hm, HIER_COLL_ALLGATHER, st);
fallback:
    mca_coll_hier_account(hm, HIER_COLL_ALLGATHER, path, block);
    return hm->prev_allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, hm->prev_allgather_module);
}
