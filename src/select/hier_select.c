/* hier_select.c: the one loop that reads the rules (hier_select_rules.c:
 * built in, or a rules file's), what a shape offers them, and the choices
 * around them. Thresholds are parameters (base/hier_params.c holds every
 * default and says why); a rule names the one it uses. */
#include "select/hier_select.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "select/hier_select_rules.h"
#include "sched/hier_sched_pattern.h"

/* The built-in rules are text in hier_select_rules.c; why each is what it
 * is: docs/design.md, *Choosing*. */

/* The parameter that forces each level's algorithm, by collective. */
static const int *hier_select_forced(int level, hier_coll_t coll)
{
    static const int *const node[HIER_RULE_COLLS] = {&hier_params.allreduce_algorithm,
                                                      &hier_params.allgather_algorithm,
                                                      &hier_params.reduce_scatter_algorithm};
    return level == HIER_RULE_NET ? &hier_params.net_algorithm : node[coll];
}

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
    return *hier_select_forced(HIER_RULE_NODE, coll);
}

/* Whether single copy serves an allgather of this block under auto: within
 * the parameters' bounds where set, else the node's measured window; before
 * the probe, open (the rule then asks for the probe, which measures it). */
static int hier_select_cma_pays(const hier_select_shape_t *s, size_t block)
{
    hier_select_window_t w = s->cma < 0 ? HIER_SELECT_WINDOW_ANY : s->cma_window;
    if (hier_params.allgather_cma_min) w.lo = hier_params.allgather_cma_min;
    if (hier_params.allgather_cma_max) w.hi = hier_params.allgather_cma_max;
    return block >= w.lo && block <= w.hi;
}

/* (a crossover between two blocks, on a log scale) */
static size_t hier_select_between(size_t a, size_t b)
{
    return (size_t)sqrt((double)a * (double)b);
}

hier_select_window_t hier_select_cma_window(const hier_select_probe_t *p)
{
    int i = 0, j;
    while (i < p->n && p->t_cma[i] >= p->t_shm[i]) i++; /* (a tie is the segment's) */
    if (p->n && i == p->n) return HIER_SELECT_WINDOW_NONE;
    for (j = i; j < p->n && p->t_cma[j] < p->t_shm[j]; j++) continue;
    return (hier_select_window_t){.lo = i == 0 ? 0 : hier_select_between(p->block[i - 1], p->block[i]),
                                  .hi = j == p->n ? SIZE_MAX : hier_select_between(p->block[j - 1], p->block[j])};
}

void hier_select_ll_plan(const hier_select_shape_t *s, hier_select_ll_probe_t *p)
{
    *p = (hier_select_ll_probe_t){0};
    for (size_t b = HIER_SELECT_LL_PROBE_MIN; b <= s->ll_capacity && p->n < HIER_SELECT_PROBES; b *= 2)
        p->bytes[p->n++] = b;
}

size_t hier_select_ll_top(const hier_select_ll_probe_t *p)
{
    int i = p->n;
    while (i > 0 && p->t_sched[i - 1] * (100 + HIER_SELECT_LL_MARGIN) < p->t_ll[i - 1] * 100) i--;
    if (i == p->n) return SIZE_MAX; /* (the schedule wins from size i on) */
    return i == 0 ? HIER_SELECT_LL_PROBE_MIN - 1 : hier_select_between(p->bytes[i - 1], p->bytes[i]);
}

/* Whether low latency serves a call of this many bytes under auto: up to
 * the parameter where set, else the node's measured cut-off (before it,
 * below the sizes the measurement times). */
static int hier_select_ll_pays(const hier_select_shape_t *s, hier_coll_t coll, size_t bytes)
{
    const size_t *param = hier_rules_ll_max((int)coll);
    if (!param) return 0;
    size_t top = *param ? *param : s->ll_top[coll] ? s->ll_top[coll] : HIER_SELECT_LL_PROBE_MIN - 1;
    return bytes <= top;
}

static unsigned hier_select_features(const hier_select_shape_t *s, hier_coll_t coll, size_t bytes)
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
    if (hier_select_cma_pays(s, bytes)) f |= HIER_SEL_CMA_PAYS;
    if (!s->crowded) f |= HIER_SEL_OWN_CORES;
    if (hier_select_ll_pays(s, coll, bytes)) f |= HIER_SEL_LL_PAYS;
    return f;
}

static int hier_select_holds(const hier_rule_t *r, unsigned hard, unsigned has, uint32_t count, size_t bytes)
{
    unsigned need = r->need | hard;
    return (has & need) == need && count >= r->count_lo && count <= r->count_hi && bytes >= hier_rule_bound(r->from) &&
           bytes <= hier_rule_bound(r->to);
}

/* The forced algorithm where its hard conditions hold, else the first
 * rule that holds; the last always holds. */
