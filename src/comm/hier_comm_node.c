/* hier_comm_node.c: a communicator's node level: its node segment (made or
 * recycled at set-up), the in-call agreement, and the pipeline segment
 * (made at the first call too large for the small slots, within the
 * segment budget). A run over them: hier_comm_node_run.c. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_xchg.h"
#include "exec/hier_run.h"
#include "sched/hier_sched_build.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_proc.h"
#include "select/hier_select_chunk.h"
#include "shm/hier_shm_pool.h"

#define HIER_NODE_CROWDED_SPIN 0    /* polls before yielding when ranks outnumber cores */
/* Step arrays up to this many steps are made at set-up (a few KiB; large
 * communicators' allgather and reduce_scatter bounds grow with their ranks
 * and are made at their first call, with an agreement of their own). */
#define HIER_NODE_STEPS_AHEAD 256
static size_t hier_node_round64(size_t v)
{
    return (v + 63) & ~(size_t)63;
}

static hier_shm_shape_t hier_node_shape(int nranks)
{
    return (hier_shm_shape_t){.kind = HIER_SHM_NODE, .nranks = nranks, .chunk_bytes = hier_select_small_chunk(nranks)};
}

hier_status_t hier_node_offer(hier_comm_t *c, const uint64_t *procs, int nprocs, int fresh_only,
                              hier_node_offer_t *offer_p)
{
    hier_shm_shape_t shape = hier_node_shape(nprocs);
    hier_shm_pool_user_t user = {0};
    hier_node_offer_t o = {.fresh = 0};
    o.seg = fresh_only ? NULL : hier_shm_pool_take(&shape, procs, nprocs, NULL, &user);
    o.mr = user.data;
    if (!o.seg) {
        hier_status_t st = hier_shm_create(hier_params.shm_dir, &shape, &o.seg);
        if (st == HIER_OK) st = hier_shm_claim(o.seg, 0);
        if (st != HIER_OK) {
            hier_shm_detach(o.seg);
            return st;
        }
        o.fresh = 1;
    }
    (void)c;
    *offer_p = o;
    return HIER_OK;
}

hier_status_t hier_node_accept(hier_comm_t *c, const char *name, int recycled, const uint64_t *procs, int nprocs,
                               int me, hier_node_offer_t *offer_p, int *missing_p)
{
    hier_shm_shape_t shape = hier_node_shape(nprocs);
    hier_node_offer_t o = {.fresh = !recycled};
    *missing_p = 0;
    if (recycled) {
        hier_shm_pool_user_t user = {0};
        o.seg = hier_shm_pool_take(&shape, procs, nprocs, name, &user);
        o.mr = user.data;
        if (!o.seg) {
            *missing_p = 1;
            return HIER_ERR_SHM;
        }
        hier_shm_joining(o.seg, me);
    } else {
        hier_status_t st = hier_shm_attach(hier_params.shm_dir, name, &shape, &o.seg);
        if (st == HIER_OK) st = hier_shm_claim(o.seg, me);
        if (st != HIER_OK) {
            hier_shm_detach(o.seg);
            return st;
        }
    }
    (void)c;
    *offer_p = o;
    return HIER_OK;
}

/* Give a segment back: to the pool, with its registration, unless it saw an
 * error (a rank's flag is up: nothing of it is trusted again). */
static void hier_node_give_back(hier_shm_t *seg, hier_fabric_mr_t *mr, const uint64_t *procs, int nprocs,
                                hier_shm_t *node_seg)
{
    int broken = 0;
    for (int r = 0; node_seg && r < nprocs; r++)
        broken |= atomic_load_explicit(&hier_shm_ctl(node_seg, r)->error, memory_order_relaxed) != 0;
    hier_shm_pool_user_t user = {.data = mr, .release = mr ? hier_net_tier_release : NULL};
    if (broken) {
        if (user.release) user.release(mr);
        hier_shm_detach(seg);
        return;
    }
    hier_shm_pool_put(seg, procs, nprocs, user, hier_proc_shm_budget());
}

int hier_node_set_aside(const uint64_t *procs, int nprocs, int me, hier_node_offer_t *cands, int most)
{
    hier_shm_shape_t shape = hier_node_shape(nprocs);
    int n = 0;
    while (n < most) {
        hier_shm_pool_user_t user = {0};
        hier_shm_t *seg = hier_shm_pool_take(&shape, procs, nprocs, NULL, &user);
        if (!seg) break;
        hier_shm_joining(seg, me);
        cands[n++] = (hier_node_offer_t){.seg = seg, .mr = user.data};
    }
    return n;
}

