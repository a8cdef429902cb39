/* hier_comm_pd.c: allgather of device buffers NIC to NIC ("peer direct"):
 * the communicator's one vote (at its first allgather with blocks of
 * device_peer_direct_min or more: are every rank's buffers device memory
 * the NIC registers?), the ring's channels, the buffers' registration and
 * a rank's own block. The ring is a schedule (sched/hier_sched_direct.c)
 * the network executor runs. docs/design.md, "Device (accelerator)
 * buffers". */
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_setup.h"
#include "comm/hier_comm_pd.h"
#include "comm/hier_proc.h"
#include "exec/hier_net_exec.h"
#include "net/hier_dev_mr.h"
#include "sched/hier_sched_direct.h"

enum {
    HIER_PD_NONE, /* not voted on yet */
    HIER_PD_OFF,  /* voted down, or failed: staged for good */
    HIER_PD_ON,   /* every eligible allgather goes NIC to NIC */
};

/* The communicator's ring: a channel end with each neighbour, and what
 * the network executor runs the ring's schedule with (sched/hier_sched_direct.c). */
struct hier_pd {
    int state;
    hier_chan_t *left;    /* with the rank before me in the ring: it writes into my buffer */
    hier_chan_t *right;   /* with the rank after me: I write into its buffer */
    uint32_t *counts;     /* per ring step, the left's writes that landed this call */
    size_t max_msg;       /* the smallest max_msg_size of all ranks: blocks are cut by it */
    hier_step_t *steps;   /* hier_sched_direct_max_steps(size) */
    void *links[HIER_DIRECT_PEERS]; /* the executor's participants: left, right */
    hier_net_send_t sendq[2 * HIER_NOTE_KINDS]; /* (a run's sends are its notes) */
    hier_exec_bufs_t bufs;
    hier_net_direct_t direct;
    hier_net_exec_t x;
};

#define HIER_PD_SPIN 16    /* endpoint polls before a waiting rank yields */
/* Note slots per channel: a slot is reused once its write completed, which
 * on shm needs the receiver's progress; two notes per call, so a few
 * calls' worth keeps a sender from waiting on a receiver busy elsewhere. */
#define HIER_PD_CTL_SLOTS 8

/* What the set-up exchanges per rank. */
typedef struct {
    uint64_t addr_len;
    uint8_t addr[HIER_FABRIC_ADDR_MAX];
    hier_chan_info_t left, right;
    uint64_t max_msg; /* the provider's, here */
    int64_t vote;     /* 1: my buffers are device memory the NIC took */
} hier_pd_info_t;

static int hier_pd_pos(const hier_comm_t *c)
{
    return (int)c->layout.node_first[c->layout.node] + c->layout.me;
}

int hier_comm_pd_voted(const hier_comm_t *c)
{
    return !c->pd ? -1 : c->pd->state == HIER_PD_ON;
}

void hier_comm_pd_close(hier_comm_t *c)
{
    if (!c->pd) return;
    hier_chan_close(c->pd->left);
    hier_chan_close(c->pd->right);
    free(c->pd->counts);
    free(c->pd->steps);
    free(c->pd);
    c->pd = NULL;
}

/* My ring neighbours' channel ends and address: open and describe. */
static int hier_pd_chans(hier_comm_t *c, hier_fabric_t *fab, hier_pd_info_t *mine)
{
    struct hier_pd *pd = c->pd;
    size_t len = sizeof(mine->addr);
    if (!(pd->counts = calloc((size_t)c->size, sizeof(*pd->counts))) ||
        !(pd->steps = calloc(hier_sched_direct_max_steps(c->size), sizeof(*pd->steps))) ||
        hier_chan_open(fab, HIER_PD_CTL_SLOTS, sizeof(hier_net_note_t), &pd->left) != HIER_OK ||
        hier_chan_open(fab, HIER_PD_CTL_SLOTS, sizeof(hier_net_note_t), &pd->right) != HIER_OK ||
        hier_fabric_addr(fab, mine->addr, &len) != HIER_OK)
        return 0;
    mine->addr_len = len;
    hier_chan_direct_counts(pd->left, pd->counts, (size_t)c->size);
    hier_chan_info(pd->left, &mine->left);
    hier_chan_info(pd->right, &mine->right);
    return 1;
}

