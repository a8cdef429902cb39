/* hier_fabric_impl.h: the endpoint's state, shared by the files of the
 * fabric module (internal to net/hier_fabric*.c). */
#ifndef HIER_FABRIC_IMPL_H
#define HIER_FABRIC_IMPL_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <stdatomic.h>
#include <stddef.h>

#include "net/hier_fabric.h"
#include "net/hier_fi.h"

#define HIER_FABRIC_IOV_MAX 4 /* pieces of one gathered write we ever need */
#define HIER_FABRIC_RETIRED 1024 /* retired registrations kept; the oldest goes beyond */
#define HIER_FABRIC_CTL_RECVS 64 /* control messages that may arrive before we poll */
#define HIER_FABRIC_CTL_SENDS 32

/* One NIC this process drives: its own endpoint, completion queue and
 * address vector (the peers' addresses as this rail reaches them). */
typedef struct {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    uint64_t next_key; /* without FI_MR_PROV_KEY keys are ours to choose, unique per domain */
    int nic;           /* its index in the node's NIC list (the same on every node) */
    int near;          /* near this process (or either location unknown) */
    uint64_t *bytes;   /* written through it: hier_stats_rails[its index] */
} hier_fabric_rail_t;

/* How this process reaches one peer: lanes pair a rail of ours with one of
 * its rails (the same NIC index where both drive it), each with the peer's
 * address in our rail's address vector; control messages go from our first
 * rail to its first. */
typedef struct {
    uint8_t mine, theirs;
    fi_addr_t addr;
} hier_fabric_lane_t;

typedef struct {
    unsigned nlanes;
    fi_addr_t ctl;
    hier_fabric_lane_t lane[HIER_FABRIC_RAILS_MAX];
} hier_fabric_remote_t;

/* A write in flight (hier_fabric_op.c): the provider is given &fi, which
 * FI_CONTEXT2 lets it use until the completion; `context` is the caller's. */
typedef struct hier_fabric_op {
    struct fi_context2 fi; /* first */
    void *context;
    struct hier_fabric_op *next; /* (free list) */
} hier_fabric_op_t;
_Static_assert(offsetof(hier_fabric_op_t, fi) == 0, "a completion's op_context is the op itself");

struct hier_fabric {
    hier_fabric_rail_t rail[HIER_FABRIC_RAILS_MAX];
    unsigned nrails;
    int stripe;        /* messages spread over every lane (0: the first lane only) */
    int efa_direct;    /* efa-direct's rules kept (hier_fabric_profile) */
    size_t rma_max;    /* the largest write: FI_OPT_MAX_RMA_SIZE where the provider answers, else max_msg_size */
    struct fi_info *list; /* what fi_getinfo offered (the rails' infos are copies) */
    uint64_t mr_mode;
    _Atomic uint64_t hmem_ifaces; /* bit per fi_hmem_iface it may register (cleared on refusal) */
    hier_fabric_remote_t *remote; /* peers inserted, by handle */
    size_t nremote, remote_cap;
    unsigned poll_next;           /* the rail whose completions are read first next time */
    /* control messages (hier_fabric_ctl.c), on the first rail: receives kept posted, and send buffers */
    uint8_t *ctl_recv;                 /* HIER_FABRIC_CTL_RECVS buffers of HIER_FABRIC_CTL_MAX bytes */
    uint8_t *ctl_send;                 /* HIER_FABRIC_CTL_SENDS buffers */
    uint8_t ctl_send_busy[HIER_FABRIC_CTL_SENDS];
    uint8_t ctl_unposted[HIER_FABRIC_CTL_RECVS]; /* receives to post again (the provider had no room) */
    unsigned ctl_unposted_n;           /* how many */
    struct fi_context2 ctl_recv_ctx[HIER_FABRIC_CTL_RECVS]; /* their contexts: not the buffers, which the */
    struct fi_context2 ctl_send_ctx[HIER_FABRIC_CTL_SENDS]; /* provider may use meanwhile (FI_CONTEXT2) */
    hier_fabric_mr_t *ctl_mr;          /* both areas, one registration */
    /* registrations kept for late remote writes (hier_fabric_mr_retire), oldest first */
    struct hier_fabric_retired { hier_fabric_mr_t *mr; void *mem; } retired[HIER_FABRIC_RETIRED];
    size_t nretired, first_retired;
    /* the contexts of writes in flight (hier_fabric_op.c) */
    hier_fabric_op_t *op_free;
    struct hier_fabric_op_block *op_blocks;
};