int hier_node_pick(hier_node_offer_t *cands, int n, uint64_t id, const uint64_t *procs, int nprocs,
                   hier_node_offer_t *offer_p)
{
    int found = 0;
    for (int i = n - 1; i >= 0; i--) { /* (back in the order they came out) */
        if (!found && hier_shm_id(cands[i].seg) == id) {
            *offer_p = cands[i];
            found = 1;
        } else {
            hier_node_give_back(cands[i].seg, cands[i].mr, procs, nprocs, NULL);
        }
        cands[i].seg = NULL;
    }
    return found;
}

void hier_node_withdraw(hier_comm_t *c, hier_node_offer_t *o, const uint64_t *procs, int nprocs)
{
    if (!o->seg) return;
    if (o->fresh) {
        hier_shm_unlink(o->seg); /* (the creator's: a no-op for the others) */
        if (o->mr) hier_net_tier_release(o->mr);
        hier_shm_detach(o->seg);
    } else {
        hier_node_give_back(o->seg, o->mr, procs, nprocs, NULL);
    }
    o->seg = NULL;
    (void)c;
}

/* Crowded: the runtime says so, or the node's ranks exceed its online CPUs
 * (not our affinity: a rank bound to one core is not crowded). */
int hier_node_crowded(const hier_comm_t *c, int nlocal)
{
    long cpus = hier_proc_cpus();
    return (c->ops.oversubscribed && c->ops.oversubscribed()) || (cpus > 0 && nlocal > cpus);
}

/* Polls before a waiting rank yields. When ranks outnumber the cores, the
 * rank we wait for is likely waiting for our core: spinning only delays it;
 * sleeping waits only where the application's threads do not call at once
 * (docs/performance.md, "Waits on crowded nodes"). */
static void hier_node_wait_policy(const hier_comm_t *c, int crowded, hier_shm_wait_t *w)
{
    const hier_layout_t *l = &c->layout;
    *w = (hier_shm_wait_t){.nranks = l->nranks, .me = l->me, .spin_count = hier_params.spin_count,
                           .progress = hier_proc_progress, .poll = hier_chan_poll,
                           .ranks = l->node_ranks ? l->node_ranks + l->node_first[l->node] : NULL};
    if (crowded && hier_params.spin_count > HIER_NODE_CROWDED_SPIN) w->spin_count = HIER_NODE_CROWDED_SPIN;
    w->progress_every = crowded ? HIER_WAIT_PROGRESS_TURNS : 1;
    w->sleep = w->spin_count == HIER_NODE_CROWDED_SPIN && hier_params.spin_count > 0 && !hier_lock_callers_threaded();
}

static uint8_t **hier_node_slots(hier_shm_t *seg, int nranks)
{
    uint8_t **slots = malloc((size_t)nranks * sizeof(*slots));
    for (int r = 0; slots && r < nranks; r++) slots[r] = hier_shm_slot(seg, r);
    return slots;
}

/* The level and its small arrays, kept (slots, order) or not (locs), are one
 * block: a communicator's set-up makes few allocations (a one-node dup +
 * first call + free is 4-6 us, and each pair of malloc and free some 20 ns). */
typedef struct {
    hier_node_t nd;
    unsigned char tail[]; /* slots, locs, order (at sizeof(hier_node_t): a multiple of a pointer's alignment) */
} hier_node_block_t;

hier_status_t hier_node_reserve(int nranks, int size, int spans, hier_node_reserved_t *reserved)
{
    size_t n = (size_t)nranks;
    /* the steps of any call's chunk, as far as HIER_NODE_STEPS_AHEAD goes: one node, the one-node
     * kinds' bound (nranks + 8, the same for all); several, the cap (cut to the layout's need) */
    size_t steps = spans ? HIER_NODE_STEPS_AHEAD : (size_t)size + 8 <= HIER_NODE_STEPS_AHEAD ? (size_t)size + 8 : 0;
    _Static_assert(sizeof(hier_locality_t) % sizeof(uint32_t) == 0, "order follows locs");
    hier_node_block_t *b = calloc(1, sizeof(*b) + n * (sizeof(uint8_t *) + sizeof(hier_locality_t) + sizeof(uint32_t)));
    hier_node_reserved_t r = {.nd = b ? &b->nd : NULL,
                          .groups = malloc(HIER_TOPO_GROUPS_WORDS(nranks) * sizeof(*r.groups)),
                          .steps = steps ? malloc(steps * sizeof(*r.steps)) : NULL,
                          .sendq = steps && spans ? malloc(steps * sizeof(*r.sendq)) : NULL, .cap = steps};
    if (b) {
        r.slots = (uint8_t **)b->tail;
        r.locs = (hier_locality_t *)(r.slots + n);
        r.order = (uint32_t *)(r.locs + n);
    }
    if (!r.nd || !r.groups || (steps && !r.steps) || (steps && spans && !r.sendq)) {
        hier_node_reserved_free(&r);
        return HIER_ERR_NO_MEMORY;
    }
    *reserved = r;
    return HIER_OK;
}

