/* hier_comm_setup.c: a communicator's set-up, collective, at its first call: one exchange when every rank is
 * prepared (its part cannot fail), else one exchange and one agreement (docs/design.md, "A communicator's life"):
 * 1. locally: my node, the memory everything after the exchange needs, the leader's segment offered (recycled
 *    or fresh), the others' set aside;
 * 2. allgather one record per rank (with the first call, piggybacked);
 * 3. every rank reaches the same verdict and makes its levels (between nodes over libfabric, or Open MPI's
 *    point-to-point: HIER_COMM_PML);
 * 4. else agree on the least status: retry with fresh segments, exchange addresses, or fall back for good;
 * 5. leaders unlink fresh segments' names. */
#include <stdlib.h>
#include <string.h>

#include "base/hier_fiber.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_setup.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_probe.h"
#include "comm/hier_comm_xchg.h"
#include "comm/hier_proc.h"
#include "select/hier_select_rules.h"

enum { /* statuses, least first: the agreement takes the least */
    HIER_SETUP_NO_MEMORY = -2,
    HIER_SETUP_SHM = -1,     /* no segment: fallback:shm */
    HIER_SETUP_MISSING = 0,  /* a recycled segment is not in every pool: again, fresh */
    HIER_SETUP_NET = 1,      /* served, libfabric failing or unavailable somewhere: the point-to-point for good */
    HIER_SETUP_ADDRESSES = 2,
    HIER_SETUP_OK = 3,
};

#define HIER_SETUP_DEVICE 1u   /* a device backend is here */
#define HIER_SETUP_RECYCLED 2u /* the offered segment is recycled */
#define HIER_SETUP_CROWDED 4u  /* more ranks on my node than cores, as I see it */
#define HIER_SETUP_FABRIC 8u   /* my endpoint is open */
#define HIER_SETUP_NO_FABRIC 64u /* ... and can never be (no usable provider) */
#define HIER_SETUP_PREPARED 16u /* nothing I do after the exchange can fail */
#define HIER_SETUP_SHORT 32u   /* no memory for what I do after it */

/* Recycled segments a rank sets aside for its leader's offer: its pool's
 * most recent for these processes, as the leader's is (pools of processes
 * that freed the same communicators hold the same, most recent first). */
#define HIER_SETUP_CANDIDATES 4

typedef struct {
    int32_t node;     /* my node's lowest rank; -1 when every rank shares my node */
    int32_t numa;     /* my NUMA domain, -1 unknown */
    int32_t nic_numa; /* where my NICs should be: my accelerator's domain, or numa */
    uint32_t digest;  /* of the parameters that shape what ranks do */
    uint32_t mbox;     /* where this communicator's messages land for me */
    uint32_t flags;
    uint64_t seg_id;  /* leaders: the offered segment's hier_shm_id */
    uint64_t cand[HIER_SETUP_CANDIDATES]; /* the others: the segments set aside (0: none) */
    char seg[HIER_SHM_NAME_MAX]; /* leaders: the node segment offered; empty if none could be */
    hier_piggyback_rec_t pb; /* the first call, when it can piggyback (hier_comm_piggyback.c) */
} hier_setup_rec_t;

/* Step 1's locality: the node's processes, my place among them. */
typedef struct {
    int32_t node;     /* as in the record */
    int me, nlocal, leader;
    uint64_t *procs;  /* nlocal: the node's processes in local order */
} hier_setup_local_t;

/* Step 1's memory, and the segments set aside: what the makers take is
 * gone from it, the rest is freed or given back. */
typedef struct {
    hier_setup_rec_t *all;
    int32_t *node_of, *numa; /* (in all's block) numa: 2 x nlocal, the NICs' after the ranks' */
    size_t *rs_displs;
    hier_layout_reserved_t layout;
    hier_node_reserved_t node;
    hier_net_reserved_t net;
    hier_node_offer_t cand[HIER_SETUP_CANDIDATES];
    int ncand;
} hier_setup_reserved_t;

