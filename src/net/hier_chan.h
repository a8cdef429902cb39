/* hier_chan.h: a message stream between two processes over libfabric, both ways, with credit flow control, shared
 * by every communicator (mailbox) the two have in common (docs/design.md, "Between nodes": Channels). Message k
 * goes into the receiver's slot k % slots by fi_writedata; the sender has at most `slots` messages not yet
 * released, credit coming back in the other way's headers or in a word the sender registered. Immediate data
 * (32 bits, all EFA carries): bit 31 credit return, bit 30 direct write, bits 29..14 channel id (the landing
 * end's, told to the other), bits 13..0 message number (or direct-write tag) modulo 2^14. */
#ifndef HIER_CHAN_H
#define HIER_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_sig.h"
#include "net/hier_fabric.h"
#include "net/hier_link.h"

#define HIER_CHAN_ID_BITS 16
#define HIER_CHAN_SEQ_BITS 14
#define HIER_CHAN_MAX_ID ((1u << HIER_CHAN_ID_BITS) - 1)
/* Messages in flight per channel at most (slots), and direct-write tags. */
#define HIER_CHAN_MAX_SLOTS (1u << (HIER_CHAN_SEQ_BITS - 1))
#define HIER_CHAN_MAX_TAGS (1u << HIER_CHAN_SEQ_BITS)

typedef struct hier_chan hier_chan_t;

/* What the other side needs: the ring (when it sends to us) and the credit word (when we send to it). */
typedef struct {
    hier_fabric_rkey_t ring;
    hier_fabric_rkey_t credit;
    uint32_t id;
    uint32_t slot_bytes; /* both ends must have the same ring shape: */
    uint64_t slots;      /* a writer computes offsets from its own */
} hier_chan_info_t;

/* A channel end with `slots` (2 .. HIER_CHAN_MAX_SLOTS) slots of `slot_bytes` payload each, ready both ways once
 * connected. HIER_ERR_NO_MEMORY also when the process has HIER_CHAN_MAX_ID + 1 open. */
hier_status_t hier_chan_open(hier_fabric_t *fab, size_t slots, size_t slot_bytes, hier_chan_t **ch_p);
void hier_chan_close(hier_chan_t *ch);
void hier_chan_info(const hier_chan_t *ch, hier_chan_info_t *info);
/* HIER_ERR_INVALID_ARG when the peer's ring is shaped differently. */
hier_status_t hier_chan_connect(hier_chan_t *ch, hier_fabric_peer_t peer, const hier_chan_info_t *peer_info);

/* ---- A channel's messages: hier_link_chan's ops (hier_link.h's contracts), `link` a hier_chan_t ---- */
/* Send len <= slot_bytes bytes to the peer's mailbox, labelled tag and signed sig (the receiver checks), without
 * waiting: *sent_p = 0 when every slot is in use or the provider has no room. From `mr` (registered memory holding
 * the data; NULL: copied) it goes out in place unless the provider cannot gather (iov_limit 1), and must not
 * change until hier_chan_sent_done(link, *msg_p). */
hier_status_t hier_chan_try_send_from(void *link, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                      hier_fabric_mr_t *mr, hier_sig_t sig, int *sent_p, uint64_t *msg_p);
/* Whether message `msg` (from hier_chan_try_send_from) completed here: its source may be reused. */
int hier_chan_sent_done(const void *link, uint64_t msg);
/* The segments a message of len bytes is cut into, the same at both ends (the last may be shorter): whole slots,
 * or, on several lanes and from half a slot, a share per lane (HIER_CHAN_STRIPE_MIN at least). */
#define HIER_CHAN_STRIPE_MIN 16384
size_t hier_chan_segment(const void *link, size_t len);
/* The next message of `mailbox` if it is there (*got_p = 1), without waiting (`expect` unused: the slots bound
 * every message, and the executor checks its length). */