void hier_node_reserved_free(hier_node_reserved_t *reserved)
{
    free(reserved->nd); /* (slots, locs and order with it) */
    free(reserved->groups);
    free(reserved->steps);
    free(reserved->sendq);
    *reserved = (hier_node_reserved_t){0};
}

/* An array of `cap` elements cut to `n` (n <= cap; kept whole if realloc says no). */
static void *hier_node_cut(void *p, size_t n, size_t elem)
{
    void *q = n ? realloc(p, n * elem) : NULL;
    if (!n) free(p);
    return q || !n ? q : p;
}

/* Memory for one chunk of any collective on this layout whose schedule fits
 * HIER_NODE_STEPS_AHEAD, made with the set-up (reserved before its
 * exchange), so a first call needs no agreement of its own for it (between
 * nodes that agreement was about 40 us of a dup + first 8-byte allreduce +
 * free: as much as the rest of the call). The same on every rank: it
 * depends on the layout alone. */
static void hier_node_steps_ahead(const hier_comm_t *c, hier_node_t *nd, hier_node_reserved_t *reserved)
{
    const hier_layout_t *l = &c->layout;
    hier_sched_args_t layout = {.nranks = l->nranks, .me = l->me, .node = l->node, .nnodes = l->nnodes,
                                .node_first = l->node_first, .node_ranks = l->node_ranks, .pieces = l->pieces,
                                .net_radix = hier_params.net_radix_max};
    size_t need = hier_sched_max_steps_within(&layout, HIER_NODE_STEPS_AHEAD);
    if (need > reserved->cap || (l->nnodes > 1 && !reserved->sendq)) need = 0; /* (reserved for one node) */
    /* (cut where it saves more than half: one node's reservation is close to its need already) */
    nd->steps[0] = need && need * 2 >= reserved->cap ? reserved->steps
                                                     : hier_node_cut(reserved->steps, need, sizeof(hier_step_t));
    nd->sendq = reserved->sendq ? hier_node_cut(reserved->sendq, need, sizeof(hier_net_send_t)) : NULL;
    nd->nqueues = nd->sendq != NULL;
    nd->nsteps = need;
    reserved->steps = NULL;
    reserved->sendq = NULL;
}

hier_status_t hier_node_make(hier_comm_t *c, hier_node_offer_t *o, const int32_t *numa, int crowded,
                             hier_node_reserved_t *reserved)
{
    int n = c->layout.nranks;
    hier_node_t *nd = reserved->nd;
    for (int r = 0; r < n; r++) {
        reserved->order[r] = (uint32_t)r;
        reserved->slots[r] = hier_shm_slot(o->seg, r);
        reserved->locs[r] = (hier_locality_t){.numa = numa[r]};
    }
    if (hier_topo_groups_by_numa_in(reserved->locs, n, reserved->groups, &nd->groups) != HIER_OK) {
        hier_node_reserved_free(reserved); /* (a NUMA index from a record that makes no sense) */
        return HIER_ERR_INVALID_ARG;
    }
    reserved->groups = NULL;
    nd->small = (hier_tier_t){.seg = o->seg, .mr = o->mr, .slots = reserved->slots};
    nd->order = reserved->order;
    hier_node_steps_ahead(c, nd, reserved);
    hier_node_wait_policy(c, crowded, &nd->wait);
    if (!o->fresh) hier_shm_sign_reset(o->seg, c->layout.me); /* (a past communicator's: hier_shm_joining) */
    nd->crowded = crowded;
    nd->cma = -1;
    nd->cma_window = HIER_SELECT_WINDOW_ANY;
    nd->recycled = !o->fresh;
    *reserved = (hier_node_reserved_t){0}; /* (locs went with it: the level's block) */
    c->node = nd;
    o->seg = NULL; /* (the node level's now) */
    HIER_LOG(HIER_LOG_DEBUG, "node level: %d ranks, segment %s (%s), %d NUMA group(s), %d polls before yielding", n,
             hier_shm_name(nd->small.seg), o->fresh ? "new" : "recycled", nd->groups.ngroups, nd->wait.spin_count);
    return HIER_OK;
}

