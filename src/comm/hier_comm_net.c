/* hier_comm_net.c: a communicator's inter-node level. One libfabric endpoint
 * per process, opened by the first communicator that spans nodes and shared
 * by all; per communicator, every owner (local index below `pieces`) has one
 * credit channel to the rank of its local index on each other node. Channel
 * ids are per process and exchanged, so communicators never see each other's
 * messages. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "comm/hier_comm_impl.h"
#include "net/hier_dev_mr.h"
#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "exec/hier_net_exec.h"
#include "sched/hier_sched_net.h"
#include "base/hier_params.h"

/* Polls of the endpoint before a waiting rank yields: each poll is a
 * system call on tcp, so a few are worth a shared-memory spin of thousands. */
#define HIER_COMM_NET_SPIN 16

static hier_fabric_t *_Atomic hier_core_fab; /* (read unlocked by every waiting thread) */
static int hier_core_fab_tried;
/* Open MPI's progress; set by every communicator created (always the same
 * function), read by any waiting thread. */
static _Atomic hier_progress_fn_t hier_core_glue_progress;

void hier_core_set_progress(hier_progress_fn_t progress)
{
    atomic_store_explicit(&hier_core_glue_progress, progress, memory_order_relaxed);
}

/* A rank waiting in shared memory still polls the endpoint: its peers on
 * other nodes may need it to push its last writes (manual progress). */
void hier_core_progress(void)
{
    hier_fabric_t *fab = atomic_load_explicit(&hier_core_fab, memory_order_acquire);
    hier_progress_fn_t glue = atomic_load_explicit(&hier_core_glue_progress, memory_order_relaxed);
    if (glue) glue();
    if (fab) (void)hier_chan_progress(fab);
}

static hier_fabric_t *hier_core_fabric_locked(void)
{
    hier_fabric_t *fab = NULL;
    if (hier_core_fab || hier_core_fab_tried) return hier_core_fab;
    hier_core_fab_tried = 1;
    hier_fabric_config_t cfg = {.provider = hier_params.fabric_provider, .iface = hier_params.fabric_iface,
                                /* only where device buffers may come: FI_HMEM can cost host traffic (shm) */
                                .hmem = hier_params.device_peer_direct && !hier_params.device_force_staging &&
                                        hier_accel_has_backend(),
                                .cuda = hier_accel_cuda_backend() != NULL};
    if (hier_fabric_open(&cfg, &fab) != HIER_OK) fab = NULL;
    atomic_store_explicit(&hier_core_fab, fab, memory_order_release);
    return fab;
}

/* The process's endpoint, opened once; NULL when no provider works (tried once). */
hier_fabric_t *hier_core_fabric(void)
{
    hier_fabric_t *fab = atomic_load_explicit(&hier_core_fab, memory_order_acquire);
    if (fab) return fab; /* (every wait turn of peer direct asks: no lock once open) */
    hier_lock_take(); /* (threads: one opens it) */
    fab = hier_core_fabric_locked();
    hier_lock_drop();
    return fab;
}

void hier_core_fabric_close(void)
{
    hier_dev_mr_flush();
    hier_lock_take();
    hier_fabric_close(hier_core_fab);
    atomic_store_explicit(&hier_core_fab, NULL, memory_order_release);
    hier_core_fab_tried = 0;
    hier_lock_drop();
}

/* Channels first: closing drains their writes, which may read my slot. */
void hier_comm_close_net(hier_comm_t *c)
{
    for (int n = 0; c->chans && n < c->nnodes; n++) {
        hier_chan_close(c->chans[n]);
        c->chans[n] = NULL;
    }
    hier_fabric_mr_dereg(c->slot_mr);
    c->slot_mr = NULL;
}

typedef struct {
    uint64_t len;
    uint8_t addr[HIER_FABRIC_ADDR_MAX];
} hier_comm_addr_t;

