/* hier_comm_net.c: a communicator's network level (several nodes only).
 *
 * Channels belong to process pairs (net/hier_peers.h), not communicators:
 * a communicator only names the processes its schedules talk to (its local
 * index on the nodes hier_sched_net_peers gives) and its box, where its
 * messages land in every process: the set-up exchanges the boxes, and the
 * peers' addresses only when some rank does not know them yet (once per
 * process pair). */
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_xchg.h"
#include "comm/hier_proc.h"
#include "sched/hier_sched_net.h"

/* Polls of the endpoint before a waiting rank yields: each poll is a
 * system call on tcp, so a few are worth a shared-memory spin of thousands. */
#define HIER_NET_SPIN 16

static _Atomic uint32_t hier_net_next_box = 1; /* boxes are never reused (0: tests' channels) */

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

uint32_t hier_net_new_box(void)
{
    return atomic_fetch_add(&hier_net_next_box, HIER_RUN_DEPTH_MAX); /* (a box per run in flight) */
}

hier_status_t hier_net_reserve(int size, hier_net_room_t *room)
{
    size_t n = (size_t)size; /* (nodes: at most the ranks) */
    hier_net_room_t r = {.net = calloc(1, sizeof(*r.net)), .peers = malloc(n * sizeof(*r.peers)),
                         .boxes = malloc(n * sizeof(*r.boxes)),
                         .talk = malloc((size_t)hier_sched_net_max_peers_upto(size) * sizeof(*r.talk))};
    if (!r.net || !r.peers || !r.boxes || !r.talk) {
        hier_net_room_free(&r);
        return HIER_ERR_NO_MEMORY;
    }
    *room = r;
    return HIER_OK;
}

void hier_net_room_free(hier_net_room_t *room)
{
    free(room->net);
    free(room->peers);
    free(room->boxes);
    free(room->talk);
    *room = (hier_net_room_t){0};
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

hier_status_t hier_net_make(hier_comm_t *c, uint32_t box, hier_net_room_t *room, int *known_p)
{
    const hier_layout_t *l = &c->layout;
    hier_fabric_t *fab = hier_proc_fabric();
    uint64_t self;
    *known_p = 1;
    if (!fab) {
        hier_net_room_free(room);
        return HIER_ERR_NOT_SUPPORTED;
    }
    c->ops.peer(c->rank, &self, c->ops.arg);
    hier_net_configure(fab, self);
    hier_net_t *net = room->net;
    int *talk = room->talk;
    net->peers = room->peers;
    net->boxes = room->boxes;
    memset(net->peers, 0, (size_t)l->nnodes * sizeof(*net->peers));
    memset(net->boxes, 0, (size_t)l->nnodes * sizeof(*net->boxes));
    net->box = box;
    c->net = net;
    *room = (hier_net_room_t){0};
    /* ranks of a local index past the fewest any node has own no piece: they never talk */
    size_t n = l->me < l->pieces ? hier_sched_net_peers(l->nnodes, l->node, hier_params.net_radix_max, talk) : 0;
    hier_status_t st = HIER_OK;
    for (size_t i = 0; i < n && st == HIER_OK; i++) {
        uint64_t proc;
        c->ops.peer(hier_layout_rank(l, talk[i], l->me), &proc, c->ops.arg);
        if (!(net->peers[talk[i]] = hier_peers_get(proc))) st = HIER_ERR_NO_MEMORY; /* (a peer met for the first time) */
        else if (!hier_peer_known(net->peers[talk[i]])) *known_p = 0;
    }
    free(talk);
    return st;
}

void hier_net_free(hier_comm_t *c)
{
    if (!c->net) return;
    free(c->net->peers);
    free(c->net->boxes);
    free(c->net);
    c->net = NULL;
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
    int ok = all && hier_fabric_addr(fab, mine.addr, &len) == HIER_OK;
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

void hier_net_tier_release(void *mr)
{
    hier_fabric_mr_dereg(mr);
}

/* The executor's settings for a run over `tier`: schedules send only from
 * my slot, so registered once (it stays with the segment, recycled or
 * not) it goes to the wire in place; refused, sends are copied. */
hier_net_exec_t *hier_net_exec_for(hier_comm_t *c, hier_tier_t *tier)
{
    hier_net_t *net = c->net;
    hier_fabric_t *fab = hier_proc_fabric();
    uint8_t *mine = tier->slots[c->layout.me];
    size_t len = hier_shm_parities(tier->seg) * hier_shm_parity_stride(tier->seg);
    if (!tier->mr && !tier->mr_tried && c->layout.me < c->layout.pieces &&
        hier_fabric_mr_reg(fab, mine, len, &tier->mr) != HIER_OK)
        tier->mr = NULL;
    tier->mr_tried = 1;
    hier_net_exec_t *x = &net->netx;
    x->fab = fab;
    x->peers = net->peers;
    x->link = &hier_link_chan;
    x->links = NULL;
    x->boxes = net->boxes;
    x->box = net->box;
    x->progress = hier_proc_glue_progress();
    x->spin = HIER_NET_SPIN;
    x->progress_every = (unsigned)c->node->wait.progress_every; /* (the node's waits decide: hier_node_wait_policy) */
    x->mr = tier->mr;
    x->mr_base = tier->mr ? mine : NULL;
    x->mr_len = tier->mr ? len : 0;
    for (unsigned d = 0; d < HIER_RUN_DEPTH_MAX; d++) /* (a run without a queue refuses to start) */
        x->run[d].q = d < c->node->nqueues ? (hier_net_queue_t){.q = c->node->sendq + d * c->node->nsteps,
                                                                .cap = c->node->nsteps}
                                           : (hier_net_queue_t){0};
    return x;
}
