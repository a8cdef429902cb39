/* hier_select.h: which algorithm serves a call. One list of rules per
 * collective and level (one node, between nodes; hier_select_rules.h),
 * read top to bottom: the first rule whose conditions hold serves the
 * call. A forced algorithm (coll_hier_<coll>_algorithm,
 * coll_hier_net_algorithm) serves where its hard conditions hold, auto's
 * choice otherwise. Pure: it reads the parameters, the rules and the shape
 * it is given, nothing else, so every rank of a communicator chooses alike
 * (the set-up agrees on the rules' digest) and a unit test sweeps it. */
#ifndef HIER_SELECT_H
#define HIER_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_params.h"
#include "base/hier_stats.h"
#include "sched/hier_sched.h"
#include "select/hier_select_rules.h"

/* A range of blocks, [lo, hi]; lo > hi: none. */
typedef struct {
    size_t lo, hi;
} hier_select_window_t;
#define HIER_SELECT_WINDOW_ANY ((hier_select_window_t){0, SIZE_MAX})
#define HIER_SELECT_WINDOW_NONE ((hier_select_window_t){SIZE_MAX, 0})

/* What the communicator looks like to the rules: the same on every rank
 * (the node's fields are given on one node only, 0 otherwise: nodes may
 * differ in them, and the network's rules must not read them). */
typedef struct {
    uint32_t size;        /* ranks in the communicator */
    uint32_t nnodes;
    uint32_t local_ranks; /* one node: its ranks */
    uint32_t numa_groups; /* one node: NUMA domains among its ranks */
    int crowded;          /* one node: more ranks than cores (any rank of it says so) */
    int cma;              /* one node, single copy: -1 not probed yet, 0 unavailable, 1 available */
    hier_select_window_t cma_window; /* one node, probed: the allgather blocks single copy wins at */
    size_t ll_capacity;   /* the most bytes the low-latency area holds */
    size_t ll_top[HIER_RULE_COLLS]; /* one node, measured: by collective, the largest call low latency serves (0: not yet) */
} hier_select_shape_t;

/* The choice: a low-latency call (path HIER_PATH_SHM_LL), or a schedule. */
typedef struct {
    hier_path_t path;
    hier_sched_kind_t kind;
    hier_net_kind_t net_kind; /* several nodes: between them */
    int split;                /* several nodes: every local rank drives the network with its own piece */
    int net_radix;            /* several nodes, rabenseifner: the largest radix */
    size_t chunk;             /* the rule's chunk=, unsigned its depth=: caps on the parameters' */
    unsigned depth;           /* (0: none; hier_select_chunk.h applies them) */
} hier_select_t;

/* `bytes`: allreduce, the vector; allgather, one rank's block; reduce_scatter,
 * the whole send buffer. One node's thresholds speak of these; between
 * nodes, of the vector that crosses (allgather: the result, block x size),
 * because that is what the network moves whatever the ranks. `coll` is one of ALLREDUCE,
 * ALLGATHER, REDUCE_SCATTER. When the choice is single copy and
 * shape->cma is -1, the caller probes it (hier_node_cma, collective: every
 * rank gets here alike) and selects again with the answer. */
void hier_select(const hier_select_shape_t *shape, hier_coll_t coll, size_t bytes, hier_select_t *out);
/* The same, and the rule that chose (NULL: the algorithm was forced). */
void hier_select_explain(const hier_select_shape_t *shape, hier_coll_t coll, size_t bytes, hier_select_t *out,
                         const hier_rule_t **rule_p);
/* Whether the choice runs as the pair path (exec/hier_exec_pair.h), one
 * message each way from the caller's buffers, instead of its schedule:
 * two nodes of one rank each, a choice whose folds the pair's are (an
 * allreduce's recursive doubling; any allgather or reduce_scatter: each
 * element folded once, mine first, whatever the algorithm), the whole
 * vector (allgather: block x size) within coll_hier_net_pair_max. */
static inline int hier_select_pair(const hier_select_shape_t *shape, hier_coll_t coll, size_t vector_bytes,
                                   const hier_select_t *choice)
{
    if (shape->size != 2 || shape->nnodes != 2 || vector_bytes > hier_params.net_pair_max) return 0;
    switch (coll) {
    case HIER_COLL_ALLREDUCE: return choice->path == HIER_PATH_NET_RD;
    case HIER_COLL_ALLGATHER: return choice->path == HIER_PATH_NET_COPY;
    case HIER_COLL_REDUCE_SCATTER: return choice->path == HIER_PATH_NET_RS;
    default: return 0;
    }
}
/* A node's measurement of the allgather's two paths (hier_comm_probe.c):
 * n block sizes, ascending, and the slowest rank's time of a call through
 * the segment and by single copy at each, the same on every rank. */
#define HIER_SELECT_PROBES 6
typedef struct {
    int n;
    size_t block[HIER_SELECT_PROBES];
    uint64_t t_shm[HIER_SELECT_PROBES], t_cma[HIER_SELECT_PROBES];
} hier_select_probe_t;
/* The window where single copy serves: from the first probe it wins at to
 * where it stops winning (a bound between two probes: their geometric
 * mean; before the first probe or past the last: open), none when it wins
 * at none (pure: every rank draws the same). */