/* Connect to what the neighbours described (their addresses through the peer directory). */
static int hier_pd_connect(hier_comm_t *c, hier_fabric_t *fab, const hier_pd_info_t *all)
{
    int total = c->size, pos = hier_pd_pos(c);
    int left = (int)c->layout.node_ranks[(pos + total - 1) % total];
    int right = (int)c->layout.node_ranks[(pos + 1) % total];
    hier_fabric_peer_t lp, rp;
    uint64_t lproc, rproc;
    c->ops.peer(left, &lproc, c->ops.arg);
    c->ops.peer(right, &rproc, c->ops.arg);
    hier_peer_t *l = hier_peers_get(lproc), *r = hier_peers_get(rproc);
    if (!l || !r || all[left].addr_len > HIER_FABRIC_ADDR_MAX || all[right].addr_len > HIER_FABRIC_ADDR_MAX ||
        hier_peer_learn(fab, l, all[left].addr, all[left].addr_len) != HIER_OK ||
        hier_peer_learn(fab, r, all[right].addr, all[right].addr_len) != HIER_OK || hier_peer_addr(l, &lp) ||
        hier_peer_addr(r, &rp))
        return 0;
    return hier_chan_connect(c->pd->left, lp, &all[left].right) == HIER_OK &&
           hier_chan_connect(c->pd->right, rp, &all[right].left) == HIER_OK;
}

/* One call's buffers as the NIC sees them: receive buffer, and send buffer
 * unless in place (host buffers described as an allocation of their own). */
typedef struct {
    hier_accel_buf_t rbuf, sbuf;
    hier_dev_mr_t recv, send;
} hier_pd_regs_t;

/* Device memory: its allocation's registration (kept in a cache); host
 * memory (a rank with host buffers once peer direct is on): the buffer
 * itself, for this call. */
static hier_status_t hier_pd_register_one(hier_fabric_t *fab, const hier_accel_buf_t *b, const void *p, size_t len,
                                          hier_accel_buf_t *as, hier_dev_mr_t *m)
{
    *as = *b;
    if (hier_accel_is_device(b)) return hier_dev_mr_get(fab, b, m);
    as->range = (hier_accel_range_t){.base = (uintptr_t)p, .len = len};
    *m = (hier_dev_mr_t){.nic_base = (uint8_t *)p};
    return hier_fabric_mr_reg(fab, (void *)p, len ? len : 1, &m->mr);
}

static int hier_pd_register(hier_fabric_t *fab, const hier_accel_pair_t *d, const void *sbuf, void *rbuf,
                            size_t block, size_t size, hier_pd_regs_t *regs)
{
    memset(regs, 0, sizeof(*regs));
    if (hier_pd_register_one(fab, &d->rbuf, rbuf, block * size, &regs->rbuf, &regs->recv) != HIER_OK) return 0;
    if (!sbuf || hier_pd_register_one(fab, &d->sbuf, sbuf, block, &regs->sbuf, &regs->send) == HIER_OK) return 1;
    hier_dev_mr_put(&regs->recv);
    return 0;
}

static void hier_pd_release(hier_pd_regs_t *regs)
{
    if (regs->send.mr) hier_dev_mr_put(&regs->send);
    if (regs->recv.mr) hier_dev_mr_put(&regs->recv);
}

/* The NIC's address of p, inside buffer b registered as m. */
static const uint8_t *hier_pd_nic(const hier_accel_buf_t *b, const hier_dev_mr_t *m, const void *p)
{
    return m->nic_base + ((uintptr_t)p - b->range.base);
}

/* My own block into place: between device buffers, device to device; with
 * host memory on either side, through that side's backend (or memcpy). */
static hier_status_t hier_pd_copy_own(const hier_pd_regs_t *d, void *dst, const void *src, size_t len)
{
    if (hier_accel_is_device(&d->rbuf) && hier_accel_is_device(&d->sbuf))
        return hier_accel_copy_d2d(d->rbuf.backend, dst, src, len);
    if (hier_accel_is_device(&d->rbuf)) return d->rbuf.backend->from_host(dst, src, len);
    if (hier_accel_is_device(&d->sbuf)) return d->sbuf.backend->to_host(dst, src, len);
    memcpy(dst, src, len);
    return HIER_OK;
}

/* The executor's setting for the ring, once voted on: its participants
 * are my neighbours' channels; peers' writes are counted by step. */
static void hier_pd_exec_init(hier_comm_t *c, hier_fabric_t *fab)
{
    struct hier_pd *pd = c->pd;
    pd->links[HIER_DIRECT_LEFT] = pd->left;
    pd->links[HIER_DIRECT_RIGHT] = pd->right;
    pd->bufs = (hier_exec_bufs_t){.esize = 1};
    pd->direct = (hier_net_direct_t){.counts = pd->counts, .ntags = (size_t)c->size, .max_write = pd->max_msg};
    pd->x = (hier_net_exec_t){.link = &hier_link_chan, .fab = fab, .links = pd->links, .bufs = &pd->bufs, .direct = &pd->direct,
                              .progress = c->ops.progress, .spin = HIER_PD_SPIN,
                              .progress_every = c->node ? (unsigned)c->node->wait.progress_every : 1,
                              .run[0].q = {.q = pd->sendq, .cap = sizeof(pd->sendq) / sizeof(pd->sendq[0])}};
}