static hier_status_t hier_setup_locality(hier_comm_t *c, hier_setup_local_t *loc)
{
    int first = -1, alone = 1;
    loc->procs = malloc((size_t)c->size * sizeof(*loc->procs));
    if (!loc->procs) return HIER_ERR_NO_MEMORY;
    loc->nlocal = 0;
    for (int r = 0; r < c->size; r++) {
        uint64_t proc;
        int local = c->ops.peer(r, &proc, c->ops.arg) || r == c->rank;
        alone &= local;
        if (!local) continue;
        if (first < 0) first = r;
        if (r == c->rank) loc->me = loc->nlocal;
        loc->procs[loc->nlocal++] = proc;
    }
    loc->node = alone ? -1 : first;
    loc->leader = first == c->rank;
    return HIER_OK;
}

static void hier_setup_reserved_free(hier_setup_reserved_t *reserved, const hier_setup_local_t *loc)
{
    free(reserved->all); /* (node_of and numa with it) */
    free(reserved->rs_displs);
    hier_layout_reserved_free(&reserved->layout);
    hier_node_reserved_free(&reserved->node);
    hier_net_reserved_free(&reserved->net);
    hier_node_offer_t none;
    hier_node_pick(reserved->cand, reserved->ncand, 0, loc->procs, loc->nlocal, &none); /* (all back to the pool) */
    *reserved = (hier_setup_reserved_t){0};
}

/* Step 1's memory, as large as anything after the exchange can ask; the
 * records, node_of and numa (2 x nlocal: the NICs' after the ranks') are
 * one block, gone with the set-up. */
static hier_status_t hier_setup_reserve(hier_comm_t *c, const hier_setup_local_t *loc, hier_setup_reserved_t *reserved)
{
    size_t n = (size_t)c->size, nl = (size_t)loc->nlocal;
    int spans = loc->node >= 0;
    _Static_assert(sizeof(hier_setup_rec_t) % sizeof(int32_t) == 0, "node_of follows the records");
    *reserved = (hier_setup_reserved_t){.all = malloc(n * sizeof(*reserved->all) + (n + 2 * nl) * sizeof(int32_t)),
                                .rs_displs = malloc(n * sizeof(size_t))};
    if (!reserved->all || !reserved->rs_displs) return HIER_ERR_NO_MEMORY;
    reserved->node_of = (int32_t *)(reserved->all + n);
    reserved->numa = reserved->node_of + n;
    if (hier_layout_reserve(c->size, &reserved->layout) != HIER_OK ||
        hier_node_reserve(loc->nlocal, c->size, spans, &reserved->node) != HIER_OK ||
        (spans && hier_net_reserve(c->size, &reserved->net) != HIER_OK))
        return HIER_ERR_NO_MEMORY;
    return HIER_OK;
}

/* Step 3's checks, the same on every rank: parameters, then node names. */
static hier_path_t hier_setup_check(hier_comm_t *c, const hier_setup_rec_t *all, int32_t *node_of, int *one_p)
{
    int one = 1, several = 1;
    for (int r = 0; r < c->size; r++) {
        if (all[r].digest != all[0].digest) {
            if (c->rank == 0)
                HIER_ERROR("the ranks of a communicator have different coll_hier parameters (MCA settings differ "
                           "between nodes or processes?): rank %d's differ from rank 0's; it uses the previous "
                           "component", r);
            return HIER_PATH_FALLBACK_PARAMS;
        }
        node_of[r] = all[r].node;
        one &= all[r].node < 0;
        several &= all[r].node >= 0;
    }
    if (!one && !several) {
        if (c->rank == 0) HIER_ERROR("ranks disagree whether the communicator spans nodes: not served");
        return HIER_PATH_FALLBACK_RANKS;
    }
    for (int r = 0; r < c->size; r++)
        if (all[r].flags & HIER_SETUP_SHORT) {
            if (c->rank == 0) HIER_ERROR("rank %d has no memory to set a communicator up: not served", r);
            return HIER_PATH_FALLBACK_SHM;
        }
    *one_p = one;
    return HIER_PATH_COUNT; /* (no fallback) */
}

/* Step 3's verdict, the same on every rank: every rank is prepared, and every
 * leader's segment is recycled and set aside by each rank of its node. */
