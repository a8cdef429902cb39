/* hier_fabric.c: libfabric endpoint, RMA write with remote CQ data, and
 * progress (registration: hier_fabric_mr.c). See hier_fabric.h for the rules it follows. */
#include "net/hier_fabric.h"
#include "net/hier_fabric_impl.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>
#include <rdma/fi_rma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "net/hier_fi.h"

/* Options newer than the headers hier may be built with, by their ABI values:
 * libfabric 2.0's limits per operation (asked only of a 2.0 library or
 * newer), and EFA's "is RDMA write emulated?" (asked only of efa). */
#define HIER_FI_OPT_MAX_MSG_SIZE 12
#define HIER_FI_OPT_MAX_RMA_SIZE 14
#define HIER_FI_OPT_EFA_EMULATED_WRITE (FI_OPT_EFA_RNR_RETRY + 2)
/* An EFA device's MTU, about 8 KiB: efa-direct's largest message. */
#define HIER_FABRIC_EFA_MTU 8192
#if FI_MAJOR_VERSION >= 2
_Static_assert(FI_OPT_MAX_MSG_SIZE == HIER_FI_OPT_MAX_MSG_SIZE && FI_OPT_MAX_RMA_SIZE == HIER_FI_OPT_MAX_RMA_SIZE &&
               FI_OPT_EFA_EMULATED_WRITE == HIER_FI_OPT_EFA_EMULATED_WRITE,
               "libfabric's option values");
#endif

const char *hier_fabric_fork_safety(void)
{
    /* rdma-core's enum ibv_fork_status: 0 disabled, 1 enabled, 2 unneeded */
    switch (hier_fi_load() == HIER_OK && hier_fi.fork_initialized ? hier_fi.fork_initialized() : -1) {
    case 1: return "fork-safe";
    case 2: return "fork-safe (kernel)";
    case 0: return "not fork-safe";
    }
    return "fork safety unknown (no rdma-core)";
}

/* Providers tried for what the user typed, in order; NULL-terminated.
 * "tcp" is libfabric's native TCP RDM endpoint: named "net" in 1.17 (where a
 * bare "tcp" RDM request gives tcp;ofi_rxm, which sends an acknowledgement
 * for every write: half the speed of small messages here), "tcp" from 1.18.
 * Nothing named: efa on AWS, then TCP, then sockets. A full name ("tcp;ofi_rxm")
 * is taken as it is. */
static void hier_fabric_candidates(const char *name, const char *out[5])
{
    static const char *const def[] = {"efa", "net", "tcp", "sockets", NULL};
    static const char *const tcp[] = {"net", "tcp", NULL};
    const char *const *list = def;
    if (name && name[0]) {
        if (!strcmp(name, "tcp")) list = tcp;
        else {
            out[0] = !strcmp(name, "udp") ? "udp;ofi_rxd" : !strcmp(name, "verbs") ? "verbs;ofi_rxm" : name;
            out[1] = NULL;
            return;
        }
    }
    size_t i = 0;
    for (; list[i]; i++) out[i] = list[i];
    out[i] = NULL;
}

/* Whether the profile asks for efa-direct's rules (else auto or default);
 * an unknown name is said once and read as auto. */
static int hier_fabric_profile_asked(const hier_fabric_config_t *cfg)
{
    const char *p = cfg->profile && cfg->profile[0] ? cfg->profile : "auto";
    if (strcmp(p, "auto") && strcmp(p, "default") && strcmp(p, "efa-direct"))
        HIER_LOG_ONCE(HIER_LOG_ERROR, "coll_hier_fabric_profile \"%s\" is none of auto, default, efa-direct: "
                      "auto is used", p);
    return !strcmp(p, "efa-direct");
}

/* What hier asks of a provider. Under efa-direct's rules, and of efa (whose
 * efa-direct fabric, from libfabric 2.4 the first it offers, takes only
 * endpoints that give FI_CONTEXT2 scratch space and let it progress on its
 * own), the FI_CONTEXT2 mode is offered (every operation's context is a
 * struct fi_context2 of hier's) and any progress model taken (hier polls
 * either way); of the others, as before: no mode, manual progress. Never
 * FI_RX_CQ_DATA: hier posts no receives for remote CQ data. */
