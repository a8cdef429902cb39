/* hier_fabric_mr.c: memory registration on the rails, and registrations
 * retired until the endpoint closes (hier_fabric.h says why). Under the
 * transport lock, as everything of the endpoint's. */
#include "net/hier_fabric.h"
#include "net/hier_fabric_impl.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "net/hier_fi.h"

int hier_fabric_hmem(const hier_fabric_t *fab, int iface)
{
    return iface >= 0 && iface < 64 && (atomic_load_explicit(&fab->hmem_ifaces, memory_order_relaxed) >> iface & 1);
}

/* A provider granting FI_HMEM may still lack one iface: libfabric built
 * without that runtime's support (Debian's has none) answers -FI_ENOSYS.
 * That is a property of the stack, not an error: stop asking, say so once,
 * and let such buffers be staged. */
static int hier_fabric_iface_refused(hier_fabric_t *fab, const struct fi_mr_attr *attr, int ret)
{
    if (attr->iface == FI_HMEM_SYSTEM || (ret != -FI_ENOSYS && ret != -FI_EOPNOTSUPP)) return 0;
    uint64_t bit = (uint64_t)1 << attr->iface;
    if (atomic_fetch_and_explicit(&fab->hmem_ifaces, ~bit, memory_order_relaxed) & bit)
        HIER_LOG(HIER_LOG_COMM, "provider %s cannot register %s memory (fi_mr_regattr: %s): such buffers are "
                 "staged through host memory", hier_fabric_prov(fab), hier_fi.tostr(&attr->iface, FI_TYPE_HMEM_IFACE),
                 hier_fi_strerror(-ret));
    return 1;
}

void hier_fabric_mr_close(hier_fabric_mr_t *m)
{
    for (unsigned j = 0; j < HIER_FABRIC_RAILS_MAX; j++)
        if (m->mr[j]) fi_close(&m->mr[j]->fid);
    free(m);
}

/* Register on the first nrails rails with the attributes given (iface and
 * device set by the caller; access, if not set, for our writes and the
 * peers' into it). */
hier_status_t hier_fabric_regattr(hier_fabric_t *fab, struct fi_mr_attr *attr, unsigned nrails, hier_fabric_mr_t **mr_p)
{
    hier_status_t st = HIER_OK;
    int ret;
    hier_fabric_mr_t *m = calloc(1, sizeof(*m));
    if (!m) return HIER_ERR_NO_MEMORY;
    m->fab = fab;
    if (!attr->access) attr->access = FI_WRITE | FI_REMOTE_WRITE;
    for (unsigned j = 0; j < nrails && st == HIER_OK; j++) {
        hier_fabric_rail_t *r = &fab->rail[j];
        attr->requested_key = fab->mr_mode & FI_MR_PROV_KEY ? 0 : r->next_key++;
        if ((ret = fi_mr_regattr(r->domain, attr, 0, &m->mr[j]))) {
            m->mr[j] = NULL;
            st = hier_fabric_iface_refused(fab, attr, ret) ? HIER_ERR_NOT_SUPPORTED
                                                           : hier_fabric_fail(fab, "fi_mr_regattr", ret);
        } else if ((fab->mr_mode & FI_MR_ENDPOINT) &&
                   ((ret = fi_mr_bind(m->mr[j], &r->ep->fid, 0)) || (ret = fi_mr_enable(m->mr[j])))) {
            st = hier_fabric_fail(fab, "fi_mr_bind/fi_mr_enable", ret);
        } else {
            m->desc[j] = fi_mr_desc(m->mr[j]);
            m->rkey.key[j] = fi_mr_key(m->mr[j]);
        }
    }
    if (st != HIER_OK) {
        hier_fabric_mr_close(m);
        return st;
    }
    /* Without FI_MR_VIRT_ADDR a remote address is an offset: a pointer there
     * is accepted and silently lands nowhere (tcp;ofi_rxm). */
    m->rkey.base = fab->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)attr->mr_iov->iov_base : 0;
    *mr_p = m;
    return HIER_OK;
}

static hier_status_t hier_fabric_mr_reg_locked(hier_fabric_t *fab, void *buf, size_t len, hier_fabric_mr_t **mr_p)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct fi_mr_attr attr = {.mr_iov = &iov, .iov_count = 1, .iface = FI_HMEM_SYSTEM};
    return hier_fabric_regattr(fab, &attr, fab->nrails, mr_p);
}

static hier_status_t hier_fabric_mr_reg_dev_locked(hier_fabric_t *fab, void *buf, size_t len, int iface, int device,
                                                   hier_fabric_mr_t **mr_p)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct fi_mr_attr attr = {.mr_iov = &iov, .iov_count = 1, .iface = (enum fi_hmem_iface)iface};
    if (!hier_fabric_hmem(fab, iface)) return HIER_ERR_NOT_SUPPORTED;
    switch (iface) { /* the union member the provider reads for this iface */
    case FI_HMEM_CUDA: attr.device.cuda = device; break;
    case FI_HMEM_ZE: attr.device.ze = device; break;
    case FI_HMEM_NEURON: attr.device.neuron = device; break;
    case FI_HMEM_SYNAPSEAI: attr.device.synapseai = device; break;
    default: break;
    }
    return hier_fabric_regattr(fab, &attr, fab->nrails, mr_p);
}

static void hier_fabric_mr_dereg_locked(hier_fabric_mr_t *mr)
{
    if (mr) hier_fabric_mr_close(mr);
}

hier_fabric_rkey_t hier_fabric_mr_rkey(const hier_fabric_mr_t *mr)
{
    return mr->rkey;
}

static void hier_fabric_retired_drop(hier_fabric_t *fab)
{
    struct hier_fabric_retired *r = &fab->retired[fab->first_retired];
    hier_fabric_mr_dereg_locked(r->mr);
    free(r->mem);
    fab->first_retired = (fab->first_retired + 1) % HIER_FABRIC_RETIRED;
    fab->nretired--;
}

void hier_fabric_mr_retired_free(hier_fabric_t *fab)
{
    while (fab->nretired) hier_fabric_retired_drop(fab);
}

hier_status_t hier_fabric_mr_reg(hier_fabric_t *fab, void *buf, size_t len, hier_fabric_mr_t **mr_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_fabric_mr_reg_locked(fab, buf, len, mr_p));
}

hier_status_t hier_fabric_mr_reg_dev(hier_fabric_t *fab, void *buf, size_t len, int iface, int device,
                                     hier_fabric_mr_t **mr_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_fabric_mr_reg_dev_locked(fab, buf, len, iface, device, mr_p));
}

void hier_fabric_mr_dereg(hier_fabric_mr_t *mr)
{
    hier_lock_take();
    hier_fabric_mr_dereg_locked(mr);
    hier_lock_drop();
}

void hier_fabric_mr_retire(hier_fabric_mr_t *mr, void *mem)
{
    hier_lock_take();
    hier_fabric_t *fab = mr->fab;
    if (fab->nretired == HIER_FABRIC_RETIRED) hier_fabric_retired_drop(fab); /* long enough ago */
    fab->retired[(fab->first_retired + fab->nretired++) % HIER_FABRIC_RETIRED] =
        (struct hier_fabric_retired){.mr = mr, .mem = mem};
    hier_lock_drop();
}