static int hier_setup_all_prepared(const hier_comm_t *c, const hier_setup_rec_t *all, const int32_t *node_of)
{
    for (int r = 0; r < c->size; r++) {
        const hier_setup_rec_t *me = &all[r], *lead = &all[node_of ? node_of[r] : 0];
        int held = lead == me;
        if (!(me->flags & HIER_SETUP_PREPARED) || !(lead->flags & HIER_SETUP_RECYCLED) || !lead->seg_id ||
            me->numa < -1 || me->nic_numa < -1)
            return 0;
        for (int k = 0; !held && k < HIER_SETUP_CANDIDATES; k++) held = me->cand[k] == lead->seg_id;
        if (!held) return 0;
    }
    return 1;
}

/* The node level, around the segment, with the NUMA domains of the node's
 * ranks; crowded if any of them says so (all of the node decide alike). */
static hier_status_t hier_setup_node(hier_comm_t *c, hier_node_offer_t *offer, const hier_setup_rec_t *all,
                                     hier_setup_reserved_t *reserved)
{
    int32_t *numa = reserved->numa, *nic_numa = numa + c->layout.nranks;
    int crowded = 0;
    for (int i = 0; i < c->layout.nranks; i++) {
        const hier_setup_rec_t *r = &all[c->layout.nnodes > 1 ? hier_layout_rank(&c->layout, c->layout.node, i) : i];
        numa[i] = r->numa;
        nic_numa[i] = r->nic_numa;
        crowded |= (r->flags & HIER_SETUP_CROWDED) != 0;
    }
    if (c->layout.nnodes > 1) hier_proc_fabric_place(nic_numa, c->layout.nranks, c->layout.me);
    return hier_node_make(c, offer, numa, crowded, &reserved->node);
}

/* Where my endpoint stands: open (or opened now with fabric_warmup 0: the
 * first call between nodes pays it), or never to be had; neither while it
 * is not open yet (it opens in the background once calls make it worth
 * it, hier_comm.c). */
static uint32_t hier_setup_fabric_flags(void)
{
    hier_fabric_t *fab = hier_params.fabric_warmup ? hier_proc_fabric_open() : hier_proc_fabric();
    if (fab) return HIER_SETUP_FABRIC;
    return hier_proc_fabric_failed() ? HIER_SETUP_NO_FABRIC : 0;
}

/* Step 1 for this rank: its record, its offer (leaders) or the segments it
 * sets aside (the others). */
static void hier_setup_mine(hier_comm_t *c, hier_setup_local_t *loc, int fresh_only, uint32_t mbox,
                            const hier_piggyback_t *pb, hier_setup_reserved_t *reserved, hier_node_offer_t *offer,
                            hier_setup_rec_t *mine)
{
    int short_of = hier_setup_reserve(c, loc, reserved) != HIER_OK;
    *mine = (hier_setup_rec_t){.node = loc->node, .numa = hier_proc_my_numa(loc->me),
                               .nic_numa = hier_proc_nic_numa(loc->me), .digest = hier_params_digest(&hier_params) ^ hier_rules_digest(),
                               .mbox = mbox,
                               .flags = (hier_accel_has_backend() ? HIER_SETUP_DEVICE : 0) |
                                        (hier_node_crowded(c, loc->nlocal) ? HIER_SETUP_CROWDED : 0) |
                                        (short_of ? HIER_SETUP_SHORT : 0)};
    if (loc->node >= 0) mine->flags |= hier_setup_fabric_flags();
    int prepared = !short_of && (!(mine->flags & HIER_SETUP_FABRIC) || hier_net_peers_known(c));
    if (loc->leader && !short_of && hier_node_offer(c, loc->procs, loc->nlocal, fresh_only, offer) == HIER_OK) {
        const char *name = hier_shm_name(offer->seg);
        memcpy(mine->seg, name, strnlen(name, sizeof(mine->seg) - 1)); /* (the record is zeroed: terminated) */
        mine->seg_id = hier_shm_id(offer->seg);
        mine->flags |= offer->fresh ? 0 : HIER_SETUP_RECYCLED;
        if (!offer->fresh) hier_shm_joining(offer->seg, loc->me);
    }
    if (!loc->leader && !short_of && !fresh_only)
        reserved->ncand = hier_node_set_aside(loc->procs, loc->nlocal, loc->me, reserved->cand, HIER_SETUP_CANDIDATES);
    for (int k = 0; k < reserved->ncand; k++) mine->cand[k] = hier_shm_id(reserved->cand[k].seg);
    mine->flags |= prepared ? HIER_SETUP_PREPARED : 0;
    hier_piggyback_pack(pb, &mine->pb);
}