/* Step 3 of the set-up: my channels, one per node my schedules talk to
 * (ring neighbours, recursive-doubling partners: 2 + log2 nodes, not all),
 * and their descriptions. */
static hier_status_t hier_comm_open_chans(hier_comm_t *c, hier_fabric_t *fab, hier_chan_info_t *mine)
{
    size_t slot = hier_params.fabric_slot_size < 4096 ? 4096 : hier_params.fabric_slot_size;
    if (slot + 64 > hier_fabric_max_msg(fab)) slot = hier_fabric_max_msg(fab) - 64; /* a slot is one write */
    slot &= ~(size_t)63; /* whole elements of any type in every message (reductions split at slot ends) */
    size_t slots = hier_params.fabric_slots < 2 ? 2 : (size_t)hier_params.fabric_slots;
    int *peers = malloc(sizeof(*peers) * (size_t)hier_sched_net_max_peers(c->nnodes));
    if (!peers) return HIER_ERR_NO_MEMORY;
    size_t npeers = hier_sched_net_peers(c->nnodes, c->node, peers);
    /* Schedules send only from my slot: registered, it goes to the wire in
     * place. Without it (registration refused) sends are copied. */
    if (c->me < c->pieces &&
        hier_fabric_mr_reg(fab, hier_shm_slot(c->shm, c->me), 2 * hier_shm_parity_stride(c->shm), &c->slot_mr) != HIER_OK)
        c->slot_mr = NULL;
    for (size_t i = 0; i < npeers && c->me < c->pieces; i++) {
        int n = peers[i];
        hier_status_t st = hier_chan_open(fab, slots, slot, &c->chans[n]);
        if (st != HIER_OK) {
            free(peers);
            return st;
        }
        hier_chan_info(c->chans[n], &mine[n]);
    }
    free(peers);
    return HIER_OK;
}

/* Step 5: insert my peers' addresses and connect my channels to theirs. */
static hier_status_t hier_comm_connect_chans(hier_comm_t *c, hier_fabric_t *fab, const hier_comm_addr_t *addrs,
                                             const hier_chan_info_t *infos)
{
    for (int n = 0; n < c->nnodes && c->me < c->pieces; n++) {
        if (!c->chans[n]) continue;
        int r = c->node_ranks[c->node_first[n] + c->me];
        hier_fabric_peer_t peer;
        if (addrs[r].len > HIER_FABRIC_ADDR_MAX) return HIER_ERR_INVALID_ARG;
        hier_status_t st = hier_fabric_insert(fab, addrs[r].addr, &peer);
        if (st != HIER_OK) return st;
        st = hier_chan_connect(c->chans[n], peer, &infos[(size_t)r * (size_t)c->nnodes + (size_t)c->node]);
        if (st != HIER_OK) return st;
    }
    return HIER_OK;
}

/* Channel set-up, collective over the communicator, at its first multi-node call:
 * 1. open the process's endpoint (once) and agree that every rank has one;
 * 2. allgather every rank's address;
 * 3. owners open a channel per node their schedules talk to;
 * 4. allgather every rank's channel descriptions (one per node);
 * 5. insert the peers' addresses and connect the channels;
 * 6. agree; on any failure everyone closes its channels and the communicator
 *    uses the previous component from then on. */
