/* coll_hier_allgather.c: MPI_Allgather arguments to hier_comm_allgather.
 * Allgather moves bytes only. Ranks may describe their blocks with different
 * datatypes of the same signature, so whether hier serves a call must not
 * depend on them (a rank that fell back alone would hang the others): a
 * non-contiguous layout is packed into, or unpacked from, a contiguous
 * temporary instead. Device buffers are never touched by the CPU: one with a
 * non-contiguous layout is mirrored whole in host memory through its backend
 * first (and a receive buffer copied back after), so it is served like the
 * others. */
#include "coll_hier.h"

#include <stdlib.h>


/* The call on mirrors of its non-contiguous device buffers; the receive
 * mirror goes back to the device. */
static int mca_coll_hier_allgather_mirrored(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype,
                                            void *rbuf, mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype,
                                            ompi_communicator_t *comm,
                                            mca_coll_base_module_t *module, hier_accel_mirror_t *sm,
                                            hier_accel_mirror_t *rm)
{
    const void *s = hier_accel_mirror_at(sm, (void *)sbuf);
    int rc = mca_coll_hier_allgather(s, scount, sdtype, hier_accel_mirror_at(rm, rbuf), rcount, rdtype, comm, module);
    if (rc == MPI_SUCCESS && hier_accel_mirror_out(rm) != HIER_OK) rc = OMPI_ERROR;
    hier_accel_mirror_free(sm);
    hier_accel_mirror_free(rm);
    return rc;
}

int mca_coll_hier_allgather(const void *sbuf, mca_coll_hier_count_t scount, ompi_datatype_t *sdtype, void *rbuf,
                            mca_coll_hier_count_t rcount, ompi_datatype_t *rdtype, ompi_communicator_t *comm,
                            mca_coll_base_module_t *module)
{
    mca_coll_hier_module_t *hm = (mca_coll_hier_module_t *)module;
    int n = ompi_comm_size(comm), rank = ompi_comm_rank(comm), in_place = sbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
    size_t rsize, ssize;
    ptrdiff_t slb = 0, rlb = 0, rext_lb, rext;
    char *spack = NULL, *rpack = NULL;
    const char *s = NULL;
    char *r;
    hier_status_t st = HIER_ERR_NOT_SUPPORTED;

    ompi_datatype_type_size(rdtype, &rsize);
    size_t items = (size_t)rcount * (size_t)n, block = (size_t)rcount * rsize, total = block * (size_t)n;
    hier_result_t res = {.path = hm->comm_fallback};
    if (res.path != MCA_COLL_HIER_SERVED) goto fallback;

    /* 0. device buffers with non-contiguous layouts: through host mirrors */
    hier_accel_mirror_t sm, rm;
    if ((rc = mca_coll_hier_mirror_in(rbuf, items, rdtype, &rm)) != OMPI_SUCCESS) return rc;
    if ((rc = mca_coll_hier_mirror_in(in_place ? NULL : sbuf, (size_t)scount, sdtype, &sm)) != OMPI_SUCCESS) {
        hier_accel_mirror_free(&rm);
        return rc;
    }
    if (sm.backend || rm.backend)
        return mca_coll_hier_allgather_mirrored(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, module, &sm, &rm);

    /* 1. the receive side: straight into rbuf, or through a contiguous temporary */
    if (mca_coll_hier_layout(hm, rdtype, items, &rlb) == MCA_COLL_HIER_SERVED) {
        r = (char *)rbuf + rlb;
    } else {
        if (!(r = rpack = malloc(total ? total : 1))) return OMPI_ERR_OUT_OF_RESOURCE;
        ompi_datatype_get_extent(rdtype, &rext_lb, &rext);
        if (in_place && /* my block sits in rbuf in the receive layout */
            (rc = mca_coll_hier_sndrcv((char *)rbuf + (ptrdiff_t)rank * (ptrdiff_t)rcount * rext, (size_t)rcount,
                                       rdtype, rpack + (size_t)rank * block, block, MPI_BYTE)) != MPI_SUCCESS)
            goto free_rpack;
    }
    /* 2. the send side: straight from sbuf, or packed */
    if (!in_place) {
        ompi_datatype_type_size(sdtype, &ssize);
        if (mca_coll_hier_layout(hm, sdtype, (size_t)scount, &slb) == MCA_COLL_HIER_SERVED) {
            s = (const char *)sbuf + slb;
        } else {
            if (!(spack = malloc(block ? block : 1))) {
                rc = OMPI_ERR_OUT_OF_RESOURCE;
                goto free_rpack;
            }
            if ((rc = mca_coll_hier_sndrcv(sbuf, (size_t)scount, sdtype, spack, block, MPI_BYTE)) != MPI_SUCCESS) {
                free(spack);
                goto free_rpack;
            }
            s = spack;
        }
    } /* (in place: in rbuf, or in the temporary rpack) */
    /* 3. the exchange, then 4. unpacking */
    st = hier_comm_allgather(hm->core, in_place ? HIER_IN_PLACE : s, r, block, &res);
    if (st == HIER_OK && rpack) rc = mca_coll_hier_sndrcv(rpack, total, MPI_BYTE, rbuf, items, rdtype);
    if (spack) free(spack);
free_rpack:
    if (rpack) free(rpack);
    if (rc != MPI_SUCCESS) return rc;
    if (st == HIER_OK) {
        mca_coll_hier_account(hm, HIER_COLL_ALLGATHER, &res, block);
        return MPI_SUCCESS;
    }
    if (st != HIER_ERR_NOT_SUPPORTED) return mca_coll_hier_error(hm, HIER_COLL_ALLGATHER, st);
fallback:
    mca_coll_hier_account(hm, HIER_COLL_ALLGATHER, &res, block);
    return hm->prev_allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, hm->prev_allgather_module);
}
