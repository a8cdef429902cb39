/* hier_comm_net.c: a communicator's network level (several nodes only; docs/design.md, "Between nodes").
 * Its schedules talk to the rank of my local index on some nodes (hier_sched_net_peers), through one of two
 * transports (net/hier_link.h): Open MPI's point-to-point from the first call, a link per such rank made at
 * set-up; or libfabric once every rank's endpoint is open, whose channels belong to process pairs
 * (net/hier_peers.h), so the level only names the processes it talks to and its mailbox (the set-up exchanges
 * the mailboxes, and the addresses only where some rank lacks them). The move from one to the other is
 * collective, at a call every rank agrees on (hier_net_switch). */
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_xchg.h"
#include "comm/hier_proc.h"
#include "exec/hier_exec_pair.h"
#include "sched/hier_sched_net.h"

_Static_assert(HIER_RUN_DEPTH_MAX <= HIER_PML_MBOXES, "a PML link has a mailbox for every run in flight");

/* Polls of the endpoint before a waiting rank yields: each poll is a
 * system call on tcp, so a few are worth a shared-memory spin of thousands. */
#define HIER_NET_SPIN 16

static _Atomic uint32_t hier_net_next_mbox = 1; /* mailboxes are never reused (0: tests' channels) */

/* The slot shape of every channel this process opens: the parameters
 * (the same on every rank, checked at set-up), within what the provider takes. */
static void hier_net_configure(hier_fabric_t *fab, uint64_t self)
{
    size_t slot = hier_params.fabric_slot_size < 4096 ? 4096 : hier_params.fabric_slot_size;
    if (slot + 64 > hier_fabric_max_msg(fab)) slot = hier_fabric_max_msg(fab) - 64; /* a slot is one write */
    slot &= ~(size_t)63; /* whole elements of any type in every message (reductions split at slot ends) */
    size_t slots = hier_params.fabric_slots < 2 ? 2 : (size_t)hier_params.fabric_slots;
    if (slots > HIER_CHAN_MAX_SLOTS) slots = HIER_CHAN_MAX_SLOTS;
    hier_peers_configure(self, slots, slot);
}

/* A point-to-point message's segment: a channel's slot as the parameters
 * ask for it (the same on every rank). */
static size_t hier_net_pml_segment(void)
{
    size_t seg = hier_params.fabric_slot_size < 4096 ? 4096 : hier_params.fabric_slot_size;
    return seg & ~(size_t)63;
}

uint32_t hier_net_new_mbox(void)
{
    return atomic_fetch_add(&hier_net_next_mbox, HIER_RUN_DEPTH_MAX); /* (a mailbox per run in flight) */
}

hier_status_t hier_net_reserve(int size, hier_net_reserved_t *reserved)
{
    size_t n = (size_t)size, most = (size_t)hier_sched_net_max_peers_upto(size); /* (nodes: at most the ranks) */
    hier_net_reserved_t r = {.net = calloc(1, sizeof(*r.net)), .peers = calloc(n, sizeof(*r.peers)),
                         .mboxes = calloc(n, sizeof(*r.mboxes)), .links = calloc(n, sizeof(*r.links)),
                         .link_mem = calloc(most ? most : 1, hier_pml_size()),
                         .talk = malloc((most ? most : 1) * sizeof(*r.talk))};
    if (!r.net || !r.peers || !r.mboxes || !r.links || !r.link_mem || !r.talk) {
        hier_net_reserved_free(&r);
        return HIER_ERR_NO_MEMORY;
    }
    *reserved = r;
    return HIER_OK;
}

void hier_net_reserved_free(hier_net_reserved_t *reserved)
{
    free(reserved->net);
    free(reserved->peers);
    free(reserved->mboxes);
    free(reserved->links);
    free(reserved->link_mem);
    free(reserved->talk);
    *reserved = (hier_net_reserved_t){0};
}