static struct fi_info *hier_fabric_hints(const char *prov, int hmem, int efa_rules)
{
    struct fi_info *hints = hier_fi.dupinfo(NULL);
    if (!hints) return NULL;
    int efa = efa_rules || hier_fabric_provider_is_efa(prov);
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
    hints->mode = efa ? FI_CONTEXT | FI_CONTEXT2 : 0;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    if (hmem) {
        hints->caps |= FI_HMEM;
        hints->domain_attr->mr_mode |= FI_MR_HMEM;
    }
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->data_progress = efa ? FI_PROGRESS_UNSPEC : FI_PROGRESS_MANUAL;
    hints->domain_attr->av_type = FI_AV_TABLE;
    if (prov && !(hints->fabric_attr->prov_name = strdup(prov))) {
        hier_fi.freeinfo(hints);
        return NULL;
    }
    return hints;
}

/* First provider that answers: the one named, or the default order; each
 * with FI_HMEM first when asked, then without (device buffers are staged). */
static hier_status_t hier_fabric_getinfo(const hier_fabric_config_t *cfg, struct fi_info **info_p)
{
    const char *cand[5];
    int ret = -FI_ENODATA;

    hier_fabric_candidates(cfg->provider, cand);
    for (size_t i = 0; cand[i]; i++) {
        for (int hmem = cfg->hmem != 0; hmem >= 0; hmem--) {
            struct fi_info *hints = hier_fabric_hints(cand[i], hmem, hier_fabric_profile_asked(cfg));
            if (!hints) return HIER_ERR_NO_MEMORY;
            ret = hier_fi.getinfo(HIER_FI_API_VERSION, NULL, NULL, 0, hints, info_p);
            hier_fi.freeinfo(hints);
            if (ret == 0) return HIER_OK;
            HIER_LOG(HIER_LOG_DEBUG, "provider %s unavailable%s: %s", cand[i], hmem ? " with FI_HMEM" : "",
                     hier_fi_strerror(-ret));
        }
    }
    HIER_ERROR("no usable libfabric provider (%s%s): %s", cfg->provider && cfg->provider[0] ? "asked for " : "tried ",
               cfg->provider && cfg->provider[0] ? cfg->provider : "efa, net, tcp, sockets", hier_fi_strerror(-ret));
    return HIER_ERR_NOT_SUPPORTED;
}

/* hier_fabric_prefetch's answer, for the provider and hmem it was asked
 * with (provider "" = the default order), until hier_fabric_open takes it. */
static struct {
    int done, hmem;
    char provider[64];
    hier_status_t st;
    struct fi_info *list;
} hier_fabric_pre;

static const char *hier_fabric_key(const hier_fabric_config_t *cfg)
{
    return cfg->provider ? cfg->provider : "";
}

void hier_fabric_prefetch(const hier_fabric_config_t *cfg)
{
    if (hier_fabric_pre.done || strlen(hier_fabric_key(cfg)) >= sizeof(hier_fabric_pre.provider)) return;
    hier_fabric_pre.st = hier_fi_load() == HIER_OK ? hier_fabric_getinfo(cfg, &hier_fabric_pre.list)
                                                   : HIER_ERR_NOT_SUPPORTED;
    hier_fabric_pre.hmem = cfg->hmem != 0;
    strcpy(hier_fabric_pre.provider, hier_fabric_key(cfg));
    hier_fabric_pre.done = 1;
}

/* Step 1: the prefetched answer when it was for the same question (it
 * said why already if it failed), else asked now. */