hier_status_t hier_chan_try_recv(void *link, uint32_t mbox, size_t expect, hier_link_msg_t *msg, int *got_p);
/* Done with a message: its slot may be rewritten once every older one is released too. Credit goes back in our
 * next message's header or, once half the slots are released without one, by a write of its own. */
hier_status_t hier_chan_release(void *link, hier_link_msg_t *msg);
/* HIER_OK, or the error of a write of ours that failed on this channel (every later operation returns it too). */
hier_status_t hier_chan_status(const void *link);
/* Log the channel's counters (a wait that timed out says where it stood). */
void hier_chan_report(const void *link, const char *why);
/* ---- */

/* hier_chan_try_send_from of a copied message, unsigned. */
hier_status_t hier_chan_try_send(hier_chan_t *ch, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                 int *sent_p);
size_t hier_chan_slot_bytes(const hier_chan_t *ch);
/* Credit returns written on their own (not carried by a message). */
uint64_t hier_chan_credit_writes(const hier_chan_t *ch);
/* Messages moved aside so far (found before the one asked for). */
uint64_t hier_chan_set_aside(const hier_chan_t *ch);

/* A write straight into memory the peer registered (rkey, offset off; where is the two ends' agreement), outside
 * the ring and its credits, tagged (tag < HIER_CHAN_MAX_TAGS): writes may land in any order, and the peer counts
 * them by tag (hier_chan_direct_counts). src lies in `mr`, read until hier_chan_direct_pending drops to 0; len <=
 * hier_fabric_max_msg. *posted_p = 0 when the provider has no room: progress and try again. */
hier_status_t hier_chan_try_write_direct(hier_chan_t *ch, const void *src, size_t len, hier_fabric_mr_t *mr,
                                         hier_fabric_rkey_t rkey, uint64_t off, uint32_t tag, int *posted_p);
/* Where this end counts the peer's direct writes: counts[tag]++ for tags below n (the array stays the caller's). */
void hier_chan_direct_counts(hier_chan_t *ch, uint32_t *counts, size_t n);
/* counts[tag] of an array given to hier_chan_direct_counts, read under the transport lock (progress counts). */
uint32_t hier_chan_direct_count(const uint32_t *counts, size_t tag);
/* One turn of every loop waiting on the network: polls the endpoint; past `spin` turns yields the CPU and runs
 * `progress` (Open MPI's; may be NULL). HIER_ERR_TIMEOUT, logged with `what`, once nothing happened for
 * coll_hier_timeout (*still_since starts at 0; the caller resets it to 0 whenever something moved). */
hier_status_t hier_chan_wait_turn(hier_fabric_t *fab, void (*progress)(void), int spin, unsigned every, unsigned turn,
                                  uint64_t *still_since, const char *what);
/* Direct writes of ours not yet completed. */
uint64_t hier_chan_direct_pending(const hier_chan_t *ch);

/* Poll until no channel of `fab` has a direct write in flight (2 s at most), before the memory they read goes. */
void hier_chan_quiesce_direct(hier_fabric_t *fab);

/* Where control messages go (hier_peers.c connects with them); called under the transport lock from progress,
 * and with no message after a poll while *owing (the handler's count of messages it owes) is not 0. */
typedef void (*hier_chan_ctl_fn_t)(hier_fabric_t *fab, const void *msg, size_t len);
void hier_chan_set_ctl_handler(hier_chan_ctl_fn_t fn, const unsigned *owing);

/* Drive progress: poll the transport and hand events to their channels. */
hier_status_t hier_chan_progress(hier_fabric_t *fab);
/* The endpoint every wait polls between Open MPI's progress (NULL: none; the process's, once open), and the
 * poll: a rank waiting in shared memory still moves its peers' traffic on other nodes (manual progress: their
 * last writes, a connection request). */
void hier_chan_poll_on(hier_fabric_t *fab);
void hier_chan_poll(void);

#endif
