/* hier_comm_pd.c: allgather of device buffers NIC to NIC ("peer direct").
 *
 * When the provider registers device memory (FI_HMEM: efa with device RDMA,
 * shm), an allgather needs no host copy at all: every rank registers its
 * receive buffer and the blocks travel a ring over every rank of the
 * communicator, written by RDMA from one device buffer straight into the
 * next. The ring visits the ranks node by node, so only one edge per node
 * crosses the network: each node's link carries every other node's blocks
 * once, as the hierarchical allgather does, and the ranks of a node pass
 * blocks through the provider's intra-node path (CUDA IPC on shm, the NIC's
 * loopback on efa) instead of the CPU.
 *
 * Every rank must take the same path, whatever its own buffers, and no call
 * may cost an agreement. So the communicator decides once: its first
 * allgather with blocks of device_peer_direct_min bytes or more sets the
 * ring up and votes whether every rank's buffers are device memory the NIC
 * takes. Yes: every such allgather from then on goes NIC to NIC, a rank
 * that passes host buffers then registering them for the call; no (or no
 * endpoint that registers device memory, or no device backend on some
 * rank): peer direct is off for good and device buffers are staged
 * (exec/hier_stage.c). Host-only jobs never vote: no rank has a backend. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_host.h"
#include "comm/hier_comm_pd.h"
#include "comm/hier_proc.h"
#include "net/hier_dev_mr.h"

enum {
    HIER_PD_NONE, /* not voted on yet */
    HIER_PD_OFF,  /* voted down, or failed: staged for good */
    HIER_PD_ON,   /* every eligible allgather goes NIC to NIC */
};

/* The communicator's ring: a channel end with each neighbour. */
struct hier_pd {
    int state;
    hier_chan_t *left;    /* with the rank before me in the ring: it writes into my buffer */
    hier_chan_t *right;   /* with the rank after me: I write into its buffer */
    uint32_t *counts;     /* per ring step, the left's writes that landed this call */
    size_t max_msg;       /* the smallest max_msg_size of all ranks: blocks are cut by it */
};

#define HIER_PD_SPIN 16    /* endpoint polls before a waiting rank yields */
/* Control slots per channel: a slot is reused once its write completed,
 * which on shm needs the receiver's progress; two messages per call, so a
 * few calls' worth keeps a sender from waiting on a receiver busy elsewhere. */
#define HIER_PD_CTL_SLOTS 8

/* Control messages between ring neighbours, towards the left. */
enum { HIER_PD_WHERE, HIER_PD_DONE };
typedef struct {
    uint64_t kind;
    hier_fabric_rkey_t rkey; /* WHERE: my receive buffer, for the left neighbour's writes */
    uint64_t off;            /* of the receive buffer in the registration */
} hier_pd_ctl_t;

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
    free(c->pd);
    c->pd = NULL;
}