static hier_status_t hier_fabric_list(const hier_fabric_config_t *cfg, struct fi_info **info_p)
{
    int same = hier_fabric_pre.done && hier_fabric_pre.hmem == (cfg->hmem != 0) &&
               !strcmp(hier_fabric_pre.provider, hier_fabric_key(cfg));
    if (hier_fabric_pre.done) {
        hier_fabric_pre.done = 0;
        if (same) {
            *info_p = hier_fabric_pre.list;
            hier_fabric_pre.list = NULL; /* (the open's now) */
            return hier_fabric_pre.st;
        }
        if (hier_fabric_pre.list) hier_fi.freeinfo(hier_fabric_pre.list);
    }
    hier_fabric_pre.list = NULL;
    return hier_fabric_getinfo(cfg, info_p);
}

/* What device memory the endpoint may register: none without FI_HMEM. With
 * CUDA buffers about, the provider is asked not to call CUDA itself
 * (FI_OPT_CUDA_API_PERMITTED, libfabric >= 1.18, as aws-ofi-nccl does): a
 * provider that then cannot move CUDA memory (EFA without device RDMA)
 * refuses, and hier stages CUDA buffers itself, pipelined, instead of the
 * provider copying them behind our back. Before fi_enable. */
static void hier_fabric_hmem_setup(hier_fabric_t *fab, const hier_fabric_config_t *cfg)
{
    if (!(fab->list->caps & FI_HMEM)) return;
    atomic_store_explicit(&fab->hmem_ifaces, ~(uint64_t)0, memory_order_relaxed);
#if FI_VERSION_GE(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 18))
    /* (the option exists in the headers; the library may still be older) */
    if (cfg->cuda && FI_VERSION_GE(hier_fi_runtime_version(), FI_VERSION(1, 18))) {
        bool permitted = false;
        int ret = 0;
        for (unsigned j = 0; j < fab->nrails && !ret; j++)
            ret = fi_setopt(&fab->rail[j].ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &permitted,
                            sizeof(permitted));
        if (ret == -FI_EOPNOTSUPP) {
            atomic_fetch_and_explicit(&fab->hmem_ifaces, ~((uint64_t)1 << FI_HMEM_CUDA), memory_order_relaxed);
            HIER_LOG(HIER_LOG_COMM, "provider %s needs CUDA calls of its own for CUDA memory (no device RDMA: "
                     "FI_EFA_USE_DEVICE_RDMA=1?): CUDA buffers are staged", hier_fabric_provider(fab));
        }
    }
#else
    (void)cfg;
#endif
}

/* A size_t option of the first rail's endpoint; `dflt` where the provider does not answer. */
static size_t hier_fabric_size_opt(hier_fabric_t *fab, int name, size_t dflt)
{
    size_t v = 0, len = sizeof(v);
    if (!FI_VERSION_GE(hier_fi_runtime_version(), FI_VERSION(2, 0))) return dflt;
    return fi_getopt(&fab->rail[0].ep->fid, FI_OPT_ENDPOINT, name, &v, &len) == 0 && v ? v : dflt;
}

/* Step 3's rules: the largest write (FI_OPT_MAX_RMA_SIZE: efa-direct's RMA
 * limit is not its message limit, the MTU); under efa-direct's, what its
 * endpoints require that the provider might not (control messages within
 * the message limit; no receives owed to remote CQ data). How EFA writes. */
