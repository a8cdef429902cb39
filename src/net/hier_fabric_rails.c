/* hier_fabric_rails.c: the NICs a process drives (its rails), and how it reaches each peer through them
 * (lanes) (docs/design.md, "Several NICs per node"). Opening the rails:
 * 1. the node's NICs: every domain the provider offers that passes the user's list (without one, 1b: the NICs
 *    meant for data), in name order (numbers compared as numbers), so NIC i is rail i on every node;
 * 2. where each is: its PCI bus id (fi_info's nic, or the interface's device in sysfs) located by hwloc, or
 *    unknown;
 * 3. the node's plan (hier_nic_assign), the same on every rank: this rank's NICs, nearest first and balanced;
 *    logged by the node's first rank;
 * 4. an endpoint per NIC: fabric, domain, completion queue, address vector, endpoint, bound and enabled. */
#define _GNU_SOURCE /* strverscmp */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_nic.h"
#include "base/hier_topo.h"
#include "net/hier_fabric_impl.h"
#include "net/hier_fi.h"

#define HIER_FABRIC_NICS_MAX 256 /* NICs of a node looked at */
#define HIER_FABRIC_ADDR_VERSION 1

static int hier_fabric_default_nic(const char *name)
{
    return strcmp(name, "lo") && strncmp(name, "docker", 6);
}

static int hier_fabric_nic_order(const void *a, const void *b)
{
    return strverscmp((*(struct fi_info *const *)a)->domain_attr->name, (*(struct fi_info *const *)b)->domain_attr->name);
}

/* 1b: without a user's list, the NICs meant for data (hier_nic_default_set):
 * not the management link that carries the default route, none slower than
 * the fastest; what goes is said (by the node's first rank). */
static size_t hier_fabric_default_set(struct fi_info **nics, size_t n, int log)
{
    hier_nic_fact_t *facts = malloc(sizeof(*facts) * n);
    unsigned char *keep = malloc(n);
    const char **why = malloc(sizeof(*why) * n);
    size_t kept = n;
    if (facts && keep && why) {
        for (size_t i = 0; i < n; i++)
            facts[i] = (hier_nic_fact_t){.speed_mbps = hier_topo_netdev_speed(nics[i]->domain_attr->name),
                                         .default_route = hier_topo_netdev_default_route(nics[i]->domain_attr->name)};
        hier_nic_default_set(facts, (int)n, keep, why);
        kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (!keep[i] && log)
                HIER_LOG(HIER_LOG_COMM, "fabric: NIC %s left out: %s (coll_hier_fabric_iface names NICs to use)",
                         nics[i]->domain_attr->name, why[i]);
            if (keep[i]) nics[kept++] = nics[i];
        }
    }
    free(facts);
    free(keep);
    free(why);
    return kept;
}

/* 1 */
static size_t hier_fabric_nics(struct fi_info *list, const char *filter, struct fi_info **nics, int log)
{
    size_t n = 0, usual = 0;
    for (int pass = 0; pass < 2 && !usual; pass++) { /* pass 1: loopback after all, when alone */
        n = 0;
        for (struct fi_info *i = list; i && n < HIER_FABRIC_NICS_MAX; i = i->next) {
            const char *name = i->domain_attr->name;
            if (strcmp(i->fabric_attr->prov_name, list->fabric_attr->prov_name) || i->addr_format != list->addr_format ||
                !name || !hier_nic_filter_pass(filter, name))
                continue;
            int dup = 0;
            for (size_t j = 0; j < n; j++) dup |= !strcmp(nics[j]->domain_attr->name, name);
            if (dup) continue;
            if ((filter && filter[0]) || pass || hier_fabric_default_nic(name)) nics[n++] = i;
        }
        usual = n || (filter && filter[0]);
        if (n > 1 && !pass && !(filter && filter[0])) n = hier_fabric_default_set(nics, n, log);
    }
    qsort(nics, n, sizeof(*nics), hier_fabric_nic_order); /* rail0 .. rail9, rail10: the same order on every node */
    return n;
}