/* Step 3's transport between nodes, the same on every rank: libfabric
 * when every rank's endpoint is open (1), else Open MPI's point-to-point. */
static int hier_setup_fabric(const hier_comm_t *c, const hier_setup_rec_t *all)
{
    for (int r = 0; r < c->size; r++)
        if (!(all[r].flags & HIER_SETUP_FABRIC)) return 0;
    return 1;
}

/* ... and whether libfabric can never serve it: some rank can have no endpoint. */
static int hier_setup_fabric_never(const hier_comm_t *c, const hier_setup_rec_t *all)
{
    for (int r = 0; r < c->size; r++)
        if (all[r].flags & HIER_SETUP_NO_FABRIC) return 1;
    return 0;
}

/* Step 3 for this rank, after the layout; a status (HIER_SETUP_OK: nothing
 * failed here). `prepared`: every rank's verdict that nothing can. */
static int hier_setup_levels(hier_comm_t *c, hier_setup_local_t *loc, int prepared, uint32_t mbox,
                             const hier_setup_rec_t *all, hier_setup_reserved_t *reserved, hier_node_offer_t *offer)
{
    const hier_setup_rec_t *lead = &all[loc->node < 0 ? 0 : loc->node];
    int status = HIER_SETUP_OK, missing = 0, known = 1;
    if (!lead->seg[0]) return HIER_SETUP_SHM;
    if (!loc->leader && prepared) { /* (its segment is among those set aside: my record says so) */
        int found = hier_node_pick(reserved->cand, reserved->ncand, lead->seg_id, loc->procs, loc->nlocal, offer);
        reserved->ncand = 0;
        if (!found) {
            HIER_ERROR("rank %d: the segment its record set aside is gone (a defect)", c->rank);
            return HIER_SETUP_SHM;
        }
    } else if (!loc->leader)
        hier_node_pick(reserved->cand, reserved->ncand, 0, loc->procs, loc->nlocal, offer); /* (back, then by name) */
    reserved->ncand = 0;
    if (!loc->leader && !prepared &&
        hier_node_accept(c, lead->seg, (lead->flags & HIER_SETUP_RECYCLED) != 0, loc->procs, loc->nlocal, loc->me,
                         offer, &missing) != HIER_OK)
        return missing ? HIER_SETUP_MISSING : HIER_SETUP_SHM;
    if (hier_setup_node(c, offer, all, reserved) != HIER_OK) return HIER_SETUP_NO_MEMORY;
    if (c->layout.nnodes > 1) {
        int fabric = hier_setup_fabric(c, all);
        hier_status_t st = hier_net_make(c, mbox, fabric, &reserved->net, &known);
        status = st != HIER_OK || (!fabric && hier_setup_fabric_never(c, all)) ? HIER_SETUP_NET
                 : known                                                        ? HIER_SETUP_OK
                                                                                : HIER_SETUP_ADDRESSES;
        for (int i = 0; i < c->net->ntalk; i++) { /* every peer's mailbox */
            int n = c->net->talk[i];
            c->net->mboxes[n] = all[hier_layout_rank(&c->layout, n, c->layout.me)].mbox;
        }
    }
    return status;
}

/* Steps 1-4 with segments recycled (fresh_only 0) or fresh (1); the agreed
 * status. A set-up that ends well serves the call piggybacked on it (3, 4). */