void hier_node_cached_drop(hier_node_cached_t *e)
{
    free(e->rcounts);
    hier_run_cache_clear(&e->run);
    *e = (hier_node_cached_t){0};
}

void hier_node_cache_clear(hier_node_t *nd)
{
    for (unsigned i = 0; i < HIER_NODE_CACHED; i++) hier_node_cached_drop(&nd->cached[i]);
}

static void hier_node_free_arrays(hier_node_t *nd)
{
    hier_node_cache_clear(nd);
    hier_topo_groups_free(&nd->groups);
    free(nd->pipe.slots);
    free(nd->procs);
    for (unsigned i = 0; i <= HIER_RUN_DEPTH_MAX; i++) free(nd->steps[i]);
    free(nd->sendq);
    free(nd->scratch);
    free(nd); /* (small.slots and order with it: hier_node_reserve) */
}

void hier_node_discard(hier_comm_t *c, hier_node_offer_t *offer)
{
    if (!c->node) return;
    offer->seg = c->node->small.seg;
    offer->mr = c->node->small.mr;
    hier_node_free_arrays(c->node);
    c->node = NULL;
}

void hier_node_free(hier_comm_t *c)
{
    hier_node_t *nd = c->node;
    if (!nd) return;
    int n = c->layout.nranks;
    if (nd->pipe.seg) hier_node_give_back(nd->pipe.seg, nd->pipe.mr, nd->procs, n, nd->small.seg);
    hier_node_give_back(nd->small.seg, nd->small.mr, nd->procs, n, nd->small.seg);
    hier_node_free_arrays(nd);
    c->node = NULL;
}

/* An agreement inside a call (ops.agree: an allreduce of the minimum over
 * point-to-point) that also agrees every rank runs the same call:
 * 1. the node's ranks meet at a barrier, each saying it is at an agreement,
 *    and compare signatures;
 * 2. a rank that finds another call there agrees only when every rank of
 *    its node is at an agreement too (across nodes: the other nodes' ranks
 *    may be in it already), saying "mismatch"; else it leaves the call: the
 *    allreduce has no timeout, and a rank alone in it
 *    would take the user's next allreduce for the agreement;
 * 3. every rank adds h and -h of its signature's digest h (a mismatch: -1
 *    and -1): min(h) equals -min(-h) only when every h is the same.
 * values has room for n + 2. HIER_ERR_MISMATCH on every rank that agreed.
 * (A rank whose call never reaches an agreement while others of another
 * node wait in one leaves them waiting: README, Limitations.) */
hier_status_t hier_node_agree(hier_comm_t *c, int *values, int n)
{
    hier_node_t *nd = c->node;
    hier_shm_agreeing(nd->small.seg, &nd->wait, 1);                                                   /* 1 */
    hier_status_t st = hier_shm_barrier(nd->small.seg, &nd->wait);
    if (st == HIER_OK) st = hier_shm_check_peers(nd->small.seg, &nd->wait);
    int veto = st == HIER_ERR_MISMATCH && c->layout.nnodes > 1 &&                                     /* 2 */
              hier_shm_all_agreeing(nd->small.seg, &nd->wait);
    if (st != HIER_OK && !veto) {
        hier_shm_agreeing(nd->small.seg, &nd->wait, 0);
        return st;
    }
    int h = hier_sig_fold(nd->wait.sig);                                                              /* 3 */
    values[n] = veto ? -1 : h;
    values[n + 1] = veto ? -1 : -h;
    int failed = c->ops.agree(values, n + 2, c->ops.arg) != 0;
    hier_shm_agreeing(nd->small.seg, &nd->wait, 0);
    if (failed) {
        for (int i = 0; i < n; i++) values[i] = 0;
        return st;
    }
    if (st == HIER_OK && values[n] != -values[n + 1]) {
        HIER_ERROR("rank %d: ranks on another node run another collective (call signatures differ)", c->rank);
        st = HIER_ERR_MISMATCH;
    }
    return st;
}

/* ---- the pipeline segment ---- */

/* The chunks in flight the communicator's transport wants: the
 * provider's over libfabric (open: its channels carry the calls), the
 * others' over Open MPI's point-to-point. */
