/* hier_topo.c: hwloc behind hier_topo.h. hwloc errors (-1 + errno) become
 * hier_status_t here, where they enter, and are logged once. */
#include "base/hier_topo.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"

struct hier_topo {
    hwloc_topology_t hw;
    int owned; /* loaded here (destroyed at close), or another library's (hier_topo_adopt) */
    /* PCI devices: hw itself when it has them, else loaded at the first PCI
     * query (a topology with I/O takes ~3x as long to load: only NIC and
     * accelerator placement need it) */
    pthread_mutex_t io_lock;
    hwloc_topology_t io;
    int io_tried;
    /* counted once at open: the topology never changes afterwards */
    int numa_count;
    int package_count;
    int core_count;
    int pu_count;
};

/* The errno of a failed hwloc call, as a status; dflt for what has no better name. */
static hier_status_t topo_status_from_errno(int err, hier_status_t dflt)
{
    switch (err) {
    case ENOMEM: return HIER_ERR_NO_MEMORY;
    case ENOSYS: return HIER_ERR_NOT_SUPPORTED;
    default: return dflt;
    }
}

static int topo_count(hwloc_topology_t hw, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(hw, type);
    return n > 0 ? n : 0; /* -1 (type at several depths) cannot happen for these types */
}

/* The counts every query reads, once; a topology without PUs is refused. */
static hier_status_t topo_count_all(hier_topo_t *topo, const char *what)
{
    topo->numa_count = topo_count(topo->hw, HWLOC_OBJ_NUMANODE);
    topo->package_count = topo_count(topo->hw, HWLOC_OBJ_PACKAGE);
    topo->core_count = topo_count(topo->hw, HWLOC_OBJ_CORE);
    topo->pu_count = topo_count(topo->hw, HWLOC_OBJ_PU);
    if (topo->pu_count == 0) {
        HIER_ERROR("topo: hwloc reports no processing units");
        return HIER_ERR_TOPOLOGY;
    }
    char line[160];
    if (hier_topo_describe(topo, line, sizeof(line)) == HIER_OK)
        HIER_LOG(HIER_LOG_DEBUG, "topo: %s topology: %s", what, line);
    return HIER_OK;
}

/* hwloc breaks its ABI between major API versions (the upper 16 bits). */
static int topo_abi_ok(void)
{
    if ((hwloc_get_api_version() >> 16) == (HWLOC_API_VERSION >> 16)) return 1;
    HIER_ERROR("topo: compiled against hwloc API 0x%x but running with 0x%x", (unsigned)HWLOC_API_VERSION,
               hwloc_get_api_version());
    return 0;
}

static hier_status_t topo_open(const char *synthetic, int io, hier_topo_t **topo_p);

hier_status_t hier_topo_open(const char *synthetic, hier_topo_t **topo_p)
{
    return topo_open(synthetic, 1, topo_p);
}

hier_status_t hier_topo_open_cpus(hier_topo_t **topo_p)
{
    return topo_open(NULL, 0, topo_p);
}