static int hier_setup_try(hier_comm_t *c, hier_setup_local_t *loc, int fresh_only, uint32_t mbox,
                          hier_piggyback_t *pb, hier_node_offer_t *offer)
{
    hier_setup_reserved_t reserved = {0};
    hier_setup_rec_t mine;
    int status = HIER_SETUP_OK, one = 0, prepared = 0;
    *offer = (hier_node_offer_t){0};
    hier_setup_mine(c, loc, fresh_only, mbox, pb, &reserved, offer, &mine);                             /* 1 */
    hier_setup_rec_t *all = reserved.all;
    if (!all || hier_xchg_allgather(c, &mine, all, sizeof(mine)) != 0) {                       /* 2 */
        all = NULL;
        status = HIER_SETUP_NO_MEMORY; /* (this rank alone: agreed below) */
    } else {                                                                                           /* 3 */
        hier_path_t refused = hier_setup_check(c, all, reserved.node_of, &one);
        if (refused == HIER_PATH_COUNT &&
            hier_layout_make_in(c->size, c->rank, one ? NULL : reserved.node_of, &reserved.layout, &c->layout) !=
                HIER_OK)
            refused = HIER_PATH_FALLBACK_RANKS; /* (from the records: every rank alike) */
        if (refused != HIER_PATH_COUNT) {       /* (every rank alike: no agreement needed) */
            hier_setup_reserved_free(&reserved, loc);
            hier_node_withdraw(c, offer, loc->procs, loc->nlocal);
            c->refused = refused;
            return HIER_SETUP_NO_MEMORY - 1;
        }
        prepared = hier_setup_all_prepared(c, all, one ? NULL : reserved.node_of);
        for (int r = 0; r < c->size; r++) c->dev_possible |= (all[r].flags & HIER_SETUP_DEVICE) != 0;
        c->rs_displs = reserved.rs_displs;
        reserved.rs_displs = NULL;
        status = hier_setup_levels(c, loc, prepared, mbox, all, &reserved, offer);
    }
    if (!prepared && hier_xchg_agree(c, &status, 1) != 0) status = HIER_SETUP_NO_MEMORY;          /* 4 */
    if (all && (status == HIER_SETUP_OK || status == HIER_SETUP_NET) &&
        hier_piggyback_agreed(c, pb, &all[0].pb, sizeof(*all)))
        hier_piggyback_serve(c, pb, &all[0].pb, sizeof(*all));
    hier_setup_reserved_free(&reserved, loc);
    return status;
}

/* Undo an attempt that is not kept. */
static void hier_setup_undo(hier_comm_t *c, hier_setup_local_t *loc, hier_node_offer_t *offer)
{
    hier_net_free(c);
    hier_node_discard(c, offer);
    hier_node_withdraw(c, offer, loc->procs, loc->nlocal);
    hier_layout_free(&c->layout);
    free(c->rs_displs);
    c->rs_displs = NULL;
    c->dev_possible = 0;
}

/* The set-up ended well: which transport carries the calls between nodes
 * (libfabric; the point-to-point until every endpoint is open, PML; or
 * for good), and what the log says. */
static const char *hier_setup_transport(hier_comm_t *c, int status)
{
    c->state = HIER_COMM_READY;
    if (!c->net) return "";
    if (status == HIER_SETUP_NET) {
        c->net->fabric = 0;
        return ", Open MPI's point-to-point between nodes (libfabric cannot serve every rank)";
    }
    if (c->net->fabric) return ", libfabric between nodes";
    c->state = HIER_COMM_PML;
    hier_net_waiting(c, 1);
    return ", Open MPI's point-to-point between nodes until every rank's libfabric endpoint is open";
}

hier_status_t hier_comm_setup(hier_comm_t *c, hier_piggyback_t *pb)
{
    hier_setup_local_t loc = {0};
    hier_node_offer_t offer = {0};
    int status = HIER_SETUP_NO_MEMORY;
    uint32_t mbox = hier_net_new_mbox();
    if (hier_setup_locality(c, &loc) != HIER_OK) loc.procs = NULL;
    for (int fresh_only = 0; fresh_only < 2; fresh_only++) {
        status = hier_setup_try(c, &loc, fresh_only, mbox, pb, &offer);
        if (status < HIER_SETUP_NO_MEMORY) break; /* refused on every rank alike (c->refused) */
        if (status == HIER_SETUP_ADDRESSES)
            status = hier_net_exchange_addresses(c) == HIER_OK ? HIER_SETUP_OK : HIER_SETUP_NET;
        if (status != HIER_SETUP_MISSING) break;
        hier_setup_undo(c, &loc, &offer); /* a recycled segment missing somewhere: again, fresh */
    }
    if (status == HIER_SETUP_OK || status == HIER_SETUP_NET) {
        if (loc.leader && offer.fresh) hier_shm_unlink(c->node->small.seg);                        /* 5 */
        c->node->procs = loc.procs;
        const char *transport = hier_setup_transport(c, status);
        HIER_LOG(HIER_LOG_COMM, "rank %d: served by hier: %d node(s), %d local rank(s), segment %s%s", c->rank,
                 c->layout.nnodes, c->layout.nranks, offer.fresh ? "new" : "recycled", transport);
        return HIER_OK;
    }
    if (status >= HIER_SETUP_NO_MEMORY) {
        hier_setup_undo(c, &loc, &offer);
        c->refused = HIER_PATH_FALLBACK_SHM;
        HIER_LOG(HIER_LOG_COMM, "shared-memory segment unavailable on some rank: using the previous component on this "
                 "communicator");
    }
    free(loc.procs);
    hier_comm_refuse(c, c->refused);
    return HIER_ERR_NOT_SUPPORTED;
}

