/* hier_comm_host.c: the collectives on host buffers: which algorithm serves
 * a call, and the call itself. */
#include <string.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_host.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_setup.h"
#include "exec/hier_exec_ll.h"

/* Common entry: the set-up at the first call, a forced fallback, or one rank. */
hier_status_t hier_comm_prepare(hier_comm_t *c, int algo, hier_path_t *path_p)
{
    if (algo == HIER_ALGO_FALLBACK) {
        *path_p = HIER_PATH_FALLBACK_FORCED;
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (c->size == 1) { /* (no segment for a communicator of one) */
        *path_p = HIER_PATH_SELF;
        return HIER_IN_PROGRESS; /* caller copies */
    }
    if (c->state == HIER_COMM_NEW) hier_comm_setup(c);
    if (c->state == HIER_COMM_REFUSED) {
        *path_p = c->refused;
        return HIER_ERR_NOT_SUPPORTED;
    }
    return HIER_OK;
}

/* A schedule over the node (and the network); a failure on any rank fails
 * the call on every rank, and the communicator uses the previous component
 * from then on. */
static hier_status_t hier_comm_run(hier_comm_t *c, hier_sched_args_t *args, const void *sbuf, void *rbuf,
                                   hier_reduce_kernel_t kernel)
{
    hier_status_t st = hier_node_run(c, args, sbuf, rbuf, kernel);
    if (st != HIER_OK && st != HIER_ERR_NOT_SUPPORTED) {
        c->state = HIER_COMM_REFUSED;
        c->refused = HIER_PATH_FALLBACK_SHM;
    }
    return st;
}

static hier_exec_ll_t hier_comm_ll(hier_comm_t *c)
{
    return (hier_exec_ll_t){.shm = c->node->small.seg, .wait = &c->node->wait};
}

/* Small enough for the low-latency path (auto, or forced and it fits). */
static int hier_coll_use_ll(int algo, size_t bytes, size_t ll_max)
{
    size_t max = ll_max < hier_exec_ll_capacity() ? ll_max : hier_exec_ll_capacity();
    if (algo == HIER_ALGO_LL) return bytes <= hier_exec_ll_capacity();
    return algo == HIER_ALGO_AUTO && bytes <= max;
}

/* Allreduce: flat or NUMA tree when small, then the segment's pipelined
 * reduce-scatter + allgather, then single copy from allreduce_cma_min up. */
static hier_sched_kind_t hier_comm_pick_allreduce(hier_comm_t *c, size_t bytes, hier_path_t *path_p)
{
    int algo = hier_params.allreduce_algorithm;
    if (algo == HIER_ALGO_AUTO || algo == HIER_ALGO_LL) {
        if (bytes > hier_params.allreduce_flat_max)
            algo = hier_params.cma && bytes >= hier_params.allreduce_cma_min && hier_node_cma(c) ? HIER_ALGO_CMA
                                                                                                 : HIER_ALGO_RSAG;
        else if (c->node->groups.ngroups > 1 && (size_t)c->layout.nranks >= hier_params.allreduce_numa_min_ranks)
            algo = HIER_ALGO_NUMA;
        else
            algo = HIER_ALGO_FLAT;
    }
    if (algo == HIER_ALGO_CMA && !hier_node_cma(c)) algo = HIER_ALGO_RSAG; /* forced, but the kernel said no */
    switch (algo) {
    case HIER_ALGO_NUMA: *path_p = HIER_PATH_SHM_NUMA; return HIER_SCHED_ALLREDUCE_NUMA;
    case HIER_ALGO_RSAG: *path_p = HIER_PATH_SHM_RSAG; return HIER_SCHED_ALLREDUCE_RSAG;
    case HIER_ALGO_CMA: *path_p = HIER_PATH_CMA_RSAG; return HIER_SCHED_CMA_ALLREDUCE;
    default: *path_p = HIER_PATH_SHM_FLAT; return HIER_SCHED_ALLREDUCE_FLAT;
    }
}

/* Allgather and reduce_scatter: the segment, or single copy from `cma_min` up. */
static int hier_comm_use_cma(hier_comm_t *c, int algo, size_t bytes, size_t cma_min, int allowed)
{
    if (!allowed || !(algo == HIER_ALGO_CMA || (algo == HIER_ALGO_AUTO && hier_params.cma && bytes >= cma_min)))
        return 0;
    return hier_node_cma(c);
}

/* Several nodes: one owner per node below net_split_min bytes per rank (a
 * message per node, not per rank), else every local rank with its piece. */
static int hier_comm_net_pieces(const hier_comm_t *c, size_t bytes_per_rank)
{
    return bytes_per_rank < hier_params.net_split_min ? 1 : c->layout.pieces;
}

/* Between nodes, recursive doubling (fewest rounds) up to net_rd_max bytes
 * per rank, net_rd_max_two_nodes on two nodes (there it moves as many bytes
 * as Rabenseifner in one round instead of two, but every node reduces the
 * whole vector instead of half); above, Rabenseifner (the ring's data in log
 * rounds) on a power-of-two node count and the ring otherwise; or as forced. */
static int hier_comm_net_algo(const hier_comm_t *c, size_t bytes_per_rank)
{
    int algo = hier_params.net_algorithm, pow2 = (c->layout.nnodes & (c->layout.nnodes - 1)) == 0;
    size_t rd_max = c->layout.nnodes == 2 ? hier_params.net_rd_max_two_nodes : hier_params.net_rd_max;
    if (algo != HIER_ALGO_AUTO) return algo;
    if (bytes_per_rank <= rd_max) return HIER_ALGO_RD;
    return pow2 ? HIER_ALGO_RH : HIER_ALGO_RING;
}

static int hier_comm_net_rd(const hier_comm_t *c, size_t bytes_per_rank)
{
    return hier_comm_net_algo(c, bytes_per_rank) == HIER_ALGO_RD;
}

/* Allgather and reduce_scatter between nodes have recursive doubling and the
 * ring: a forced net_algorithm rd is kept, any other forced one is the ring.
 * Auto: as allreduce, except that allgather on two nodes always exchanges
 * once (recursive doubling), and reduce_scatter on two nodes of one rank each
 * always takes the ring, which there also takes one round and one message,
 * of half the piece instead of all of it (with more ranks per node it sends
 * a range per rank: slower for small pieces, measured). */
static int hier_comm_net_rd_allgather(const hier_comm_t *c, size_t block_bytes)
{
    if (hier_params.net_algorithm != HIER_ALGO_AUTO) return hier_params.net_algorithm == HIER_ALGO_RD;
    return c->layout.nnodes == 2 || hier_comm_net_rd(c, block_bytes);
}

static int hier_comm_net_rd_reduce_scatter(const hier_comm_t *c, size_t bytes_per_rank)
{
    if (hier_params.net_algorithm != HIER_ALGO_AUTO) return hier_params.net_algorithm == HIER_ALGO_RD;
    return !(c->layout.nnodes == 2 && c->size == 2) && bytes_per_rank <= hier_params.net_rd_max &&
           hier_comm_net_rd(c, bytes_per_rank);
}

static hier_sched_kind_t hier_comm_pick_net_allreduce(const hier_comm_t *c, size_t bytes, hier_sched_args_t *args,
                                                      hier_path_t *path_p)
{
    args->pieces = hier_comm_net_pieces(c, bytes);
    int algo = hier_comm_net_algo(c, bytes);
    switch (algo) {
    case HIER_ALGO_RD: args->net_kind = HIER_NET_RD_ALLREDUCE; *path_p = HIER_PATH_NET_RD; break;
    case HIER_ALGO_RH: args->net_kind = HIER_NET_RH_ALLREDUCE; *path_p = HIER_PATH_NET_RH; break;
    default: args->net_kind = HIER_NET_RING_ALLREDUCE; *path_p = HIER_PATH_NET_RING; break;
    }
    return HIER_SCHED_HIER_ALLREDUCE;
}

/* A one-rank communicator: the result is the input. */
static void hier_coll_self(const void *sbuf, void *rbuf, size_t bytes)
{
    if (sbuf) memcpy(rbuf, sbuf, bytes);
}

hier_status_t hier_coll_host_allreduce(hier_comm_t *c, const void *sbuf, void *rbuf, size_t count, hier_dtype_t dt,
                                       hier_op_t op, hier_path_t *path_p)
{
    hier_reduce_kernel_t kernel;
    size_t esize = hier_dtype_size(dt), bytes = count * esize;
    int algo = hier_params.allreduce_algorithm;
    hier_path_t path;
    hier_status_t st;

    if (hier_reduce_kernel_get(dt, op, &kernel) != HIER_OK) {
        *path_p = HIER_PATH_FALLBACK_OP;
        return HIER_ERR_NOT_SUPPORTED;
    }
    st = hier_comm_prepare(c, algo, &path);
    if (st == HIER_IN_PROGRESS) {
        hier_coll_self(sbuf, rbuf, bytes);
        st = HIER_OK;
    } else if (st == HIER_OK && c->layout.nnodes > 1) {
        hier_sched_args_t args = {.esize = esize, .count = count, .in_place = sbuf == NULL};
        args.kind = hier_comm_pick_net_allreduce(c, bytes, &args, &path);
        st = hier_comm_run(c, &args, sbuf, rbuf, kernel);
    } else if (st == HIER_OK && hier_coll_use_ll(algo, bytes, hier_params.allreduce_ll_max)) {
        path = HIER_PATH_SHM_LL;
        hier_exec_ll_t ll = hier_comm_ll(c);
        st = hier_exec_ll_allreduce(&ll, sbuf, rbuf, count, esize, kernel);
    } else if (st == HIER_OK) {
        hier_sched_args_t args = {.kind = hier_comm_pick_allreduce(c, bytes, &path), .esize = esize,
                                  .count = count, .in_place = sbuf == NULL};
        st = hier_comm_run(c, &args, sbuf, rbuf, kernel);
    }
    if (st == HIER_OK || st == HIER_ERR_NOT_SUPPORTED) *path_p = path;
    return st;
}

hier_status_t hier_coll_host_allgather(hier_comm_t *c, const void *sbuf, void *rbuf, size_t block_bytes,
                                       hier_path_t *path_p)
{
    int algo = hier_params.allgather_algorithm;
    hier_path_t path;
    hier_status_t st = hier_comm_prepare(c, algo, &path);

    if (st == HIER_IN_PROGRESS) {
        hier_coll_self(sbuf, rbuf, block_bytes);
        st = HIER_OK;
    } else if (st == HIER_OK && c->layout.nnodes > 1) {
        hier_sched_args_t args = {.kind = HIER_SCHED_HIER_ALLGATHER, .esize = 1, .count = block_bytes,
                                  .in_place = sbuf == NULL, .pieces = hier_comm_net_pieces(c, block_bytes),
                                  .net_kind = hier_comm_net_rd_allgather(c, block_bytes) ? HIER_NET_RD_ALLGATHER
                                                                                         : HIER_NET_RING_ALLGATHER};
        path = HIER_PATH_NET_COPY;
        st = hier_comm_run(c, &args, sbuf, rbuf, (hier_reduce_kernel_t){0});
    } else if (st == HIER_OK && hier_coll_use_ll(algo, block_bytes, hier_params.allgather_ll_max)) {
        path = HIER_PATH_SHM_LL;
        hier_exec_ll_t ll = hier_comm_ll(c);
        st = hier_exec_ll_allgather(&ll, sbuf, rbuf, block_bytes);
    } else if (st == HIER_OK) {
        int cma = hier_comm_use_cma(c, algo, block_bytes, hier_params.allgather_cma_min, 1);
        hier_sched_args_t args = {.kind = cma ? HIER_SCHED_CMA_ALLGATHER : HIER_SCHED_ALLGATHER, .esize = 1,
                                  .count = block_bytes, .in_place = sbuf == NULL};
        path = cma ? HIER_PATH_CMA_COPY : HIER_PATH_SHM_COPY;
        st = hier_comm_run(c, &args, sbuf, rbuf, (hier_reduce_kernel_t){0});
    }
    if (st == HIER_OK || st == HIER_ERR_NOT_SUPPORTED) *path_p = path;
    return st;
}

hier_status_t hier_coll_host_reduce_scatter(hier_comm_t *c, const void *sbuf, void *rbuf, const size_t *rcounts,
                                            hier_dtype_t dt, hier_op_t op, hier_path_t *path_p)
{
    hier_reduce_kernel_t kernel;
    size_t esize = hier_dtype_size(dt), *displs, total = 0;
    int algo = hier_params.reduce_scatter_algorithm;
    hier_path_t path;
    hier_status_t st;

    if (hier_reduce_kernel_get(dt, op, &kernel) != HIER_OK) {
        *path_p = HIER_PATH_FALLBACK_OP;
        return HIER_ERR_NOT_SUPPORTED;
    }
    st = hier_comm_prepare(c, algo, &path);
    if (st == HIER_IN_PROGRESS) {
        hier_coll_self(sbuf, rbuf, rcounts[0] * esize);
        *path_p = path;
        return HIER_OK;
    }
    if (st != HIER_OK) {
        *path_p = path;
        return st;
    }
    displs = c->rs_displs; /* (made at set-up) */
    for (int r = 0; r < c->size; r++) {
        displs[r] = total;
        total += rcounts[r];
    }
    if (c->layout.nnodes > 1) {
        size_t per_rank = total * esize / (size_t)c->size;
        hier_sched_args_t args = {.kind = HIER_SCHED_HIER_REDUCE_SCATTER, .esize = esize, .count = total,
                                  .rcounts = rcounts, .rdispls = displs, .in_place = sbuf == NULL,
                                  .pieces = hier_comm_net_pieces(c, per_rank),
                                  .net_kind = hier_comm_net_rd_reduce_scatter(c, per_rank)
                                                  ? HIER_NET_RD_ALLREDUCE : HIER_NET_RING_REDUCE_SCATTER};
        path = HIER_PATH_NET_RS;
        st = hier_comm_run(c, &args, sbuf, rbuf, kernel);
    } else if (hier_coll_use_ll(algo, total * esize, hier_params.reduce_scatter_ll_max)) {
        path = HIER_PATH_SHM_LL;
        hier_exec_ll_t ll = hier_comm_ll(c);
        st = hier_exec_ll_reduce_scatter(&ll, sbuf, rbuf, rcounts, displs, total, esize, kernel);
    } else {
        int cma = hier_comm_use_cma(c, algo, total * esize, hier_params.reduce_scatter_cma_min, sbuf != NULL);
        hier_sched_args_t args = {.kind = cma ? HIER_SCHED_CMA_REDUCE_SCATTER : HIER_SCHED_REDUCE_SCATTER,
                                  .esize = esize, .count = total, .rcounts = rcounts, .rdispls = displs,
                                  .in_place = sbuf == NULL};
        path = cma ? HIER_PATH_CMA_RS : HIER_PATH_SHM_RS;
        st = hier_comm_run(c, &args, sbuf, rbuf, kernel);
    }
    if (st == HIER_OK) *path_p = path;
    return st;
}