/* 2 */
static int hier_fabric_nic_numa(hier_topo_t *topo, const struct fi_info *i)
{
    char busid[16];
    hier_locality_t loc;
    if (!topo) return -1;
    if (i->nic && i->nic->bus_attr && i->nic->bus_attr->bus_type == FI_BUS_PCI) {
        const struct fi_pci_attr *pci = &i->nic->bus_attr->attr.pci;
        snprintf(busid, sizeof(busid), "%04x:%02x:%02x.%x", pci->domain_id, pci->bus_id, pci->device_id,
                 pci->function_id);
    } else if (hier_topo_netdev_busid(i->domain_attr->name, busid, sizeof(busid)) != HIER_OK) {
        return -1;
    }
    return hier_topo_pci_locality(topo, busid, &loc) == HIER_OK ? loc.numa : -1;
}

/* 3: the log says, per rank, which NICs and why */
static void hier_fabric_plan_log(const hier_nic_plan_t *plan, struct fi_info **nics, size_t nnics,
                                 const int *nic_numa, const hier_fabric_config_t *cfg, int nlocal)
{
    char line[512];
    const char **names = malloc(sizeof(*names) * nnics);
    if (!names) return;
    for (size_t n = 0; n < nnics; n++) names[n] = nics[n]->domain_attr->name;
    for (int r = 0; r < nlocal; r++) {
        hier_nic_plan_describe(plan, names, nic_numa, r, line, sizeof(line));
        HIER_LOG(HIER_LOG_COMM, "fabric: local rank %d (near NUMA %d) drives %s", r,
                 cfg->rank_numa ? cfg->rank_numa[r] : -1, line);
    }
    free(names);
}

static hier_status_t hier_fabric_plan(const hier_fabric_config_t *cfg, struct fi_info **nics, size_t nnics,
                                      int *mine, unsigned *nmine_p, int *near)
{
    int *nic_numa = malloc(sizeof(int) * nnics), alone = -1;
    if (!nic_numa) return HIER_ERR_NO_MEMORY;
    for (size_t n = 0; n < nnics; n++) nic_numa[n] = hier_fabric_nic_numa(cfg->topo, nics[n]);
    int nlocal = cfg->rank_numa && cfg->nlocal > 0 ? cfg->nlocal : 1;
    int max = cfg->max_rails < 1 ? 1 : cfg->max_rails > HIER_FABRIC_RAILS_MAX ? HIER_FABRIC_RAILS_MAX : cfg->max_rails;
    hier_nic_problem_t p = {.nnics = (int)nnics, .nic_numa = nic_numa, .nranks = nlocal,
                            .rank_numa = cfg->rank_numa && cfg->nlocal > 0 ? cfg->rank_numa : &alone,
                            .max_per_rank = max};
    int me = cfg->rank_numa && cfg->nlocal > 0 ? cfg->me : 0;
    hier_nic_plan_t plan;
    hier_status_t st = hier_nic_assign(&p, &plan);
    if (st == HIER_OK) {
        for (int j = 0; j < plan.per_rank; j++) {
            mine[j] = plan.nic[me * plan.per_rank + j];
            near[j] = plan.near[me * plan.per_rank + j];
        }
        *nmine_p = (unsigned)plan.per_rank;
        if (me == 0 && nnics > 1) hier_fabric_plan_log(&plan, nics, nnics, nic_numa, cfg, nlocal);
        hier_nic_plan_free(&plan);
    }
    free(nic_numa);
    return st;
}

/* 4 */
static hier_status_t hier_fabric_rail_open(hier_fabric_rail_t *r)
{
    int ret;
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    r->next_key = 1;
    if ((ret = hier_fi.fabric(r->info->fabric_attr, &r->fabric, NULL))) goto fail;
    if ((ret = fi_domain(r->fabric, r->info, &r->domain, NULL))) goto fail;
    if ((ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL))) goto fail;
    if ((ret = fi_av_open(r->domain, &av_attr, &r->av, NULL))) goto fail;
    if ((ret = fi_endpoint(r->domain, r->info, &r->ep, NULL))) goto fail;
    return HIER_OK;
fail: /* (what was opened goes in hier_fabric_rails_close) */
    HIER_ERROR("opening NIC %s on provider %s failed: %s (%d)", r->info->domain_attr->name,
               r->info->fabric_attr->prov_name, hier_fi_strerror(-ret), ret);
    return ret == -FI_ENOMEM ? HIER_ERR_NO_MEMORY : HIER_ERR_NOT_SUPPORTED;
}

