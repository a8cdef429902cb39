/* hier_nic.c: see hier_nic.h. */
#include "base/hier_nic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hier_nic_near(int nic_numa, int rank_numa)
{
    return nic_numa < 0 || rank_numa < 0 || nic_numa == rank_numa;
}

/* The NIC rank r takes next: near first, then least loaded, then lowest index;
 * -1 when none has room. */
static int hier_nic_pick(const hier_nic_problem_t *p, int r, const int *load, const unsigned char *taken,
                         int cap, int *extra_left)
{
    int best = -1, best_near = 0;
    for (int n = 0; n < p->nnics; n++) {
        if (taken[n] || load[n] > cap || (load[n] == cap && *extra_left == 0)) continue;
        int near = hier_nic_near(p->nic_numa[n], p->rank_numa[r]);
        if (best < 0 || near > best_near || (near == best_near && load[n] < load[best])) {
            best = n;
            best_near = near;
        }
    }
    if (best >= 0 && load[best] == cap) (*extra_left)--;
    return best;
}

/* 1. how many NICs per rank, and how many ranks per NIC; 2. ranks with a
 * known place choose before the others; 3. each takes its NICs one by one. */
hier_status_t hier_nic_assign(const hier_nic_problem_t *p, hier_nic_plan_t *plan_p)
{
    if (p->nnics < 1 || p->nranks < 1 || p->max_per_rank < 1) return HIER_ERR_INVALID_ARG;
    int k = 1, cap = 1, extra = 0;                                                            /* 1 */
    if (p->nranks <= p->nnics) {
        k = p->nnics / p->nranks;
        if (k > p->max_per_rank) k = p->max_per_rank;
    } else {
        cap = p->nranks / p->nnics;
        extra = p->nranks % p->nnics;
    }
    hier_nic_plan_t plan = {.per_rank = k, .nic = malloc(sizeof(int) * (size_t)p->nranks * (size_t)k),
                            .near = malloc((size_t)p->nranks * (size_t)k)};
    int *load = calloc((size_t)p->nnics, sizeof(int));
    unsigned char *taken = calloc((size_t)p->nnics, 1);
    if (!plan.nic || !plan.near || !load || !taken) {
        free(load);
        free(taken);
        hier_nic_plan_free(&plan);
        return HIER_ERR_NO_MEMORY;
    }
    for (int pass = 0; pass < 2; pass++) {                                                    /* 2 */
        for (int r = 0; r < p->nranks; r++) {
            if ((p->rank_numa[r] < 0) != pass) continue;
            memset(taken, 0, (size_t)p->nnics);
            for (int j = 0; j < k; j++) {                                                     /* 3 */
                int n = hier_nic_pick(p, r, load, taken, cap, &extra);
                /* (cannot fail: the capacities add up to what the ranks take) */
                plan.nic[r * k + j] = n;
                plan.near[r * k + j] = (unsigned char)hier_nic_near(p->nic_numa[n], p->rank_numa[r]);
                load[n]++;
                taken[n] = 1;
            }
        }
    }
    free(load);
    free(taken);
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