static hier_status_t topo_open(const char *synthetic, int io, hier_topo_t **topo_p)
{
    hier_status_t st;
    hier_topo_t *topo;
    int err;

    if (topo_p == NULL) {
        HIER_ERROR("topo: open: NULL output argument");
        return HIER_ERR_INVALID_ARG;
    }
    if (!topo_abi_ok()) return HIER_ERR_NOT_SUPPORTED;

    topo = calloc(1, sizeof(*topo));
    if (topo == NULL) {
        HIER_ERROR("topo: open: out of memory");
        return HIER_ERR_NO_MEMORY;
    }
    if (hwloc_topology_init(&topo->hw) != 0) {
        err = errno;
        st = topo_status_from_errno(err, HIER_ERR_TOPOLOGY);
        HIER_ERROR("topo: hwloc_topology_init failed: %s", strerror(err));
        goto err_free;
    }
    /* PCI devices too (NICs are placed by them); bridges and the rest only
     * where they lead to one */
    if (io) hwloc_topology_set_io_types_filter(topo->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    size_t slen = synthetic ? strlen(synthetic) : 0;
    if (slen > 4 && !strcmp(synthetic + slen - 4, ".xml")) { /* an exported topology (tests) */
        if (hwloc_topology_set_xml(topo->hw, synthetic) != 0) {
            err = errno;
            st = topo_status_from_errno(err, HIER_ERR_INVALID_ARG);
            HIER_ERROR("topo: hwloc cannot read the XML topology %s: %s", synthetic, strerror(err));
            goto err_destroy;
        }
        synthetic = NULL;
    }
    /* hwloc only explains a bad string when HWLOC_SYNTHETIC_VERBOSE=1 is set. */
    else if (synthetic != NULL && hwloc_topology_set_synthetic(topo->hw, synthetic) != 0) {
        err = errno;
        st = topo_status_from_errno(err, HIER_ERR_INVALID_ARG);
        HIER_ERROR("topo: hwloc rejects synthetic topology \"%s\": %s "
                   "(HWLOC_SYNTHETIC_VERBOSE=1 says why)", synthetic, strerror(err));
        goto err_destroy;
    }
    if (hwloc_topology_load(topo->hw) != 0) {
        err = errno;
        st = topo_status_from_errno(err, HIER_ERR_TOPOLOGY);
        HIER_ERROR("topo: hwloc_topology_load failed: %s", strerror(err));
        goto err_destroy;
    }

    topo->owned = 1;
    topo->io = io ? topo->hw : NULL;
    pthread_mutex_init(&topo->io_lock, NULL);
    if ((st = topo_count_all(topo, synthetic != NULL ? "synthetic" : "this machine's")) != HIER_OK) goto err_destroy;
    *topo_p = topo;
    return HIER_OK;

err_destroy:
    hwloc_topology_destroy(topo->hw);
err_free:
    free(topo);
    return st;
}

hier_topo_load_fn_t hier_topo_library(void)
{
    return (hier_topo_load_fn_t)hwloc_topology_load;
}

hier_status_t hier_topo_adopt(void *hwloc_topology, hier_topo_t **topo_p)
{
    hwloc_topology_t hw = hwloc_topology;
    if (!hw || !topo_abi_ok()) return HIER_ERR_NOT_SUPPORTED;
    /* one loaded from XML or synthetic would answer binding queries with the whole machine */
    if (!hwloc_topology_is_thissystem(hw)) return HIER_ERR_NOT_SUPPORTED;
    hier_topo_t *topo = calloc(1, sizeof(*topo));
    if (!topo) return HIER_ERR_NO_MEMORY;
    topo->hw = hw;
    topo->io = hwloc_get_next_pcidev(hw, NULL) ? hw : NULL;
    pthread_mutex_init(&topo->io_lock, NULL);
    hier_status_t st = topo_count_all(topo, "Open MPI's");
    if (st != HIER_OK) {
        free(topo);
        return st;
    }
    *topo_p = topo;
    return HIER_OK;
}

void hier_topo_close(hier_topo_t *topo)
{
    if (topo == NULL) return;
    if (topo->io && topo->io != topo->hw) hwloc_topology_destroy(topo->io);
    if (topo->owned) hwloc_topology_destroy(topo->hw);
    pthread_mutex_destroy(&topo->io_lock);
    free(topo);
}

/* Size in bytes of the largest data/unified cache of that level (1..5); 0 if none. */
static size_t topo_cache_size(const hier_topo_t *topo, int level)
{
    hwloc_obj_type_t type;
    hwloc_obj_t obj = NULL;
    size_t max = 0;

    if (topo == NULL || level < 1 || level > 5) return 0;
    /* L1CACHE..L5CACHE are consecutive in hwloc_obj_type_t (data/unified only). */
    type = (hwloc_obj_type_t)(HWLOC_OBJ_L1CACHE + (level - 1));
    while ((obj = hwloc_get_next_obj_by_type(topo->hw, type, obj)) != NULL) {
        if ((size_t)obj->attr->cache.size > max) max = (size_t)obj->attr->cache.size;
    }
    return max;
}

/* Logical index of the one object of this type whose CPUs meet set, or -1 if
 * none or several do. Objects with equal CPU sets count as one (a package's
 * DDR and HBM NUMA nodes): the first, lowest index, is kept. */
static int topo_sole_index(hwloc_topology_t hw, hwloc_obj_type_t type, hwloc_const_cpuset_t set)
{
    hwloc_obj_t found = NULL;
    hwloc_obj_t obj = NULL;

    while ((obj = hwloc_get_next_obj_by_type(hw, type, obj)) != NULL) {
        if (obj->cpuset == NULL || !hwloc_bitmap_intersects(obj->cpuset, set)) continue;
        if (found == NULL) {
            found = obj;
        } else if (!hwloc_bitmap_isequal(obj->cpuset, found->cpuset)) {
            return -1;
        }
    }
    return found != NULL ? (int)found->logical_index : -1;
}

static hier_locality_t topo_locality_of(const hier_topo_t *topo, hwloc_const_cpuset_t set)
{
    hier_locality_t loc;

    loc.numa = topo_sole_index(topo->hw, HWLOC_OBJ_NUMANODE, set);
    return loc;
}

int hier_topo_machine_numa_count(void)
{
    DIR *d = opendir("/sys/devices/system/node");
    struct dirent *e;
    int n = 0;
    if (!d) return 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "node", 4) && isdigit((unsigned char)e->d_name[4])) n++;
    closedir(d);
    return n;
}