hier_status_t hier_fabric_rails_open(hier_fabric_t *fab, const hier_fabric_config_t *cfg)
{
    struct fi_info **nics = malloc(sizeof(*nics) * HIER_FABRIC_NICS_MAX);
    int mine[HIER_FABRIC_RAILS_MAX], near[HIER_FABRIC_RAILS_MAX];
    unsigned nmine = 0;
    hier_status_t st = nics ? HIER_OK : HIER_ERR_NO_MEMORY;
    int log = (cfg->rank_numa && cfg->nlocal > 0 ? cfg->me : 0) == 0;
    size_t nnics = nics ? hier_fabric_nics(fab->list, cfg->iface, nics, log) : 0;               /* 1 */
    if (st == HIER_OK && !nnics) {
        HIER_ERROR("provider %s offers no NIC that coll_hier_fabric_iface (\"%s\") lets through",
                   fab->list->fabric_attr->prov_name, cfg->iface ? cfg->iface : "");
        st = HIER_ERR_NOT_SUPPORTED;
    }
    if (st == HIER_OK) st = hier_fabric_plan(cfg, nics, nnics, mine, &nmine, near);                /* 2, 3 */
    for (unsigned j = 0; st == HIER_OK && j < nmine; j++) {                                     /* 4 */
        hier_fabric_rail_t *r = &fab->rail[j];
        if (!(r->info = hier_fi.dupinfo(nics[mine[j]]))) {
            st = HIER_ERR_NO_MEMORY;
            break;
        }
        fab->nrails = j + 1;
        r->nic = mine[j];
        r->near = near[j];
        r->bytes = &hier_stats_rails[j].bytes;
        snprintf(hier_stats_rails[j].nic, sizeof(hier_stats_rails[j].nic), "%s", r->info->domain_attr->name);
        st = hier_fabric_rail_open(r);
    }
    free(nics);
    return st;
}

void hier_fabric_rails_close(hier_fabric_t *fab)
{
    for (unsigned j = fab->nrails; j-- > 0;) {
        hier_fabric_rail_t *r = &fab->rail[j];
        if (r->ep) fi_close(&r->ep->fid);
        if (r->av) fi_close(&r->av->fid);
        if (r->cq) fi_close(&r->cq->fid);
        if (r->domain) fi_close(&r->domain->fid);
        if (r->fabric) fi_close(&r->fabric->fid);
        hier_fi.freeinfo(r->info);
        *r = (hier_fabric_rail_t){0};
    }
    fab->nrails = 0;
}

/* ---- addresses and lanes ----
 * An address: a version byte, the number of rails, then per rail its NIC
 * index (2 bytes, little end first), the length of its libfabric address
 * (1 byte) and that address. */

hier_status_t hier_fabric_addr(hier_fabric_t *fab, void *addr, size_t *len_p)
{
    uint8_t *out = addr;
    size_t off = 2;
    hier_status_t st = HIER_OK;
    hier_lock_take();
    for (unsigned j = 0; j < fab->nrails && st == HIER_OK; j++) {
        size_t len = off + 3 < HIER_FABRIC_ADDR_MAX ? HIER_FABRIC_ADDR_MAX - off - 3 : 0;
        int ret = len ? fi_getname(&fab->rail[j].ep->fid, out + off + 3, &len) : -FI_ETOOSMALL;
        if (ret == -FI_ETOOSMALL || len > 255) {
            HIER_ERROR("the addresses of %u rails do not fit in %d bytes: use fewer (coll_hier_fabric_rails_max)",
                       fab->nrails, HIER_FABRIC_ADDR_MAX);
            st = HIER_ERR_NOT_SUPPORTED;
        } else if (ret) {
            st = hier_fabric_fail(fab, "fi_getname", ret);
        } else {
            out[off] = (uint8_t)(fab->rail[j].nic & 0xff);
            out[off + 1] = (uint8_t)(fab->rail[j].nic >> 8);
            out[off + 2] = (uint8_t)len;
            off += 3 + len;
        }
    }
    hier_lock_drop();
    if (st != HIER_OK) return st;
    out[0] = HIER_FABRIC_ADDR_VERSION;
    out[1] = (uint8_t)fab->nrails;
    *len_p = off;
    return HIER_OK;
}

typedef struct {
    unsigned n;
    int nic[HIER_FABRIC_RAILS_MAX];
    const uint8_t *addr[HIER_FABRIC_RAILS_MAX];
} hier_fabric_parsed_t;

