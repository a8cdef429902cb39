/* hier_coll.c: the names of collectives and paths; see hier_coll.h. */
#include "base/hier_coll.h"

static const char *const hier_coll_names[HIER_COLL_COUNT] = {
    [HIER_COLL_ALLREDUCE] = "allreduce",
    [HIER_COLL_ALLGATHER] = "allgather",
    [HIER_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [HIER_COLL_REDUCE_SCATTER_BLOCK] = "reduce_scatter_block",
    [HIER_COLL_IALLREDUCE] = "iallreduce",
    [HIER_COLL_IALLGATHER] = "iallgather",
    [HIER_COLL_IREDUCE_SCATTER] = "ireduce_scatter",
    [HIER_COLL_IREDUCE_SCATTER_BLOCK] = "ireduce_scatter_block",
    [HIER_COLL_ALLREDUCE_INIT] = "pallreduce",
    [HIER_COLL_ALLGATHER_INIT] = "pallgather",
    [HIER_COLL_REDUCE_SCATTER_INIT] = "preduce_scatter",
    [HIER_COLL_REDUCE_SCATTER_BLOCK_INIT] = "preduce_scatter_block",
};

static const char *const hier_path_names[HIER_PATH_COUNT][2] = {
    [HIER_PATH_SELF] = {"self", "self"},
    [HIER_PATH_SHM_LL] = {"shm_ll", "shm_ll"},
    [HIER_PATH_SHM_FLAT] = {"shm_flat", "shm_flat"},
    [HIER_PATH_SHM_NUMA] = {"shm_numa", "shm_numa"},
    [HIER_PATH_SHM_RSAG] = {"shm_rsag", "shm_rsag"},
    [HIER_PATH_SHM_COPY] = {"shm_copy", "shm_copy"},
    [HIER_PATH_SHM_RS] = {"shm_rs", "shm_rs"},
    [HIER_PATH_CMA_COPY] = {"cma_copy", "cma_copy"},
    [HIER_PATH_NET_RING] = {"net_ring", "net_ring"},
    [HIER_PATH_NET_RD] = {"net_rd", "net_rd"},
    [HIER_PATH_NET_RH] = {"net_rh", "net_rh"},
    [HIER_PATH_NET_COPY] = {"net_copy", "net_copy"},
    [HIER_PATH_NET_RS] = {"net_rs", "net_rs"},
    [HIER_PATH_PML_RING] = {"pml_ring", "pml_ring"},
    [HIER_PATH_PML_RD] = {"pml_rd", "pml_rd"},
    [HIER_PATH_PML_RH] = {"pml_rh", "pml_rh"},
    [HIER_PATH_PML_COPY] = {"pml_copy", "pml_copy"},
    [HIER_PATH_PML_RS] = {"pml_rs", "pml_rs"},
    [HIER_PATH_NET_DIRECT] = {"net_direct", "net_direct"},
    [HIER_PATH_SETUP] = {"setup", "setup"},
    [HIER_PATH_FALLBACK_OP] = {"fallback:op", "fallback_op"},
    [HIER_PATH_FALLBACK_DATATYPE] = {"fallback:datatype", "fallback_datatype"},
    [HIER_PATH_FALLBACK_INTERCOMM] = {"fallback:intercomm", "fallback_intercomm"},
    [HIER_PATH_FALLBACK_SHM] = {"fallback:shm", "fallback_shm"},
    [HIER_PATH_FALLBACK_RANKS] = {"fallback:ranks", "fallback_ranks"},
    [HIER_PATH_FALLBACK_FORCED] = {"fallback:forced", "fallback_forced"},
    [HIER_PATH_FALLBACK_DEVICE] = {"fallback:device", "fallback_device"},
    [HIER_PATH_FALLBACK_PARAMS] = {"fallback:params", "fallback_params"},
    [HIER_PATH_FALLBACK_MISMATCH] = {"fallback:mismatch", "fallback_mismatch"},
    [HIER_PATH_FALLBACK_NONBLOCKING] = {"fallback:nonblocking", "fallback_nonblocking"},
};

const char *hier_coll_name(hier_coll_t coll)
{
    return (unsigned)coll < HIER_COLL_COUNT ? hier_coll_names[coll] : "unknown";
}

const char *hier_path_name(hier_path_t path)
{
    return (unsigned)path < HIER_PATH_COUNT ? hier_path_names[path][0] : "unknown";
}

const char *hier_path_ident(hier_path_t path)
{
    return (unsigned)path < HIER_PATH_COUNT ? hier_path_names[path][1] : "unknown";
}
