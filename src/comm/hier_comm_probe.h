/* hier_comm_probe.h: choices measured on the node (hier_comm_probe.c). */
#ifndef HIER_COMM_PROBE_H
#define HIER_COMM_PROBE_H

#include <stddef.h>

#include "comm/hier_comm_state.h"

/* The allgather blocks single copy serves on a one-node communicator whose ranks read each other: the window kept
 * for as many local ranks, else measured (once per process). Collective, inside a call (its signature renewed). */
hier_status_t hier_probe_cma_window(hier_comm_t *c, hier_select_window_t *w_p);
/* The kept windows' common one, without measuring (a set-up run as a fiber); -1 if the agreement failed. */
int hier_probe_cma_window_kept(hier_comm_t *c, hier_select_window_t *w_p);
/* The largest call of `coll` low latency serves (SIZE_MAX: any the area holds): kept, else measured (once per
 * process). Collective, between calls. */
hier_status_t hier_probe_ll_top(hier_comm_t *c, hier_coll_t coll, size_t *top_p);
/* The kept cut-offs without measuring (a set-up run as a fiber): top[coll], where 0, set wherever every rank keeps
 * one. Collective (one agreement); -1 if it failed. */
int hier_probe_ll_tops_kept(hier_comm_t *c, size_t top[HIER_RULE_COLLS]);

#endif
