/* hier_select.c: the rules tables and the one loop that reads them. The
 * thresholds are parameters (base/hier_params.c holds every default and
 * says why); a rule points at the one it uses. */
#include "select/hier_select.h"

#include <math.h>

#include "base/hier_params.h"
#include "sched/hier_sched_pattern.h"

/* What a rule may ask of the call and the communicator. */
enum {
    HIER_SEL_TWO_NODES = 1u << 0,
    HIER_SEL_MANY_NODES = 1u << 1,  /* three or more */
    HIER_SEL_NO_FOLD = 1u << 2,     /* rabenseifner's radices make the node count: no node folded */
    HIER_SEL_POW2_NODES = 1u << 8,
    HIER_SEL_RING_NODES = 1u << 3,  /* at most net_ring_max_nodes nodes */
    HIER_SEL_NUMA = 1u << 4,        /* several NUMA domains and allreduce_numa_min_ranks local ranks */
    HIER_SEL_LL_FITS = 1u << 5,     /* the low-latency area holds the call */
    HIER_SEL_CMA = 1u << 6,         /* single copy available, or not probed yet */
    HIER_SEL_OWN_CORES = 1u << 7,   /* every local rank has a core of its own */
    HIER_SEL_CMA_PAYS = 1u << 9,    /* the block is within the window where single copy wins (hier_select_cma_top) */
    HIER_SEL_FORCED_ONLY = 1u << 30 /* never holds: a rule only forcing reaches */
};

typedef struct {
    hier_algo_t algo;           /* the name that forces it */
    unsigned need;              /* conditions under auto */
    unsigned need_forced;       /* conditions even when forced (auto needs them too) */
    const size_t *min, *max;    /* auto: bytes in [*min, *max]; NULL: unbounded */
    hier_path_t path;
    hier_sched_kind_t kind;
    hier_net_kind_t net_kind;
} hier_select_rule_t;

typedef struct {
    const hier_select_rule_t *rules;
    size_t nrules;
    const int *forced;          /* the parameter that forces a rule */
    int times_size;             /* the rules' sizes are bytes x size: what crosses between nodes */
} hier_select_table_t;

#define HIER_P(name) (&hier_params.name)

/* One node. Allreduce: low latency, then flat (or the NUMA tree) while
 * reducing everything everywhere is cheap, then the pipelined
 * reduce-scatter + allgather. */
static const hier_select_rule_t hier_select_allreduce[] = {
    {HIER_ALGO_LL, 0, HIER_SEL_LL_FITS, NULL, HIER_P(allreduce_ll_max), HIER_PATH_SHM_LL, 0, 0},
    {HIER_ALGO_NUMA, HIER_SEL_NUMA, 0, NULL, HIER_P(allreduce_flat_max), HIER_PATH_SHM_NUMA,
     HIER_SCHED_ALLREDUCE_NUMA, 0},
    {HIER_ALGO_FLAT, 0, 0, NULL, HIER_P(allreduce_flat_max), HIER_PATH_SHM_FLAT, HIER_SCHED_ALLREDUCE_FLAT, 0},
    {HIER_ALGO_RSAG, 0, 0, NULL, NULL, HIER_PATH_SHM_RSAG, HIER_SCHED_ALLREDUCE_RSAG, 0},
};

/* Allgather: low latency, then single copy when every rank has its own
 * core (crowded, the page pinning costs more than it saves) and the block
 * is within the window where the node measured it faster than the
 * segment's two copies (hier_select_cma_window), then the segment. */
static const hier_select_rule_t hier_select_allgather[] = {
    {HIER_ALGO_LL, 0, HIER_SEL_LL_FITS, NULL, HIER_P(allgather_ll_max), HIER_PATH_SHM_LL, 0, 0},
    {HIER_ALGO_CMA, HIER_SEL_OWN_CORES | HIER_SEL_CMA_PAYS, HIER_SEL_CMA, HIER_P(allgather_cma_min), NULL,
     HIER_PATH_CMA_COPY, HIER_SCHED_CMA_ALLGATHER, 0},
    {HIER_ALGO_SHM, 0, 0, NULL, NULL, HIER_PATH_SHM_COPY, HIER_SCHED_ALLGATHER, 0},
};

