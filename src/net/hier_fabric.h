/* hier_fabric.h: the inter-node transport over libfabric (FI_EP_RDM) (docs/design.md, "Between nodes":
 * Endpoint, Rails). One endpoint per NIC the process drives (its rails, hier_nic.h), shared by every
 * communicator; a peer is reached through lanes (rail i of one node with rail i of another), and registrations
 * hold one key per rail. Data moves by RMA write with 32 bits of remote CQ data (fi_writedata): only the
 * target's remote CQ entry means the data is in its memory, never a local write completion. The mr_mode bits
 * the provider grants are honoured (offsets or pointers, keys, descriptors, binding). Progress is manual: the
 * target must poll (hier_fabric_poll) for data to land. */
#ifndef HIER_FABRIC_H
#define HIER_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_stats.h"
#include "base/hier_status.h"
#include "base/hier_topo.h"

/* NICs one process drives at most (p5: 32 NICs for 8 GPUs is 4 each). */
#define HIER_FABRIC_RAILS_MAX HIER_STATS_RAILS
/* A process's address: every rail's (see hier_fabric_addr). */
#define HIER_FABRIC_ADDR_MAX 320

typedef struct hier_fabric hier_fabric_t;
typedef struct hier_fabric_mr hier_fabric_mr_t;
typedef uint64_t hier_fabric_peer_t; /* fi_addr_t */

typedef struct {
    const char *provider; /* "tcp" (tcp;ofi_rxm), "shm", "sockets", "efa", a full name, or NULL/"" = best */
    const char *iface;    /* the NICs (libfabric domains: interfaces for tcp, rdmap* devices for EFA) to use,
                           * a comma list, or after '^' to exclude (hier_nic_filter_pass); NULL or "": all
                           * but loopback and docker* (unless nothing else is there) */
    int hmem;             /* ask for FI_HMEM (device memory registration); a provider without it still opens */
    int cuda;             /* CUDA buffers may come: ask the provider not to call CUDA itself (libfabric >= 1.18) */
    int max_rails;        /* NICs this process drives at most (0: 1; capped at HIER_FABRIC_RAILS_MAX) */
    int stripe;           /* spread a peer's messages over every lane (0: its first lane only) */
    const char *profile;  /* the provider's rules kept: "auto" (NULL, ""), "default", "efa-direct" (hier_fabric.c) */
    /* where the node's ranks run, to place NICs near them: rank_numa[nlocal]
     * (-1 unknown) and mine is [me]; NULL: this process alone. topo locates
     * the NICs (NULL: every NIC near every rank). */
    hier_topo_t *topo;
    const int *rank_numa;
    int nlocal, me;
} hier_fabric_config_t;

/* What a peer needs to write into a registered region: the address of
 * offset 0 and the key on each of the registering process's rails. */
typedef struct {
    uint64_t base; /* remote address of offset 0: the pointer (FI_MR_VIRT_ADDR) or 0 */
    uint64_t key[HIER_FABRIC_RAILS_MAX];
} hier_fabric_rkey_t;

typedef enum {
    HIER_FABRIC_EV_WRITE_DONE, /* a write of ours completed locally (its buffer may be reused) */
    HIER_FABRIC_EV_REMOTE,     /* a peer's write landed here: `data` is its immediate */
    HIER_FABRIC_EV_WRITE_FAILED, /* a write of ours failed: `context` is the caller's, `data` the fi_errno */
    HIER_FABRIC_EV_CONTROL,    /* a control message arrived: `msg`, `len` bytes */
} hier_fabric_ev_kind_t;

/* Control messages: small untagged messages (fi_send into receives the
 * endpoint keeps posted), for what happens outside any collective, such as
 * connecting two processes' channels. At most this many bytes. */
#define HIER_FABRIC_CTL_MAX 512

typedef struct {
    hier_fabric_ev_kind_t kind;
    uint32_t data;  /* REMOTE: the immediate */
    void *context;  /* WRITE_DONE: the caller's context */
    size_t len;     /* CONTROL */
    uint8_t msg[HIER_FABRIC_CTL_MAX] __attribute__((aligned(8)));
} hier_fabric_event_t;

/* Whether registered memory survives fork() here (rdma-core's
 * ibv_is_fork_initialized): "fork-safe", "fork-safe (kernel)", or "not
 * fork-safe" — then set RDMAV_FORK_SAFE=1 (FI_EFA_FORK_SAFE=1 on EFA) before
 * MPI_Init if the application forks. Reported at verbose level by open. */
const char *hier_fabric_fork_safety(void);

hier_status_t hier_fabric_open(const hier_fabric_config_t *cfg, hier_fabric_t **fab_p);
/* Step 1 of hier_fabric_open ahead of it (loading libfabric and asking it
 * for providers: the costly part, 0.1-0.5 s where every provider
 * initialises), e.g. in a thread while the application runs: the next
 * hier_fabric_open with the same provider and hmem takes its answer. Not
 * concurrently with hier_fabric_open (the caller orders them). */
void hier_fabric_prefetch(const hier_fabric_config_t *cfg);
void hier_fabric_close(hier_fabric_t *fab); /* (NULL: drops an answer prefetched and never taken) */
/* The provider actually used, e.g. "tcp;ofi_rxm". */
const char *hier_fabric_provider(const hier_fabric_t *fab);
/* Whether a provider's name (as asked, or as libfabric gives it) is EFA's:
 * efa, efa-direct (NULL: no). */