hier_status_t hier_topo_self_locality(hier_topo_t *topo, hier_locality_t *loc_p)
{
    hier_status_t st = HIER_OK;
    hwloc_bitmap_t set;
    int err;

    if (topo == NULL || loc_p == NULL) {
        HIER_ERROR("topo: self_locality: NULL argument");
        return HIER_ERR_INVALID_ARG;
    }
    /* A synthetic or XML topology answers binding queries with the whole machine. */
    if (!hwloc_topology_is_thissystem(topo->hw)) {
        HIER_ERROR("topo: self_locality: topology does not describe this machine");
        return HIER_ERR_NOT_SUPPORTED;
    }
    set = hwloc_bitmap_alloc();
    if (set == NULL) {
        HIER_ERROR("topo: self_locality: out of memory");
        return HIER_ERR_NO_MEMORY;
    }
    /* PROCESS: the union over all threads, so a helper thread bound elsewhere counts. */
    if (hwloc_get_cpubind(topo->hw, set, HWLOC_CPUBIND_PROCESS) != 0) {
        err = errno;
        st = topo_status_from_errno(err, HIER_ERR_TOPOLOGY);
        HIER_ERROR("topo: hwloc_get_cpubind failed: %s", strerror(err));
        goto out_free;
    }
    *loc_p = topo_locality_of(topo, set);

out_free:
    hwloc_bitmap_free(set);
    return st;
}

/* One decimal PU index at *pp, below npus; advances *pp. hwloc's own list
 * parser is too lenient ("0x3" reads as 3, "1-0" as empty), hence this one. */
static hier_status_t topo_parse_pu(const char **pp, int npus, const char *list, int *pu_p)
{
    const char *p = *pp;
    long v = 0;

    if (!isdigit((unsigned char)*p)) {
        HIER_ERROR("topo: cpulist \"%s\": expected a PU index at offset %d", list, (int)(p - list));
        return HIER_ERR_INVALID_ARG;
    }
    while (isdigit((unsigned char)*p) && v < npus) v = v * 10 + (*p++ - '0');
    if (v >= npus) {
        HIER_ERROR("topo: cpulist \"%s\": PU index out of range (this topology has %d PUs)",
                   list, npus);
        return HIER_ERR_INVALID_ARG;
    }
    *pp = p;
    *pu_p = (int)v;
    return HIER_OK;
}