static const hier_select_rule_t hier_select_reduce_scatter[] = {
    {HIER_ALGO_LL, 0, HIER_SEL_LL_FITS, NULL, HIER_P(reduce_scatter_ll_max), HIER_PATH_SHM_LL, 0, 0},
    {HIER_ALGO_SHM, 0, 0, NULL, NULL, HIER_PATH_SHM_RS, HIER_SCHED_REDUCE_SCATTER, 0},
};

/* Between nodes. Allreduce: recursive doubling (fewest rounds) while small,
 * then Rabenseifner in mixed radix (the ring's data in
 * 2 log(nodes)/log(net_radix_max) rounds) where the node count needs no
 * fold, else the ring up to net_ring_max_nodes (folding doubles the traffic
 * of the folded nodes, and there the ring's rounds still cost less) and the
 * folded Rabenseifner beyond (at 1,000 nodes the ring's 2 x 999 rounds per
 * chunk are predicted 67 times slower on p4d: docs/model.md). Recursive doubling's
 * limit is where it stopped paying on three and four namespace nodes (16
 * KiB: 0.13 ms against 0.17; 64 KiB: 1.0-2.5 ms against 0.5-0.7). On two
 * nodes it moves no more than Rabenseifner, in one round, so it serves up
 * to a larger size. */
static const hier_select_rule_t hier_select_net_allreduce[] = {
    {HIER_ALGO_RD, HIER_SEL_TWO_NODES, 0, NULL, HIER_P(net_rd_max_two_nodes), HIER_PATH_NET_RD,
     HIER_SCHED_HIER_ALLREDUCE, HIER_NET_RD_ALLREDUCE},
    {HIER_ALGO_RD, HIER_SEL_MANY_NODES, 0, NULL, HIER_P(net_rd_max), HIER_PATH_NET_RD, HIER_SCHED_HIER_ALLREDUCE,
     HIER_NET_RD_ALLREDUCE},
    {HIER_ALGO_RH, HIER_SEL_NO_FOLD, 0, NULL, NULL, HIER_PATH_NET_RH, HIER_SCHED_HIER_ALLREDUCE,
     HIER_NET_RH_ALLREDUCE},
    {HIER_ALGO_RING, HIER_SEL_RING_NODES, 0, NULL, NULL, HIER_PATH_NET_RING, HIER_SCHED_HIER_ALLREDUCE,
     HIER_NET_RING_ALLREDUCE},
    {HIER_ALGO_RH, 0, 0, NULL, NULL, HIER_PATH_NET_RH, HIER_SCHED_HIER_ALLREDUCE, HIER_NET_RH_ALLREDUCE},
};

/* Allgather: on two nodes recursive doubling (one exchange of the whole
 * block), and while small on a power of two (no fold: fewest messages).
 * Otherwise Rabenseifner's allgather half where no node is folded: what the
 * ring sends in fewer rounds, and no fold as recursive doubling needs
 * (three namespace nodes, 64 KiB: 0.16 ms against 0.86; docs/model.md); with
 * a fold, Rabenseifner while small (the fold costs little there), the ring
 * up to net_ring_max_nodes, Rabenseifner beyond. */
static const hier_select_rule_t hier_select_net_allgather[] = {
    {HIER_ALGO_RD, HIER_SEL_TWO_NODES, 0, NULL, NULL, HIER_PATH_NET_COPY, HIER_SCHED_HIER_ALLGATHER,
     HIER_NET_RD_ALLGATHER},
    {HIER_ALGO_RD, HIER_SEL_POW2_NODES, 0, NULL, HIER_P(net_rd_max), HIER_PATH_NET_COPY, HIER_SCHED_HIER_ALLGATHER,
     HIER_NET_RD_ALLGATHER},
    {HIER_ALGO_RH, HIER_SEL_NO_FOLD, 0, NULL, NULL, HIER_PATH_NET_COPY, HIER_SCHED_HIER_ALLGATHER,
     HIER_NET_RH_ALLGATHER},
    {HIER_ALGO_RH, 0, 0, NULL, HIER_P(net_rd_max), HIER_PATH_NET_COPY, HIER_SCHED_HIER_ALLGATHER,
     HIER_NET_RH_ALLGATHER},
    {HIER_ALGO_RING, HIER_SEL_RING_NODES, 0, NULL, NULL, HIER_PATH_NET_COPY, HIER_SCHED_HIER_ALLGATHER,
     HIER_NET_RING_ALLGATHER},
    {HIER_ALGO_RH, 0, 0, NULL, NULL, HIER_PATH_NET_COPY, HIER_SCHED_HIER_ALLGATHER, HIER_NET_RH_ALLGATHER},
};