int hier_fabric_provider_is_efa(const char *prov);

/* The largest message (RMA write) the provider takes in one operation. */
size_t hier_fabric_max_msg(const hier_fabric_t *fab);
/* Whether the endpoint keeps efa-direct's rules (the provider is efa-direct, or the profile asked). */
int hier_fabric_efa_direct(const hier_fabric_t *fab);

/* This process's address (every rail's, with its NIC index), to exchange
 * with the peers: at most HIER_FABRIC_ADDR_MAX bytes. */
hier_status_t hier_fabric_addr(hier_fabric_t *fab, void *addr, size_t *len_p);
/* Learn a peer from its address: a handle for its first lane.
 * HIER_ERR_INVALID_ARG for an address that is not one. */
hier_status_t hier_fabric_insert(hier_fabric_t *fab, const void *addr, hier_fabric_peer_t *peer_p);
/* Lanes to the peer (1 without striping; fixed once the address is inserted), and the handle of lane k mod
 * that (the handle's low HIER_FABRIC_LANE_BITS bits name the lane). */
#define HIER_FABRIC_LANE_BITS 8
unsigned hier_fabric_lanes(const hier_fabric_t *fab, hier_fabric_peer_t peer);
static inline hier_fabric_peer_t hier_fabric_lane_handle(hier_fabric_peer_t peer, unsigned lanes, uint64_t k)
{
    return (peer & ~(((hier_fabric_peer_t)1 << HIER_FABRIC_LANE_BITS) - 1)) | (hier_fabric_peer_t)(k % lanes);
}

/* The rails this process drives, and for each its NIC's name, index in the
 * node's list, whether it is near, and the bytes written through it. */
unsigned hier_fabric_nrails(const hier_fabric_t *fab);
void hier_fabric_rail_info(const hier_fabric_t *fab, unsigned rail, const char **name_p, int *nic_p, int *near_p,
                           uint64_t *bytes_p);

/* Whether memory of this fi_hmem_iface may be registered (FI_HMEM granted;
 * for CUDA, also without the provider calling CUDA where that was refused). */
int hier_fabric_hmem(const hier_fabric_t *fab, int iface);
/* Register device memory [buf, buf + len) of `iface` / `device` (buf the
 * address the NIC is given). HIER_ERR_NOT_SUPPORTED without hier_fabric_hmem. */
hier_status_t hier_fabric_mr_reg_dev(hier_fabric_t *fab, void *buf, size_t len, int iface, int device,
                                     hier_fabric_mr_t **mr_p);

/* Register [buf, buf + len) for local use and remote writes. */
hier_status_t hier_fabric_mr_reg(hier_fabric_t *fab, void *buf, size_t len, hier_fabric_mr_t **mr_p);
void hier_fabric_mr_dereg(hier_fabric_mr_t *mr);
hier_fabric_rkey_t hier_fabric_mr_rkey(const hier_fabric_mr_t *mr);
/* Done with a registration a peer may still write into (a late credit
 * return): it stays valid, and `mem` (malloc'd, or NULL) allocated, until
 * the endpoint closes or 1024 later retirements push it out. */
void hier_fabric_mr_retire(hier_fabric_mr_t *mr, void *mem);

/* One piece of a gathered write: bytes, and the region that holds them
 * (NULL allowed without FI_MR_LOCAL). */
typedef struct {
    const void *buf;
    size_t len;
    hier_fabric_mr_t *mr;
} hier_fabric_iov_t;

/* How many pieces one write may gather (the provider's iov_limit). */
size_t hier_fabric_iov_limit(const hier_fabric_t *fab);

/* Write len bytes from src (inside `mr`, may be NULL without FI_MR_LOCAL) to
 * offset `off` of the peer's region, with immediate `data`. `context` comes
 * back in a WRITE_DONE (or WRITE_FAILED) event. Never waits: *posted_p = 0
 * when the provider has no room (-FI_EAGAIN; a peer that is gone says it for
 * ever): the caller polls and tries again, and bounds its wait. */
hier_status_t hier_fabric_try_write(hier_fabric_t *fab, hier_fabric_peer_t peer, const void *src, size_t len,
                                    hier_fabric_mr_t *mr, hier_fabric_rkey_t rkey, uint64_t off, uint32_t data,
                                    void *context, int *posted_p);
/* The same gathering n <= hier_fabric_iov_limit pieces into one contiguous
 * remote range, with one immediate. */
hier_status_t hier_fabric_try_writev(hier_fabric_t *fab, hier_fabric_peer_t peer, const hier_fabric_iov_t *iov,
                                     size_t n, hier_fabric_rkey_t rkey, uint64_t off, uint32_t data, void *context,
                                     int *posted_p);

/* Send a control message of len <= HIER_FABRIC_CTL_MAX bytes to `peer`
 * (copied: the caller's buffer is free on return). Never waits: *posted_p
 * = 0 when the provider or our send buffers have no room; the caller polls
 * and tries again. */
hier_status_t hier_fabric_try_send_ctl(hier_fabric_t *fab, hier_fabric_peer_t peer, const void *msg, size_t len,
                                       int *posted_p);

/* Progress: at most `max` events into `ev`, their number in *n_p (0 if none). */
hier_status_t hier_fabric_poll(hier_fabric_t *fab, hier_fabric_event_t *ev, size_t max, size_t *n_p);

#endif