struct hier_fabric_mr {
    hier_fabric_t *fab;
    struct fid_mr *mr[HIER_FABRIC_RAILS_MAX]; /* one registration per rail */
    void *desc[HIER_FABRIC_RAILS_MAX];
    hier_fabric_rkey_t rkey;
};

/* A peer handle: the remote's index, and a lane in the low bits. */
static inline size_t hier_fabric_remote_index(hier_fabric_peer_t peer) { return (size_t)(peer >> HIER_FABRIC_LANE_BITS); }
static inline unsigned hier_fabric_lane_of(hier_fabric_peer_t peer)
{
    return (unsigned)(peer & (((hier_fabric_peer_t)1 << HIER_FABRIC_LANE_BITS) - 1));
}

/* A libfabric return code where it enters (hier_fi_fail), with the provider's name. */
static inline const char *hier_fabric_prov(const hier_fabric_t *fab)
{
    return fab && fab->list ? fab->list->fabric_attr->prov_name : NULL;
}
static inline hier_status_t hier_fabric_fail(const hier_fabric_t *fab, const char *call, int ret)
{
    return hier_fi_fail(hier_fabric_prov(fab), call, ret);
}
/* Register on every rail (or the first only: control buffers; hier_fabric_mr.c). */
hier_status_t hier_fabric_regattr(hier_fabric_t *fab, struct fi_mr_attr *attr, unsigned nrails, hier_fabric_mr_t **mr_p);
void hier_fabric_mr_close(hier_fabric_mr_t *mr);
/* Deregister every retired registration (the endpoint closing). */
void hier_fabric_mr_retired_free(hier_fabric_t *fab);
/* The rails (hier_fabric_rails.c): which NICs this process drives, opened
 * into fab->rail[]; closed in reverse. */
hier_status_t hier_fabric_rails_open(hier_fabric_t *fab, const hier_fabric_config_t *cfg);
void hier_fabric_rails_close(hier_fabric_t *fab);
/* Control messages: set up after the endpoint is enabled, torn down after it closes. */
hier_status_t hier_fabric_ctl_open(hier_fabric_t *fab);
void hier_fabric_ctl_close(hier_fabric_t *fab);
/* A completion of ours for a control buffer (`context`): 1 when it was one
 * (a received message goes to *ev, *got_p = 1), 0 otherwise. */
int hier_fabric_ctl_completion(hier_fabric_t *fab, void *context, uint64_t flags, size_t len, int failed,
                               hier_fabric_event_t *ev, int *got_p);
/* Post again the receives the provider had no room for (ctl_unposted_n of them). */
void hier_fabric_ctl_repost(hier_fabric_t *fab);
/* Whether a completion's context is a control buffer's (hier_fabric_ctl_completion's), not a write's. */
static inline int hier_fabric_ctl_owns(const hier_fabric_t *fab, const void *context)
{
    const struct fi_context2 *at = context;
    return (at >= fab->ctl_recv_ctx && at < fab->ctl_recv_ctx + HIER_FABRIC_CTL_RECVS) ||
           (at >= fab->ctl_send_ctx && at < fab->ctl_send_ctx + HIER_FABRIC_CTL_SENDS);
}
/* The free list of contexts grown by a block (0: no memory, said). */
int hier_fabric_op_grow(hier_fabric_t *fab);
/* A context for a write carrying the caller's `context` (NULL: no memory,
 * said); its completion's op_context gives it back, and the caller's value. */
static inline hier_fabric_op_t *hier_fabric_op_take(hier_fabric_t *fab, void *context)
{
    if (!fab->op_free && !hier_fabric_op_grow(fab)) return NULL;
    hier_fabric_op_t *op = fab->op_free;
    fab->op_free = op->next;
    op->context = context;
    return op;
}
static inline void *hier_fabric_op_give(hier_fabric_t *fab, void *fi_context)
{
    hier_fabric_op_t *op = fi_context; /* (fi is its first member) */
    op->next = fab->op_free;
    fab->op_free = op;
    return op->context;
}
/* Every context, at close (the endpoints closed first). */
void hier_fabric_ops_free(hier_fabric_t *fab);

#endif
