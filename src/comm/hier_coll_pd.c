/* hier_coll_pd.c: allgather of device buffers NIC to NIC ("peer direct").
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
 * Every rank must take the same path, whatever its own buffers: a rank
 * with host buffers votes no. Each call with blocks of device_peer_direct_min
 * bytes or more agrees (one previous-module allreduce of an int) whether every
 * rank's buffers are registered device memory; if not, device buffers are
 * staged (hier_coll_dev.c). Host-only applications pay one agreement per
 * communicator: the first one finds a rank without a device backend and
 * switches peer direct off. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hier_lock.h"
#include "comm/hier_coll_dev.h"
#include "comm/hier_comm_impl.h"
#include "net/hier_dev_mr.h"
#include "base/hier_log.h"
#include "exec/hier_net_exec.h"
#include "base/hier_params.h"

enum {
    HIER_PD_NONE,   /* not tried yet */
    HIER_PD_OFF,    /* every rank agreed it cannot be used: no more agreements */
    HIER_PD_READY,  /* channels up: every eligible call agrees */
    HIER_PD_BROKEN, /* a call failed here: this rank votes no from now on */
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
} hier_pd_info_t;

static int hier_pd_pos(const hier_comm_t *c)
{
    return c->node_first[c->node] + c->me;
}

void hier_coll_pd_close(hier_comm_t *c)
{
    hier_chan_close(c->pd_left);
    hier_chan_close(c->pd_right);
    c->pd_left = c->pd_right = NULL;
    free(c->pd_counts);
    c->pd_counts = NULL;
}

/* My ring neighbours' channel ends and addresses: open and describe (1),
 * or connect to what they described (2). */
static int hier_pd_chans(hier_comm_t *c, hier_fabric_t *fab, hier_pd_info_t *mine)
{
    size_t len = sizeof(mine->addr);
    if (!(c->pd_counts = calloc((size_t)c->size, sizeof(*c->pd_counts))) ||
        hier_chan_open(fab, HIER_PD_CTL_SLOTS, sizeof(hier_pd_ctl_t), &c->pd_left) != HIER_OK ||
        hier_chan_open(fab, HIER_PD_CTL_SLOTS, sizeof(hier_pd_ctl_t), &c->pd_right) != HIER_OK ||
        hier_fabric_addr(fab, mine->addr, &len) != HIER_OK)
        return 0;
    mine->addr_len = len;
    hier_chan_direct_counts(c->pd_left, c->pd_counts, (size_t)c->size);
    hier_chan_info(c->pd_left, &mine->left);
    hier_chan_info(c->pd_right, &mine->right);
    return 1;
}

static int hier_pd_connect(hier_comm_t *c, hier_fabric_t *fab, const hier_pd_info_t *all)
{
    int total = c->size, pos = hier_pd_pos(c);
    int left = c->node_ranks[(pos + total - 1) % total], right = c->node_ranks[(pos + 1) % total];
    hier_fabric_peer_t lp, rp;
    if (all[left].addr_len > HIER_FABRIC_ADDR_MAX || all[right].addr_len > HIER_FABRIC_ADDR_MAX) return 0;
    return hier_fabric_insert(fab, all[left].addr, &lp) == HIER_OK &&
           hier_fabric_insert(fab, all[right].addr, &rp) == HIER_OK &&
           hier_chan_connect(c->pd_left, lp, &all[left].right) == HIER_OK &&
           hier_chan_connect(c->pd_right, rp, &all[right].left) == HIER_OK;
}

/* Set-up, collective, at the first eligible allgather:
 * 1. agree that every rank has a device backend and an endpoint that
 *    registers device memory;
 * 2. open a channel end for each ring neighbour;
 * 3. allgather addresses and channel descriptions;
 * 4. connect, and agree. Any failure switches peer direct off for good. */