int hier_net_peers_known(const hier_comm_t *c)
{
    for (int r = 0; r < c->size; r++) {
        uint64_t proc;
        if (c->ops.peer(r, &proc, c->ops.arg) || r == c->rank) continue; /* (on my node) */
        hier_peer_t *p = hier_peers_get(proc);
        if (!p || !hier_peer_known(p)) return 0;
    }
    return 1;
}

/* The processes libfabric's channels go to, my schedules' peers; *known_p:
 * whether every address is known here. HIER_ERR_NOT_SUPPORTED without an
 * endpoint; HIER_ERR_NO_MEMORY for a peer never met before. */
static hier_status_t hier_net_fabric_peers(hier_comm_t *c, int *known_p)
{
    const hier_layout_t *l = &c->layout;
    hier_net_t *net = c->net;
    hier_fabric_t *fab = hier_proc_fabric();
    uint64_t self;
    *known_p = 1;
    if (!fab) return HIER_ERR_NOT_SUPPORTED;
    c->ops.peer(c->rank, &self, c->ops.arg);
    hier_net_configure(fab, self);
    for (int i = 0; i < net->ntalk; i++) {
        uint64_t proc;
        c->ops.peer(hier_layout_rank(l, net->talk[i], l->me), &proc, c->ops.arg);
        net->peers[net->talk[i]] = hier_peers_get(proc); /* (made when met for the first time) */
        if (!net->peers[net->talk[i]]) return HIER_ERR_NO_MEMORY;
        if (!hier_peer_known(net->peers[net->talk[i]])) *known_p = 0;
    }
    return HIER_OK;
}

/* Messages of this communicator over libfabric from this call on: the links are its channels, found as the
 * network executor first needs each (the point-to-point's stay in link_mem, to be finished at the end); the
 * executor is set for them now, so it never names a transport the communicator has left. */
static void hier_net_go_fabric(hier_comm_t *c)
{
    c->net->fabric = 1;
    memset(c->net->links, 0, (size_t)c->size * sizeof(*c->net->links));
    hier_net_exec_set(c);
}

hier_status_t hier_net_make(hier_comm_t *c, uint32_t mbox, int fabric, hier_net_reserved_t *reserved, int *known_p)
{
    const hier_layout_t *l = &c->layout;
    hier_net_t *net = reserved->net;
    *net = (hier_net_t){.talk = reserved->talk, .links = reserved->links, .link_mem = reserved->link_mem, .mbox = mbox,
                        .peers = reserved->peers, .mboxes = reserved->mboxes};
    c->net = net;
    *reserved = (hier_net_reserved_t){0};
    *known_p = 1;
    /* ranks of a local index past the fewest any node has own no piece: they never talk */
    net->ntalk = l->me < l->pieces ? (int)hier_sched_net_peers(l->nnodes, l->node, hier_params.net_radix_max,
                                                              net->talk)
                                   : 0;
    for (int i = 0; i < net->ntalk; i++) {
        hier_pml_t *link = (hier_pml_t *)(net->link_mem + (size_t)i * hier_pml_size());
        hier_pml_init(link, &c->ops.p2p, hier_layout_rank(l, net->talk[i], l->me), hier_net_pml_segment());
        net->links[net->talk[i]] = link;
    }
    if (!fabric) return HIER_OK;
    hier_status_t st = hier_net_fabric_peers(c, known_p);
    if (st == HIER_OK) hier_net_go_fabric(c);
    return st;
}

void hier_net_free(hier_comm_t *c)
{
    hier_net_t *net = c->net;
    if (!net) return;
    for (int i = 0; i < net->ntalk; i++) hier_pml_fini((hier_pml_t *)(net->link_mem + (size_t)i * hier_pml_size()));
    free(net->talk);
    free(net->links);
    free(net->link_mem);
    free(net->peers);
    free(net->mboxes);
    free(net);
    c->net = NULL;
}

size_t hier_net_bytes(const hier_comm_t *c)
{
    const hier_net_t *net = c->net;
    size_t n = (size_t)c->size, bytes = sizeof(*net) + n * (2 * sizeof(void *) + sizeof(uint32_t));
    for (int i = 0; i < net->ntalk; i++)
        bytes += sizeof(int) + hier_pml_size() +
                 hier_pml_bytes((hier_pml_t *)(net->link_mem + (size_t)i * hier_pml_size()));
    return bytes;
}