hier_select_window_t hier_select_cma_window(const hier_select_probe_t *p);
/* A node's measurement of the low-latency cut-off (hier_comm_probe.c):
 * n sizes, ascending from HIER_SELECT_LL_PROBE_MIN, and the slowest rank's
 * time of a call by the low-latency path and by the schedule that serves
 * it without, the same on every rank. Below the first size low latency
 * always serves (no barrier, no copy through a slot: it wins there on every
 * CPU measured), so the measurement changes no choice made before it. */
#define HIER_SELECT_LL_PROBE_MIN 1024
typedef struct {
    int n;
    size_t bytes[HIER_SELECT_PROBES];
    uint64_t t_ll[HIER_SELECT_PROBES], t_sched[HIER_SELECT_PROBES];
} hier_select_ll_probe_t;
/* The sizes to time for a collective on this shape: doubling from
 * HIER_SELECT_LL_PROBE_MIN while the low-latency area holds them. */
void hier_select_ll_plan(const hier_select_shape_t *shape, hier_select_ll_probe_t *p);
/* The cut-off: low latency serves up to the size from which the schedule
 * is more than HIER_SELECT_LL_MARGIN percent faster at every size timed (a
 * bound between two sizes: their geometric mean; the schedule faster at
 * the last by less: any the area holds). Low latency's cost per byte is
 * the higher, so the schedule's wins are those from some size on: one at a
 * smaller size alone is noise. Below the first size always (pure: every
 * rank draws the same). */
#define HIER_SELECT_LL_MARGIN 10
size_t hier_select_ll_top(const hier_select_ll_probe_t *p);
/* Whether a call's choice waits for the node's measurement of the
 * cut-off: one node, not measured yet, a size the measurement decides,
 * and a rule that serves it by low latency where it pays (ll_pays, the
 * collective's ll_max parameter 0: not forced, not fixed). A shape whose
 * ll_top is SIZE_MAX chooses as if it paid at every size the area holds. */
int hier_select_ll_due(const hier_select_shape_t *shape, hier_coll_t coll, size_t bytes);
/* How a call's data travels, besides the algorithm: decided from what every
 * rank knows alike, so every rank takes the same steps whatever its own
 * buffers (a rank's host or device memory changes only how it stages what
 * every rank runs: hier_stage.c). */
typedef struct {
    hier_coll_t coll;
    size_t bytes;             /* the whole vector (allgather: block x size) */
    size_t block;             /* allgather: one rank's block */
    uint32_t size;            /* ranks */
    int device_possible;      /* some rank has a device backend (said at set-up) */
    int peer_direct;          /* the communicator's vote: -1 not taken yet, 0 off for good, 1 on */
} hier_select_route_in_t;
typedef struct {
    int peer_direct;          /* an allgather NIC to NIC: voted on now if not yet (hier_comm_pd.c) */
    int chunked;              /* every rank runs the call as the staging pipeline's chunks */
} hier_select_route_t;
void hier_select_route(const hier_select_route_in_t *in, hier_select_route_t *out);

/* The algorithm the user set for a collective (coll_hier_<coll>_algorithm:
 * HIER_ALGO_AUTO, a forced one, or HIER_ALGO_FALLBACK): whether hier may
 * serve it at all, and whether its first call may be piggybacked on the set-up. */
int hier_select_algorithm(hier_coll_t coll);

/* A communicator's choices, remembered by (collective, bytes): a choice
 * depends on nothing else but the shape (and the parameters, fixed for the
 * job), and applications repeat their sizes (a solver's vectors, a
 * training step's buckets). Direct-mapped, HIER_SELECT_CACHE_SLOTS entries;
 * emptied when the one field of a shape that changes after set-up does
 * (cma: single copy probed). An all-zero cache is empty. */
#define HIER_SELECT_CACHE_SLOTS 16
typedef struct {
    struct {
        size_t bytes;
        uint8_t coll_1;       /* the collective + 1 (0: empty) */
        hier_select_t choice;
    } slot[HIER_SELECT_CACHE_SLOTS];
    int cma_1;                /* the shape's cma + 2 they were made for (0: none yet) */
    unsigned last_1;          /* the slot of the last choice + 1 (a loop asks one size again and again) */
    uint32_t told[3];         /* by collective, the rules whose choice coll_hier_verbose 2 named (bit 31: forced) */
} hier_select_cache_t;
/* hier_select's choice, from the cache or made and kept there: the last
 * one's slot is looked at first, inline (a loop asks one size again and
 * again), then the slot of (coll, bytes). */
void hier_select_cached_miss(hier_select_cache_t *cache, const hier_select_shape_t *shape, hier_coll_t coll,
                             size_t bytes, hier_select_t *out);
/* The last choice, when it was for (coll, bytes) and a shape of this cma: 1. */
static inline int hier_select_cached_last(const hier_select_cache_t *cache, int cma, hier_coll_t coll, size_t bytes,
                                          hier_select_t *out)
{
    unsigned i = cache->last_1 - 1;
    if (!cache->last_1 || cache->cma_1 != cma + 2 || cache->slot[i].coll_1 != (uint8_t)(coll + 1) ||
        cache->slot[i].bytes != bytes)
        return 0;
    *out = cache->slot[i].choice;
    return 1;
}
static inline void hier_select_cached(hier_select_cache_t *cache, const hier_select_shape_t *shape, hier_coll_t coll,
                                      size_t bytes, hier_select_t *out)
{
    if (!hier_select_cached_last(cache, shape->cma, coll, bytes, out))
        hier_select_cached_miss(cache, shape, coll, bytes, out);
}

#endif