static hier_status_t hier_fabric_rules(hier_fabric_t *fab, const hier_fabric_config_t *cfg)
{
    const struct fi_info *info = fab->rail[0].info;
    size_t msg = info->ep_attr->max_msg_size;
    fab->rma_max = hier_fabric_size_opt(fab, HIER_FI_OPT_MAX_RMA_SIZE, msg);
    const char *name = info->fabric_attr->name ? info->fabric_attr->name : "";
    const char *why = hier_fabric_profile_asked(cfg) ? "coll_hier_fabric_profile efa-direct"
                      : strcmp(cfg->profile ? cfg->profile : "", "default") && !strcmp(name, "efa-direct")
                          ? "the provider's fabric is efa-direct" : NULL;
    fab->efa_direct = why != NULL;
    if (fab->efa_direct) { /* (its messages: at most the device's MTU, whatever this provider allows) */
        msg = hier_fabric_size_opt(fab, HIER_FI_OPT_MAX_MSG_SIZE, msg);
        msg = msg < HIER_FABRIC_EFA_MTU ? msg : HIER_FABRIC_EFA_MTU;
        if (msg < HIER_FABRIC_CTL_MAX || (info->mode & FI_RX_CQ_DATA)) {
            HIER_ERROR("provider %s cannot keep efa-direct's rules with coll/hier: %s", hier_fabric_provider(fab),
                       msg < HIER_FABRIC_CTL_MAX ? "its messages are smaller than hier's control messages"
                                                 : "it wants receives posted for remote CQ data (FI_RX_CQ_DATA)");
            return HIER_ERR_NOT_SUPPORTED;
        }
        HIER_LOG(HIER_LOG_COMM, "efa-direct's rules (%s): FI_CONTEXT2 contexts, every buffer registered "
                 "(FI_MR_LOCAL, checked at every write), control messages of %d bytes at most (messages: %zu), "
                 "writes of %zu at most, no FI_RMA_EVENT, remote CQ data with no receive posted", why,
                 HIER_FABRIC_CTL_MAX, msg, hier_fabric_max_msg(fab));
    }
    if (hier_fabric_provider_is_efa(hier_fabric_provider(fab))) {
        bool emulated = false;
        size_t len = sizeof(emulated);
        int ret = fi_getopt(&fab->rail[0].ep->fid, FI_OPT_ENDPOINT, HIER_FI_OPT_EFA_EMULATED_WRITE, &emulated, &len);
        HIER_LOG(HIER_LOG_COMM, "RDMA write: %s", ret ? "the provider does not say whether it is emulated"
                 : emulated ? "emulated by the provider (no device RDMA write: p4d, dl1, trn1; a write costs a "
                              "send and a copy at the target, still one-sided for hier)"
                            : "native (device RDMA write: p5 and later)");
    }
    return HIER_OK;
}

int hier_fabric_efa_direct(const hier_fabric_t *fab)
{
    return fab->efa_direct;
}

/* Open the rails: 1. pick the provider; 2. open an endpoint per NIC this
 * process drives (hier_fabric_rails.c); 3. bind and enable them, and read
 * the rules they keep; 4. the control messages, on the first rail. */
hier_status_t hier_fabric_open(const hier_fabric_config_t *cfg, hier_fabric_t **fab_p)
{
    hier_status_t st;
    int ret = 0;
    if (hier_fi_load() != HIER_OK) return HIER_ERR_NOT_SUPPORTED;
    hier_fabric_t *fab = calloc(1, sizeof(*fab));
    if (!fab) return HIER_ERR_NO_MEMORY;
    fab->stripe = cfg->stripe;
    HIER_CHECK_GOTO(hier_fabric_list(cfg, &fab->list), free_fab, st); /* 1 */
    fab->mr_mode = fab->list->domain_attr->mr_mode;
    if (fab->list->domain_attr->cq_data_size < 4) {
        HIER_ERROR("provider %s carries %zu bytes of remote CQ data; coll/hier needs 4",
                   fab->list->fabric_attr->prov_name, fab->list->domain_attr->cq_data_size);
        st = HIER_ERR_NOT_SUPPORTED;
        goto free_list;
    }
    HIER_CHECK_GOTO(hier_fabric_rails_open(fab, cfg), close_rails, st); /* 2 */
    hier_fabric_hmem_setup(fab, cfg);
    for (unsigned j = 0; j < fab->nrails && !ret; j++) { /* 3 */
        hier_fabric_rail_t *r = &fab->rail[j];
        if ((ret = fi_ep_bind(r->ep, &r->av->fid, 0)) || (ret = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV)) ||
            (ret = fi_enable(r->ep))) {
            st = hier_fabric_fail(fab, "fi_ep_bind/fi_enable", ret);
            goto close_rails;
        }
    }
    HIER_CHECK_GOTO(hier_fabric_rules(fab, cfg), close_rails, st);
    HIER_CHECK_GOTO(hier_fabric_ctl_open(fab), close_ctl, st); /* 4 */
    const char *fork = hier_fabric_fork_safety();
    int hmem = atomic_load_explicit(&fab->hmem_ifaces, memory_order_relaxed) != 0;
    uint32_t lib = hier_fi_runtime_version();
    HIER_LOG(HIER_LOG_COMM, "libfabric %u.%u (API %u.%u asked; built with %u.%u headers), provider %s, %u rail(s) "
             "(first: %s), mr_mode 0x%llx, %zu bytes of CQ data, %s, device memory: %s", FI_MAJOR(lib),
             FI_MINOR(lib), FI_MAJOR(HIER_FI_API_VERSION), FI_MINOR(HIER_FI_API_VERSION), FI_MAJOR_VERSION,
             FI_MINOR_VERSION, fab->list->fabric_attr->prov_name, fab->nrails,
             fab->rail[0].info->domain_attr->name, (unsigned long long)fab->mr_mode,
             fab->list->domain_attr->cq_data_size, fork, hmem ? "registered (FI_HMEM)" : "staged");
    if (!strcmp(fork, "not fork-safe"))
        HIER_LOG_ONCE(HIER_LOG_COMM, "memory registered with the NIC is not fork-safe on this stack: set "
                      "RDMAV_FORK_SAFE=1 (FI_EFA_FORK_SAFE=1 on EFA) if the application forks after MPI_Init");
    *fab_p = fab;
    return HIER_OK;