/* OR into set the cpusets of the logical PUs listed as "a-b,c,...". */
static hier_status_t topo_parse_cpulist(const hier_topo_t *topo, const char *list, hwloc_bitmap_t set)
{
    hier_status_t st;
    const char *p = list;
    int lo, hi;

    for (;;) {
        st = topo_parse_pu(&p, topo->pu_count, list, &lo);
        if (st != HIER_OK) return st;
        hi = lo;
        if (*p == '-') {
            p++;
            st = topo_parse_pu(&p, topo->pu_count, list, &hi);
            if (st != HIER_OK) return st;
            if (hi < lo) {
                HIER_ERROR("topo: cpulist \"%s\": range %d-%d is reversed", list, lo, hi);
                return HIER_ERR_INVALID_ARG;
            }
        }
        for (int pu = lo; pu <= hi; pu++) {
            hwloc_obj_t obj = hwloc_get_obj_by_type(topo->hw, HWLOC_OBJ_PU, (unsigned)pu);
            if (obj == NULL) {
                HIER_ERROR("topo: cpulist \"%s\": hwloc has no PU L#%d", list, pu);
                return HIER_ERR_INTERNAL;
            }
            if (hwloc_bitmap_or(set, set, obj->cpuset) != 0) {
                HIER_ERROR("topo: cpulist \"%s\": out of memory", list);
                return HIER_ERR_NO_MEMORY;
            }
        }
        if (*p == '\0') return HIER_OK;
        if (*p != ',') {
            HIER_ERROR("topo: cpulist \"%s\": unexpected '%c' at offset %d", list, *p, (int)(p - list));
            return HIER_ERR_INVALID_ARG;
        }
        p++;
    }
}

hier_status_t hier_topo_cpulist_locality(hier_topo_t *topo, const char *cpulist,
                                         hier_locality_t *loc_p)
{
    hier_status_t st;
    hwloc_bitmap_t set;

    if (topo == NULL || cpulist == NULL || loc_p == NULL) {
        HIER_ERROR("topo: cpulist_locality: NULL argument");
        return HIER_ERR_INVALID_ARG;
    }
    set = hwloc_bitmap_alloc();
    if (set == NULL) {
        HIER_ERROR("topo: cpulist_locality: out of memory");
        return HIER_ERR_NO_MEMORY;
    }
    HIER_CHECK_GOTO(topo_parse_cpulist(topo, cpulist, set), out_free, st);
    *loc_p = topo_locality_of(topo, set);

out_free:
    hwloc_bitmap_free(set);
    return st;
}

hier_status_t hier_topo_groups_by_numa(const hier_locality_t *locs, int nranks,
                                       hier_topo_groups_t *groups_p)
{
    uint32_t *mem = nranks > 0 ? malloc(HIER_TOPO_GROUPS_WORDS(nranks) * sizeof(*mem)) : NULL;
    if (nranks > 0 && !mem) {
        HIER_ERROR("topo: groups_by_numa: out of memory for %d ranks", nranks);
        return HIER_ERR_NO_MEMORY;
    }
    hier_status_t st = hier_topo_groups_by_numa_in(locs, nranks, mem, groups_p);
    if (st != HIER_OK) free(mem);
    return st;
}

