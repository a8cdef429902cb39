/* hier_topo.h: the node's hardware topology (hwloc underneath, opaque here).
 *
 * What the rest of the core asks of the machine: where a process is bound
 * (its NUMA domain), a line describing the machine for the logs, and a pure
 * function that groups local ranks by NUMA domain for the two-level
 * shared-memory tree.
 *
 * Indexes are hwloc *logical* indexes (0..n-1 in topology order), the same in
 * every process of the node, never the OS numbering (numactl's "node 3" may
 * be logical NUMA 1). */
#ifndef HIER_TOPO_H
#define HIER_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_status.h"

typedef struct hier_topo hier_topo_t;

/* Where a process runs: its logical NUMA index; -1 when unknown or when its
 * CPUs span several. */
typedef struct {
    int numa;
} hier_locality_t;

/* Ranks 0..nranks-1 grouped by NUMA domain, in arrays of nranks entries
 * (first: nranks + 1) allocated by hier_topo_groups_by_numa.
 * Groups are ordered by their leader, the lowest rank of the group.
 * CSR: group g holds members[first[g] .. first[g+1]) in increasing rank order.
 * Entries past ngroups are zero. */
typedef struct {
    int ngroups;
    uint32_t *group_of; /* rank -> group */
    uint32_t *leader;   /* group -> its lowest rank */
    uint32_t *first;    /* group -> offset in members; first[ngroups] == nranks */
    uint32_t *members;  /* ranks, grouped */
} hier_topo_groups_t;

/* Load this machine's topology (synthetic == NULL), an hwloc synthetic
 * description such as "pack:2 numa:2 core:4 pu:1", or an exported XML
 * topology (a path ending in .xml: tests, with PCI devices).
 * HIER_ERR_INVALID_ARG: unparsable description; HIER_ERR_TOPOLOGY: hwloc
 * could not load; HIER_ERR_NOT_SUPPORTED: run-time hwloc ABI differs from the
 * one compiled against. */
hier_status_t hier_topo_open(const char *synthetic, hier_topo_t **topo_p);
/* This machine without its PCI devices (a third of the time to load: what
 * one node's communicators need); hier_topo_pci_locality loads them when
 * first asked. */
hier_status_t hier_topo_open_cpus(hier_topo_t **topo_p);
void hier_topo_close(hier_topo_t *topo); /* NULL is fine; an adopted topology is left to its owner */

/* Wrap a topology another library of this process has loaded (Open MPI's:
 * loading one costs ~20 ms), without copying or owning it. Only the same
 * hwloc library as ours may be handed over: the caller compares its own
 * hwloc_topology_load with hier_topo_library() (an hwloc embedded under
 * another symbol prefix differs). HIER_ERR_NOT_SUPPORTED: NULL, another
 * ABI, or not this machine's (loaded from XML: binding queries would
 * answer with the whole machine). */
typedef int (*hier_topo_load_fn_t)(void *);
hier_topo_load_fn_t hier_topo_library(void);
hier_status_t hier_topo_adopt(void *hwloc_topology, hier_topo_t **topo_p);

/* NUMA domains of this machine as the kernel lists them (sysfs
 * node<N> entries), without hwloc; 0 when it lists none (no NUMA support). */
int hier_topo_machine_numa_count(void);

/* Locality of the calling process from its current CPU binding (all threads).
 * Unbound, or bound across NUMA domains: numa == -1.
 * HIER_ERR_NOT_SUPPORTED on a topology that is not this machine's (synthetic)
 * or where the OS cannot report bindings. */
hier_status_t hier_topo_self_locality(hier_topo_t *topo, hier_locality_t *loc_p);

/* Locality of a list of logical PU indexes such as "0-3,8": what
 * self_locality computes from a binding, for topologies that are not this
 * machine's (the tests' synthetic ones). NUMA domains with identical CPU sets
 * (DDR + HBM of one package) count as one: the lowest index is reported.
 * HIER_ERR_INVALID_ARG: malformed list or PU out of range. */
hier_status_t hier_topo_cpulist_locality(hier_topo_t *topo, const char *cpulist,
                                         hier_locality_t *loc_p);

/* Locality of a PCI device from its bus id ("0000:00:05.0"): the NUMA
 * domain of the CPUs it attaches to, -1 when it hangs off the whole machine.
 * HIER_ERR_NOT_SUPPORTED: no such device in the topology. */
hier_status_t hier_topo_pci_locality(hier_topo_t *topo, const char *busid, hier_locality_t *loc_p);

/* The PCI bus id of a network interface (from /sys/class/net/IF/device), in
 * busid (13 bytes suffice). HIER_ERR_NOT_SUPPORTED for virtual interfaces. */
hier_status_t hier_topo_netdev_busid(const char *ifname, char *busid, size_t len);
/* The interface's link speed in Mb/s, -1 unknown; whether it carries the
 * machine's (IPv4) default route. */
long hier_topo_netdev_speed(const char *ifname);
int hier_topo_netdev_default_route(const char *ifname);

/* Group ranks by locs[rank].numa. If any rank's numa is -1 the result is one
 * flat group. HIER_ERR_INVALID_ARG: nranks below 1, or a numa below -1;
 * HIER_ERR_NO_MEMORY. Pure: touches no topology. Free with hier_topo_groups_free. */
hier_status_t hier_topo_groups_by_numa(const hier_locality_t *locs, int nranks,
                                       hier_topo_groups_t *groups_p);
/* The same in mem (HIER_TOPO_GROUPS_WORDS(nranks) words, made beforehand),
 * which the groups take on success; only HIER_ERR_INVALID_ARG. */
#define HIER_TOPO_GROUPS_WORDS(nranks) (6 * (size_t)(nranks) + 1)
hier_status_t hier_topo_groups_by_numa_in(const hier_locality_t *locs, int nranks, uint32_t *mem,
                                          hier_topo_groups_t *groups_p);
void hier_topo_groups_free(hier_topo_groups_t *groups);

/* One line for the logs: "packages=2 numa=4 cores=16 pus=16 l3=32MiB"
 * (the last-level cache, whichever level it is, its largest instance;
 * omitted if none).
 * HIER_ERR_INVALID_ARG if it does not fit in len (buf then untouched). */
hier_status_t hier_topo_describe(const hier_topo_t *topo, char *buf, size_t len);

#endif