/* ---- the set-up without waiting (a first call that is nonblocking) ------------ */

/* Whether the node lacks a low-latency cut-off (the same on every rank: each was agreed). */
static int hier_setup_ll_unknown(const hier_comm_t *c)
{
    for (int coll = 0; coll < HIER_RULE_COLLS; coll++)
        if (!c->node->ll_top[coll]) return 1;
    return 0;
}

/* The fiber: 1. the set-up; on one node, 2. the low-latency cut-offs the
 * process kept (a nonblocking call measures none), and 3. single copy
 * probed (a nonblocking call cannot probe it: 2's agreement first, so that
 * every rank's control line is written when the others read it); the
 * communicator stays SETTING until they are over. */
static void hier_setup_fiber(void *arg)
{
    hier_comm_t *c = arg;
    hier_comm_setup(c, NULL);                                                                          /* 1 */
    hier_comm_state_t verdict = c->state;
    if (verdict != HIER_COMM_READY || c->layout.nnodes > 1 || c->layout.nranks < 2) return;
    if (c->node->cma >= 0 && !hier_setup_ll_unknown(c)) return;
    c->state = HIER_COMM_SETTING;
    if (hier_probe_ll_tops_kept(c, c->node->ll_top) == 0 && c->node->cma < 0) {                       /* 2 */
        int v = hier_node_cma_reads(c);                                                                /* 3 */
        if (hier_xchg_agree(c, &v, 1) == 0 && (v == 0 || hier_probe_cma_window_kept(c, &c->node->cma_window) == 0))
            c->node->cma = v;
    }
    c->state = verdict;
}

/* The pipeline segment, for a nonblocking call that wants it. */
static void hier_setup_pipe_fiber(void *arg)
{
    hier_comm_t *c = arg;
    if (hier_node_pipe_setup(c, 1) != HIER_OK)
        HIER_LOG(HIER_LOG_COMM, "rank %d: no pipeline segment made without waiting: the small slots serve", c->rank);
    if (c->node->pipe_state == HIER_PIPE_NONE) c->node->pipe_state = HIER_PIPE_SMALL; /* (not again) */
    c->state = c->setting_from;
}

/* The move to libfabric, for a nonblocking call due to ask. */
static void hier_setup_switch_fiber(void *arg)
{
    hier_comm_t *c = arg;
    if (hier_net_switch(c) == HIER_NOT_READY) {
        c->state = HIER_COMM_PML;
        return;
    }
    hier_node_pipe_redepth(c);
    c->state = HIER_COMM_READY;
}

static int hier_setup_fiber_begin(hier_comm_t *c, void (*fn)(void *))
{
    if (!c->ops.sendrecv || !c->ops.sendrecv_test || c->setting) return 0;
    if (hier_fiber_new(fn, c, &c->setting) != HIER_OK) return 0;
    c->setting_from = c->state;
    c->state = HIER_COMM_SETTING;
    hier_comm_setup_step(c);
    return 1;
}

int hier_comm_setup_begin(hier_comm_t *c)
{
    return hier_setup_fiber_begin(c, hier_setup_fiber);
}

int hier_comm_pipe_begin(hier_comm_t *c)
{
    return (c->state == HIER_COMM_READY || c->state == HIER_COMM_PML) && hier_setup_fiber_begin(c, hier_setup_pipe_fiber);
}

