/* hier_comm_req_impl.h: a request, as the files of the requests see it
 * (hier_comm_req.c runs them, hier_req_plan.c plans them); internal to comm/. */
#ifndef HIER_COMM_REQ_IMPL_H
#define HIER_COMM_REQ_IMPL_H

#include "comm/hier_comm_req.h"
#include "exec/hier_exec_ll.h"
#include "exec/hier_run.h"
#include "select/hier_select.h"

struct hier_req {
    hier_comm_t *c;
    struct hier_req *next;       /* the communicator's queue */
    hier_req_call_t call;
    size_t *counts;              /* reduce_scatter: rcounts, then their prefix sums (owned) */
    hier_req_notify_t notify;
    hier_reduce_kernel_t kernel;
    hier_select_t choice;
    hier_exec_ll_call_t llc;
    hier_exec_ll_req_t llq;
    hier_sched_args_t args;
    hier_run_t plan;
    hier_run_req_t run;
    hier_status_t st;            /* HIER_IN_PROGRESS until over (persistent: while running) */
    int freed;                   /* given back before it was over: freed then */
    int planned;                 /* choice, args and llc made (persistent: once) */
    int decided;                 /* what it is decided (a busy communicator's request: when it is first) */
    int started;                 /* begun (2): the first in its queue at some point */
    int ask;                     /* asks, when it begins, whether to move to libfabric (hier_comm_switch_due) */
    int decide;                  /* made while the communicator was busy: decided when it begins */
    int handback;                /* refused when made (busy): handed back when it begins */
    hier_path_t path;            /* what serves it, or why it is handed back */
    hier_status_t begun;         /* how it began: HIER_OK, or why it ends at once (handed back, failed) */
    int finished;                /* over in the progress thread: finish_st, told by the next MPI call's progress */
    hier_status_t finish_st;
    uint64_t net_bytes;
};

/* ---- the plan (hier_req_plan.c): what serves a request, decided alike on
 * every rank from what every rank knows alike; HIER_ERR_NOT_SUPPORTED and
 * why (*path_p) when the previous component does. ---- */

/* The parameters let hier serve this kind of call as a request. */
hier_status_t hier_req_enabled(const hier_comm_t *c, hier_coll_t coll, hier_path_t *path_p);
/* The communicator can start a call now, without waiting for its peers. */
hier_status_t hier_req_servable(hier_comm_t *c, hier_coll_t coll, hier_path_t *path_p);
/* A first call, nonblocking, sets the communicator up without waiting. */
int hier_req_sets_up(const hier_comm_t *c);
/* Over the point-to-point: whether this call asks to move to libfabric. */
int hier_req_switch_due(hier_comm_t *c, const hier_req_call_t *k);
/* The bytes a call's whole vector holds (what the set-up's opening rule asks). */
size_t hier_req_bytes(const hier_comm_t *c, const hier_req_call_t *k);
/* The reduction's kernel (an allgather has none). */
hier_status_t hier_req_kernel(hier_req_t *q, hier_path_t *path_p);
/* select/'s choice and the schedule's arguments (no_wait: without a collective step). */
hier_status_t hier_req_plan(hier_req_t *q, int no_wait, hier_path_t *path_p);
/* A start's plan: made at init, or at the first start that can. */
hier_status_t hier_req_replan(hier_req_t *q, hier_path_t *path_p);

/* ---- the progress thread (hier_req_thread.c) ---- */

/* Started once, at the first request, when the parameter asks and threads
 * may call at once: it runs `pass` (2: a request moved, 1: some wait for a
 * peer, 0: none is the thread's) and naps between passes. */
void hier_req_thread_start(int (*pass)(void));

#endif