/* This call's buffers, as the ring's steps name them (HIER_BUF_SEND, HIER_BUF_RECV). */
static void hier_pd_exec_bufs(struct hier_pd *pd, const uint8_t *sbuf, uint8_t *rbuf, const hier_pd_regs_t *regs)
{
    hier_net_direct_t *dw = &pd->direct;
    pd->bufs.sbuf = sbuf;
    pd->bufs.rbuf = rbuf;
    dw->mr[HIER_BUF_RECV] = regs->recv.mr;
    dw->nic[HIER_BUF_RECV] = hier_pd_nic(&regs->rbuf, &regs->recv, rbuf);
    dw->reg_off[HIER_BUF_RECV] = (uint64_t)(dw->nic[HIER_BUF_RECV] - regs->recv.nic_base);
    dw->mr[HIER_BUF_SEND] = sbuf ? regs->send.mr : NULL;
    dw->nic[HIER_BUF_SEND] = sbuf ? hier_pd_nic(&regs->sbuf, &regs->send, sbuf) : NULL;
    dw->reg_off[HIER_BUF_SEND] = sbuf ? (uint64_t)(dw->nic[HIER_BUF_SEND] - regs->send.nic_base) : 0;
}

/* Until my writes completed (a registration kept for this call only):
 * not part of the ring's schedule, since on shm a completion needs the
 * target's progress, and the target may be gone into other work already;
 * a cached registration lets them come in later polls. */
static hier_status_t hier_pd_settle(hier_comm_t *c)
{
    uint64_t still_since = 0;
    hier_status_t st = HIER_OK;
    for (unsigned k = 0; st == HIER_OK && hier_chan_direct_pending(c->pd->right); k++) {
        st = hier_chan_wait_turn(c->pd->x.fab, c->ops.progress, HIER_PD_SPIN, c->pd->x.progress_every, k,
                                 &still_since, "peer-direct allgather: waiting for my writes to complete");
        if (st == HIER_OK) st = hier_chan_status(c->pd->right);
    }
    return st;
}

/* The ring (sched/hier_sched_direct.c, whose step numbers these are) run
 * by the network executor:
 * 1. count nothing yet: no write of this call comes before my key (the
 *    schedule's first step) reached the left neighbour;
 * 2. my own block into place (device to device) while the ring runs,
 *    unless in place: no neighbour writes there;
 * 5. the blocks from the left made visible to the device where the backend
 *    says how; my writes completed where the registration is this call's. */
static hier_status_t hier_pd_ring(hier_comm_t *c, const uint8_t *sbuf, uint8_t *rbuf, size_t block,
                                  const hier_pd_regs_t *regs)
{
    struct hier_pd *pd = c->pd;
    hier_direct_args_t a = {.total = c->size, .pos = hier_pd_pos(c), .ring = c->layout.node_ranks, .block = block,
                            .in_place = !sbuf};
    size_t n = hier_sched_direct_allgather(&a, pd->steps);
    hier_pd_exec_bufs(pd, sbuf, rbuf, regs);
    hier_lock_take(); /* (counted into by whichever thread progresses) */
    memset(pd->counts, 0, (size_t)c->size * sizeof(*pd->counts));                             /* 1 */
    hier_lock_drop();
    hier_status_t st = hier_net_exec_start(&pd->x, 0, pd->steps, n);
    if (st != HIER_OK) return st;
    if (sbuf) st = hier_pd_copy_own(regs, rbuf + (size_t)c->rank * block, sbuf, block);       /* 2 */
    hier_status_t ring = hier_net_exec_finish(&pd->x, 0); /* (finished whatever 2 did: the neighbours wait on it) */
    if (st == HIER_OK) st = ring;
    if (st == HIER_OK && regs->rbuf.backend && regs->rbuf.backend->flush_rdma)              /* 5 */
        st = regs->rbuf.backend->flush_rdma(regs->rbuf.range.device);
    if (st == HIER_OK && (!regs->recv.cached || (sbuf && !regs->send.cached))) st = hier_pd_settle(c);
    return st;
}

/* The vote, collective, at the communicator's first eligible allgather:
 * 1. can I take part at all (a device backend, an endpoint registering
 *    device memory, a ring no longer than the channels' tags)? Then open a
 *    channel end for each neighbour, and vote: are this call's buffers
 *    device memory, registered?
 * 2. allgather addresses, channel descriptions, message limits and votes:
 *    everyone sees every vote, so all decide alike;
 * 3. every vote yes: connect to the neighbours, and agree that it worked;
 * on for good when it did, else everything closed and off for good. */
