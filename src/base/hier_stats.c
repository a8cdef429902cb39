#include "base/hier_stats.h"

#include <inttypes.h>

hier_stats_cell_t hier_stats[HIER_COLL_COUNT][HIER_PATH_COUNT];

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
    [HIER_PATH_NET_DIRECT] = {"net_direct", "net_direct"},
    [HIER_PATH_SETUP] = {"setup", "setup"},
    [HIER_PATH_FALLBACK_OP] = {"fallback:op", "fallback_op"},
    [HIER_PATH_FALLBACK_DATATYPE] = {"fallback:datatype", "fallback_datatype"},
    [HIER_PATH_FALLBACK_INTERCOMM] = {"fallback:intercomm", "fallback_intercomm"},
    [HIER_PATH_FALLBACK_SHM] = {"fallback:shm", "fallback_shm"},
    [HIER_PATH_FALLBACK_RANKS] = {"fallback:ranks", "fallback_ranks"},
    [HIER_PATH_FALLBACK_FORCED] = {"fallback:forced", "fallback_forced"},
    [HIER_PATH_FALLBACK_NET] = {"fallback:net", "fallback_net"},
    [HIER_PATH_FALLBACK_DEVICE] = {"fallback:device", "fallback_device"},
    [HIER_PATH_FALLBACK_PARAMS] = {"fallback:params", "fallback_params"},
    [HIER_PATH_FALLBACK_MISMATCH] = {"fallback:mismatch", "fallback_mismatch"},
    [HIER_PATH_FALLBACK_WARMUP] = {"fallback:warmup", "fallback_warmup"},
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

hier_stats_rail_t hier_stats_rails[HIER_STATS_RAILS];
uint64_t hier_stats_exchanges;

void hier_stats_print_rails(FILE *out, int rank, const hier_stats_rail_t rails[HIER_STATS_RAILS])
{
    for (int j = 0; j < HIER_STATS_RAILS; j++)
        if (rails[j].nic[0])
            fprintf(out, "coll:hier:nic rank=%d rail=%d nic=%s bytes=%" PRIu64 "\n", rank, j, rails[j].nic,
                    __atomic_load_n(&rails[j].bytes, __ATOMIC_RELAXED));
    fflush(out);
}

void hier_stats_print(FILE *out, const hier_stats_cell_t cells[HIER_COLL_COUNT][HIER_PATH_COUNT])
{
    for (int c = 0; c < HIER_COLL_COUNT; c++) {
        for (int p = 0; p < HIER_PATH_COUNT; p++) {
            if (!cells[c][p].calls) continue;
            fprintf(out,
                    "coll:hier:stats coll=%s path=%s calls=%" PRIu64 " bytes=%" PRIu64 " net_bytes=%" PRIu64
                    " staged=%" PRIu64 "\n",
                    hier_coll_name(c), hier_path_name(p), cells[c][p].calls, cells[c][p].bytes,
                    cells[c][p].net_bytes, cells[c][p].staged);
        }
    }
    fflush(out);
}
