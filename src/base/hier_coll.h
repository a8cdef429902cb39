/* hier_coll.h: the collectives' vocabulary -- which collective a call is
 * (hier_coll_t) and every way hier serves it or why it does not
 * (hier_path_t): what select/ decides, comm/ reports, the counters count
 * and the stats lines and MPI_T variables name; one call as the core runs
 * it (hier_call_t) and what it did (hier_result_t). */
#ifndef HIER_COLL_H
#define HIER_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_dtype.h"

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
    HIER_PATH_PML_RING,          /* the same five, their steps between nodes over Open MPI's point-to-point */
    HIER_PATH_PML_RD,            /* (until every rank's libfabric endpoint is open, or where none can be) */
    HIER_PATH_PML_RH,
    HIER_PATH_PML_COPY,
    HIER_PATH_PML_RS,
    HIER_PATH_NET_DIRECT,        /* device buffers NIC to NIC (peer direct), a ring over every rank */
    HIER_PATH_SETUP,             /* a communicator's first call, small: carried by the set-up's exchange */
    HIER_PATH_FIRST_FALLBACK,
    HIER_PATH_FALLBACK_OP = HIER_PATH_FIRST_FALLBACK, /* user-defined, non-commutative or invalid op */
    HIER_PATH_FALLBACK_DATATYPE, /* non-contiguous or non-predefined base type */
    HIER_PATH_FALLBACK_INTERCOMM,
    HIER_PATH_FALLBACK_SHM,      /* shared-memory segment unavailable */
    HIER_PATH_FALLBACK_RANKS,    /* the ranks disagree on who shares a node */
    HIER_PATH_FALLBACK_FORCED,   /* the user forced the fallback by parameter */
    HIER_PATH_FALLBACK_DEVICE,   /* a buffer in device memory no backend handles */
    HIER_PATH_FALLBACK_PARAMS,   /* the ranks have different coll_hier parameters */
    HIER_PATH_FALLBACK_MISMATCH, /* the ranks called different collectives on it earlier */
    HIER_PATH_FALLBACK_NONBLOCKING, /* a nonblocking call (or a persistent start) that would wait first: a collective step not taken yet */
    HIER_PATH_COUNT
} hier_path_t;

const char *hier_coll_name(hier_coll_t coll);
/* "shm_rsag", or "fallback:op" for fallbacks */
const char *hier_path_name(hier_path_t path);
/* Identifier-safe variant for pvar names: "shm_rsag", "fallback_op" */
const char *hier_path_ident(hier_path_t path);

/* One blocking collective as the core runs it, made from an entry's
 * arguments (comm/hier_comm.c): one shape for the three collectives, so
 * one sequence serves them; the staging pipeline's chunks are calls of it
 * too. */
typedef struct {
    hier_coll_t coll;        /* ALLREDUCE, ALLGATHER or REDUCE_SCATTER */
    const void *sbuf;        /* NULL: in place (HIER_IN_PLACE until hier_comm.c's check) */
    void *rbuf;
    size_t count;            /* elements of the whole vector; allgather: bytes of one rank's block */
    size_t esize;            /* bytes per element; allgather: 1 */
    hier_dtype_t dt;         /* allgather: 0 */
    hier_op_t op;
    const size_t *rcounts;   /* reduce_scatter: elements per rank */
    size_t sbytes, rbytes;   /* the buffers' lengths (in place: rbuf's input and output) */
    size_t bytes;            /* the whole vector, the same on every rank */
} hier_call_t;

/* What one call did, returned to its caller (the counters add it up):
 * the path that served it or why it was not served, the bytes this rank
 * put on the fabric, and whether its buffers were device memory staged
 * through host memory. */
typedef struct {
    hier_path_t path;
    uint64_t net_bytes;
    int staged;
} hier_result_t;

static inline int hier_path_is_fallback(hier_path_t path)
{
    return path >= HIER_PATH_FIRST_FALLBACK;
}

/* A path between nodes as Open MPI's point-to-point carried it (net_rd ->
 * pml_rd); any other path as it is. */
static inline hier_path_t hier_path_over_pml(hier_path_t path)
{
    return path >= HIER_PATH_NET_RING && path <= HIER_PATH_NET_RS
               ? (hier_path_t)(path - HIER_PATH_NET_RING + HIER_PATH_PML_RING)
               : path;
}

#endif
