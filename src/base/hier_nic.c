/* hier_nic.c: see hier_nic.h. */
#include "base/hier_nic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hier_nic_near(int nic_numa, int rank_numa)
{
    return nic_numa < 0 || rank_numa < 0 || nic_numa == rank_numa;
}

/* The NIC rank r takes next: near first (when use_near), then least
 * loaded, then lowest index; -1 when none has room. */
static int hier_nic_pick(const hier_nic_problem_t *p, int r, const int *load, const unsigned char *taken,
                         int cap, int *extra_left, int use_near)
{
    int best = -1, best_near = 0;
    for (int n = 0; n < p->nnics; n++) {
        if (taken[n] || load[n] > cap || (load[n] == cap && *extra_left == 0)) continue;
        int near = use_near && hier_nic_near(p->nic_numa[n], p->rank_numa[r]);
        if (best < 0 || near > best_near || (near == best_near && load[n] < load[best])) {
            best = n;
            best_near = near;
        }
    }
    if (best >= 0 && load[best] == cap) (*extra_left)--;
    return best;
}

static int hier_nic_gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Steps 3 and 4 of hier_nic_assign for k NICs per rank, `cap` ranks per NIC
 * and `extra` NICs that take one more; 0 when a rank found no NIC with room. */
static int hier_nic_fill(const hier_nic_problem_t *p, int k, int cap, int extra, int use_near, hier_nic_plan_t *plan,
                         int *load, unsigned char *taken)
{
    memset(load, 0, sizeof(int) * (size_t)p->nnics);
    for (int pass = 0; pass < 2; pass++) {                                                    /* 3 */
        for (int r = 0; r < p->nranks; r++) {
            if ((p->rank_numa[r] < 0) != pass) continue;
            memset(taken, 0, (size_t)p->nnics);
            for (int j = 0; j < k; j++) {                                                     /* 4 */
                int n = hier_nic_pick(p, r, load, taken, cap, &extra, use_near);
                if (n < 0) return 0;
                plan->nic[r * k + j] = n;
                plan->near[r * k + j] = (unsigned char)hier_nic_near(p->nic_numa[n], p->rank_numa[r]);
                load[n]++;
                taken[n] = 1;
            }
        }
    }
    return 1;
}

/* 1. the balanced shape: with g = gcd(NICs, ranks), every rank drives
 *    NICs / g NICs and every NIC serves ranks / g ranks, so each carries the
 *    same share of the node's bytes (ranks stripe their messages over their
 *    NICs evenly) — when NICs / g is within max_per_rank;
 * 2. otherwise the closest within it: NICs / ranks each (leftovers idle), or
 *    one each with the NICs serving ranks / NICs ranks, some one more;
 * 3. ranks with a known place choose before the others; 4. each takes its
 *    NICs one by one. Nearness gives way if it would leave a rank without a
 *    NIC with room (never for the shapes above but a crafted one). */
hier_status_t hier_nic_assign(const hier_nic_problem_t *p, hier_nic_plan_t *plan_p)
{
    if (p->nnics < 1 || p->nranks < 1 || p->max_per_rank < 1) return HIER_ERR_INVALID_ARG;
    int g = hier_nic_gcd(p->nnics, p->nranks), k = p->nnics / g, cap = p->nranks / g, extra = 0;    /* 1 */
    if (k > p->max_per_rank) {                                                                      /* 2 */
        k = 1, cap = 1;
        if (p->nranks <= p->nnics) k = p->nnics / p->nranks < p->max_per_rank ? p->nnics / p->nranks
                                                                              : p->max_per_rank;
        else cap = p->nranks / p->nnics, extra = p->nranks % p->nnics;
    }
    hier_nic_plan_t plan = {.per_rank = k, .nic = malloc(sizeof(int) * (size_t)p->nranks * (size_t)k),
                            .near = malloc((size_t)p->nranks * (size_t)k)};
    int *load = malloc(sizeof(int) * (size_t)p->nnics);
    unsigned char *taken = malloc((size_t)p->nnics);
    hier_status_t st = plan.nic && plan.near && load && taken ? HIER_OK : HIER_ERR_NO_MEMORY;
    if (st == HIER_OK && !hier_nic_fill(p, k, cap, extra, 1, &plan, load, taken) &&
        !hier_nic_fill(p, k, cap, extra, 0, &plan, load, taken))
        st = HIER_ERR_INTERNAL; /* (least loaded first always fits: the capacities add up) */
    free(load);
    free(taken);
    if (st != HIER_OK) {
        hier_nic_plan_free(&plan);
        return st;
    }
    *plan_p = plan;
    return HIER_OK;
}

void hier_nic_plan_free(hier_nic_plan_t *plan)
{
    free(plan->nic);
    free(plan->near);
    plan->nic = NULL;
    plan->near = NULL;
}

void hier_nic_plan_describe(const hier_nic_plan_t *plan, const char *const *names, const int *nic_numa, int r,
                            char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int j = 0; j < plan->per_rank && at < len; j++) {
        int n = plan->nic[r * plan->per_rank + j];
        int w = snprintf(buf + at, len - at, "%s%s (%s)", j ? ", " : "", names[n],
                         nic_numa[n] < 0 ? "location unknown" : plan->near[r * plan->per_rank + j] ? "near"
                                                                                                : "far: balance");
        at += w > 0 ? (size_t)w : 0;
    }
}

/* 1. the default route's NIC goes when another stays; 2. of the rest, those
 * slower than the fastest known speed go (unknown speeds stay). */
void hier_nic_default_set(const hier_nic_fact_t *facts, int n, unsigned char *keep, const char **why)
{
    int others = 0;
    long fastest = -1;
    for (int i = 0; i < n; i++) {
        keep[i] = 1;
        why[i] = NULL;
        others += !facts[i].default_route;
    }
    for (int i = 0; others && i < n; i++)                                                     /* 1 */
        if (facts[i].default_route) {
            keep[i] = 0;
            why[i] = "carries the default route (management)";
        }
    for (int i = 0; i < n; i++)
        if (keep[i] && facts[i].speed_mbps > fastest) fastest = facts[i].speed_mbps;
    for (int i = 0; i < n; i++)                                                               /* 2 */
        if (keep[i] && facts[i].speed_mbps >= 0 && facts[i].speed_mbps < fastest) {
            keep[i] = 0;
            why[i] = "slower than the fastest NIC";
        }
}

int hier_nic_filter_pass(const char *filter, const char *name)
{
    if (!filter || !filter[0]) return 1;
    int exclude = filter[0] == '^';
    const char *s = filter + exclude;
    size_t nlen = strlen(name);
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int prefix = len > 0 && s[len - 1] == '*';
        size_t cmp = prefix ? len - 1 : len;
        if (len && (prefix ? nlen >= cmp : nlen == cmp) && !strncmp(s, name, cmp)) return !exclude;
        s += len + (e != NULL);
    }
    return exclude;
}