typedef struct {
    uint64_t len;
    uint8_t addr[HIER_FABRIC_ADDR_MAX];
} hier_net_addr_t;

/* Collective: every rank's address to every rank, learnt for every rank
 * off this node (not only the peers this rank talks to: the next
 * communicator of these processes then finds every address known before
 * its exchange, and sets up without an agreement); agreed. */
hier_status_t hier_net_exchange_addresses(hier_comm_t *c)
{
    hier_fabric_t *fab = hier_proc_fabric();
    hier_net_addr_t mine = {0}, *all = calloc((size_t)c->size, sizeof(*all));
    size_t len = sizeof(mine.addr);
    int ok = all && fab && hier_fabric_addr(fab, mine.addr, &len) == HIER_OK;
    mine.len = len;
    if (hier_xchg_allgather(c, &mine, all, sizeof(mine)) != 0) ok = 0;
    for (int n = 0; ok && n < c->layout.nnodes; n++) {
        for (uint32_t i = c->layout.node_first[n]; ok && n != c->layout.node && i < c->layout.node_first[n + 1]; i++) {
            int r = (int)c->layout.node_ranks[i];
            uint64_t proc;
            c->ops.peer(r, &proc, c->ops.arg);
            hier_peer_t *p = hier_peers_get(proc);
            if (!p || all[r].len > HIER_FABRIC_ADDR_MAX || hier_peer_learn(fab, p, all[r].addr, all[r].len) != HIER_OK)
                ok = 0;
        }
    }
    free(all);
    if (hier_xchg_agree(c, &ok, 1) != 0) ok = 0;
    return ok ? HIER_OK : HIER_ERR_NOT_SUPPORTED;
}

/* What this rank can say of libfabric (hier_net_switch's step 1). */
enum {
    HIER_NET_NONE,    /* no endpoint here, and none can be had */
    HIER_NET_NOT_YET, /* still opening (in the background) */
    HIER_NET_UNKNOWN, /* open; some peer's address unknown here */
    HIER_NET_KNOWN,   /* open; every peer's address known */
};

static int hier_net_fabric_state(hier_comm_t *c)
{
    int known;
    if (!hier_proc_fabric_ready()) return HIER_NET_NOT_YET;
    hier_status_t st = hier_net_fabric_peers(c, &known);
    if (st != HIER_OK) return HIER_NET_NONE;
    return known ? HIER_NET_KNOWN : HIER_NET_UNKNOWN;
}

void hier_net_waiting(hier_comm_t *c, int on)
{
    if (c->pml_waiting == on) return;
    c->pml_waiting = on;
    if (on) __atomic_fetch_add(&hier_stats_pml_waiting, 1, __ATOMIC_RELAXED);
    else __atomic_fetch_sub(&hier_stats_pml_waiting, 1, __ATOMIC_RELAXED);
}

hier_status_t hier_net_switch(hier_comm_t *c)
{
    int v = hier_net_fabric_state(c);                                                              /* 1 */
    HIER_LOG(HIER_LOG_DEBUG, "rank %d: asks whether every endpoint is open at call %llu (ask %llu): %d here", c->rank,
             (unsigned long long)c->pml_calls, (unsigned long long)c->pml_asks, v);
    if (hier_xchg_agree(c, &v, 1) != 0) return HIER_NOT_READY; /* (asked again: the calls say what failed) */ /* 2 */
    if (v == HIER_NET_NOT_YET) return HIER_NOT_READY;                                              /* 3 */
    hier_net_waiting(c, 0);
    if (v == HIER_NET_UNKNOWN && hier_net_exchange_addresses(c) == HIER_OK) v = HIER_NET_KNOWN;
    if (v == HIER_NET_KNOWN) {
        hier_net_go_fabric(c);
        HIER_LOG(HIER_LOG_COMM, "rank %d: every rank's libfabric endpoint is open: its calls between nodes go over "
                 "libfabric from call %llu on", c->rank, (unsigned long long)c->pml_calls);
        return HIER_OK;
    }
    HIER_LOG(HIER_LOG_COMM, "rank %d: libfabric cannot serve every rank: its calls between nodes stay on Open MPI's "
             "point-to-point", c->rank);
    return HIER_OK;
}

