/* hier_comm_net.h: a communicator's network level, several nodes only (hier_comm_net.c). */
#ifndef HIER_COMM_NET_H
#define HIER_COMM_NET_H

#include "comm/hier_comm_state.h"

/* A box for a new communicator (never reused). */
uint32_t hier_net_new_box(void);
/* Make it (the peers my schedules talk to); *known_p: whether their addresses are known. */
hier_status_t hier_net_make(hier_comm_t *c, uint32_t box, int *known_p);
/* Every rank's address to every rank; learn the ones needed (collective). */
hier_status_t hier_net_exchange_addresses(hier_comm_t *c);
void hier_net_free(hier_comm_t *c);
/* The executor's settings for a run over `tier`. */
hier_net_exec_t *hier_net_exec_for(hier_comm_t *c, hier_tier_t *tier);
/* A tier's registration goes with its segment (to the pool and back). */
void hier_net_tier_release(void *mr);

#endif