close_ctl:
    fi_close(&fab->rail[0].ep->fid); /* (first: the receives posted into the control buffers go with it) */
    fab->rail[0].ep = NULL;
    hier_fabric_ctl_close(fab);
close_rails:
    hier_fabric_rails_close(fab);
free_list:
    hier_fi.freeinfo(fab->list);
free_fab:
    free(fab);
    return st;
}

static void hier_fabric_close_locked(hier_fabric_t *fab)
{
    if (!fab) return;
    hier_fabric_mr_retired_free(fab);
    fi_close(&fab->rail[0].ep->fid);
    fab->rail[0].ep = NULL;
    hier_fabric_ctl_close(fab); /* (its registration, before the domain goes) */
    hier_fabric_rails_close(fab);
    hier_fabric_ops_free(fab); /* (no completion comes once the endpoints are closed) */
    hier_fi.freeinfo(fab->list);
    free(fab->remote);
    free(fab);
}

size_t hier_fabric_max_msg(const hier_fabric_t *fab)
{
    size_t msg = fab->rail[0].info->ep_attr->max_msg_size;
    return fab->rma_max && fab->rma_max < msg ? fab->rma_max : msg; /* (hier's messages are writes) */
}

const char *hier_fabric_provider(const hier_fabric_t *fab)
{
    return fab->list->fabric_attr->prov_name;
}

int hier_fabric_provider_is_efa(const char *prov)
{
    return prov && !strncmp(prov, "efa", 3);
}

