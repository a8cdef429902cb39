/* hier_comm_net.h: a communicator's network level, several nodes only (hier_comm_net.c). */
#ifndef HIER_COMM_NET_H
#define HIER_COMM_NET_H

#include "comm/hier_comm_state.h"

/* A mailbox for a new communicator (never reused). */
uint32_t hier_net_new_mbox(void);
/* What the level needs for a communicator of `size` ranks, made before the
 * set-up's exchange. */
typedef struct {
    hier_net_t *net;
    hier_peer_t **peers;
    uint32_t *mboxes;
    void **links;
    uint8_t *link_mem;
    int *talk;
} hier_net_reserved_t;
hier_status_t hier_net_reserve(int size, hier_net_reserved_t *reserved);
void hier_net_reserved_free(hier_net_reserved_t *reserved);
/* Whether this process knows the address of every rank off its node (then hier_net_make over libfabric cannot
 * fail). */
int hier_net_peers_known(const hier_comm_t *c);
/* Make it in the reserved memory, which it empties: the links to the ranks my schedules talk to over Open MPI's
 * point-to-point (which cannot fail) and, with `fabric` (every rank's endpoint open), libfabric's peers, the
 * transport then; *known_p: whether their addresses are known. HIER_ERR_NOT_SUPPORTED without an endpoint;
 * HIER_ERR_NO_MEMORY for a peer never met before (the level stays, over the point-to-point). */
hier_status_t hier_net_make(hier_comm_t *c, uint32_t mbox, int fabric, hier_net_reserved_t *reserved, int *known_p);
/* Collective, at a call every rank makes alike (HIER_COMM_PML): agree whether every rank's endpoint is open; if
 * so, messages go over libfabric from this call on (addresses exchanged first where lacking), if some rank can have
 * none, over the point-to-point for good. HIER_OK either way (the caller makes it READY and calls
 * hier_node_pipe_redepth); HIER_NOT_READY: not yet, or the agreement failed (asked again later). */
hier_status_t hier_net_switch(hier_comm_t *c);
/* The communicator waits to move to libfabric (1) or not any more (0): counted (hier_stats_pml_waiting). */
void hier_net_waiting(hier_comm_t *c, int on);
/* Every rank's address to every rank; learn the ones needed (collective). */
hier_status_t hier_net_exchange_addresses(hier_comm_t *c);
void hier_net_free(hier_comm_t *c);
/* Bytes of this process's heap the level holds (its links' buffers among them). */
size_t hier_net_bytes(const hier_comm_t *c);
/* The network executor's settings (c->net->netx) from the communicator as it is now. */
void hier_net_exec_set(hier_comm_t *c);
/* The tier registered with the endpoint for sends from this rank's slot, once (libfabric only; a segment from
 * the pool comes registered; refused: NULL, every send from it copied). */
void hier_net_tier_register(hier_comm_t *c, hier_tier_t *tier);
/* The call over the pair path (exec/hier_exec_pair.h; hier_select_pair says when: host buffers, the call signed,
 * its kernel found). */
hier_status_t hier_net_pair(hier_comm_t *c, const hier_call_t *call, hier_reduce_kernel_t kernel,
                            uint64_t *net_bytes_p);
/* A tier's registration goes with its segment (to the pool and back). */
void hier_net_tier_release(void *mr);

#endif
