/* hier_chan_impl.h: a channel's state, shared by hier_chan.c (set-up,
 * sending, credits, events) and hier_chan_recv.c (receiving, mailboxes). */
#ifndef HIER_CHAN_IMPL_H
#define HIER_CHAN_IMPL_H

#include "net/hier_chan.h"

#define HIER_CHAN_CREDIT (1u << 31)
#define HIER_CHAN_DIRECT (1u << 30)
#define HIER_CHAN_SEQ_MASK ((1u << HIER_CHAN_SEQ_BITS) - 1)
#define HIER_CHAN_ID_SHIFT HIER_CHAN_SEQ_BITS
/* Credit returns go round this many words of the sender's (its 64 bytes):
 * a provider that orders no writes (efa among them) may land an older
 * return after a newer one, and the newer one's count stays in its own
 * word; the sender takes the highest. Every word holds a count that was
 * true once, so credit can lag, never run ahead. */
#define HIER_CHAN_CREDIT_WORDS 8
#define HIER_CHAN_SPIN 16    /* polls before a waiting thread yields the CPU (a poll is a system call on tcp) */

/* A slot starts with this header: the message length, the sender's release
 * count of the other direction (so a channel used both ways returns credit
 * with its messages and needs no separate write), the mailbox, the tag, and
 * the signature of the call it belongs to (base/hier_sig.h; zero outside
 * calls), which the receiver compares with its own. */
typedef struct {
    uint32_t len;
    uint32_t credit;
    uint32_t mbox;
    uint32_t tag;
    hier_sig_t sig;
} hier_chan_hdr_t;
_Static_assert(sizeof(hier_chan_hdr_t) == 32, "a message header is 32 bytes on the wire");
#define HIER_CHAN_HDR sizeof(hier_chan_hdr_t)

/* A message of another mailbox, found before the one asked for: parked where
 * it landed (in_ring: its slot, not released), or copied out of the ring
 * (hier_chan_recv.c). */
typedef struct hier_chan_aside {
    struct hier_chan_aside *next;
    uint32_t mbox, tag;
    hier_sig_t sig;
    size_t len;
    const uint8_t *in_ring;
    uint8_t data[];
} hier_chan_aside_t;

struct hier_chan {
    hier_fabric_t *fab;
    unsigned id;
    size_t slots, slot_bytes, stride;
    hier_fabric_peer_t peer;
    unsigned lanes;            /* to the peer (hier_fabric_lanes, at connect) */
    int gathers;               /* the provider sends header and data from two places (iov_limit >= 2) */
    hier_chan_info_t remote;
    /* receiving */
    uint8_t *ring;             /* slots x stride, written by the peer */
    hier_fabric_mr_t *ring_mr;
    uint32_t *arrived;         /* per slot: message number (mod 2^14) + 1 that landed there */
    uint8_t *consumed;         /* per slot: taken and done with, not yet counted in `released` */
    uint64_t next_recv;        /* messages taken from the ring */
    uint64_t released;         /* messages released, in ring order */
    uint64_t credited;         /* release count last sent back */
    hier_chan_aside_t *aside;  /* other mailboxes' messages, oldest first */
    hier_chan_aside_t **aside_tail;
    size_t parked;             /* of them, in the ring (at most half of it) */
    uint64_t set_aside;        /* how many were ever copied */
    /* sending */
    uint8_t *stage;            /* slots x stride source buffers, plus the credit words to send */
    hier_fabric_mr_t *stage_mr;
    uint64_t *credit_word;     /* HIER_CHAN_CREDIT_WORDS words written by the peer: how many of ours
                                * it released (64 bytes: retired, not freed, at close; see hier_chan_close) */
    uint64_t piggy_acked;      /* the same count, from the headers of the peer's messages */
    hier_fabric_mr_t *credit_mr;
    uint64_t sent, done;       /* messages written, and completed locally */
    uint64_t *posted;          /* per slot: message number + 1 still being written from it, 0 when done */
    uint64_t credits_sent, credits_done; /* credit returns written, and completed (or failed) */
    uint64_t direct_sent, direct_done;   /* direct writes of ours, and completed */
    uint32_t *direct_counts;             /* the peer's direct writes that landed here, by tag */
    size_t direct_ntags;
    int owing;                 /* a credit return could not be posted: retried by hier_chan_progress */
    hier_status_t error;       /* a write of ours failed: every later operation says so */
};

/* Our release count to the sender, now (never waits: without room, owed and retried by progress; hier_chan.c). */
hier_status_t hier_chan_return_credit(hier_chan_t *ch);

#endif
