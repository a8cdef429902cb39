/* hier_sched_net.h: inter-node schedules among the ranks of one local index, one per node (hier_sched_net.c);
 * pure: the hierarchical builders compose them, and tests run them alone over channels. */
#ifndef HIER_SCHED_NET_H
#define HIER_SCHED_NET_H

#include "sched/hier_sched_emit.h"

/* Steps of one build into `steps` (at least hier_sched_net_max_steps(a)); their number. */
size_t hier_sched_net_build(const hier_net_args_t *a, hier_step_t *steps);
size_t hier_sched_net_max_steps(const hier_net_args_t *a);
/* The same bound for any kind, from the participants, all blocks' ranges (segs), the largest's (smax), the radix. */
size_t hier_sched_net_max_steps_for(int nparts, size_t segs, size_t smax, int radix_max);
/* At least hier_sched_net_max_peers(n, any radix) for every n <= most: reserved before the participants are known. */
int hier_sched_net_max_peers_upto(int most);
/* Every participant some schedule of `me` talks to, the only ones it needs a channel to (symmetric: p needs me
 * when I need p), into peers (hier_sched_net_max_peers(nparts, radix_max) at most); their number. */
size_t hier_sched_net_peers(int nparts, int me, int radix_max, int *peers);
int hier_sched_net_max_peers(int nparts, int radix_max);

#endif
