/* hier_comm_net.h: a communicator's network level, several nodes only (hier_comm_net.c). */
#ifndef HIER_COMM_NET_H
#define HIER_COMM_NET_H

#include "comm/hier_comm_state.h"

/* A box for a new communicator (never reused). */
uint32_t hier_net_new_box(void);
/* What the level needs for a communicator of `size` ranks, made before the
 * set-up's exchange. */
typedef struct {
    hier_net_t *net;
    hier_peer_t **peers;
    uint32_t *boxes;
    int *talk;
} hier_net_room_t;
hier_status_t hier_net_reserve(int size, hier_net_room_t *room);
void hier_net_room_free(hier_net_room_t *room);
/* Whether this process knows the address of every rank off its node (then
 * hier_net_make finds every peer it talks to, known, and cannot fail). */
int hier_net_peers_known(const hier_comm_t *c);
/* Make it in the room, which it empties (the peers my schedules talk to);
 * *known_p: whether their addresses are known. HIER_ERR_NOT_SUPPORTED
 * without an endpoint; HIER_ERR_NO_MEMORY for a peer never met before. */
hier_status_t hier_net_make(hier_comm_t *c, uint32_t box, hier_net_room_t *room, int *known_p);
/* Every rank's address to every rank; learn the ones needed (collective). */
hier_status_t hier_net_exchange_addresses(hier_comm_t *c);
void hier_net_free(hier_comm_t *c);
/* The executor's settings for a run over `tier`. */
hier_net_exec_t *hier_net_exec_for(hier_comm_t *c, hier_tier_t *tier);
/* A tier's registration goes with its segment (to the pool and back). */
void hier_net_tier_release(void *mr);

#endif
