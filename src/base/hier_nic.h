/* hier_nic.h: which of its node's NICs each local rank drives (pure).
 *
 * The rule, the same on every rank of every node (so each computes the whole
 * node's plan, alike, and rail i of one node meets rail i of another):
 * - with no more ranks than NICs, every rank drives k = min(max_per_rank,
 *   NICs / ranks) NICs of its own (p5: 8 GPUs, 32 NICs, 4 each; NICs left
 *   over by an uneven division stay idle so every rank has as many);
 * - with more ranks than NICs, every rank drives one NIC and the NICs serve
 *   ranks / NICs ranks each, the first (ranks mod NICs) NICs taken one more;
 * - each rank takes, one by one, the NIC that is near it (same NUMA domain,
 *   or either location unknown: a NIC without one counts as near to
 *   everything), then the least loaded, then the lowest index; ranks with a
 *   known location choose first, so an unbound rank never takes a bound
 *   rank's near NIC. */
#ifndef HIER_NIC_H
#define HIER_NIC_H

#include <stddef.h>

#include "base/hier_status.h"

typedef struct {
    int nnics;
    const int *nic_numa;  /* per NIC: logical NUMA domain, -1 unknown */
    int nranks;
    const int *rank_numa; /* per local rank: NUMA domain of its binding, -1 unknown */
    int max_per_rank;     /* >= 1 */
} hier_nic_problem_t;

typedef struct {
    int per_rank;  /* NICs each rank drives */
    int *nic;      /* nranks x per_rank: rank r's NICs at [r * per_rank ..), in the order chosen */
    unsigned char *near; /* the same shape: whether that NIC is near the rank */
} hier_nic_plan_t;

/* HIER_ERR_INVALID_ARG without NICs or ranks; HIER_ERR_NO_MEMORY. Free with
 * hier_nic_plan_free. */
hier_status_t hier_nic_assign(const hier_nic_problem_t *p, hier_nic_plan_t *plan_p);
void hier_nic_plan_free(hier_nic_plan_t *plan);

/* What rank r drives and why, for the logs: "rdmap16s27 (near), ..." ("far:
 * balance" for a far NIC, "location unknown" for a NIC without one). */
void hier_nic_plan_describe(const hier_nic_plan_t *plan, const char *const *names, const int *nic_numa, int r,
                            char *buf, size_t len);

/* Whether `name` passes `filter`: a comma list of names to use, or, after a
 * leading '^', to exclude; an entry ending in '*' is a prefix. NULL or ""
 * lets everything pass. */
int hier_nic_filter_pass(const char *filter, const char *name);

#endif
