/* hier_fabric_ctl.c: control messages. The endpoint keeps
 * HIER_FABRIC_CTL_RECVS receives posted into buffers of its own (on its
 * first rail, where every peer sends them); a message
 * that lands is copied into the event that reports it and its buffer posted
 * again at once, so the provider always has somewhere to put the next (and
 * buffers the rare one that comes while all are full, as every RDM provider
 * here does for unexpected messages). Sends copy into one of
 * HIER_FABRIC_CTL_SENDS buffers, free again at their completion. */
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "net/hier_fi.h"
#include "net/hier_fabric_impl.h"

/* Which of the n contexts at ctx `p` is (n: none of them). */
static size_t hier_fabric_ctl_index(const struct fi_context2 *ctx, size_t n, const void *p)
{
    uintptr_t at = (uintptr_t)p, first = (uintptr_t)ctx;
    if (at < first || at >= first + n * sizeof(*ctx) || (at - first) % sizeof(*ctx)) return n;
    return (at - first) / sizeof(*ctx);
}

static void *hier_fabric_ctl_desc(const hier_fabric_t *fab)
{
    return fab->ctl_mr ? fab->ctl_mr->desc[0] : NULL;
}

static int hier_fabric_ctl_post(hier_fabric_t *fab, size_t i)
{
    uint8_t *buf = fab->ctl_recv + i * HIER_FABRIC_CTL_MAX;
    ssize_t ret = fi_recv(fab->rail[0].ep, buf, HIER_FABRIC_CTL_MAX, hier_fabric_ctl_desc(fab), FI_ADDR_UNSPEC,
                          &fab->ctl_recv_ctx[i]);
    if (fab->ctl_unposted[i] != (ret != 0)) fab->ctl_unposted_n += ret != 0 ? 1u : -1u;
    fab->ctl_unposted[i] = ret != 0;
    if (ret && ret != -FI_EAGAIN) HIER_LOG_ONCE(HIER_LOG_COMM, "fi_recv for control messages: %s", hier_fi_strerror((int)-ret));
    return ret == 0;
}

/* One area for both kinds of buffer, registered for sends and receives
 * (providers with FI_MR_LOCAL want descriptors for both). */
hier_status_t hier_fabric_ctl_open(hier_fabric_t *fab)
{
    size_t bytes = (HIER_FABRIC_CTL_RECVS + HIER_FABRIC_CTL_SENDS) * HIER_FABRIC_CTL_MAX;
    if (!(fab->ctl_recv = aligned_alloc(64, bytes))) return HIER_ERR_NO_MEMORY;
    memset(fab->ctl_recv, 0, bytes);
    fab->ctl_send = fab->ctl_recv + HIER_FABRIC_CTL_RECVS * HIER_FABRIC_CTL_MAX;
    struct iovec iov = {.iov_base = fab->ctl_recv, .iov_len = bytes};
    struct fi_mr_attr attr = {.mr_iov = &iov, .iov_count = 1, .access = FI_SEND | FI_RECV, .iface = FI_HMEM_SYSTEM};
    hier_status_t st = hier_fabric_regattr(fab, &attr, 1, &fab->ctl_mr);
    if (st != HIER_OK) return st;
    for (size_t i = 0; i < HIER_FABRIC_CTL_RECVS; i++)
        if (!hier_fabric_ctl_post(fab, i) && !fab->ctl_unposted[i]) return HIER_ERR_INTERNAL;
    return HIER_OK;
}

void hier_fabric_ctl_close(hier_fabric_t *fab)
{
    if (fab->ctl_mr) {
        hier_fabric_mr_close(fab->ctl_mr);
        fab->ctl_mr = NULL;
    }
    free(fab->ctl_recv);
    fab->ctl_recv = fab->ctl_send = NULL;
}

void hier_fabric_ctl_repost(hier_fabric_t *fab)
{
    for (size_t i = 0; i < HIER_FABRIC_CTL_RECVS; i++)
        if (fab->ctl_unposted[i]) hier_fabric_ctl_post(fab, i);
}

int hier_fabric_ctl_completion(hier_fabric_t *fab, void *context, uint64_t flags, size_t len, int failed,
                               hier_fabric_event_t *ev, int *got_p)
{
    *got_p = 0;
    if (!fab->ctl_recv) return 0;
    size_t i = hier_fabric_ctl_index(fab->ctl_send_ctx, HIER_FABRIC_CTL_SENDS, context);
    if (i < HIER_FABRIC_CTL_SENDS) {
        fab->ctl_send_busy[i] = 0;
        if (failed) HIER_LOG(HIER_LOG_COMM, "a control message to a peer failed on provider %s",
                             hier_fabric_prov(fab));
        return 1;
    }
    if ((i = hier_fabric_ctl_index(fab->ctl_recv_ctx, HIER_FABRIC_CTL_RECVS, context)) == HIER_FABRIC_CTL_RECVS)
        return 0;
    if (!failed && (flags & FI_RECV) && len <= HIER_FABRIC_CTL_MAX) {
        ev->kind = HIER_FABRIC_EV_CONTROL;
        ev->len = len;
        memcpy(ev->msg, fab->ctl_recv + i * HIER_FABRIC_CTL_MAX, len);
        *got_p = 1;
    }
    hier_fabric_ctl_post(fab, i);
    return 1;
}

static hier_status_t hier_fabric_try_send_ctl_locked(hier_fabric_t *fab, hier_fabric_peer_t peer, const void *msg,
                                                     size_t len, int *posted_p)
{
    size_t i = 0;
    *posted_p = 0;
    if (len > HIER_FABRIC_CTL_MAX) return HIER_ERR_INVALID_ARG;
    while (i < HIER_FABRIC_CTL_SENDS && fab->ctl_send_busy[i]) i++;
    if (i == HIER_FABRIC_CTL_SENDS) return HIER_OK; /* all in flight: the caller polls */
    uint8_t *buf = fab->ctl_send + i * HIER_FABRIC_CTL_MAX;
    memcpy(buf, msg, len);
    ssize_t ret = fi_send(fab->rail[0].ep, buf, len, hier_fabric_ctl_desc(fab),
                          fab->remote[hier_fabric_remote_index(peer)].ctl, &fab->ctl_send_ctx[i]);
    if (ret == -FI_EAGAIN) return HIER_OK;
    if (ret) return hier_fabric_fail(fab, "fi_send", (int)ret);
    fab->ctl_send_busy[i] = 1;
    *posted_p = 1;
    return HIER_OK;
}

hier_status_t hier_fabric_try_send_ctl(hier_fabric_t *fab, hier_fabric_peer_t peer, const void *msg, size_t len,
                                       int *posted_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_fabric_try_send_ctl_locked(fab, peer, msg, len, posted_p));
}
