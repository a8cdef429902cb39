/* hier_topo.h: the node's hardware topology (hwloc underneath, opaque here): where a process is bound, where a
 * PCI device or NIC is, a line for the logs, and a pure grouping of local ranks by NUMA domain. Indexes are hwloc
 * *logical* ones (0..n-1 in topology order), the same in every process of the node, never the OS numbering. */
#ifndef HIER_TOPO_H
#define HIER_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_status.h"

typedef struct hier_topo hier_topo_t;

/* Where a process runs: its logical NUMA index; -1 when unknown or when its CPUs span several. */
typedef struct {
    int numa;
} hier_locality_t;

/* Ranks 0..nranks-1 grouped by NUMA domain (arrays of nranks entries, first nranks + 1), ordered by leader: group g
 * holds members[first[g] .. first[g+1]) in increasing rank order; entries past ngroups are zero. */
typedef struct {
    int ngroups;
    uint32_t *group_of; /* rank -> group */
    uint32_t *leader;   /* group -> its lowest rank */
    uint32_t *first;    /* group -> offset in members; first[ngroups] == nranks */
    uint32_t *members;  /* ranks, grouped */
} hier_topo_groups_t;

/* Load this machine's topology (synthetic NULL), an hwloc synthetic one ("pack:2 numa:2 core:4 pu:1") or an XML
 * file (a path ending in .xml). HIER_ERR_INVALID_ARG: unparsable; HIER_ERR_TOPOLOGY: hwloc could not load;
 * HIER_ERR_NOT_SUPPORTED: the run-time hwloc ABI differs from the one compiled against. */
hier_status_t hier_topo_open(const char *synthetic, hier_topo_t **topo_p);
/* This machine without its PCI devices (quicker to load); hier_topo_pci_locality loads them when first asked. */
hier_status_t hier_topo_open_cpus(hier_topo_t **topo_p);
void hier_topo_close(hier_topo_t *topo); /* NULL is fine; an adopted topology is left to its owner */

/* Wrap a topology another library of this process loaded (Open MPI's), without copying or owning it; only from
 * the same hwloc library as ours (the caller compares its hwloc_topology_load with hier_topo_library()).
 * HIER_ERR_NOT_SUPPORTED: NULL, another ABI, or not this machine's (loaded from XML). */
typedef int (*hier_topo_load_fn_t)(void *);
hier_topo_load_fn_t hier_topo_library(void);
hier_status_t hier_topo_adopt(void *hwloc_topology, hier_topo_t **topo_p);

/* NUMA domains of this machine as the kernel lists them (sysfs), without hwloc; 0 when it lists none. */
int hier_topo_machine_numa_count(void);

/* Locality of the calling process from its CPU binding (all threads); numa -1 unbound or across NUMA domains.
 * HIER_ERR_NOT_SUPPORTED on a topology not this machine's (synthetic) or where the OS cannot report bindings. */
hier_status_t hier_topo_self_locality(hier_topo_t *topo, hier_locality_t *loc_p);

/* The same for logical PUs such as "0-3,8", on topologies not this machine's (tests); NUMA domains with identical
 * CPU sets (DDR + HBM) count as one, the lowest. HIER_ERR_INVALID_ARG: malformed list or PU out of range. */
hier_status_t hier_topo_cpulist_locality(hier_topo_t *topo, const char *cpulist,
                                         hier_locality_t *loc_p);

/* Locality of a PCI device by bus id ("0000:00:05.0"): its CPUs' NUMA domain, -1 when it hangs off the whole
 * machine. HIER_ERR_NOT_SUPPORTED: no such device in the topology. */
hier_status_t hier_topo_pci_locality(hier_topo_t *topo, const char *busid, hier_locality_t *loc_p);

/* A network interface's PCI bus id (sysfs) in busid (13 bytes suffice); HIER_ERR_NOT_SUPPORTED: virtual. */
hier_status_t hier_topo_netdev_busid(const char *ifname, char *busid, size_t len);
/* The interface's link speed in Mb/s (-1 unknown); whether it carries the machine's (IPv4) default route. */
long hier_topo_netdev_speed(const char *ifname);
int hier_topo_netdev_default_route(const char *ifname);

/* Group ranks by locs[rank].numa (one flat group if any is -1); pure. HIER_ERR_INVALID_ARG: nranks below 1 or a
 * numa below -1; HIER_ERR_NO_MEMORY. Free with hier_topo_groups_free. */
hier_status_t hier_topo_groups_by_numa(const hier_locality_t *locs, int nranks,
                                       hier_topo_groups_t *groups_p);
/* The same in the caller's mem (HIER_TOPO_GROUPS_WORDS words), which the groups take; only HIER_ERR_INVALID_ARG. */
#define HIER_TOPO_GROUPS_WORDS(nranks) (6 * (size_t)(nranks) + 1)
hier_status_t hier_topo_groups_by_numa_in(const hier_locality_t *locs, int nranks, uint32_t *mem,
                                          hier_topo_groups_t *groups_p);
void hier_topo_groups_free(hier_topo_groups_t *groups);

/* One line for the logs, "packages=2 numa=4 cores=16 pus=16 l3=32MiB" (the largest last-level cache, omitted if
 * none). HIER_ERR_INVALID_ARG if it does not fit in len (buf then untouched). */
hier_status_t hier_topo_describe(const hier_topo_t *topo, char *buf, size_t len);

#endif
