/* hier_comm_node.h: a communicator's node level (hier_comm_node.c). */
#ifndef HIER_COMM_NODE_H
#define HIER_COMM_NODE_H

#include "comm/hier_comm_state.h"
#include "exec/hier_run.h"
#include "select/hier_select_chunk.h"
#include "shm/hier_shm.h"

typedef struct {
    hier_shm_t *seg;
    hier_fabric_mr_t *mr;        /* a recycled segment's registration (my small slot) */
    int fresh;                   /* made for this set-up (else recycled) */
} hier_node_offer_t;
/* Local leader: a recycled node segment for these processes, or a fresh one. */
hier_status_t hier_node_offer(hier_comm_t *c, const uint64_t *procs, int nprocs, int fresh_only,
                              hier_node_offer_t *offer_p);
/* The others (local index me): the leader's segment, from the pool (by name) or attached; HIER_ERR_SHM with
 * *missing_p = 1 when a recycled one is not in this process's pool. */
hier_status_t hier_node_accept(hier_comm_t *c, const char *name, int recycled, const uint64_t *procs, int nprocs,
                               int me, hier_node_offer_t *offer_p, int *missing_p);
/* The others, before the exchange (local index me): up to `most` pooled segments for these processes set aside
 * (a leader's recycled offer among them is taken without a miss); how many. */
int hier_node_set_aside(const uint64_t *procs, int nprocs, int me, hier_node_offer_t *cands, int most);
/* After it: the one whose hier_shm_id is `id` becomes *offer_p (whether found); the others (id 0: all) go back to
 * the pool. */
int hier_node_pick(hier_node_offer_t *cands, int n, uint64_t id, const uint64_t *procs, int nprocs,
                   hier_node_offer_t *offer_p);
/* Undo an offer or acceptance the set-up does not keep (back to the pool, or gone). */
void hier_node_withdraw(hier_comm_t *c, hier_node_offer_t *offer, const uint64_t *procs, int nprocs);
/* What the node level of `nranks` local ranks needs (`spans`: the communicator of `size` ranks may span nodes),
 * made before the set-up's exchange so that nothing after it fails for want of memory. */
typedef struct {
    hier_node_t *nd;
    hier_locality_t *locs;
    uint8_t **slots;
    uint32_t *order, *groups;
    hier_step_t *steps;
    hier_net_send_t *sendq;
    size_t cap;              /* steps (and sendq) made */
} hier_node_reserved_t;
hier_status_t hier_node_reserve(int nranks, int size, int spans, hier_node_reserved_t *reserved);
void hier_node_reserved_free(hier_node_reserved_t *reserved);
/* Make the node level in the reserved memory (which it empties, made or not) around the segment (which it takes),
 * with every local rank's NUMA domain; HIER_ERR_INVALID_ARG only for a NUMA index below -1. */
hier_status_t hier_node_make(hier_comm_t *c, hier_node_offer_t *offer, const int32_t *numa, int crowded,
                             hier_node_reserved_t *reserved);
/* Whether this process sees its node's `nlocal` ranks outnumber the cores. */
int hier_node_crowded(const hier_comm_t *c, int nlocal);
/* Undo hier_node_make: the segment back into the offer, nothing given back. */
void hier_node_discard(hier_comm_t *c, hier_node_offer_t *offer);
/* Give every segment back (recycled for the next communicator) and free the level. */
void hier_node_free(hier_comm_t *c);
/* The pipeline segment, made collectively (fibered: by a fiber, hier_comm_xchg.c's exchanges). */
hier_status_t hier_node_pipe_setup(hier_comm_t *c, int fibered);
/* The transport changed (every rank at the same call): the calls' decisions cached go (they set the network
 * executor and registered the tiers for the old one), and a pipeline segment whose depth is not the new
 * transport's, or too small for its chunks, goes, to be made again at its next use. */
void hier_node_pipe_redepth(hier_comm_t *c);
/* Whether a run of this shape wants the pipeline segment, not made yet (the small slots do not carry it). */
int hier_node_wants_pipe(const hier_comm_t *c, const hier_sched_args_t *args);
/* The small slots' chunk, the same on every node: the smallest node's. */
static inline size_t hier_node_small_for_comm(const hier_comm_t *c)
{
    return hier_select_small_chunk(c->layout.nnodes > 1 ? c->layout.pieces : c->layout.nranks);
}
/* The chunks in flight over a tier (one pipeline buffer is the next chunk's). */
static inline unsigned hier_node_tier_depth(const hier_tier_t *tier)
{
    return hier_shm_nbufs(tier->seg) - 1;
}
/* The in-call agreement of the node's ranks (between nodes, every rank) on the least of n values (values holds
 * n + 2), HIER_ERR_MISMATCH on every rank when the calls' signatures differ. */
hier_status_t hier_node_agree(hier_comm_t *c, int *values, int n);
/* The blocking calls' shapes cached (hier_node_run) forgotten: the tiers or the steps' memory change; one entry
 * emptied. */
void hier_node_cache_clear(hier_node_t *nd);
void hier_node_cached_drop(hier_node_cached_t *e);
/* ---- hier_comm_node_run.c ---- */
/* Single copy, probed collectively at the first call that asks: 1 yes, 0 no, or the (negative) status that failed
 * the call. */
int hier_node_cma(hier_comm_t *c);
/* Whether this rank reads every peer of its node through the kernel (after the set-up); the caller agrees on it. */
int hier_node_cma_reads(const hier_comm_t *c);
/* A run of a schedule over the node set up: args filled in, its tier and its steps' memory reserved when first
 * needed (collective steps: with no_wait, HIER_NOT_READY instead, the same on every rank). HIER_ERR_NOT_SUPPORTED:
 * no buffer within the budget carries it. */
hier_status_t hier_node_prep(hier_comm_t *c, hier_sched_args_t *args, int no_wait, hier_run_t *run_p);
/* What a request decides when made, with no collective step and making nothing: args' node fields and chunk
 * (HIER_OK), HIER_NOT_READY (a segment it needs is not made) or HIER_ERR_NOT_SUPPORTED, alike on every rank. Its
 * run is prepared (hier_node_prep, no_wait) when it begins, since the running request uses the reserved memory. */
hier_status_t hier_node_fit(hier_comm_t *c, hier_sched_args_t *args);
/* A run's end: the status it ended with, checked against the peers' signatures. */
hier_status_t hier_node_ran(hier_comm_t *c, hier_status_t st);
/* Run a schedule over the node (and the network); what this rank put on the fabric is added to *net_bytes_p. */
hier_status_t hier_node_run(hier_comm_t *c, hier_sched_args_t *args, const void *sbuf, void *rbuf,
                            hier_reduce_kernel_t kernel, uint64_t *net_bytes_p);

#endif