/* Reduce_scatter: two nodes take the ring (one round and one message of
 * half the piece, where recursive doubling sends all of it: measured on two
 * namespace nodes x 2 ranks, 1 MiB, 2.7 ms against 4.7; Rabenseifner is the
 * same exchange there). On more, as allgather: recursive doubling would
 * allreduce the whole piece, log2(nodes) times the data (three namespace
 * nodes, 512 KiB: 9.2 ms against Rabenseifner's 2.9). */
static const hier_select_rule_t hier_select_net_reduce_scatter[] = {
    {HIER_ALGO_RING, HIER_SEL_TWO_NODES, 0, NULL, NULL, HIER_PATH_NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER,
     HIER_NET_RING_REDUCE_SCATTER},
    {HIER_ALGO_RH, HIER_SEL_NO_FOLD, 0, NULL, NULL, HIER_PATH_NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER,
     HIER_NET_RH_REDUCE_SCATTER},
    {HIER_ALGO_RH, 0, 0, NULL, HIER_P(net_rd_max), HIER_PATH_NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER,
     HIER_NET_RH_REDUCE_SCATTER},
    {HIER_ALGO_RD, HIER_SEL_FORCED_ONLY, 0, NULL, NULL, HIER_PATH_NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER,
     HIER_NET_RD_ALLREDUCE},
    {HIER_ALGO_RING, HIER_SEL_RING_NODES, 0, NULL, NULL, HIER_PATH_NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER,
     HIER_NET_RING_REDUCE_SCATTER},
    {HIER_ALGO_RH, 0, 0, NULL, NULL, HIER_PATH_NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER,
     HIER_NET_RH_REDUCE_SCATTER},
};

#define HIER_TABLE(rules, forced, times_size) {rules, sizeof(rules) / sizeof(rules[0]), forced, times_size}

static const hier_select_table_t hier_select_node_tables[] = {
    [HIER_COLL_ALLREDUCE] = HIER_TABLE(hier_select_allreduce, HIER_P(allreduce_algorithm), 0),
    [HIER_COLL_ALLGATHER] = HIER_TABLE(hier_select_allgather, HIER_P(allgather_algorithm), 0),
    [HIER_COLL_REDUCE_SCATTER] = HIER_TABLE(hier_select_reduce_scatter, HIER_P(reduce_scatter_algorithm), 0),
};

static const hier_select_table_t hier_select_net_tables[] = {
    [HIER_COLL_ALLREDUCE] = HIER_TABLE(hier_select_net_allreduce, HIER_P(net_algorithm), 0),
    [HIER_COLL_ALLGATHER] = HIER_TABLE(hier_select_net_allgather, HIER_P(net_algorithm), 1),
    [HIER_COLL_REDUCE_SCATTER] = HIER_TABLE(hier_select_net_reduce_scatter, HIER_P(net_algorithm), 0),
};

/* Peer direct: device allgathers with blocks of device_peer_direct_min
 * or more, unless switched off or every device buffer must be staged, on a
 * communicator that has not voted it down. Chunks: calls above
 * device_stage_chunk where some rank has a device backend (a rank with host
 * buffers runs the same chunks). */
void hier_select_route(const hier_select_route_in_t *in, hier_select_route_t *out)
{
    *out = (hier_select_route_t){0};
    if (!in->device_possible) return;
    out->peer_direct = in->coll == HIER_COLL_ALLGATHER && hier_params.device_peer_direct &&
                       !hier_params.device_force_staging && in->size >= 2 &&
                       in->block >= hier_params.device_peer_direct_min && in->peer_direct != 0;
    out->chunked = in->bytes > hier_params.device_stage_chunk;
}

int hier_select_algorithm(hier_coll_t coll)
{
    return *hier_select_node_tables[coll].forced;
}

/* The largest block single copy serves under auto: the parameter, else
 * the node's measured window; before the probe, unbounded (the rule then
 * asks for the probe, which measures it). */
static size_t hier_select_cma_top(const hier_select_shape_t *s)
{
    if (hier_params.allgather_cma_max) return hier_params.allgather_cma_max;
    return s->cma < 0 ? SIZE_MAX : s->cma_max;
}