static unsigned hier_node_transport_depth(const hier_comm_t *c)
{
    hier_fabric_t *fab = c->net && c->net->fabric ? hier_proc_fabric() : NULL;
    return hier_select_pipe_depth(c->layout.nnodes, fab ? hier_fabric_provider(fab) : NULL);
}

/* The pipeline segment of `chunk`: a pipeline buffer for each chunk in
 * flight and one for the chunk copied in meanwhile (hier_run.c). */
static hier_shm_shape_t hier_node_pipe_shape(const hier_comm_t *c, size_t chunk)
{
    return (hier_shm_shape_t){.kind = HIER_SHM_PIPE, .nranks = c->layout.nranks, .chunk_bytes = chunk,
                              .nbufs = hier_node_transport_depth(c) + 1};
}

void hier_node_pipe_redepth(hier_comm_t *c)
{
    hier_node_t *nd = c->node;
    hier_node_cache_clear(nd);
    if (nd->pipe_state == HIER_PIPE_NONE) return;
    if (nd->pipe_state == HIER_PIPE_READY && hier_shm_nbufs(nd->pipe.seg) == hier_node_transport_depth(c) + 1)
        return;
    if (nd->pipe.seg) hier_node_give_back(nd->pipe.seg, nd->pipe.mr, nd->procs, c->layout.nranks, nd->small.seg);
    free(nd->pipe.slots);
    nd->pipe = (hier_tier_t){0};
    nd->pipe_state = HIER_PIPE_NONE;
}

/* The largest chunk up to what the parameters ask for (at least `least`)
 * whose segment fits in the budget, pooled segments given back first; 0:
 * none does. */
static size_t hier_node_affordable(const hier_comm_t *c, size_t least)
{
    size_t want = hier_select_pipe_chunk(c->layout.nnodes);
    size_t budget = hier_proc_shm_budget();
    want = hier_node_round64(want < least ? least : want);
    for (size_t chunk = want; chunk >= least; chunk = hier_node_round64(chunk / 2)) {
        hier_shm_shape_t shape = hier_node_pipe_shape(c, chunk);
        size_t size = hier_shm_size(&shape);
        if (size <= budget) hier_shm_pool_trim(budget - size);
        if (hier_shm_mapped_total() + size <= budget) return chunk;
        if (chunk == least) break;
    }
    return 0;
}

/* The leader's pipeline segment, recycled or fresh, named in the node segment's offer. */
static hier_status_t hier_node_pipe_offer(hier_comm_t *c, size_t chunk, int fresh_only, int *fresh_p)
{
    hier_node_t *nd = c->node;
    hier_shm_shape_t shape = hier_node_pipe_shape(c, chunk);
    hier_shm_pool_user_t user = {0};
    hier_shm_t *seg = fresh_only ? NULL : hier_shm_pool_take(&shape, nd->procs, c->layout.nranks, NULL, &user);
    hier_shm_offer_t *offer = hier_shm_offer(nd->small.seg);
    *fresh_p = !seg;
    if (!seg) {
        hier_status_t st = hier_shm_create(hier_params.shm_dir, &shape, &seg);
        if (st == HIER_OK && (st = hier_shm_claim(seg, 0)) != HIER_OK) hier_shm_detach(seg);
        if (st != HIER_OK) seg = NULL;
    }
    offer->chunk_bytes = chunk;
    offer->fresh = (uint32_t)*fresh_p;
    snprintf(offer->name, sizeof(offer->name), "%s", seg ? hier_shm_name(seg) : "");
    atomic_fetch_add_explicit(&offer->seq, 1, memory_order_release); /* (the barrier after it publishes it) */
    nd->pipe = (hier_tier_t){.seg = seg, .mr = user.data};
    return seg ? HIER_OK : HIER_ERR_SHM;
}

/* The others: what the leader offered. *missing_p: a recycled one not in my pool. */
static hier_status_t hier_node_pipe_accept(hier_comm_t *c, size_t chunk, int *missing_p)
{
    hier_node_t *nd = c->node;
    hier_shm_shape_t shape = hier_node_pipe_shape(c, chunk);
    const hier_shm_offer_t *offer = hier_shm_offer(nd->small.seg);
    hier_shm_pool_user_t user = {0};
    hier_shm_t *seg = NULL;
    *missing_p = 0;
    if (!offer->name[0] || offer->chunk_bytes != chunk) return HIER_ERR_SHM;
    if (!offer->fresh) {
        seg = hier_shm_pool_take(&shape, nd->procs, c->layout.nranks, offer->name, &user);
        *missing_p = !seg;
    } else if (hier_shm_attach(hier_params.shm_dir, offer->name, &shape, &seg) == HIER_OK &&
               hier_shm_claim(seg, c->layout.me) != HIER_OK) {
        hier_shm_detach(seg);
        seg = NULL;
    }
    nd->pipe = (hier_tier_t){.seg = seg, .mr = user.data};
    return seg ? HIER_OK : HIER_ERR_SHM;
}

