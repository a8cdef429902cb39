/* hier_plan.h: the order in which a rank takes a collective's chunks, as a
 * pure iterator. The run (hier_run.c) carries each action out and the model
 * (model/hier_model.c) times it: one order, written once. The numbered
 * steps are hier_run.c's (docs/design.md, "Between nodes"). */
#ifndef HIER_PLAN_H
#define HIER_PLAN_H

#include <stddef.h>

#include "sched/hier_sched.h"

/* A chunk's steps cut for the overlap: [BEGIN, B1) before its first
 * barrier (the copy in), [B1, NET) up to its network run, [NET, TAIL) the
 * run (NET == TAIL: none on this rank), [TAIL, END) from its last barrier
 * on (the copy out). Only schedules with a network level are cut (overlap
 * 1); the others run whole: B1 == NET == TAIL == END. */
enum {
    HIER_PLAN_CUT_BEGIN,
    HIER_PLAN_CUT_B1,
    HIER_PLAN_CUT_NET,
    HIER_PLAN_CUT_TAIL,
    HIER_PLAN_CUT_END,
    HIER_PLAN_CUTS
};
void hier_plan_cut(const hier_step_t *steps, size_t n, int overlap, size_t cut[HIER_PLAN_CUTS]);

typedef enum {
    HIER_PLAN_BUILD,      /* build chunk `chunk`'s steps, and cut them */
    HIER_PLAN_LOCAL,      /* run its steps [cut[from], cut[to]) on this rank (barriers among them) */
    HIER_PLAN_NET_START,  /* start its network run */
    HIER_PLAN_NET_FINISH, /* its network run over (waited for) */
    HIER_PLAN_MEET,       /* a call of no data: one barrier with the node */
    HIER_PLAN_OVER
} hier_plan_op_t;

typedef struct {
    hier_plan_op_t op;
    int from, to; /* HIER_PLAN_LOCAL: the cut's bounds */
    size_t chunk;
} hier_plan_act_t;

typedef struct {
    size_t nchunks;
    size_t k;       /* the oldest chunk not done */
    size_t started; /* chunks run up to their network runs, which started */
    unsigned depth; /* network runs in flight at once (chunk j's is run j % depth) */
    int at;         /* where in the numbered plan (hier_plan.c) */
} hier_plan_t;

/* A plan of nchunks chunks, depth network runs in flight (1 or more). */
void hier_plan_begin(hier_plan_t *p, size_t nchunks, unsigned depth);
/* What to do now; the same until hier_plan_next says it is done. */
hier_plan_act_t hier_plan_act(const hier_plan_t *p);
void hier_plan_next(hier_plan_t *p);
/* The numbered step the plan is at, for a report ("3 (copy out)"). */
const char *hier_plan_where(const hier_plan_t *p);

#endif