size_t hier_select_cma_window(const hier_select_probe_t *p)
{
    for (int i = 0; i < p->n; i++) {
        if (p->t_cma[i] < p->t_shm[i]) continue;
        if (i == 0) return 0;
        double mid = sqrt((double)p->block[i - 1] * (double)p->block[i]); /* (the crossover, on a log scale) */
        return (size_t)mid;
    }
    return SIZE_MAX;
}

static unsigned hier_select_features(const hier_select_shape_t *s, size_t bytes)
{
    unsigned f = 0;
    if (s->nnodes == 2) f |= HIER_SEL_TWO_NODES;
    if (s->nnodes > 2) f |= HIER_SEL_MANY_NODES;
    if (s->nnodes > 1 && hier_radix((int)s->nnodes, hier_params.net_radix_max).fold.rem == 0) f |= HIER_SEL_NO_FOLD;
    if (hier_params.net_ring_max_nodes > 0 && s->nnodes <= (uint32_t)hier_params.net_ring_max_nodes)
        f |= HIER_SEL_RING_NODES; /* (a negative limit is no ring, not every ring) */
    if ((s->nnodes & (s->nnodes - 1)) == 0) f |= HIER_SEL_POW2_NODES;
    if (s->numa_groups > 1 && s->local_ranks >= hier_params.allreduce_numa_min_ranks) f |= HIER_SEL_NUMA;
    if (bytes <= s->ll_capacity) f |= HIER_SEL_LL_FITS;
    if (s->cma != 0) f |= HIER_SEL_CMA;
    if (bytes <= hier_select_cma_top(s)) f |= HIER_SEL_CMA_PAYS;
    if (!s->crowded) f |= HIER_SEL_OWN_CORES;
    return f;
}

static int hier_select_holds(const hier_select_rule_t *r, unsigned has, size_t bytes)
{
    unsigned need = r->need | r->need_forced;
    return (has & need) == need && (!r->min || bytes >= *r->min) && (!r->max || bytes <= *r->max);
}

/* The forced rule, else the first rule that holds; the last always holds. */
static const hier_select_rule_t *hier_select_rule(const hier_select_table_t *t, unsigned has, size_t bytes)
{
    if (*t->forced != HIER_ALGO_AUTO)
        for (size_t i = 0; i < t->nrules; i++)
            if ((int)t->rules[i].algo == *t->forced && (has & t->rules[i].need_forced) == t->rules[i].need_forced)
                return &t->rules[i];
    for (size_t i = 0; i + 1 < t->nrules; i++)
        if (hier_select_holds(&t->rules[i], has, bytes)) return &t->rules[i];
    return &t->rules[t->nrules - 1];
}

void hier_select(const hier_select_shape_t *shape, hier_coll_t coll, size_t bytes, hier_select_t *out)
{
    int net = shape->nnodes > 1;
    const hier_select_table_t *t = net ? &hier_select_net_tables[coll] : &hier_select_node_tables[coll];
    size_t b = t->times_size ? bytes * shape->size : bytes;
    const hier_select_rule_t *r = hier_select_rule(t, hier_select_features(shape, b), b);
    *out = (hier_select_t){.path = r->path, .kind = r->kind, .net_kind = r->net_kind,
                           .split = net && b >= hier_params.net_split_min, .net_radix = hier_params.net_radix_max};
}

/* The slot of (coll, bytes): sizes of a few powers of two apart land apart. */
static size_t hier_select_slot(hier_coll_t coll, size_t bytes)
{
    uint64_t h = ((uint64_t)bytes ^ ((uint64_t)coll << 56)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 60) % HIER_SELECT_CACHE_SLOTS;
}

void hier_select_cached_miss(hier_select_cache_t *cache, const hier_select_shape_t *shape, hier_coll_t coll,
                             size_t bytes, hier_select_t *out)
{
    if (cache->cma_1 != shape->cma + 2) {
        for (size_t j = 0; j < HIER_SELECT_CACHE_SLOTS; j++) cache->slot[j].coll_1 = 0;
        cache->cma_1 = shape->cma + 2;
    }
    size_t i = hier_select_slot(coll, bytes);
    if (!(cache->slot[i].coll_1 == (uint8_t)(coll + 1) && cache->slot[i].bytes == bytes)) {
        hier_select(shape, coll, bytes, &cache->slot[i].choice);
        cache->slot[i].bytes = bytes;
        cache->slot[i].coll_1 = (uint8_t)(coll + 1);
    }
    cache->last_1 = (unsigned)i + 1;
    *out = cache->slot[i].choice;
}