static void hier_pd_setup(hier_comm_t *c)
{
    hier_fabric_t *fab = NULL;
    hier_pd_info_t mine = {0};
    int layout = hier_comm_ensure_layout(c); /* collective: every rank, first */
    hier_pd_info_t *all = calloc((size_t)c->size, sizeof(*all));
    int ok = layout && all && hier_accel_has_backend() && (fab = hier_core_fabric()) != NULL &&
             hier_fabric_hmem(fab, 0); /* 1 */
    if (c->ops.agree(&ok, c->ops.arg) != 0 || !ok) goto off;
    ok = hier_pd_chans(c, fab, &mine); /* 2 */
    mine.max_msg = hier_fabric_max_msg(fab);
    if (c->ops.allgather(&mine, all, sizeof(mine), c->ops.arg) != 0) ok = 0; /* 3 */
    if (ok) ok = hier_pd_connect(c, fab, all);                               /* 4 */
    c->pd_max_msg = SIZE_MAX; /* every rank cuts blocks alike: by the smallest limit */
    for (int r = 0; ok && r < c->size; r++)
        if (all[r].max_msg < c->pd_max_msg) c->pd_max_msg = all[r].max_msg;
    free(all);
    all = NULL;
    if (c->ops.agree(&ok, c->ops.arg) != 0 || !ok) goto off;
    c->pd_state = HIER_PD_READY;
    HIER_LOG(HIER_LOG_COMM, "peer-direct allgather ready: ring position %d of %d over %s", hier_pd_pos(c), c->size,
             hier_fabric_provider(fab));
    return;

off:
    free(all);
    hier_coll_pd_close(c);
    c->pd_state = HIER_PD_OFF;
    HIER_LOG(HIER_LOG_COMM, "no peer-direct allgather on this communicator (no device backend or no FI_HMEM "
             "endpoint on some rank): device buffers are staged");
}

/* A turn of a waiting loop (hier_chan_wait_turn): the endpoint, Open MPI,
 * the CPU, the clock; and a write of ours that failed on either channel. */
static hier_status_t hier_pd_turn(hier_comm_t *c, unsigned turn, time_t *deadline, const char *what)
{
    hier_status_t st = hier_chan_wait_turn(hier_core_fabric(), c->ops.progress, HIER_PD_SPIN, turn, deadline, what);
    if (st == HIER_OK) st = hier_chan_status(c->pd_left);
    return st == HIER_OK ? hier_chan_status(c->pd_right) : st;
}

/* Wait for every piece the left neighbour wrote at its step s. */
static hier_status_t hier_pd_wait_block(hier_comm_t *c, int s, size_t nseg)
{
    time_t deadline = 0;
    hier_status_t st = HIER_OK;
    for (unsigned k = 0; st == HIER_OK && hier_chan_direct_count(c->pd_counts, (size_t)s) < nseg; k++)
        st = hier_pd_turn(c, k, &deadline, "peer-direct allgather: waiting for a block from the previous rank");
    return st;
}

/* One call's registrations: receive buffer, and send buffer unless in place. */
typedef struct {
    hier_dev_mr_t recv, send;
} hier_pd_regs_t;

static int hier_pd_register(hier_fabric_t *fab, const hier_coll_dev_call_t *d, int in_place, hier_pd_regs_t *regs)
{
    if (hier_dev_mr_get(fab, &d->rbuf, &regs->recv) != HIER_OK) return 0;
    if (in_place || hier_dev_mr_get(fab, &d->sbuf, &regs->send) == HIER_OK) return 1;
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
    size_t max = c->pd_max_msg;
    for (size_t done = 0, n; done < len; done += n) {
        n = len - done < max ? len - done : max;
        time_t deadline = 0;
        int posted = 0;
        for (unsigned k = 0; !posted; k++) {
            hier_status_t st = hier_chan_try_write_direct(c->pd_right, src + done, n, mr, to->rkey,
                                                          to->off + off + done, (uint32_t)step, &posted);
            if (st == HIER_OK && !posted)
                st = hier_pd_turn(c, k, &deadline, "peer-direct allgather: room to write to the next rank");
            if (st != HIER_OK) return st;
        }
        c->net_bytes += n;
    }
    return HIER_OK;
}

/* A control message to the left neighbour, waiting (and yielding) for a slot. */
static hier_status_t hier_pd_send_ctl(hier_comm_t *c, const hier_pd_ctl_t *ctl)
{
    time_t deadline = 0;
    hier_status_t st = HIER_OK;
    int sent = 0;
    for (unsigned k = 0; st == HIER_OK && !sent; k++)
        if ((st = hier_chan_try_send(c->pd_left, ctl, sizeof(*ctl), &sent)) == HIER_OK && !sent)
            st = hier_pd_turn(c, k, &deadline, "peer-direct allgather: waiting for a control slot");
    return st;
}

