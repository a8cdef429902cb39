/* hier_fabric_impl.h: the endpoint's state, shared by the files of the
 * fabric module (internal to net/hier_fabric*.c). */
#ifndef HIER_FABRIC_IMPL_H
#define HIER_FABRIC_IMPL_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <stdatomic.h>

#include "net/hier_fabric.h"

#define HIER_FABRIC_IOV_MAX 4 /* pieces of one gathered write we ever need */
#define HIER_FABRIC_RETIRED 1024 /* retired registrations kept; the oldest goes beyond */
#define HIER_FABRIC_CTL_RECVS 64 /* control messages that may arrive before we poll */
#define HIER_FABRIC_CTL_SENDS 32

struct hier_fabric {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    uint64_t mr_mode;
    _Atomic uint64_t hmem_ifaces; /* bit per fi_hmem_iface it may register (cleared on refusal) */
    uint64_t next_key; /* without FI_MR_PROV_KEY keys are ours to choose, unique per domain */
    /* control messages (hier_fabric_ctl.c): receives kept posted, and send buffers */
    uint8_t *ctl_recv;                 /* HIER_FABRIC_CTL_RECVS buffers of HIER_FABRIC_CTL_MAX bytes */
    uint8_t *ctl_send;                 /* HIER_FABRIC_CTL_SENDS buffers */
    uint8_t ctl_send_busy[HIER_FABRIC_CTL_SENDS];
    uint8_t ctl_unposted[HIER_FABRIC_CTL_RECVS]; /* receives to post again (the provider had no room) */
    hier_fabric_mr_t *ctl_mr;          /* both areas, one registration */
    /* registrations kept for late remote writes (hier_fabric_mr_retire), oldest first */
    struct hier_fabric_retired { hier_fabric_mr_t *mr; void *mem; } retired[HIER_FABRIC_RETIRED];
    size_t nretired, first_retired;
};

struct hier_fabric_mr {
    hier_fabric_t *fab;
    struct fid_mr *mr;
    void *desc;
    hier_fabric_rkey_t rkey;
};

hier_status_t hier_fabric_fail(const hier_fabric_t *fab, const char *call, int ret);
hier_status_t hier_fabric_regattr(hier_fabric_t *fab, struct fi_mr_attr *attr, hier_fabric_mr_t **mr_p);
/* Control messages: set up after the endpoint is enabled, torn down after it closes. */
hier_status_t hier_fabric_ctl_open(hier_fabric_t *fab);
void hier_fabric_ctl_close(hier_fabric_t *fab);
/* A completion of ours for a control buffer (`context`): 1 when it was one
 * (a received message goes to *ev, *got_p = 1), 0 otherwise. */
int hier_fabric_ctl_completion(hier_fabric_t *fab, void *context, uint64_t flags, size_t len, int failed,
                               hier_fabric_event_t *ev, int *got_p);
/* Post again the receives the provider had no room for. */
void hier_fabric_ctl_repost(hier_fabric_t *fab);

#endif