/* Read completions into ev; 0 when none. */
static hier_status_t hier_fabric_cq_drain(hier_fabric_t *fab, struct fid_cq *cq, hier_fabric_event_t *ev, size_t max,
                                          size_t *n_p)
{
    struct fi_cq_data_entry entries[16];
    size_t want = max < 16 ? max : 16;
    ssize_t ret = fi_cq_read(cq, entries, want);
    *n_p = 0;
    if (ret == -FI_EAGAIN) return HIER_OK;
    if (ret == -FI_EAVAIL) { /* handed to the caller, who knows whether that write mattered */
        struct fi_cq_err_entry err = {0};
        fi_cq_readerr(cq, &err, 0);
        HIER_LOG(HIER_LOG_DEBUG, "completion error on provider %s: %s (%d)", hier_fabric_provider(fab),
                 fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0), err.err);
        int got = 0;
        if (hier_fabric_ctl_owns(fab, err.op_context) &&
            hier_fabric_ctl_completion(fab, err.op_context, err.flags, 0, 1, &ev[0], &got)) {
            *n_p = (size_t)got;
            return HIER_OK;
        }
        if (!err.op_context) { /* not a write of ours (a peer's write to us failed on our side): its writer is told */
            HIER_LOG(HIER_LOG_COMM, "provider %s reported an error on a peer's operation: %s", hier_fabric_provider(fab),
                     hier_fi_strerror(err.err));
            return HIER_OK;
        }
        ev[0] = (hier_fabric_event_t){.kind = HIER_FABRIC_EV_WRITE_FAILED,
                                      .context = hier_fabric_op_give(fab, err.op_context), .data = (uint32_t)err.err};
        *n_p = 1;
        return HIER_OK;
    }
    if (ret < 0) return hier_fabric_fail(fab, "fi_cq_read", (int)ret);
    size_t n = 0;
    for (ssize_t i = 0; i < ret; i++) {
        int got = 0;
        /* match on the flag alone: len is 0 on rxm and the full size on shm */
        if (entries[i].flags & FI_REMOTE_CQ_DATA)
            ev[n++] = (hier_fabric_event_t){.kind = HIER_FABRIC_EV_REMOTE, .data = (uint32_t)entries[i].data};
        else if (hier_fabric_ctl_owns(fab, entries[i].op_context) &&
                 hier_fabric_ctl_completion(fab, entries[i].op_context, entries[i].flags, entries[i].len, 0, &ev[n],
                                            &got))
            n += (size_t)got;
        else
            ev[n++] = (hier_fabric_event_t){.kind = HIER_FABRIC_EV_WRITE_DONE,
                                            .context = hier_fabric_op_give(fab, entries[i].op_context)};
    }
    if (fab->ctl_unposted_n) hier_fabric_ctl_repost(fab);
    *n_p = n;
    return HIER_OK;
}

/* Every rail's completions, a different rail first each time (so a busy
 * one does not starve the others when `max` is small). */
static hier_status_t hier_fabric_poll_locked(hier_fabric_t *fab, hier_fabric_event_t *ev, size_t max, size_t *n_p)
{
    size_t n = 0;
    unsigned first = fab->poll_next++ % fab->nrails;
    for (unsigned k = 0; k < fab->nrails && n < max; k++) {
        size_t got;
        hier_status_t st = hier_fabric_cq_drain(fab, fab->rail[(first + k) % fab->nrails].cq, ev + n, max - n, &got);
        if (st != HIER_OK) return st;
        n += got;
    }
    *n_p = n;
    return HIER_OK;
}

size_t hier_fabric_iov_limit(const hier_fabric_t *fab)
{
    size_t n = fab->rail[0].info->tx_attr->iov_limit;
    return n < HIER_FABRIC_IOV_MAX ? (n ? n : 1) : HIER_FABRIC_IOV_MAX;
}

/* Post one write; -FI_EAGAIN (no room) comes back as *posted_p = 0. One
 * piece goes by fi_writedata, several by fi_writemsg with the same flags. */
