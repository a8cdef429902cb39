/* hier_peers.h: the processes this one talks to over the network, and the one channel it has with each, shared
 * by every communicator that reaches that process. Addresses are exchanged once per process pair at a set-up;
 * channels connect on first use by a REQUEST/ACCEPT handshake outside any collective, so each pair ends with
 * exactly one channel (docs/design.md, "Between nodes": Peers). */
#ifndef HIER_PEERS_H
#define HIER_PEERS_H

#include <stdatomic.h>
#include <stdint.h>

#include "net/hier_chan.h"
#include "net/hier_fabric.h"

typedef struct hier_peer hier_peer_t;
/* The start of a peer's entry (hier_peers.c): its channel once connected, NULL before and after a failure,
 * published for the calls' sends and receives without the lock. */
typedef struct {
    _Atomic(hier_chan_t *) ch;
} hier_peer_head_t;

/* This process's identity (unique in the job) and the ring shape of the channels it opens: before any peer is
 * connected; again with the same values is a no-op. */
void hier_peers_configure(uint64_t self, size_t slots, size_t slot_bytes);
/* The entry of process `proc`, made when absent; NULL without memory. */
hier_peer_t *hier_peers_get(uint64_t proc);
/* Whether its address is known here. */
int hier_peer_known(const hier_peer_t *p);
/* Learn its address (the first one learnt stays). */
hier_status_t hier_peer_learn(hier_fabric_t *fab, hier_peer_t *p, const void *addr, size_t len);
/* Its address in the endpoint's address vector: HIER_OK once known. */
hier_status_t hier_peer_addr(const hier_peer_t *p, hier_fabric_peer_t *addr_p);
/* Its channel when connected, NULL otherwise; starts nothing (a receiver: the sender connects). */
static inline hier_chan_t *hier_peer_connected(hier_peer_t *p)
{
    return atomic_load_explicit(&((hier_peer_head_t *)p)->ch, memory_order_acquire);
}
/* hier_peer_chan before the channel is connected. */
hier_status_t hier_peer_connect(hier_fabric_t *fab, hier_peer_t *p, hier_chan_t **ch_p);
/* Its channel once connected (*ch_p), else NULL and the first call starts connecting (its address must be known);
 * never waits. An error when the connection cannot be made. */
static inline hier_status_t hier_peer_chan(hier_fabric_t *fab, hier_peer_t *p, hier_chan_t **ch_p)
{
    hier_chan_t *ch = hier_peer_connected(p);
    if (!ch) return hier_peer_connect(fab, p, ch_p);
    *ch_p = ch;
    return HIER_OK;
}
/* Peers known and channels connected so far. */
void hier_peers_count(size_t *known_p, size_t *connected_p);
/* Close every channel and forget every peer (the endpoint is closing). */
void hier_peers_clear(void);

#endif
