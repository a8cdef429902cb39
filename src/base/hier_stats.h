/* hier_stats.h: per-process counters of what served each collective.
 * Counters are plain uint64_t updated with relaxed atomics so MPI_T
 * performance variables can point straight at them. */
#ifndef HIER_STATS_H
#define HIER_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "base/hier_lock.h"

typedef enum {
    HIER_COLL_ALLREDUCE,
    HIER_COLL_ALLGATHER,
    HIER_COLL_REDUCE_SCATTER,
    HIER_COLL_REDUCE_SCATTER_BLOCK,
    HIER_COLL_IALLREDUCE,        /* nonblocking: their own counters and signatures (a */
    HIER_COLL_IALLGATHER,        /* nonblocking call never matches a blocking one) */
    HIER_COLL_IREDUCE_SCATTER,
    HIER_COLL_IREDUCE_SCATTER_BLOCK,
    HIER_COLL_ALLREDUCE_INIT,    /* persistent ("pallreduce", ...: a pvar's name must fit 63 */
    HIER_COLL_ALLGATHER_INIT,    /* characters): every start counted; their own signatures too */
    HIER_COLL_REDUCE_SCATTER_INIT,
    HIER_COLL_REDUCE_SCATTER_BLOCK_INIT,
    HIER_COLL_COUNT
} hier_coll_t;

/* Every way a call can be served. Names are what stats lines print. */
typedef enum {
    HIER_PATH_SELF,              /* one rank: local copy */
    HIER_PATH_SHM_LL,            /* small messages: flags inside the data, no barrier */
    HIER_PATH_SHM_FLAT,          /* every rank reduces every slot */
    HIER_PATH_SHM_NUMA,          /* NUMA leaders reduce their group, then everyone reduces leaders */
    HIER_PATH_SHM_RSAG,          /* reduce-scatter then allgather, pipelined */
    HIER_PATH_SHM_COPY,          /* allgather through slots */
    HIER_PATH_SHM_RS,            /* reduce_scatter through slots */
    HIER_PATH_CMA_COPY,          /* allgather, single copy between processes */
    HIER_PATH_NET_RING,          /* several nodes: allreduce, ring between nodes */
    HIER_PATH_NET_RD,            /* several nodes: allreduce, recursive doubling between nodes */
    HIER_PATH_NET_RH,            /* several nodes: allreduce, Rabenseifner between nodes */
    HIER_PATH_NET_COPY,          /* several nodes: allgather */
    HIER_PATH_NET_RS,            /* several nodes: reduce_scatter */
    HIER_PATH_NET_DIRECT,        /* device buffers NIC to NIC (peer direct), a ring over every rank */
    HIER_PATH_SETUP,             /* a communicator's first call, small: carried by the set-up's exchange */
    HIER_PATH_FIRST_FALLBACK,
    HIER_PATH_FALLBACK_OP = HIER_PATH_FIRST_FALLBACK, /* user-defined, non-commutative or invalid op */
    HIER_PATH_FALLBACK_DATATYPE, /* non-contiguous or non-predefined base type */
    HIER_PATH_FALLBACK_INTERCOMM,
    HIER_PATH_FALLBACK_SHM,      /* shared-memory segment unavailable */
    HIER_PATH_FALLBACK_RANKS,    /* the ranks disagree on who shares a node */
    HIER_PATH_FALLBACK_FORCED,   /* the user forced the fallback by parameter */
    HIER_PATH_FALLBACK_NET,      /* several nodes, and no usable libfabric provider */
    HIER_PATH_FALLBACK_DEVICE,   /* a buffer in device memory no backend handles */
    HIER_PATH_FALLBACK_PARAMS,   /* the ranks have different coll_hier parameters */
    HIER_PATH_FALLBACK_MISMATCH, /* the ranks called different collectives on it earlier */
    HIER_PATH_FALLBACK_WARMUP,   /* several nodes, some rank's libfabric endpoint still opening */
    HIER_PATH_FALLBACK_NONBLOCKING, /* a nonblocking call (or a persistent start) that would wait first: a collective step not taken yet */
    HIER_PATH_COUNT
} hier_path_t;

typedef struct {
    uint64_t calls;
    uint64_t bytes;
    uint64_t net_bytes; /* bytes this process put on the fabric */
    uint64_t staged;    /* calls whose buffers were device memory, staged through host memory */
} hier_stats_cell_t;

extern hier_stats_cell_t hier_stats[HIER_COLL_COUNT][HIER_PATH_COUNT];

/* Per rail this process drives (net/hier_fabric*.c fills them in): its NIC's
 * name (empty: no such rail) and the bytes written through it. */
#define HIER_STATS_RAILS 8
typedef struct {
    char nic[32];
    uint64_t bytes;
} hier_stats_rail_t;
extern hier_stats_rail_t hier_stats_rails[HIER_STATS_RAILS];

/* Collective exchanges hier made for itself (a communicator's set-up,
 * agreements inside calls): what creating and first using communicators
 * costs beyond Open MPI's own work, one round trip between nodes each. */
extern uint64_t hier_stats_exchanges;

static inline void hier_stats_count_exchange(void)
{
    __atomic_fetch_add(&hier_stats_exchanges, 1, __ATOMIC_RELAXED);
}

const char *hier_coll_name(hier_coll_t coll);
/* "shm_rsag", or "fallback:op" for fallbacks */
const char *hier_path_name(hier_path_t path);
/* Identifier-safe variant for pvar names: "shm_rsag", "fallback_op" */
const char *hier_path_ident(hier_path_t path);

static inline int hier_path_is_fallback(hier_path_t path)
{
    return path >= HIER_PATH_FIRST_FALLBACK;
}

/* A call counted: locked read-modify-writes only where threads may count
 * at once (MPI_THREAD_MULTIPLE, hier's progress thread); otherwise the one
 * writer's plain adds (MPI_T's readers still load whole values). */
static inline void hier_stats_count(hier_coll_t coll, hier_path_t path, uint64_t bytes, uint64_t net_bytes,
                                    int staged)
{
    hier_stats_cell_t *cell = &hier_stats[coll][path];
    if (hier_lock_threaded()) {
        if (staged) __atomic_fetch_add(&cell->staged, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cell->calls, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cell->bytes, bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cell->net_bytes, net_bytes, __ATOMIC_RELAXED);
        return;
    }
    uint64_t calls = cell->calls + 1, total = cell->bytes + bytes, net = cell->net_bytes + net_bytes;
    __atomic_store_n(&cell->calls, calls, __ATOMIC_RELAXED);
    __atomic_store_n(&cell->bytes, total, __ATOMIC_RELAXED);
    __atomic_store_n(&cell->net_bytes, net, __ATOMIC_RELAXED);
    if (staged) __atomic_store_n(&cell->staged, cell->staged + 1, __ATOMIC_RELAXED);
}

/* One "coll:hier:stats coll=... path=... calls=... bytes=... net_bytes=... staged=..." line per
 * non-empty cell of `cells` (a table shaped like hier_stats). */
void hier_stats_print(FILE *out, const hier_stats_cell_t cells[HIER_COLL_COUNT][HIER_PATH_COUNT]);
/* One "coll:hier:nic rank=R rail=J nic=NAME bytes=N" line per rail of `rails`. */
void hier_stats_print_rails(FILE *out, int rank, const hier_stats_rail_t rails[HIER_STATS_RAILS]);

#endif