static int hier_pd_vote(hier_comm_t *c, const hier_accel_pair_t *d, const void *sbuf, void *rbuf, size_t block,
                        hier_pd_regs_t *regs)
{
    hier_fabric_t *fab = NULL;
    hier_pd_info_t mine = {0}, *all = calloc((size_t)c->size, sizeof(*all));
    int yes = all && (c->pd = calloc(1, sizeof(*c->pd))) && hier_accel_has_backend() &&           /* 1 */
              (uint32_t)c->size <= HIER_CHAN_MAX_TAGS && (fab = hier_proc_fabric()) && hier_fabric_hmem(fab, 0) &&
              hier_accel_is_device(&d->rbuf) && (!sbuf || hier_accel_is_device(&d->sbuf)) &&
              hier_pd_chans(c, fab, &mine) && hier_pd_register(fab, d, sbuf, rbuf, block, (size_t)c->size, regs);
    mine.vote = yes;
    mine.max_msg = fab ? hier_fabric_max_msg(fab) : 0;
    if (c->ops.allgather(&mine, all, sizeof(mine), c->ops.arg) != 0) yes = 0;                      /* 2 */
    int all_yes = yes != 0 || !all;
    for (int r = 0; all && r < c->size; r++) all_yes &= all[r].vote != 0;
    if (all_yes) {                                                                                   /* 3 */
        int ok = hier_pd_connect(c, fab, all);
        c->pd->max_msg = SIZE_MAX; /* every rank cuts blocks alike: by the smallest limit */
        for (int r = 0; r < c->size; r++)
            if (all[r].max_msg < c->pd->max_msg) c->pd->max_msg = all[r].max_msg;
        if (c->ops.agree(&ok, 1, c->ops.arg) != 0) ok = 0;
        all_yes = ok;
        if (ok) hier_pd_exec_init(c, fab);
    }
    free(all);
    if (all_yes) {
        c->pd->state = HIER_PD_ON;
        HIER_LOG(HIER_LOG_COMM, "peer-direct allgather on: ring position %d of %d over %s", hier_pd_pos(c), c->size,
                 hier_fabric_provider(fab));
        return 1;
    }
    if (yes) hier_pd_release(regs);
    hier_comm_pd_close(c);
    if ((c->pd = calloc(1, sizeof(*c->pd)))) c->pd->state = HIER_PD_OFF;
    HIER_LOG(HIER_LOG_COMM, "no peer-direct allgather on this communicator (some rank's buffers are host memory, or "
             "no device backend or FI_HMEM endpoint there): device buffers are staged");
    return 0;
}

int hier_comm_pd_allgather(hier_comm_t *c, const hier_accel_pair_t *d, const hier_call_t *call,
                           hier_result_t *res, hier_status_t *st_p)
{
    const void *sbuf = call->sbuf;
    void *rbuf = call->rbuf;
    size_t block = call->count;
    hier_pd_regs_t regs = {.recv = {.mr = NULL}};
    /* (over the point-to-point until libfabric is open everywhere: the vote
     * waits for it, rather than open it on MPI's thread; staged meanwhile) */
    if (!c->pd && c->state == HIER_COMM_PML) return 0;
    if (!c->pd && !hier_pd_vote(c, d, sbuf, rbuf, block, &regs)) return 0;
    if (c->pd->state == HIER_PD_ON && regs.recv.mr == NULL &&
        !hier_pd_register(hier_proc_fabric(), d, sbuf, rbuf, block, (size_t)c->size, &regs)) {
        HIER_ERROR("peer-direct allgather: rank %d cannot register its buffers", c->rank);
        *st_p = HIER_ERR_INTERNAL; /* (its neighbours time out: the communicator falls back for good) */
        hier_comm_refuse(c, HIER_PATH_FALLBACK_DEVICE);
        return 1;
    }
    *st_p = hier_pd_ring(c, sbuf, rbuf, block, &regs);
    hier_pd_release(&regs);
    if (*st_p == HIER_OK) { /* (NIC to NIC: nothing staged; every block but mine written once, step 4) */
        *res = (hier_result_t){.path = HIER_PATH_NET_DIRECT, .net_bytes = (uint64_t)(c->size - 1) * block};
    } else {
        hier_comm_refuse(c, HIER_PATH_FALLBACK_DEVICE);
        HIER_ERROR("peer-direct allgather failed on rank %d: this communicator uses the previous component from "
                   "now on", c->rank);
    }
    return 1;
}
