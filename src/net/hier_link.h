/* hier_link.h: what the network executor (exec/hier_net_exec.c) moves a schedule's messages through, whatever
 * carries them (docs/design.md, "Between nodes": Two transports): hier_link_chan, a libfabric channel
 * (hier_chan.h) shared by every communicator of a process pair, or hier_link_pml, Open MPI's point-to-point
 * (hier_pml.h), one link per communicator and peer. A link is a stream of messages both ways with one peer; each
 * message carries its mailbox (which stream of the receiver: a communicator's run), its tag (which message of the
 * schedule) and its call's signature, which the executor checks on arrival. The executor holds links as `void *`
 * and calls them through the ops of the transport its communicator uses now. */
#ifndef HIER_LINK_H
#define HIER_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_sig.h"
#include "base/hier_status.h"
#include "net/hier_fabric.h"

/* A message taken from a link: valid until its release. */
typedef struct {
    const void *data;
    size_t len;
    uint32_t tag;
    hier_sig_t sig;   /* of the sender's call */
    void *held;       /* (the transport's: which slot or buffer it is) */
} hier_link_msg_t;

typedef struct {
    const char *name; /* "net", "pml": the stats' path names start with it */
    /* The segments a message of len bytes is cut into: the same at both ends. */
    size_t (*segment)(const void *link, size_t len);
    /* Send without waiting; *sent_p = 0: no room now. From mr (registered
     * memory holding the data; NULL: copied) the data stays read until
     * sent_done(*msg_p). */
    hier_status_t (*try_send)(void *link, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                              hier_fabric_mr_t *mr, hier_sig_t sig, int *sent_p, uint64_t *msg_p);
    int (*sent_done)(const void *link, uint64_t msg);
    /* HIER_OK, or the error that ended the link (every later call says so). */
    hier_status_t (*status)(const void *link);
    /* The next message of `mailbox` if it is there (*got_p = 1), without
     * waiting; `expect`: the bytes the schedule awaits (a longer message is
     * an error, never taken for it). */
    hier_status_t (*try_recv)(void *link, uint32_t mbox, size_t expect, hier_link_msg_t *msg, int *got_p);
    hier_status_t (*release)(void *link, hier_link_msg_t *msg);
    /* Log where the link stands (a wait that timed out). */
    void (*report)(const void *link, const char *why);
    /* The transport as a whole (fab: the endpoint, or NULL): poll it once;
     * one turn of a loop waiting on it (hier_chan_wait_turn's contract). */
    hier_status_t (*poll)(hier_fabric_t *fab);
    hier_status_t (*wait_turn)(hier_fabric_t *fab, void (*progress)(void), int spin, unsigned every, unsigned turn,
                               uint64_t *still_since, const char *what);
} hier_link_ops_t;

/* A waiting loop's clock, every transport's: every 4,096th turn looks at
 * the time; HIER_ERR_TIMEOUT, logged with `what`, once nothing moved for
 * coll_hier_timeout (*still_since starts at 0; the caller resets it to 0
 * whenever something moved). */
hier_status_t hier_link_clock_read(uint64_t *still_since, const char *what); /* (the 4,096th turn's) */
static inline hier_status_t hier_link_clock(unsigned turn, uint64_t *still_since, const char *what)
{
    return turn % 4096 != 4095 ? HIER_OK : hier_link_clock_read(still_since, what);
}

/* libfabric channels (hier_chan.h; links are hier_chan_t, fab the endpoint). */
extern const hier_link_ops_t hier_link_chan;

#endif