static int hier_fabric_parse(const uint8_t *in, hier_fabric_parsed_t *p)
{
    size_t off = 2;
    if (in[0] != HIER_FABRIC_ADDR_VERSION || in[1] < 1 || in[1] > HIER_FABRIC_RAILS_MAX) return 0;
    p->n = in[1];
    for (unsigned j = 0; j < p->n; j++) {
        if (off + 3 > HIER_FABRIC_ADDR_MAX || off + 3 + in[off + 2] > HIER_FABRIC_ADDR_MAX) return 0;
        p->nic[j] = in[off] | in[off + 1] << 8;
        p->addr[j] = in + off + 3;
        off += 3 + in[off + 2];
    }
    return 1;
}

static int hier_fabric_av_insert(hier_fabric_t *fab, unsigned rail, const void *addr, fi_addr_t *out)
{
    int ret = fi_av_insert(fab->rail[rail].av, addr, 1, out, 0, NULL);
    if (ret != 1) hier_fabric_fail(fab, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
    return ret == 1;
}

/* Lanes: our rails whose NIC the peer drives too, with that rail of its;
 * none in common (the ranks drive different NICs): rail t of ours with rail
 * t of its, for as many as the fewer has. */
static void hier_fabric_pair(const hier_fabric_t *fab, const hier_fabric_parsed_t *p, hier_fabric_remote_t *rem)
{
    rem->nlanes = 0;
    for (unsigned i = 0; i < fab->nrails; i++)
        for (unsigned j = 0; j < p->n; j++)
            if (fab->rail[i].nic == p->nic[j]) rem->lane[rem->nlanes++] = (hier_fabric_lane_t){.mine = (uint8_t)i,
                                                                                                .theirs = (uint8_t)j};
    if (!rem->nlanes) {
        unsigned n = fab->nrails < p->n ? fab->nrails : p->n;
        for (unsigned t = 0; t < n; t++) rem->lane[t] = (hier_fabric_lane_t){.mine = (uint8_t)t, .theirs = (uint8_t)t};
        rem->nlanes = n;
    }
}

static hier_status_t hier_fabric_insert_locked(hier_fabric_t *fab, const void *addr, hier_fabric_peer_t *peer_p)
{
    hier_fabric_parsed_t p;
    hier_fabric_remote_t rem = {0};
    if (!hier_fabric_parse(addr, &p)) {
        HIER_ERROR("a peer's fabric address is malformed (a different coll/hier version?)");
        return HIER_ERR_INVALID_ARG;
    }
    if (fab->nremote == fab->remote_cap) {
        size_t cap = fab->remote_cap ? 2 * fab->remote_cap : 16;
        hier_fabric_remote_t *grown = realloc(fab->remote, cap * sizeof(*grown));
        if (!grown) return HIER_ERR_NO_MEMORY;
        fab->remote = grown;
        fab->remote_cap = cap;
    }
    hier_fabric_pair(fab, &p, &rem);
    for (unsigned t = 0; t < rem.nlanes; t++)
        if (!hier_fabric_av_insert(fab, rem.lane[t].mine, p.addr[rem.lane[t].theirs], &rem.lane[t].addr))
            return HIER_ERR_INTERNAL;
    if (rem.lane[0].mine == 0 && rem.lane[0].theirs == 0) rem.ctl = rem.lane[0].addr;
    else if (!hier_fabric_av_insert(fab, 0, p.addr[0], &rem.ctl)) return HIER_ERR_INTERNAL;
    fab->remote[fab->nremote] = rem;
    *peer_p = (hier_fabric_peer_t)fab->nremote++ << HIER_FABRIC_LANE_BITS;
    return HIER_OK;
}

hier_status_t hier_fabric_insert(hier_fabric_t *fab, const void *addr, hier_fabric_peer_t *peer_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_fabric_insert_locked(fab, addr, peer_p));
}

unsigned hier_fabric_lanes(const hier_fabric_t *fab, hier_fabric_peer_t peer)
{
    return fab->stripe ? fab->remote[hier_fabric_remote_index(peer)].nlanes : 1;
}


unsigned hier_fabric_nrails(const hier_fabric_t *fab)
{
    return fab->nrails;
}

void hier_fabric_rail_info(const hier_fabric_t *fab, unsigned rail, const char **name_p, int *nic_p, int *near_p,
                           uint64_t *bytes_p)
{
    const hier_fabric_rail_t *r = &fab->rail[rail];
    *name_p = r->info->domain_attr->name;
    *nic_p = r->nic;
    *near_p = r->near;
    *bytes_p = __atomic_load_n(r->bytes, __ATOMIC_RELAXED);
}