void hier_net_tier_release(void *mr)
{
    hier_fabric_mr_dereg(mr);
}

/* The executor's settings from the communicator: its waits, its send queues (the node's step memory) and its
 * transport. Made at every decision (hier_node_decide), which is where the queues may grow, and at the move to
 * libfabric, after which the decisions cached go too (hier_node_pipe_redepth: their tiers were not
 * registered), so a call decided before finds them as they are. */
void hier_net_exec_set(hier_comm_t *c)
{
    hier_net_t *net = c->net;
    hier_net_exec_t *x = &net->netx;
    const hier_node_t *nd = c->node; /* (NULL while the set-up makes the level: no queues yet) */
    x->progress = c->ops.progress; /* (the process's too: every communicator gives the same) */
    x->spin = HIER_NET_SPIN;
    x->progress_every = nd ? (unsigned)nd->wait.progress_every : 1; /* (the node's waits decide) */
    for (unsigned d = 0; d < HIER_RUN_DEPTH_MAX; d++) /* (a run without a queue refuses to start) */
        x->run[d].q = nd && d < nd->nqueues ? (hier_net_queue_t){.q = nd->sendq + d * nd->nsteps, .cap = nd->nsteps}
                                            : (hier_net_queue_t){0};
    if (!net->fabric) { /* (Open MPI's point-to-point: a mailbox is a tag, a run's its index; sends copied) */
        x->link = &hier_link_pml;
        x->fab = NULL;
        x->peers = NULL;
        x->links = net->links;
        x->mboxes = NULL;
        x->mbox = 0;
        return;
    }
    x->link = &hier_link_chan;
    x->fab = x->fab ? x->fab : hier_proc_fabric(); /* (the process's one endpoint: it stays) */
    x->peers = net->peers;
    x->links = net->links;
    x->mboxes = net->mboxes;
    x->mbox = net->mbox;
}

void hier_net_tier_register(hier_comm_t *c, hier_tier_t *tier)
{
    if (!c->net->fabric || tier->mr || tier->mr_tried) return; /* (a recycled segment brings its own) */
    tier->mr_tried = 1;
    if (c->layout.me >= c->layout.pieces) return; /* (sends nothing from its slot) */
    hier_fabric_t *fab = c->net->netx.fab ? c->net->netx.fab : hier_proc_fabric();
    if (hier_fabric_mr_reg(fab, tier->slots[c->layout.me], hier_tier_bytes(tier), &tier->mr) != HIER_OK)
        tier->mr = NULL;
}

hier_status_t hier_net_pair(hier_comm_t *c, const hier_call_t *call, hier_reduce_kernel_t kernel,
                            uint64_t *net_bytes_p)
{
    hier_net_exec_t *x = &c->net->netx;
    hier_status_t st;
    hier_net_exec_set(c);
    x->mr = NULL; /* (no tier: every send copied) */
    x->mr_base = NULL;
    x->mr_len = 0;
    x->net_bytes = 0;
    switch (call->coll) {
    case HIER_COLL_ALLREDUCE:
        st = hier_exec_pair_allreduce(x, c->rank, call->sbuf, call->rbuf, call->count, call->esize, kernel);
        break;
    case HIER_COLL_ALLGATHER: st = hier_exec_pair_allgather(x, c->rank, call->sbuf, call->rbuf, call->count); break;
    default:
        st = hier_exec_pair_reduce_scatter(x, c->rank, call->sbuf, call->rbuf, call->rcounts, c->rs_displs,
                                           call->esize, kernel);
    }
    *net_bytes_p += x->net_bytes;
    x->net_bytes = 0;
    return st;
}
