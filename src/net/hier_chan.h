/* hier_chan.h: a one-way message stream between two processes over the
 * libfabric transport, with credit flow control.
 *
 * The receiver registers a ring of `slots` slots; the sender writes message k
 * into slot k % slots with fi_writedata, the immediate naming the channel and
 * k. The sender may have at most `slots` messages the receiver has not yet
 * released: the receiver returns credits by writing its release count into a
 * word the sender registered (again with an immediate), every half ring. So a
 * fast sender waits instead of overwriting data not yet consumed.
 *
 * Immediate layout (32 bits, all EFA carries): bit 31 credit return, bit 30
 * direct write, bits 29..20 channel id, bits 19..0 message number modulo
 * 2^20. Each end
 * picks its own id (unique in its process) and tells the other, which puts
 * it in every immediate it writes: so an immediate names the channel at the
 * end where it lands, however many communicators share the endpoint. */
#ifndef HIER_CHAN_H
#define HIER_CHAN_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "net/hier_fabric.h"

#define HIER_CHAN_MAX_ID 1023

typedef struct hier_chan hier_chan_t;

/* What the other side needs: the ring (when it sends to us) and the credit
 * word (when we send to it). */
typedef struct {
    hier_fabric_rkey_t ring;
    hier_fabric_rkey_t credit;
    uint32_t id;
    uint32_t slot_bytes; /* both ends must have the same ring shape: */
    uint64_t slots;      /* a writer computes offsets from its own */
} hier_chan_info_t;

/* A channel end with `slots` slots of `slot_bytes` payload each, both ways
 * ready: it can send to and receive from the peer it is connected to.
 * HIER_ERR_NO_MEMORY also when the process has HIER_CHAN_MAX_ID + 1 open. */
hier_status_t hier_chan_open(hier_fabric_t *fab, size_t slots, size_t slot_bytes, hier_chan_t **ch_p);
void hier_chan_close(hier_chan_t *ch);
void hier_chan_info(const hier_chan_t *ch, hier_chan_info_t *info);
/* HIER_ERR_INVALID_ARG when the peer's ring is shaped differently. */
hier_status_t hier_chan_connect(hier_chan_t *ch, hier_fabric_peer_t peer, const hier_chan_info_t *peer_info);

/* Send len <= slot_bytes bytes; waits (polling) while every slot is in use.
 * *waited_p (may be NULL) counts the times it had to wait for credit. */
hier_status_t hier_chan_send(hier_chan_t *ch, const void *data, size_t len, unsigned long *waited_p);
/* The same without waiting: *sent_p = 0 when every slot is in use. */
hier_status_t hier_chan_try_send(hier_chan_t *ch, const void *data, size_t len, int *sent_p);
/* The same sending the data straight from `mr`, registered memory that
 * holds it (NULL: copy, like hier_chan_try_send): the provider reads it
 * until hier_chan_sent_done(ch, *msg_p), so it must not change before.
 * Without gathering writes (iov_limit 1) the data is copied anyway. */
hier_status_t hier_chan_try_send_from(hier_chan_t *ch, const void *data, size_t len, hier_fabric_mr_t *mr,
                                      int *sent_p, uint64_t *msg_p);
/* Whether message `msg` (from hier_chan_try_send_from) completed here: its
 * source may be reused. */
int hier_chan_sent_done(const hier_chan_t *ch, uint64_t msg);
/* The next message if it is there (*got_p = 1), without waiting. */
hier_status_t hier_chan_try_recv(hier_chan_t *ch, const void **data_p, size_t *len_p, int *got_p);
size_t hier_chan_slot_bytes(const hier_chan_t *ch);
/* The next message, in order; valid until hier_chan_release. */
hier_status_t hier_chan_recv(hier_chan_t *ch, const void **data_p, size_t *len_p);
/* Done with the message hier_chan_recv returned: its slot may be rewritten.
 * Credit goes back in the header of our next message to the peer, or, once
 * half the slots are released without one, by a write of its own. */
hier_status_t hier_chan_release(hier_chan_t *ch);
/* Credit returns written on their own (not carried by a message). */
uint64_t hier_chan_credit_writes(const hier_chan_t *ch);
/* A write straight into memory the peer registered (its rkey, offset off),
 * outside the ring and its credits, tagged (tag < 2^20): the peer's end
 * counts it under its tag (hier_chan_direct_counts); what lands where is
 * the two ends' agreement. Writes may complete at the peer in any order
 * (EFA), hence tags. src lies in `mr` and is read until
 * hier_chan_direct_pending drops to 0. len <= hier_fabric_max_msg.
 * *posted_p = 0 when the provider has no room: progress and try again. */
hier_status_t hier_chan_try_write_direct(hier_chan_t *ch, const void *src, size_t len, hier_fabric_mr_t *mr,
                                         hier_fabric_rkey_t rkey, uint64_t off, uint32_t tag, int *posted_p);
/* Where this end counts the peer's direct writes: counts[tag]++ for tags
 * below n (the array stays the caller's). */
void hier_chan_direct_counts(hier_chan_t *ch, uint32_t *counts, size_t n);
/* counts[tag] of an array given to hier_chan_direct_counts, read under the
 * transport lock (any thread's progress may be counting into it). */
uint32_t hier_chan_direct_count(const uint32_t *counts, size_t tag);
/* One turn of a loop waiting on the network (every wait for the fabric uses
 * it): polls the endpoint; past `spin` turns yields the CPU and runs
 * `progress` (Open MPI's; may be NULL); HIER_ERR_TIMEOUT, logged with
 * `what`, once nothing happened for 60 s (*deadline starts at 0: the caller
 * resets it to 0 whenever something moved). */
hier_status_t hier_chan_wait_turn(hier_fabric_t *fab, void (*progress)(void), int spin, unsigned turn,
                                  time_t *deadline, const char *what);
/* Log the channel's counters (a wait that timed out says where it stood). */
void hier_chan_report(const hier_chan_t *ch, const char *why);
/* HIER_OK, or the error of a write of ours that failed on this channel
 * (every later operation on it returns that error too). */
hier_status_t hier_chan_status(const hier_chan_t *ch);
/* Direct writes of ours not yet completed. */
uint64_t hier_chan_direct_pending(const hier_chan_t *ch);

/* Poll until no channel of `fab` has a direct write in flight (2 s at most:
 * a vanished peer completes nothing), before memory they read goes. */
void hier_chan_quiesce_direct(hier_fabric_t *fab);

/* Drive progress: poll the transport and hand events to their channels. */
hier_status_t hier_chan_progress(hier_fabric_t *fab);

#endif