/* Pipeline set-up, collective, at the first call too large for the small slots:
 * 1. every rank finds the largest chunk its budget allows; agree on the least
 *    (0, or no larger than the small slots: they serve every call);
 * 2. each node's leader offers a recycled segment of that chunk, or a fresh
 *    one (its name in the node segment), and says whether it is fresh;
 * 3. node barrier; the others take the offered one from their pools, or attach;
 * 4. agree that every rank has it; a recycled one missing somewhere: again
 *    from 2 with fresh segments; any other failure: the small slots serve;
 * 5. leaders unlink fresh names.
 * Made by a fiber (a nonblocking call's, hier_comm_pipe_begin), no call
 * runs: the agreements are the exchanges' (hier_comm_xchg.c), and 3 is one
 * of them too (a barrier of every rank: a node's spins would not yield). */
hier_status_t hier_node_pipe_setup(hier_comm_t *c, int fibered)
{
    hier_node_t *nd = c->node;
    size_t small = hier_node_small_for_comm(c), least = small * 2;
    if (least < (size_t)(c->size + 1) * 64) least = (size_t)(c->size + 1) * 64; /* (a piece of every block) */
    int v[4] = {(int)(hier_node_affordable(c, least) / 64)};                                          /* 1 */
    hier_status_t st = !fibered                        ? hier_node_agree(c, v, 1)
                       : hier_xchg_agree(c, v, 1) == 0 ? HIER_OK
                                                       : HIER_ERR_INTERNAL;
    if (st != HIER_OK) return st;
    size_t chunk = (size_t)v[0] * 64;
    hier_node_cache_clear(nd);
    nd->pipe_state = HIER_PIPE_SMALL;
    for (int fresh_only = 0; chunk > small && fresh_only < 2; fresh_only++) {
        int fresh = 0, missing = 0;
        if (c->layout.me == 0) (void)hier_node_pipe_offer(c, chunk, fresh_only, &fresh);             /* 2 */
        int one = 1;                                                                                  /* 3 */
        st = !fibered ? hier_shm_barrier(nd->small.seg, &nd->wait)
                      : hier_xchg_agree(c, &one, 1) == 0 ? HIER_OK : HIER_ERR_INTERNAL;
        if (hier_status_abandons(st) || (fibered && st != HIER_OK)) return st;
        if (c->layout.me != 0 && st == HIER_OK) st = hier_node_pipe_accept(c, chunk, &missing);
        int a[2] = {st == HIER_OK && nd->pipe.seg, !missing};                                         /* 4 */
        if (hier_xchg_agree(c, a, 2) != 0) a[0] = a[1] = 0;
        if (c->layout.me == 0 && nd->pipe.seg && fresh) hier_shm_unlink(nd->pipe.seg);                 /* 5 */
        if (a[0]) {
            nd->pipe.slots = hier_node_slots(nd->pipe.seg, c->layout.nranks);
            nd->pipe_state = nd->pipe.slots ? HIER_PIPE_READY : HIER_PIPE_SMALL;
            break;
        }
        if (nd->pipe.seg) hier_node_give_back(nd->pipe.seg, nd->pipe.mr, nd->procs, c->layout.nranks, NULL);
        nd->pipe = (hier_tier_t){0};
        if (a[1]) break; /* not a recycling miss: the small slots serve */
    }
    HIER_LOG(HIER_LOG_DEBUG, "pipeline buffers: %s (chunk %zu, %u chunks in flight)",
             nd->pipe_state == HIER_PIPE_READY ? "mapped" : "none within the budget, the small slots serve",
             nd->pipe_state == HIER_PIPE_READY ? chunk : small,
             nd->pipe_state == HIER_PIPE_READY ? hier_node_tier_depth(&nd->pipe) : 1);
    if (nd->pipe_state == HIER_PIPE_READY) nd->pipe_chunk = chunk;
    return HIER_OK;
}