int hier_comm_switch_begin(hier_comm_t *c)
{
    return c->state == HIER_COMM_PML && hier_setup_fiber_begin(c, hier_setup_switch_fiber);
}

int hier_comm_setup_step(hier_comm_t *c)
{
    if (!c->setting) return 1;
    if (!hier_fiber_resume(c->setting)) return 0;
    hier_fiber_free(c->setting);
    c->setting = NULL;
    if (c->setting_from == HIER_COMM_NEW)
        HIER_LOG(HIER_LOG_COMM, "rank %d: a set-up made without waiting (its first call was nonblocking) is over: %s",
                 c->rank, c->state != HIER_COMM_REFUSED ? "served" : "not served");
    return 1;
}

/* The one way a communicator stops being served: every call from now on
 * goes to the previous component, counted under `why`. */
void hier_comm_refuse(hier_comm_t *c, hier_path_t why)
{
    hier_net_waiting(c, 0);
    c->refused = why;
    c->state = HIER_COMM_REFUSED;
}

/* ---- a call's start and failure: the communicator's state moves ---- */

/* A communicator over Open MPI's point-to-point while libfabric may still
 * open (HIER_COMM_PML): small calls before the 65,536th neither start the
 * opening (fabric_open_min) nor ask: over the point-to-point they cost
 * within 0.1-0.6 us of libfabric's up to 4 KiB, which the opening's 0.15 s
 * of CPU repays only after some 500,000 of them (docs/performance.md,
 * *Between nodes from the first call*). The question, whether every rank's
 * endpoint is open (hier_net_switch), is a small agreement: asked at the
 * 1st, 2nd, 4th, ... 64th call that may open, then every 64th (every rank
 * counts the same calls), so a long opening (a busy node) costs few. */
#define HIER_COMM_PML_CALLS 65536

int hier_comm_switch_due(hier_comm_t *c, size_t bytes)
{
    if (++c->pml_calls < HIER_COMM_PML_CALLS && bytes < hier_params.fabric_open_min) return 0;
    hier_proc_fabric_warm();
    uint64_t n = ++c->pml_asks;
    return !(n & (n - 1)) || n % 64 == 0;
}

/* Common entry: the set-up at the first call, a forced fallback (the
 * communicator's served bit, hier_comm_create), or one rank. */
hier_status_t hier_comm_prepare(hier_comm_t *c, hier_coll_t coll, size_t bytes, hier_piggyback_t *pb,
                                hier_path_t *path_p)
{
    if (!(c->served_colls >> coll & 1)) {
        *path_p = HIER_PATH_FALLBACK_FORCED;
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (c->size == 1) { /* (no segment for a communicator of one) */
        *path_p = HIER_PATH_SELF;
        return HIER_ALONE; /* (the caller copies) */
    }
    if (c->state == HIER_COMM_PML && hier_comm_switch_due(c, bytes) && hier_net_switch(c) == HIER_OK) {
        hier_node_pipe_redepth(c);
        c->state = HIER_COMM_READY;
    }
    if (c->state == HIER_COMM_NEW) hier_comm_setup(c, pb);
    if (c->state == HIER_COMM_PML && !c->pml_calls && bytes >= hier_params.fabric_open_min)
        hier_proc_fabric_warm(); /* (the call that set it up may start the opening too) */
    if (c->state == HIER_COMM_REFUSED) {
        *path_p = c->refused;
        return HIER_ERR_NOT_SUPPORTED;
    }
    return HIER_OK;
}

/* A call that failed on the node (or the network) fails on every rank, and
 * the communicator uses the previous component from then on; a rank that
 * cannot wait for its peers any more (dead, stuck, in another call) says so
 * on its control line, so the node's ranks still waiting for it stop too. */
hier_status_t hier_comm_failed(hier_comm_t *c, hier_status_t st)
{
    if (st == HIER_OK || st == HIER_ERR_NOT_SUPPORTED) return st;
    if (hier_status_abandons(st)) hier_shm_leave(c->node->small.seg, &c->node->wait, st);
    hier_comm_refuse(c, st == HIER_ERR_MISMATCH ? HIER_PATH_FALLBACK_MISMATCH : HIER_PATH_FALLBACK_SHM);
    return st;
}