static hier_status_t hier_comm_setup_net(hier_comm_t *c)
{
    hier_fabric_t *fab = hier_core_fabric(); /* 1 */
    hier_comm_addr_t mine = {0}, *addrs = calloc((size_t)c->size, sizeof(*addrs));
    hier_chan_info_t *my_info = calloc((size_t)c->nnodes, sizeof(*my_info));
    hier_chan_info_t *infos = calloc((size_t)c->size * (size_t)c->nnodes, sizeof(*infos));
    size_t len = sizeof(mine.addr);
    int ok = fab && addrs && infos && my_info;

    if (c->ops.agree(&ok, c->ops.arg) != 0 || !ok) goto close_chans;
    ok = hier_fabric_addr(fab, mine.addr, &len) == HIER_OK; /* 2 */
    mine.len = len;
    if (c->ops.allgather(&mine, addrs, sizeof(mine), c->ops.arg) != 0) ok = 0;
    if (ok) ok = hier_comm_open_chans(c, fab, my_info) == HIER_OK; /* 3 */
    if (c->ops.allgather(my_info, infos, (size_t)c->nnodes * sizeof(*infos), c->ops.arg) != 0) ok = 0; /* 4 */
    if (ok) ok = hier_comm_connect_chans(c, fab, addrs, infos) == HIER_OK; /* 5 */
    if (c->ops.agree(&ok, c->ops.arg) != 0) ok = 0; /* 6 */
    if (!ok) goto close_chans;
    free(my_info);
    free(infos);
    free(addrs);
    c->net_state = HIER_SHM_STATE_READY;
    HIER_LOG(HIER_LOG_DEBUG, "inter-node level ready: node %d of %d, local rank %d of %d, %d piece(s), provider %s",
             c->node, c->nnodes, c->me, c->nranks, c->pieces, hier_fabric_provider(fab));
    return HIER_OK;

close_chans:
    hier_comm_close_net(c);
    free(my_info);
    free(infos);
    free(addrs);
    c->net_state = HIER_SHM_STATE_FAILED;
    HIER_LOG(HIER_LOG_COMM, "no inter-node transport (%s): using the previous component on this communicator",
             fab ? "channel set-up failed on some rank" : "no usable libfabric provider on some rank");
    return HIER_ERR_NOT_SUPPORTED;
}

hier_status_t hier_comm_ensure_net(hier_comm_t *c)
{
    switch (c->net_state) {
    case HIER_SHM_STATE_READY: return HIER_OK;
    case HIER_SHM_STATE_FAILED: return HIER_ERR_NOT_SUPPORTED;
    case HIER_SHM_STATE_NONE: break;
    }
    return hier_comm_setup_net(c);
}

/* The executor's settings for this call; its run state (a queue of 256
 * sends: not rewritten per chunk) is reset by hier_net_exec_start. */
static void hier_comm_net_exec(hier_comm_t *c, const hier_exec_bufs_t *bufs, hier_net_exec_t *x)
{
    x->fab = hier_core_fab;
    x->chans = c->chans;
    x->bufs = bufs;
    x->progress = atomic_load_explicit(&hier_core_glue_progress, memory_order_relaxed);
    x->spin = HIER_COMM_NET_SPIN;
    x->mr = c->slot_mr;
    x->mr_base = c->slot_mr ? hier_shm_slot(c->shm, c->me) : NULL;
    x->mr_len = c->slot_mr ? 2 * hier_shm_parity_stride(c->shm) : 0;
}

hier_status_t hier_comm_net_run(hier_comm_t *c, const hier_exec_bufs_t *bufs, const hier_step_t *steps, size_t n)
{
    hier_status_t st = hier_comm_net_start(c, bufs, steps, n), fin = hier_comm_net_finish(c); /* (counts bytes) */
    return st != HIER_OK ? st : fin;
}

hier_status_t hier_comm_net_start(hier_comm_t *c, const hier_exec_bufs_t *bufs, const hier_step_t *steps, size_t n)
{
    hier_comm_net_exec(c, bufs, &c->netx);
    return hier_net_exec_start(&c->netx, steps, n); /* (bytes counted at finish) */
}

hier_status_t hier_comm_net_poll(hier_comm_t *c)
{
    return c->netx.active ? hier_net_exec_poll(&c->netx) : HIER_OK;
}

hier_status_t hier_comm_net_finish(hier_comm_t *c)
{
    if (!c->netx.active && !c->netx.steps) return HIER_OK;
    hier_status_t st = hier_net_exec_finish(&c->netx);
    c->net_bytes += c->netx.net_bytes;
    c->netx.net_bytes = 0;
    c->netx.steps = NULL;
    return st;
}
