/* hier_nic.h: which of its node's NICs hier drives, and which each local
 * rank drives (pure: every rank of every node computes the whole node's
 * plan alike, so rail i of one node meets rail i of another). The rules,
 * with examples (p5: 32 NICs, 8 ranks): docs/design.md, "Several NICs per
 * node". Ranks with a known location choose first, so an unbound rank never
 * takes a bound rank's near NIC. */
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

/* What hier knows of a NIC for the default set. */
typedef struct {
    long speed_mbps;   /* the link's speed, -1 unknown (not a network interface, or it does not say) */
    int default_route; /* it carries the node's default route */
} hier_nic_fact_t;

/* The default set: keep[n] set for the NICs kept; why[n] says why a NIC was
 * left out (NULL: kept). At least one is kept. */
void hier_nic_default_set(const hier_nic_fact_t *facts, int n, unsigned char *keep, const char **why);

/* Whether `name` passes `filter`: a comma list of names to use, or, after a
 * leading '^', to exclude; an entry ending in '*' is a prefix. NULL or ""
 * lets everything pass. */
int hier_nic_filter_pass(const char *filter, const char *name);

#endif