hier_status_t hier_topo_groups_by_numa_in(const hier_locality_t *locs, int nranks, uint32_t *mem,
                                          hier_topo_groups_t *groups_p)
{
    hier_topo_groups_t g = {0};
    int flat = 0;

    if (locs == NULL || groups_p == NULL || nranks < 1 || mem == NULL) {
        HIER_ERROR("topo: groups_by_numa: bad arguments (nranks %d)", nranks);
        return HIER_ERR_INVALID_ARG;
    }
    for (int r = 0; r < nranks; r++) {
        if (locs[r].numa < -1) {
            HIER_ERROR("topo: groups_by_numa: rank %d has NUMA index %d", r, locs[r].numa);
            return HIER_ERR_INVALID_ARG;
        }
        if (locs[r].numa == -1) flat = 1;
    }
    /* one block: group_of, leader, first (+1), members, then the scratch numa_of and next */
    size_t n = (size_t)nranks;
    memset(mem, 0, HIER_TOPO_GROUPS_WORDS(nranks) * sizeof(*mem));
    g.group_of = mem, g.leader = mem + n, g.first = mem + 2 * n, g.members = mem + 3 * n + 1;
    int *numa_of = (int *)(mem + 4 * n + 1); /* group -> its NUMA index */
    uint32_t *next = mem + 5 * n + 1;        /* group -> next free slot in members */

    /* 1. assign groups in rank order, so each group's leader is its first rank */
    for (int r = 0; r < nranks; r++) {
        int k = 0;
        while (!flat && k < g.ngroups && numa_of[k] != locs[r].numa) k++;
        if (k == g.ngroups) {
            numa_of[k] = locs[r].numa;
            g.leader[k] = (uint32_t)r;
            g.ngroups++;
        }
        g.group_of[r] = (uint32_t)k;
        g.first[k + 1]++;
    }
    /* 2. counts to offsets */
    for (int k = 0; k < g.ngroups; k++) {
        g.first[k + 1] += g.first[k];
        next[k] = g.first[k];
    }
    /* 3. scatter ranks in increasing order, keeping each group sorted */
    for (int r = 0; r < nranks; r++) g.members[next[g.group_of[r]]++] = (uint32_t)r;
    memset(numa_of, 0, 2 * n * sizeof(*mem)); /* (scratch, also next) */

    *groups_p = g;
    return HIER_OK;
}

void hier_topo_groups_free(hier_topo_groups_t *groups)
{
    if (!groups) return;
    free(groups->group_of); /* the block's start */
    *groups = (hier_topo_groups_t){0};
}