static void hier_select_rule(int level, hier_coll_t coll, unsigned has, uint32_t count, size_t bytes,
                             hier_select_t *out, const hier_rule_t **rule_p)
{
    const hier_rules_t *rules = hier_rules_active();
    const hier_rule_t *list = rules->rule[level][coll];
    int n = rules->n[level][coll], forced = *hier_select_forced(level, coll);
    const hier_rule_algo_t *a = hier_rules_algo(level, coll, (hier_algo_t)forced);
    const hier_rule_t *r = NULL;
    if (forced != HIER_ALGO_AUTO && a->known && (has & a->hard) == a->hard) {
        *rule_p = NULL;
    } else {
        for (int i = 0; i + 1 < n && !r; i++)
            if (hier_select_holds(&list[i], hier_rules_algo(level, coll, list[i].algo)->hard, has, count, bytes))
                r = &list[i];
        if (!r) r = &list[n - 1];
        a = hier_rules_algo(level, coll, r->algo);
        *rule_p = r;
    }
    out->path = a->path, out->kind = a->kind, out->net_kind = a->net_kind;
    if (r) out->chunk = r->chunk, out->depth = r->depth;
}

void hier_select_explain(const hier_select_shape_t *shape, hier_coll_t coll, size_t bytes, hier_select_t *out,
                         const hier_rule_t **rule_p)
{
    int level = shape->nnodes > 1 ? HIER_RULE_NET : HIER_RULE_NODE;
    /* (between nodes, an allgather's rules speak of the whole result: what crosses) */
    size_t b = level == HIER_RULE_NET && coll == HIER_COLL_ALLGATHER ? bytes * shape->size : bytes;
    *out = (hier_select_t){.split = level == HIER_RULE_NET && b >= hier_params.net_split_min,
                           .net_radix = hier_params.net_radix_max};
    uint32_t count = level == HIER_RULE_NET ? shape->nnodes : shape->local_ranks; /* (ppn>=, nodes<=) */
    hier_select_rule(level, coll, hier_select_features(shape, coll, b), count, b, out, rule_p);
}

void hier_select(const hier_select_shape_t *shape, hier_coll_t coll, size_t bytes, hier_select_t *out)
{
    const hier_rule_t *rule;
    hier_select_explain(shape, coll, bytes, out, &rule);
}

int hier_select_ll_due(const hier_select_shape_t *shape, hier_coll_t coll, size_t bytes)
{
    const size_t *param = hier_rules_ll_max((int)coll);
    if (shape->nnodes != 1 || shape->local_ranks < 2 || !param || *param || shape->ll_top[coll] ||
        bytes < HIER_SELECT_LL_PROBE_MIN || bytes > shape->ll_capacity)
        return 0;
    hier_select_shape_t paid = *shape; /* (as if measured to pay at every size) */
    paid.ll_top[coll] = SIZE_MAX;
    hier_select_t choice;
    const hier_rule_t *rule;
    hier_select_explain(&paid, coll, bytes, &choice, &rule);
    return choice.path == HIER_PATH_SHM_LL && rule && (rule->need & HIER_SEL_LL_PAYS);
}

/* The slot of (coll, bytes): sizes of a few powers of two apart land apart. */
static size_t hier_select_slot(hier_coll_t coll, size_t bytes)
{
    uint64_t h = ((uint64_t)bytes ^ ((uint64_t)coll << 56)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 60) % HIER_SELECT_CACHE_SLOTS;
}

/* coll_hier_verbose 2: each rule's first choice on a communicator, and where it came from. */
static void hier_select_tell(hier_select_cache_t *cache, const hier_select_shape_t *shape, hier_coll_t coll,
                             size_t bytes, const hier_select_t *choice, const hier_rule_t *rule)
{
    if (hier_log_level < HIER_LOG_CHOICE || coll >= HIER_RULE_COLLS) return;
    int level = shape->nnodes > 1 ? HIER_RULE_NET : HIER_RULE_NODE;
    const hier_rule_t *list = hier_rules_active()->rule[level][coll];
    unsigned bit = rule ? (unsigned)(rule - list) : 31;
    if (cache->told[coll] & (1u << bit)) return;
    cache->told[coll] |= 1u << bit;
    static const char *const colls[] = {"allreduce", "allgather", "reduce_scatter"};
    char from[96];
    if (!rule) snprintf(from, sizeof(from), "forced by a parameter");
    else if (rule->line) snprintf(from, sizeof(from), "rules file line %d", rule->line);
    else snprintf(from, sizeof(from), "built-in %s rule %u", level ? "net" : "node", bit + 1);
    char pipe[64] = "";
    if (choice->chunk) snprintf(pipe, sizeof(pipe), ", chunk=%zu", choice->chunk);
    if (choice->depth) snprintf(pipe + strlen(pipe), sizeof(pipe) - strlen(pipe), ", depth=%u", choice->depth);
    HIER_LOG(HIER_LOG_CHOICE, "choice on %u rank(s), %u node(s): %s of %zu B: %s (%s%s); %s", shape->size,
             shape->nnodes, colls[coll], bytes, rule ? hier_algo_name(rule->algo) : "forced",
             hier_path_name(choice->path), pipe, from);
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
        const hier_rule_t *rule;
        hier_select_explain(shape, coll, bytes, &cache->slot[i].choice, &rule);
        hier_select_tell(cache, shape, coll, bytes, &cache->slot[i].choice, rule);
        cache->slot[i].bytes = bytes;
        cache->slot[i].coll_1 = (uint8_t)(coll + 1);
    }
    cache->last_1 = (unsigned)i + 1;
    *out = cache->slot[i].choice;
}
