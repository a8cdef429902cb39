/* hier_sched_net.h: inter-node schedules among the ranks of one local index,
 * one per node (hier_sched_net.c). Pure; the hierarchical builders compose
 * them, and tests run them alone over channels. */
#ifndef HIER_SCHED_NET_H
#define HIER_SCHED_NET_H

#include "sched/hier_sched_emit.h"

/* Steps of one build into `steps` (at least hier_sched_net_max_steps(a)); their number. */
size_t hier_sched_net_build(const hier_net_args_t *a, hier_step_t *steps);
size_t hier_sched_net_max_steps(const hier_net_args_t *a);
/* Every participant some schedule of `me` talks to (ring neighbours,
 * recursive-doubling partners): the only ones it needs a channel to, at
 * most hier_sched_net_max_peers(nparts), into peers; their number. Symmetric:
 * p needs me when I need p. */
size_t hier_sched_net_peers(int nparts, int me, int *peers);
int hier_sched_net_max_peers(int nparts);

#endif
