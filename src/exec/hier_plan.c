/* hier_plan.c: the numbered plan of hier_plan.h, one action at a time.
 *
 * With D network runs in flight (depth):
 * 0. a call of no data (no chunks) only meets its node at one barrier;
 * 1. chunks 0 .. D - 1 (as many as there are): built, run up to their
 *    network runs, which start;
 * 2. for each chunk k: chunk k + D built and copied in;
 * 3. k's network run finished, then k's copy out (chunk k is done);
 * 4. chunk k + D from its first barrier up to its network run, which starts.
 * hier_run.c says why this order is safe with D + 1 pipeline buffers per slot. */
#include "exec/hier_plan.h"

enum {
    HIER_PLAN_FILL_BUILD, /* 1 */
    HIER_PLAN_FILL_LOCAL,
    HIER_PLAN_FILL_START,
    HIER_PLAN_NEXT_BUILD, /* 2 */
    HIER_PLAN_COPY_IN,
    HIER_PLAN_FINISH,     /* 3 */
    HIER_PLAN_COPY_OUT,
    HIER_PLAN_NEXT_LOCAL, /* 4 */
    HIER_PLAN_NEXT_START,
    HIER_PLAN_AT_MEET,    /* 0 */
    HIER_PLAN_AT_OVER
};

void hier_plan_cut(const hier_step_t *steps, size_t n, int overlap, size_t cut[HIER_PLAN_CUTS])
{
    size_t b1 = n, net = n, tail = n;
    if (overlap) {
        while (tail > 0 && steps[tail - 1].op != HIER_STEP_BARRIER) tail--;
        if (tail) tail--; /* at the last barrier */
        net = tail;
        while (net > 0 && (steps[net - 1].op == HIER_STEP_NET_SEND || steps[net - 1].op == HIER_STEP_NET_RECV))
            net--;
        for (b1 = 0; b1 < net && steps[b1].op != HIER_STEP_BARRIER;) b1++;
    }
    cut[HIER_PLAN_CUT_BEGIN] = 0;
    cut[HIER_PLAN_CUT_B1] = b1;
    cut[HIER_PLAN_CUT_NET] = net;
    cut[HIER_PLAN_CUT_TAIL] = tail;
    cut[HIER_PLAN_CUT_END] = n;
}

/* Step 2 for chunk k, or straight to 3 when every chunk has started. */
static int hier_plan_step2(const hier_plan_t *p)
{
    return p->started < p->nchunks ? HIER_PLAN_NEXT_BUILD : HIER_PLAN_FINISH;
}

void hier_plan_begin(hier_plan_t *p, size_t nchunks, unsigned depth)
{
    *p = (hier_plan_t){.nchunks = nchunks, .depth = depth ? depth : 1,
                       .at = nchunks ? HIER_PLAN_FILL_BUILD : HIER_PLAN_AT_MEET};
}

hier_plan_act_t hier_plan_act(const hier_plan_t *p)
{
    switch (p->at) {
    case HIER_PLAN_FILL_BUILD:
    case HIER_PLAN_NEXT_BUILD: return (hier_plan_act_t){.op = HIER_PLAN_BUILD, .chunk = p->started};
    case HIER_PLAN_FILL_LOCAL:
        return (hier_plan_act_t){HIER_PLAN_LOCAL, HIER_PLAN_CUT_BEGIN, HIER_PLAN_CUT_NET, p->started};
    case HIER_PLAN_COPY_IN:
        return (hier_plan_act_t){HIER_PLAN_LOCAL, HIER_PLAN_CUT_BEGIN, HIER_PLAN_CUT_B1, p->started};
    case HIER_PLAN_NEXT_LOCAL:
        return (hier_plan_act_t){HIER_PLAN_LOCAL, HIER_PLAN_CUT_B1, HIER_PLAN_CUT_NET, p->started};
    case HIER_PLAN_FILL_START:
    case HIER_PLAN_NEXT_START: return (hier_plan_act_t){.op = HIER_PLAN_NET_START, .chunk = p->started};
    case HIER_PLAN_FINISH: return (hier_plan_act_t){.op = HIER_PLAN_NET_FINISH, .chunk = p->k};
    case HIER_PLAN_COPY_OUT: return (hier_plan_act_t){HIER_PLAN_LOCAL, HIER_PLAN_CUT_TAIL, HIER_PLAN_CUT_END, p->k};
    case HIER_PLAN_AT_MEET: return (hier_plan_act_t){.op = HIER_PLAN_MEET};
    default: return (hier_plan_act_t){.op = HIER_PLAN_OVER};
    }
}

void hier_plan_next(hier_plan_t *p)
{
    switch (p->at) {
    case HIER_PLAN_FILL_START:
        p->started++;
        p->at = p->started < p->nchunks && p->started < p->depth ? HIER_PLAN_FILL_BUILD : hier_plan_step2(p);
        break;
    case HIER_PLAN_COPY_OUT:
        if (p->k + 1 == p->nchunks) p->at = HIER_PLAN_AT_OVER;
        else if (p->started < p->nchunks) p->at = HIER_PLAN_NEXT_LOCAL;
        else p->k++, p->at = hier_plan_step2(p);
        break;
    case HIER_PLAN_NEXT_START:
        p->started++;
        p->k++;
        p->at = hier_plan_step2(p);
        break;
    case HIER_PLAN_AT_MEET:
    case HIER_PLAN_AT_OVER: p->at = HIER_PLAN_AT_OVER; break;
    default: p->at++; /* (the next action of the same step) */
    }
}

const char *hier_plan_where(const hier_plan_t *p)
{
    static const char *const where[] = {"1 (fill: build)", "1 (fill: local steps)", "1 (fill: network run starts)",
                                        "2 (next chunk: build)", "2 (copy in)", "3 (network run's end)",
                                        "3 (copy out)", "4 (next chunk's local steps)",
                                        "4 (next chunk's network run starts)", "0 (a call of no data meets its node)",
                                        "over"};
    _Static_assert(sizeof(where) / sizeof(where[0]) == HIER_PLAN_AT_OVER + 1, "a name for every step of the plan");
    return where[p->at];
}