static hier_status_t hier_fabric_post(hier_fabric_t *fab, hier_fabric_peer_t peer, const hier_fabric_iov_t *iov,
                                      size_t n, hier_fabric_rkey_t rkey, uint64_t off, uint32_t data, void *context,
                                      int *posted_p)
{
    const hier_fabric_remote_t *rem = &fab->remote[hier_fabric_remote_index(peer)];
    const hier_fabric_lane_t *lane = &rem->lane[hier_fabric_lane_of(peer) % rem->nlanes];
    hier_fabric_rail_t *r = &fab->rail[lane->mine];
    uint64_t key = rkey.key[lane->theirs];
    size_t total = 0;
    ssize_t ret;
    for (size_t i = 0; fab->efa_direct && i < n; i++)
        if (!iov[i].mr) {
            HIER_ERROR("a write of %zu bytes from unregistered memory under efa-direct's rules (FI_MR_LOCAL): "
                       "refused", iov[i].len);
            return HIER_ERR_INTERNAL;
        }
    hier_fabric_op_t *op = hier_fabric_op_take(fab, context);
    if (!op) return HIER_ERR_NO_MEMORY;
    if (n == 1) {
        total = iov[0].len;
        ret = fi_writedata(r->ep, iov[0].buf, iov[0].len, iov[0].mr ? iov[0].mr->desc[lane->mine] : NULL, data,
                           lane->addr, rkey.base + off, key, &op->fi);
    } else {
        struct iovec v[HIER_FABRIC_IOV_MAX];
        void *desc[HIER_FABRIC_IOV_MAX];
        for (size_t i = 0; i < n; i++) {
            v[i] = (struct iovec){.iov_base = (void *)iov[i].buf, .iov_len = iov[i].len};
            desc[i] = iov[i].mr ? iov[i].mr->desc[lane->mine] : NULL;
            total += iov[i].len;
        }
        struct fi_rma_iov rma = {.addr = rkey.base + off, .len = total, .key = key};
        struct fi_msg_rma msg = {.msg_iov = v, .desc = desc, .iov_count = n, .addr = lane->addr, .rma_iov = &rma,
                                 .rma_iov_count = 1, .context = &op->fi, .data = data};
        ret = fi_writemsg(r->ep, &msg, FI_REMOTE_CQ_DATA | FI_COMPLETION);
    }
    *posted_p = ret == 0;
    if (ret != 0) hier_fabric_op_give(fab, &op->fi);
    if (ret == 0) __atomic_fetch_add(r->bytes, total, __ATOMIC_RELAXED);
    if (ret == 0 || ret == -FI_EAGAIN) return HIER_OK;
    return hier_fabric_fail(fab, n == 1 ? "fi_writedata" : "fi_writemsg", (int)ret);
}

static hier_status_t hier_fabric_try_write_locked(hier_fabric_t *fab, hier_fabric_peer_t peer, const void *src, size_t len,
                                    hier_fabric_mr_t *mr, hier_fabric_rkey_t rkey, uint64_t off, uint32_t data,
                                    void *context, int *posted_p)
{
    hier_fabric_iov_t iov = {.buf = src, .len = len, .mr = mr};
    return hier_fabric_post(fab, peer, &iov, 1, rkey, off, data, context, posted_p);
}


/* ---- the public operations, under the transport lock (hier_lock.h) ---- */

void hier_fabric_close(hier_fabric_t *fab)
{
    hier_lock_take();
    hier_fabric_close_locked(fab);
    if (hier_fabric_pre.done && hier_fabric_pre.list) hier_fi.freeinfo(hier_fabric_pre.list); /* (never taken) */
    hier_fabric_pre.done = 0;
    hier_fabric_pre.list = NULL;
    hier_lock_drop();
}

hier_status_t hier_fabric_try_write(hier_fabric_t *fab, hier_fabric_peer_t peer, const void *src, size_t len,
                                    hier_fabric_mr_t *mr, hier_fabric_rkey_t rkey, uint64_t off, uint32_t data,
                                    void *context, int *posted_p)
{
    HIER_LOCKED_RETURN(hier_status_t,
                       hier_fabric_try_write_locked(fab, peer, src, len, mr, rkey, off, data, context, posted_p));
}

hier_status_t hier_fabric_try_writev(hier_fabric_t *fab, hier_fabric_peer_t peer, const hier_fabric_iov_t *iov,
                                     size_t n, hier_fabric_rkey_t rkey, uint64_t off, uint32_t data, void *context,
                                     int *posted_p)
{
    if (n == 0 || n > hier_fabric_iov_limit(fab)) return HIER_ERR_INVALID_ARG;
    HIER_LOCKED_RETURN(hier_status_t, hier_fabric_post(fab, peer, iov, n, rkey, off, data, context, posted_p));
}

hier_status_t hier_fabric_poll(hier_fabric_t *fab, hier_fabric_event_t *ev, size_t max, size_t *n_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_fabric_poll_locked(fab, ev, max, n_p));
}