/* "32MiB": the largest binary unit that divides bytes exactly. */
static void topo_format_size(size_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    unsigned u = 0;

    while (u + 1 < sizeof(units) / sizeof(units[0]) && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%zu%s", bytes, units[u]);
}

hier_status_t hier_topo_describe(const hier_topo_t *topo, char *buf, size_t len)
{
    char line[160];
    char size[32];
    int n;

    if (topo == NULL || buf == NULL) {
        HIER_ERROR("topo: describe: NULL argument");
        return HIER_ERR_INVALID_ARG;
    }
    n = snprintf(line, sizeof(line), "packages=%d numa=%d cores=%d pus=%d", topo->package_count,
                 topo->numa_count, topo->core_count, topo->pu_count);
    for (int level = 5; level >= 1; level--) {
        size_t bytes = topo_cache_size(topo, level);
        if (bytes == 0) continue;
        topo_format_size(bytes, size, sizeof(size));
        n += snprintf(line + n, sizeof(line) - (size_t)n, " l%d=%s", level, size);
        break;
    }
    if ((size_t)n >= len) {
        HIER_ERROR("topo: describe: %zu-byte buffer, %d needed", len, n + 1);
        return HIER_ERR_INVALID_ARG;
    }
    memcpy(buf, line, (size_t)n + 1);
    return HIER_OK;
}

/* The topology with PCI devices, loaded once when hw has none; NULL if it cannot be. */
static hwloc_topology_t topo_io(hier_topo_t *topo)
{
    pthread_mutex_lock(&topo->io_lock);
    if (!topo->io && !topo->io_tried) {
        hwloc_topology_t io;
        topo->io_tried = 1;
        if (hwloc_topology_init(&io) == 0) {
            hwloc_topology_set_io_types_filter(io, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
            if (hwloc_topology_load(io) == 0) topo->io = io;
            else hwloc_topology_destroy(io);
        }
        if (!topo->io) HIER_LOG(HIER_LOG_COMM, "topo: hwloc cannot list this machine's PCI devices: NICs and "
                                "accelerators are taken as near no NUMA domain in particular");
    }
    pthread_mutex_unlock(&topo->io_lock);
    return topo->io;
}

hier_status_t hier_topo_pci_locality(hier_topo_t *topo, const char *busid, hier_locality_t *loc_p)
{
    hwloc_topology_t io = topo_io(topo);
    hwloc_obj_t dev = io ? hwloc_get_pcidev_by_busidstring(io, busid) : NULL;
    hwloc_obj_t anc = dev ? hwloc_get_non_io_ancestor_obj(io, dev) : NULL;
    if (!anc || !anc->cpuset) return HIER_ERR_NOT_SUPPORTED;
    /* (the root's CPUs: a device attached to the whole machine, near none in
     * particular; CPU sets are the machine's, the same in either topology) */
    *loc_p = anc == hwloc_get_root_obj(io) ? (hier_locality_t){.numa = -1} : topo_locality_of(topo, anc->cpuset);
    return HIER_OK;
}

/* A PCI bus id: dddd:bb:dd.f */
static int topo_is_busid(const char *s, size_t len)
{
    unsigned a, b, c, d;
    int n = 0;
    return len == 12 && sscanf(s, "%4x:%2x:%2x.%1x%n", &a, &b, &c, &d, &n) == 4 && n == 12;
}

hier_status_t hier_topo_netdev_busid(const char *ifname, char *busid, size_t len)
{
    char link[128], *path;
    if (strchr(ifname, '/') || snprintf(link, sizeof(link), "/sys/class/net/%s/device", ifname) >= (int)sizeof(link))
        return HIER_ERR_INVALID_ARG;
    if (!(path = realpath(link, NULL))) return HIER_ERR_NOT_SUPPORTED; /* virtual: veth, bridge, lo */
    const char *found = NULL; /* the PCI device nearest the interface: the last bus id in its path */
    for (char *s = path; (s = strchr(s, '/')); s++) {
        const char *e = strchr(s + 1, '/');
        if (topo_is_busid(s + 1, e ? (size_t)(e - s - 1) : strlen(s + 1))) found = s + 1;
    }
    hier_status_t st = found && len > 12 ? HIER_OK : HIER_ERR_NOT_SUPPORTED;
    if (st == HIER_OK) snprintf(busid, 13, "%.12s", found);
    free(path);
    return st;
}

/* The kernel's link speed in Mb/s (sysfs), -1 where it does not say: not a
 * network interface (an EFA device's name), down, or a virtual one without. */
long hier_topo_netdev_speed(const char *ifname)
{
    char path[128];
    long mbps = -1;
    if (strchr(ifname, '/') || snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname) >= (int)sizeof(path))
        return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    if (fscanf(f, "%ld", &mbps) != 1 || mbps <= 0) mbps = -1; /* (down: EINVAL; unknown: -1) */
    fclose(f);
    return mbps;
}

/* Whether the interface carries a default route (IPv4, /proc/net/route:
 * destination 0 and mask 0). */
int hier_topo_netdev_default_route(const char *ifname)
{
    char line[256], name[64];
    unsigned long dest, gw, flags, mask;
    int found = 0;
    FILE *f = fopen("/proc/net/route", "r");
    if (!f) return 0;
    while (!found && fgets(line, sizeof(line), f))
        if (sscanf(line, "%63s %lx %lx %lx %*d %*d %*d %lx", name, &dest, &gw, &flags, &mask) == 5)
            found = dest == 0 && mask == 0 && (flags & 1) && !strcmp(name, ifname); /* (RTF_UP) */
    fclose(f);
    return found;
}