/* My ring neighbours' channel ends and address: open and describe. */
static int hier_pd_chans(hier_comm_t *c, hier_fabric_t *fab, hier_pd_info_t *mine)
{
    struct hier_pd *pd = c->pd;
    size_t len = sizeof(mine->addr);
    if (!(pd->counts = calloc((size_t)c->size, sizeof(*pd->counts))) ||
        hier_chan_open(fab, HIER_PD_CTL_SLOTS, sizeof(hier_pd_ctl_t), &pd->left) != HIER_OK ||
        hier_chan_open(fab, HIER_PD_CTL_SLOTS, sizeof(hier_pd_ctl_t), &pd->right) != HIER_OK ||
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

/* A turn of a waiting loop (hier_chan_wait_turn): the endpoint, Open MPI,
 * the CPU, the clock; and a write of ours that failed on either channel. */
static hier_status_t hier_pd_turn(hier_comm_t *c, unsigned turn, uint64_t *still_since, const char *what)
{
    hier_status_t st = hier_chan_wait_turn(hier_proc_fabric(), c->ops.progress, HIER_PD_SPIN,
                                           c->node ? (unsigned)c->node->wait.progress_every : 1, turn, still_since,
                                           what);
    if (st == HIER_OK) st = hier_chan_status(c->pd->left);
    return st == HIER_OK ? hier_chan_status(c->pd->right) : st;
}

/* Wait for every piece the left neighbour wrote at its step s. */
static hier_status_t hier_pd_wait_block(hier_comm_t *c, int s, size_t nseg)
{
    uint64_t still_since = 0;
    hier_status_t st = HIER_OK;
    for (unsigned k = 0; st == HIER_OK && hier_chan_direct_count(c->pd->counts, (size_t)s) < nseg; k++)
        st = hier_pd_turn(c, k, &still_since, "peer-direct allgather: waiting for a block from the previous rank");
    return st;
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

static int hier_pd_register(hier_fabric_t *fab, const hier_stage_bufs_t *d, const void *sbuf, void *rbuf,
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

/* Write `len` bytes (NIC address src) to offset `off` of the right
 * neighbour's registration, in pieces the provider takes, tagged with the
 * step; while the provider has no room, wait turns (the room may be the
 * neighbour's to make). */
static hier_status_t hier_pd_write(hier_comm_t *c, const uint8_t *src, size_t len, hier_fabric_mr_t *mr,
                                   const hier_pd_ctl_t *to, uint64_t off, int step)
{
    size_t max = c->pd->max_msg;
    for (size_t done = 0, n; done < len; done += n) {
        n = len - done < max ? len - done : max;
        uint64_t still_since = 0;
        int posted = 0;
        for (unsigned k = 0; !posted; k++) {
            hier_status_t st = hier_chan_try_write_direct(c->pd->right, src + done, n, mr, to->rkey,
                                                          to->off + off + done, (uint32_t)step, &posted);
            if (st == HIER_OK && !posted)
                st = hier_pd_turn(c, k, &still_since, "peer-direct allgather: room to write to the next rank");
            if (st != HIER_OK) return st;
        }
    }
    return HIER_OK;
}

/* A control message to the left neighbour, waiting (and yielding) for a slot. */
static hier_status_t hier_pd_send_ctl(hier_comm_t *c, const hier_pd_ctl_t *ctl)
{
    uint64_t still_since = 0;
    hier_status_t st = HIER_OK;
    int sent = 0;
    for (unsigned k = 0; st == HIER_OK && !sent; k++)
        if ((st = hier_chan_try_send(c->pd->left, 0, (uint32_t)ctl->kind, ctl, sizeof(*ctl), &sent)) == HIER_OK && !sent)
            st = hier_pd_turn(c, k, &still_since, "peer-direct allgather: waiting for a control slot");
    return st;
}

/* The next control message from the right neighbour, of the kind expected. */
static hier_status_t hier_pd_recv_ctl(hier_comm_t *c, uint64_t kind, hier_pd_ctl_t *ctl)
{
    hier_chan_msg_t m = {0};
    int got = 0;
    uint64_t still_since = 0;
    hier_status_t st = HIER_OK;
    for (unsigned k = 0; st == HIER_OK && !got; k++)
        if ((st = hier_chan_try_recv(c->pd->right, 0, &m, &got)) == HIER_OK && !got)
            st = hier_pd_turn(c, k, &still_since, "peer-direct allgather: waiting for the next rank's control message");
    if (st != HIER_OK) return st;
    if (m.len == sizeof(*ctl)) memcpy(ctl, m.data, sizeof(*ctl));
    hier_status_t rel = hier_chan_release(c->pd->right, &m);
    if (m.len != sizeof(*ctl) || ctl->kind != kind) {
        HIER_ERROR("peer-direct allgather: unexpected control message (%zu bytes, kind %llu; expected kind %llu)",
                   m.len, m.len == sizeof(*ctl) ? (unsigned long long)ctl->kind : 0ULL, (unsigned long long)kind);
        return HIER_ERR_INTERNAL;
    }
    return rel;
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

/* The ring, every rank at ring position pos:
 * 1. count nothing yet, and tell the left neighbour where to write (my
 *    receive buffer): no write of this call comes before that;
 * 2. my own block into place (device to device), unless in place;
 * 3. learn where the right neighbour wants its blocks;
 * 4. step s = 0 .. size - 2: write the block of position pos - s to the right
 *    (from step 1 on, the one the left neighbour wrote at step s - 1:
 *    wait for it first);
 * 5. wait for every block from the left (made visible to the device where
 *    the backend says how) and tell it so; wait until the
 *    right neighbour says it has all mine: the provider is done with my
 *    buffers, which are the caller's again on return. (Not the local
 *    completions: on shm they need the target's progress, and the target
 *    may be gone into other work already; they come in later polls.) A
 *    registration kept for this call only waits for them too. */
static hier_status_t hier_pd_ring(hier_comm_t *c, const uint8_t *sbuf, uint8_t *rbuf, size_t block,
                                  const hier_pd_regs_t *regs)
{
    const hier_pd_regs_t *d = regs; /* (the buffers as the NIC sees them) */
    int total = c->size, pos = hier_pd_pos(c);
    size_t max = c->pd->max_msg, nseg = block / max + (block % max != 0); /* (max may be SIZE_MAX) */
    hier_pd_ctl_t mine = {.kind = HIER_PD_WHERE, .rkey = hier_fabric_mr_rkey(regs->recv.mr),
                          .off = (uint64_t)(hier_pd_nic(&d->rbuf, &regs->recv, rbuf) - regs->recv.nic_base)};
    hier_pd_ctl_t right, done = {.kind = HIER_PD_DONE};
    hier_lock_take(); /* (counted into by whichever thread progresses) */
    memset(c->pd->counts, 0, (size_t)total * sizeof(*c->pd->counts));          /* 1 */
    hier_lock_drop();
    hier_status_t st = hier_pd_send_ctl(c, &mine);
    if (st == HIER_OK && sbuf)                                                 /* 2 */
        st = hier_pd_copy_own(d, rbuf + (size_t)c->rank * block, sbuf, block);
    if (st == HIER_OK) st = hier_pd_recv_ctl(c, HIER_PD_WHERE, &right); /* 3 */
    for (int s = 0; s < total - 1 && st == HIER_OK; s++) { /* 4 */
        int k = c->layout.node_ranks[(pos - s + total) % total];
        const uint8_t *src = hier_pd_nic(&d->rbuf, &regs->recv, rbuf + (size_t)k * block);
        hier_fabric_mr_t *mr = regs->recv.mr;
        if (s == 0 && sbuf) {
            src = hier_pd_nic(&d->sbuf, &regs->send, sbuf);
            mr = regs->send.mr;
        }
        if (s > 0) st = hier_pd_wait_block(c, s - 1, nseg);
        if (st == HIER_OK) st = hier_pd_write(c, src, block, mr, &right, (uint64_t)k * block, s);
    }
    for (int s = 0; s < total - 1 && st == HIER_OK; s++) st = hier_pd_wait_block(c, s, nseg); /* 5 */
    if (st == HIER_OK && d->rbuf.backend && d->rbuf.backend->flush_rdma)
        st = d->rbuf.backend->flush_rdma(d->rbuf.range.device);
    if (st == HIER_OK) st = hier_pd_send_ctl(c, &done);
    if (st == HIER_OK) st = hier_pd_recv_ctl(c, HIER_PD_DONE, &right);
    uint64_t still_since = 0;
    int per_call = !regs->recv.cached || (sbuf && !regs->send.cached);
    for (unsigned k = 0; st == HIER_OK && per_call && hier_chan_direct_pending(c->pd->right); k++)
        st = hier_pd_turn(c, k, &still_since, "peer-direct allgather: waiting for my writes to complete");
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
static int hier_pd_vote(hier_comm_t *c, const hier_stage_bufs_t *d, const void *sbuf, void *rbuf, size_t block,
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

int hier_comm_pd_allgather(hier_comm_t *c, const hier_stage_bufs_t *d, const hier_call_t *call,
                           hier_result_t *res, hier_status_t *st_p)
{
    const void *sbuf = call->sbuf;
    void *rbuf = call->rbuf;
    size_t block = call->count;
    hier_pd_regs_t regs = {.recv = {.mr = NULL}};
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