/* The next control message from the right neighbour, of the kind expected. */
static hier_status_t hier_pd_recv_ctl(hier_comm_t *c, uint64_t kind, hier_pd_ctl_t *ctl)
{
    const void *msg = NULL;
    size_t len = 0;
    int got = 0;
    time_t deadline = 0;
    hier_status_t st = HIER_OK;
    for (unsigned k = 0; st == HIER_OK && !got; k++)
        if ((st = hier_chan_try_recv(c->pd_right, &msg, &len, &got)) == HIER_OK && !got)
            st = hier_pd_turn(c, k, &deadline, "peer-direct allgather: waiting for the next rank's control message");
    if (st != HIER_OK) return st;
    if (len == sizeof(*ctl)) memcpy(ctl, msg, sizeof(*ctl));
    if (len != sizeof(*ctl) || ctl->kind != kind) {
        HIER_ERROR("peer-direct allgather: unexpected control message (%zu bytes, kind %llu; expected kind %llu)",
                   len, len == sizeof(*ctl) ? (unsigned long long)ctl->kind : 0ULL, (unsigned long long)kind);
        return HIER_ERR_INTERNAL;
    }
    return hier_chan_release(c->pd_right);
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
static hier_status_t hier_pd_ring(hier_comm_t *c, const hier_coll_dev_call_t *d,
                                  const uint8_t *sbuf, uint8_t *rbuf, size_t block, const hier_pd_regs_t *regs)
{
    int total = c->size, pos = hier_pd_pos(c);
    size_t max = c->pd_max_msg, nseg = block / max + (block % max != 0); /* (max may be SIZE_MAX) */
    hier_pd_ctl_t mine = {.kind = HIER_PD_WHERE, .rkey = hier_fabric_mr_rkey(regs->recv.mr),
                          .off = (uint64_t)(hier_pd_nic(&d->rbuf, &regs->recv, rbuf) - regs->recv.nic_base)};
    hier_pd_ctl_t right, done = {.kind = HIER_PD_DONE};
    hier_lock_take(); /* (counted into by whichever thread progresses) */
    memset(c->pd_counts, 0, (size_t)total * sizeof(*c->pd_counts));          /* 1 */
    hier_lock_drop();
    hier_status_t st = hier_pd_send_ctl(c, &mine);
    if (st == HIER_OK && sbuf)                                                 /* 2 */
        st = hier_accel_copy_d2d(d->rbuf.backend, rbuf + (size_t)c->rank * block, sbuf, block);
    if (st == HIER_OK) st = hier_pd_recv_ctl(c, HIER_PD_WHERE, &right); /* 3 */
    for (int s = 0; s < total - 1 && st == HIER_OK; s++) { /* 4 */
        int k = c->node_ranks[(pos - s + total) % total];
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
    if (st == HIER_OK && d->rbuf.backend->flush_rdma) st = d->rbuf.backend->flush_rdma(d->rbuf.range.device);
    if (st == HIER_OK) st = hier_pd_send_ctl(c, &done);
    if (st == HIER_OK) st = hier_pd_recv_ctl(c, HIER_PD_DONE, &right);
    time_t deadline = 0;
    int per_call = !regs->recv.cached || (sbuf && !regs->send.cached);
    for (unsigned k = 0; st == HIER_OK && per_call && hier_chan_direct_pending(c->pd_right); k++)
        st = hier_pd_turn(c, k, &deadline, "peer-direct allgather: waiting for my writes to complete");
    return st;
}

int hier_coll_pd_allgather(hier_comm_t *c, const hier_coll_dev_call_t *d, int device, const void *sbuf, void *rbuf,
                           size_t block, int *all_device_p, hier_path_t *path_p, hier_status_t *st_p)
{
    if (!hier_params.device_peer_direct || hier_params.device_force_staging || c->size < 2 ||
        block < hier_params.device_peer_direct_min || c->pd_state == HIER_PD_OFF)
        return 0;
    if (c->pd_state == HIER_PD_NONE) hier_pd_setup(c);
    if (c->pd_state == HIER_PD_OFF) return 0;

    hier_fabric_t *fab = hier_core_fabric();
    hier_pd_regs_t regs;
    memset(&regs, 0, sizeof(regs));
    /* the vote: 0 host buffers here, 1 device buffers, 2 registered for peer direct; the least wins */
    int all_device = device && hier_accel_is_device(&d->rbuf) && (!sbuf || hier_accel_is_device(&d->sbuf));
    int vote = all_device + (all_device && c->pd_state == HIER_PD_READY && hier_pd_register(fab, d, !sbuf, &regs));
    if (c->ops.agree(&vote, c->ops.arg) != 0) vote = 0; /* a failed agreement fails on every rank */
    *all_device_p = vote >= 1;
    if (vote < 2) {
        hier_pd_release(&regs);
        return 0;
    }
    c->net_bytes = 0;
    *st_p = hier_pd_ring(c, d, sbuf, rbuf, block, &regs);
    hier_pd_release(&regs);
    if (*st_p == HIER_OK) {
        *path_p = HIER_PATH_NET_DIRECT;
    } else {
        c->pd_state = HIER_PD_BROKEN;
        HIER_ERROR("peer-direct allgather failed on rank %d: device buffers are staged from now on", c->rank);
    }
    return 1;
}
