/* hier_chan.c: channel set-up, sending, credit, events and progress; the
 * receiving side is hier_chan_recv.c. */
#include "net/hier_chan_impl.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_errno.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_wait.h"
#include "net/hier_fi.h"

/* Write contexts: bits 1..0 the kind of write, then the channel id, then
 * (messages) the slot the write came from, so completions may come in any
 * order. No kind is 0, so no context is NULL: an error entry without a
 * context is none of our writes. */
enum { HIER_CHAN_W_MESSAGE = 1, HIER_CHAN_W_CREDIT, HIER_CHAN_W_DIRECT };
#define HIER_CHAN_CTX(id, slot, kind)                                                                            \
    ((void *)(uintptr_t)((((uintptr_t)(slot) * (HIER_CHAN_MAX_ID + 1) + (uintptr_t)(id)) << 2) | (kind)))
#define HIER_CHAN_CTX_KIND(ctx) ((int)((uintptr_t)(ctx) & 3))
#define HIER_CHAN_CTX_ID(ctx) ((unsigned)(((uintptr_t)(ctx) >> 2) % (HIER_CHAN_MAX_ID + 1)))
#define HIER_CHAN_CTX_SLOT(ctx) ((size_t)(((uintptr_t)(ctx) >> 2) / (HIER_CHAN_MAX_ID + 1)))

/* Channels by id, per process: events arrive on the shared endpoint. The
 * table grows (to HIER_CHAN_MAX_ID + 1 entries at most) as channels open. */
static hier_chan_t **hier_chan_table;
static unsigned hier_chan_cap;
/* Channels owing their peer a credit return the provider would not take
 * (as large as the table). */
static hier_chan_t **hier_chan_owing;
static unsigned hier_chan_nowing;
static unsigned hier_chan_next_id;
static hier_chan_ctl_fn_t hier_chan_ctl_handler;
static const unsigned *hier_chan_ctl_owing;

void hier_chan_set_ctl_handler(hier_chan_ctl_fn_t fn, const unsigned *owing)
{
    hier_lock_take();
    hier_chan_ctl_handler = fn;
    hier_chan_ctl_owing = owing;
    hier_lock_drop();
}

/* Twice the room (64 ids first), up to every id. */
static int hier_chan_grow(void)
{
    unsigned cap = hier_chan_cap ? 2 * hier_chan_cap : 64;
    if (cap > HIER_CHAN_MAX_ID + 1) cap = HIER_CHAN_MAX_ID + 1;
    if (cap == hier_chan_cap) return 0;
    hier_chan_t **t = realloc(hier_chan_table, cap * sizeof(*t));
    if (!t) return 0;
    hier_chan_table = t;
    memset(t + hier_chan_cap, 0, (cap - hier_chan_cap) * sizeof(*t));
    hier_chan_t **o = realloc(hier_chan_owing, cap * sizeof(*o));
    if (!o) return 0;
    hier_chan_owing = o;
    hier_chan_cap = cap;
    return 1;
}

/* A free id, taken round the table so a closed channel's id (and any late
 * event naming it) is not reused soon; the table grows when it is full. */
static int hier_chan_free_id(unsigned *id_p)
{
    do {
        for (unsigned i = 0; i < hier_chan_cap; i++) {
            unsigned id = (hier_chan_next_id + i) % hier_chan_cap;
            if (!hier_chan_table[id]) {
                hier_chan_next_id = id + 1;
                *id_p = id;
                return 1;
            }
        }
    } while (hier_chan_grow());
    return 0;
}

static hier_status_t hier_chan_open_locked(hier_fabric_t *fab, size_t slots, size_t slot_bytes, hier_chan_t **ch_p)
{
    hier_status_t st = HIER_ERR_NO_MEMORY;
    unsigned id;
    if (slots < 2 || slots > HIER_CHAN_MAX_SLOTS || slot_bytes > UINT32_MAX) return HIER_ERR_INVALID_ARG;
    if (!hier_chan_free_id(&id)) {
        HIER_ERROR("no free channel id: %u channels are open in this process", hier_chan_cap);
        return HIER_ERR_NO_MEMORY;
    }
    hier_chan_t *ch = calloc(1, sizeof(*ch));
    if (!ch) return HIER_ERR_NO_MEMORY;
    ch->fab = fab;
    ch->id = id;
    ch->slots = slots;
    ch->slot_bytes = slot_bytes;
    ch->lanes = 1; /* (until connected) */
    ch->gathers = hier_fabric_iov_limit(fab) >= 2;
    ch->stride = (HIER_CHAN_HDR + slot_bytes + 63) & ~(size_t)63;
    if (!(ch->ring = aligned_alloc(64, slots * ch->stride))) goto free_ch;
    if (!(ch->stage = aligned_alloc(64, slots * ch->stride + 64))) goto free_ring;
    if (!(ch->arrived = calloc(slots, sizeof(*ch->arrived)))) goto free_stage;
    if (!(ch->posted = calloc(slots, sizeof(*ch->posted)))) goto free_arrived;
    if (!(ch->consumed = calloc(slots, sizeof(*ch->consumed)))) goto free_posted;
    ch->aside_tail = &ch->aside;
    HIER_CHECK_GOTO(hier_fabric_mr_reg(fab, ch->ring, slots * ch->stride, &ch->ring_mr), free_posted, st);
    HIER_CHECK_GOTO(hier_fabric_mr_reg(fab, ch->stage, slots * ch->stride + 64, &ch->stage_mr), dereg_ring, st);
    _Static_assert(HIER_CHAN_CREDIT_WORDS * sizeof(uint64_t) == 64, "the credit words fill their 64 bytes");
    if (!(ch->credit_word = aligned_alloc(64, 64))) goto dereg_stage;
    memset(ch->credit_word, 0, 64);
    HIER_CHECK_GOTO(hier_fabric_mr_reg(fab, ch->credit_word, 64, &ch->credit_mr), free_credit, st);
    hier_chan_table[id] = ch;
    *ch_p = ch;
    return HIER_OK;

free_credit:
    free(ch->credit_word);
dereg_stage:
    hier_fabric_mr_dereg(ch->stage_mr);
dereg_ring:
    hier_fabric_mr_dereg(ch->ring_mr);
free_posted:
    free(ch->consumed);
    free(ch->posted);
free_arrived:
    free(ch->arrived);
free_stage:
    free(ch->stage);
free_ring:
    free(ch->ring);
free_ch:
    free(ch);
    return st;
}

static int hier_chan_writing(const hier_chan_t *ch)
{
    return ch->done < ch->sent || ch->credits_done < ch->credits_sent || ch->direct_done < ch->direct_sent;
}

/* ready(ch), read under the lock (another thread's progress updates channels). */
static int hier_chan_check(const hier_chan_t *ch, int (*ready)(const hier_chan_t *))
{
    hier_lock_take();
    int r = ready(ch);
    hier_lock_drop();
    return r;
}

/* The provider may still read our staging buffers for writes not completed
 * yet: wait for them (a second at most: a vanished peer completes nothing)
 * before the memory goes. */
static void hier_chan_drain(hier_chan_t *ch)
{
    time_t end = time(NULL) + 2;
    for (unsigned i = 0; hier_chan_check(ch, hier_chan_writing); i++) {
        if (hier_chan_progress(ch->fab) != HIER_OK) break;
        if (i % 1024 == 1023 && time(NULL) > end) break;
    }
}

static void hier_chan_forgive(hier_chan_t *ch)
{
    for (unsigned i = 0; ch->owing && i < hier_chan_nowing; i++)
        if (hier_chan_owing[i] == ch) hier_chan_owing[i] = hier_chan_owing[--hier_chan_nowing];
    ch->owing = 0;
}

/* The messages set aside and still held (the channel closing). */
static void hier_chan_aside_free(hier_chan_t *ch)
{
    while (ch->aside) {
        hier_chan_aside_t *a = ch->aside;
        ch->aside = a->next;
        free(a);
    }
    ch->aside_tail = &ch->aside;
    ch->parked = 0;
}

void hier_chan_close(hier_chan_t *ch)
{
    if (!ch) return;
    hier_lock_take();
    hier_chan_forgive(ch); /* first: another thread's progress would retry the return it owes */
    hier_lock_drop();
    hier_chan_drain(ch); /* (polls: not under the lock) */
    hier_lock_take();
    hier_chan_table[ch->id] = NULL;
    /* The peer may still return credit for our last messages after it has
     * every one of them and we have closed: a write to a key gone is an error
     * at our end, and a connection-based provider (tcp) answers it by
     * dropping the connection, with other communicators' messages on it.
     * The word stays registered until the endpoint closes (bounded). */
    hier_fabric_mr_retire(ch->credit_mr, ch->credit_word);
    hier_fabric_mr_dereg(ch->stage_mr);
    hier_fabric_mr_dereg(ch->ring_mr);
    hier_lock_drop();
    hier_chan_aside_free(ch);
    free(ch->consumed);
    free(ch->posted);
    free(ch->arrived);
    free(ch->stage);
    free(ch->ring);
    free(ch);
}

static void hier_chan_info_locked(const hier_chan_t *ch, hier_chan_info_t *info)
{
    info->ring = hier_fabric_mr_rkey(ch->ring_mr);
    info->credit = hier_fabric_mr_rkey(ch->credit_mr);
    info->id = ch->id;
    info->slot_bytes = (uint32_t)ch->slot_bytes;
    info->slots = ch->slots;
}

static hier_status_t hier_chan_connect_locked(hier_chan_t *ch, hier_fabric_peer_t peer,
                                              const hier_chan_info_t *peer_info)
{
    if (peer_info->slot_bytes != ch->slot_bytes || peer_info->slots != ch->slots) {
        HIER_ERROR("channel %u: the peer's ring has %llu slots of %u bytes, mine %zu of %zu (different settings?)",
                   ch->id, (unsigned long long)peer_info->slots, peer_info->slot_bytes, ch->slots, ch->slot_bytes);
        return HIER_ERR_INVALID_ARG;
    }
    ch->peer = peer;
    ch->lanes = hier_fabric_lanes(ch->fab, peer);
    ch->remote = *peer_info;
    return HIER_OK;
}

/* A write of ours failed. A credit return may fail harmlessly: the peer
 * may have closed its end once it had every message (communicators are
 * freed without a handshake); a failed message or direct write is the
 * channel's error, reported by its own next operation (whichever thread
 * polled the event, and on whichever communicator's behalf). */
static void hier_chan_write_failed(hier_chan_t *ch, const hier_fabric_event_t *ev)
{
    int peer_gone = ev->data == FI_ECONNREFUSED || ev->data == FI_ECONNRESET || ev->data == FI_ENOTCONN ||
                    ev->data == FI_EHOSTUNREACH;
    if (!ch) return; /* closed since: nobody waits for it */
    switch (HIER_CHAN_CTX_KIND(ev->context)) {
    case HIER_CHAN_W_CREDIT: ch->credits_done++; return;
    case HIER_CHAN_W_DIRECT: ch->direct_done++; break; /* (for the drain) */
    default: ch->done++; ch->posted[HIER_CHAN_CTX_SLOT(ev->context) % ch->slots] = 0;
    }
    if (ch->error == HIER_OK)
        HIER_ERROR("channel %u: a write to the peer failed: %s (%u)", ch->id, hier_fi_strerror((int)ev->data),
                   ev->data);
    ch->error = peer_gone ? HIER_ERR_PEER_DEAD : HIER_ERR_INTERNAL;
}

/* The release count a landed message carries. Read when it lands, not when
 * it is received: a sender blocked for credit may have the credit sitting in
 * a message it has not reached yet. Messages may land out of order (older
 * counts are ignored), and the count is the low 32 bits of one below ours. */
static void hier_chan_take_piggy(hier_chan_t *ch, const uint8_t *slot)
{
    hier_chan_hdr_t hdr;
    memcpy(&hdr, slot, sizeof(hdr));
    uint64_t acked = ch->sent - (uint32_t)((uint32_t)ch->sent - hdr.credit);
    if (acked > ch->piggy_acked && acked <= ch->sent) ch->piggy_acked = acked;
}

/* Events of one channel: a message landed, a credit came back, a write of ours completed. */
static void hier_chan_event(hier_chan_t *ch, const hier_fabric_event_t *ev)
{
    if (ev->kind == HIER_FABRIC_EV_WRITE_DONE) {
        switch (HIER_CHAN_CTX_KIND(ev->context)) {
        case HIER_CHAN_W_CREDIT: ch->credits_done++; break;
        case HIER_CHAN_W_DIRECT: ch->direct_done++; break;
        default:
            ch->done++;
            ch->posted[HIER_CHAN_CTX_SLOT(ev->context) % ch->slots] = 0;
        }
    } else if (ev->data & HIER_CHAN_DIRECT) {
        uint32_t tag = ev->data & HIER_CHAN_SEQ_MASK;
        if (tag < ch->direct_ntags) ch->direct_counts[tag]++;
    } else if (ev->data & HIER_CHAN_CREDIT) {
        /* nothing to do: the credit word landed before this entry, and
         * hier_chan_can_send reads it */
    } else {
        /* the message number: the immediate has its low 14 bits, and it is
         * one of the `slots` messages from next_recv on (credit) */
        uint32_t seq = ev->data & HIER_CHAN_SEQ_MASK;
        uint64_t msg = ch->next_recv + ((seq - (uint32_t)ch->next_recv) & HIER_CHAN_SEQ_MASK);
        ch->arrived[msg % ch->slots] = seq + 1;
        hier_chan_take_piggy(ch, ch->ring + (msg % ch->slots) * ch->stride);
    }
}

hier_status_t hier_chan_progress(hier_fabric_t *fab)
{
    hier_fabric_event_t ev[16];
    size_t n;
    hier_lock_take();
    hier_status_t st = hier_fabric_poll(fab, ev, 16, &n);
    for (size_t i = 0; st == HIER_OK && i < n; i++) { /* every event: they are no longer in the queue */
        if (ev[i].kind == HIER_FABRIC_EV_CONTROL) {
            if (hier_chan_ctl_handler) hier_chan_ctl_handler(fab, ev[i].msg, ev[i].len);
            continue;
        }
        unsigned id = ev[i].kind == HIER_FABRIC_EV_REMOTE ? (ev[i].data >> HIER_CHAN_ID_SHIFT) & HIER_CHAN_MAX_ID
                                                          : HIER_CHAN_CTX_ID(ev[i].context);
        hier_chan_t *ch = id < hier_chan_cap ? hier_chan_table[id] : NULL;
        if (ev[i].kind == HIER_FABRIC_EV_WRITE_FAILED) hier_chan_write_failed(ch, &ev[i]);
        else if (ch) hier_chan_event(ch, &ev[i]);
    }
    if (st == HIER_OK && hier_chan_ctl_handler && hier_chan_ctl_owing && *hier_chan_ctl_owing)
        hier_chan_ctl_handler(fab, NULL, 0); /* (what it owes peers) */
    for (unsigned i = hier_chan_nowing; st == HIER_OK && i > 0; i--) { /* (a success removes entry i - 1) */
        hier_chan_t *ch = hier_chan_owing[i - 1];
        if (ch->fab == fab) (void)hier_chan_return_credit(ch); /* (a failure is the channel's error) */
    }
    hier_lock_drop();
    return st;
}

static hier_fabric_t *_Atomic hier_chan_polled; /* (read unlocked by every waiting thread) */

void hier_chan_poll_on(hier_fabric_t *fab)
{
    atomic_store_explicit(&hier_chan_polled, fab, memory_order_release);
}

void hier_chan_poll(void)
{
    hier_fabric_t *fab = atomic_load_explicit(&hier_chan_polled, memory_order_acquire);
    if (fab) (void)hier_chan_progress(fab);
}

/* One turn of a waiting loop: the endpoint every time; past `spin` turns
 * the CPU goes to whoever shares it (oversubscribed, the peer we wait for
 * may be the one waiting for a core), and Open MPI progresses every `every`
 * turns (hier_wait.h; every 64 while spinning); and the clock, read every
 * 4096 turns only: a peer that is gone must not hang us. */
hier_status_t hier_chan_wait_turn(hier_fabric_t *fab, void (*progress)(void), int spin, unsigned every, unsigned turn,
                                  uint64_t *still_since, const char *what)
{
    if (spin && turn >= (unsigned)spin) {
        sched_yield();
        if (progress && (every < 2 || turn % every == 0)) progress();
    } else if (progress && turn % 64 == 63) {
        progress();
    }
    hier_status_t st = hier_link_clock(turn, still_since, what);
    return st != HIER_OK ? st : hier_chan_progress(fab);
}

/* The peer's release count as its returns tell it: the highest word. */
static uint64_t hier_chan_credit_acked(const hier_chan_t *ch)
{
    uint64_t acked = 0;
    for (unsigned i = 0; i < HIER_CHAN_CREDIT_WORDS; i++) {
        uint64_t w = __atomic_load_n(&ch->credit_word[i], __ATOMIC_ACQUIRE);
        if (w > acked) acked = w;
    }
    return acked;
}

/* Room for one more message: fewer than `slots` unreleased by the peer, and
 * the staging slot's previous write completed here. */
static int hier_chan_can_send(const hier_chan_t *ch)
{
    uint64_t acked = hier_chan_credit_acked(ch);
    if (ch->piggy_acked > acked) acked = ch->piggy_acked;
    return ch->sent - acked < ch->slots && !ch->posted[ch->sent % ch->slots];
}

static int hier_chan_sent_done_locked(const hier_chan_t *ch, uint64_t msg)
{
    return ch->posted[msg % ch->slots] != msg + 1; /* done, or the slot carries a later message already */
}

size_t hier_chan_slot_bytes(const hier_chan_t *ch)
{
    return ch->slot_bytes;
}

size_t hier_chan_segment(const void *link, size_t len)
{
    const hier_chan_t *ch = link;
    size_t lanes = ch->lanes;
    /* (a message under half a slot is not cut: many small ones alternate lanes anyway, and the
     * ring's credit counts messages, not bytes, so small segments would leave too few bytes in
     * flight: docs/performance.md, *Between nodes, where the network is the bottleneck*) */
    if (lanes < 2 || len < ch->slot_bytes / 2 || len <= HIER_CHAN_STRIPE_MIN) return ch->slot_bytes;
    size_t share = ((len + lanes - 1) / lanes + 63) & ~(size_t)63; /* (whole elements: slots are 64-byte multiples) */
    if (share < HIER_CHAN_STRIPE_MIN) share = HIER_CHAN_STRIPE_MIN;
    return share < ch->slot_bytes ? share : ch->slot_bytes;
}

/* Message k goes to slot k % slots: the header, then the data. The header
 * comes from the staging slot; the data from there too (copied), or
 * straight from the caller's registered memory when the provider gathers. */
hier_status_t hier_chan_try_send_from(void *link, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                      hier_fabric_mr_t *mr, hier_sig_t sig, int *sent_p, uint64_t *msg_p)
{
    hier_chan_t *ch = link;
    hier_status_t st = HIER_OK;
    int posted; /* (no room: not sent, the caller polls and comes back; never a wait under the lock) */
    *sent_p = 0;
    if (len > ch->slot_bytes) return HIER_ERR_INVALID_ARG;
    hier_lock_take();
    if (ch->error != HIER_OK || !hier_chan_can_send(ch)) {
        st = ch->error;
        goto out;
    }
    size_t slot = ch->sent % ch->slots;
    uint8_t *src = ch->stage + slot * ch->stride;
    hier_chan_hdr_t hdr = {
        .len = (uint32_t)len, .credit = (uint32_t)ch->released, .mbox = mbox, .tag = tag, .sig = sig};
    memcpy(src, &hdr, sizeof(hdr));
    hier_fabric_iov_t iov[2] = {{.buf = src, .len = HIER_CHAN_HDR, .mr = ch->stage_mr},
                                {.buf = data, .len = len, .mr = mr}};
    size_t n = 2;
    if (!mr || !ch->gathers || !len) {
        memcpy(src + HIER_CHAN_HDR, data, len);
        iov[0].len += len;
        n = 1;
    }
    uint32_t imm = (uint32_t)(ch->remote.id << HIER_CHAN_ID_SHIFT) | (uint32_t)(ch->sent & HIER_CHAN_SEQ_MASK);
    /* message k goes on lane k of the peer: consecutive segments of a message
     * on every rail at once; the ring takes them in any order */
    hier_fabric_peer_t lane = hier_fabric_lane_handle(ch->peer, ch->lanes, ch->sent);
    st = hier_fabric_try_writev(ch->fab, lane, iov, n, ch->remote.ring, slot * ch->stride, imm,
                                HIER_CHAN_CTX(ch->id, slot, HIER_CHAN_W_MESSAGE), &posted);
    if (st != HIER_OK || !posted) goto out;
    ch->posted[slot] = ch->sent + 1;
    if (ch->released > ch->credited) ch->credited = ch->released; /* carried by this message */
    if (ch->owing) hier_chan_forgive(ch);                          /* (the return it owed, too) */
    *msg_p = ch->sent++;
    *sent_p = 1;
out:
    hier_lock_drop();
    return st;
}

hier_status_t hier_chan_try_send(hier_chan_t *ch, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                 int *sent_p)
{
    uint64_t msg;
    return hier_chan_try_send_from(ch, mbox, tag, data, len, NULL, (hier_sig_t){0}, sent_p, &msg);
}

/* Return credit: our release count into the sender's next word (round
 * its HIER_CHAN_CREDIT_WORDS, hier_chan_impl.h). Never waits:
 * when the provider has no room (or the sender is gone for good, its last
 * call over) the channel owes the return and progress retries it, so a
 * receiver never hangs on a sender that needs nothing more. A source word
 * may be rewritten while its return of HIER_CHAN_CREDIT_WORDS returns ago is
 * still in flight: counts only grow, so the sender can only see a newer one. */
hier_status_t hier_chan_return_credit(hier_chan_t *ch)
{
    unsigned k = (unsigned)(ch->credits_sent % HIER_CHAN_CREDIT_WORDS);
    uint64_t *word = (uint64_t *)(ch->stage + ch->slots * ch->stride) + k;
    int posted;
    *word = ch->released;
    hier_status_t st = hier_fabric_try_write(ch->fab, ch->peer, word, sizeof(*word), ch->stage_mr,
                                             ch->remote.credit, k * sizeof(*word),
                                             HIER_CHAN_CREDIT | (uint32_t)(ch->remote.id << HIER_CHAN_ID_SHIFT),
                                             HIER_CHAN_CTX(ch->id, 0, HIER_CHAN_W_CREDIT), &posted);
    if (st != HIER_OK) { /* the channel's error, whoever tried (its user, or progress retrying) */
        hier_chan_forgive(ch);
        ch->error = st;
        return st;
    }
    if (posted) {
        ch->credited = *word;
        ch->credits_sent++;
        hier_chan_forgive(ch);
    } else if (!ch->owing) {
        ch->owing = 1;
        hier_chan_owing[hier_chan_nowing++] = ch;
    }
    return HIER_OK;
}

uint64_t hier_chan_credit_writes(const hier_chan_t *ch)
{
    HIER_LOCKED_RETURN(uint64_t, ch->credits_sent);
}

/* Never waits: *posted_p = 0 when the provider has no room (the caller
 * polls; the room may be the peer's to make). */
hier_status_t hier_chan_try_write_direct(hier_chan_t *ch, const void *src, size_t len, hier_fabric_mr_t *mr,
                                         hier_fabric_rkey_t rkey, uint64_t off, uint32_t tag, int *posted_p)
{
    uint32_t imm = HIER_CHAN_DIRECT | (uint32_t)(ch->remote.id << HIER_CHAN_ID_SHIFT) | (tag & HIER_CHAN_SEQ_MASK);
    if (tag >= HIER_CHAN_MAX_TAGS) return HIER_ERR_INVALID_ARG;
    int posted = 0;
    hier_lock_take();
    hier_status_t st = ch->error;
    if (st == HIER_OK)
        st = hier_fabric_try_write(ch->fab, hier_fabric_lane_handle(ch->peer, ch->lanes, ch->direct_sent), src, len,
                                   mr, rkey, off, imm, HIER_CHAN_CTX(ch->id, 0, HIER_CHAN_W_DIRECT), &posted);
    ch->direct_sent += st == HIER_OK && posted;
    hier_lock_drop();
    if (st == HIER_OK) *posted_p = posted;
    return st;
}

hier_status_t hier_chan_status(const void *link)
{
    HIER_LOCKED_RETURN(hier_status_t, ((const hier_chan_t *)link)->error);
}

void hier_chan_direct_counts(hier_chan_t *ch, uint32_t *counts, size_t n)
{
    hier_lock_take();
    ch->direct_counts = counts;
    ch->direct_ntags = n;
    hier_lock_drop();
}

uint64_t hier_chan_direct_pending(const hier_chan_t *ch)
{
    HIER_LOCKED_RETURN(uint64_t, ch->direct_sent - ch->direct_done);
}

uint32_t hier_chan_direct_count(const uint32_t *counts, size_t tag)
{
    HIER_LOCKED_RETURN(uint32_t, counts[tag]);
}

static int hier_chan_direct_busy(const hier_fabric_t *fab)
{
    hier_lock_take();
    int busy = 0;
    for (unsigned id = 0; !busy && id < hier_chan_cap; id++)
        busy = hier_chan_table[id] && hier_chan_table[id]->fab == fab &&
               hier_chan_table[id]->direct_done < hier_chan_table[id]->direct_sent;
    hier_lock_drop();
    return busy;
}

void hier_chan_quiesce_direct(hier_fabric_t *fab)
{
    time_t end = time(NULL) + 2;
    for (unsigned i = 0; hier_chan_direct_busy(fab); i++) {
        if (hier_chan_progress(fab) != HIER_OK) break;
        if (i % 1024 == 1023 && time(NULL) > end) break;
    }
}

/* ---- the public operations, under the transport lock (hier_lock.h) ---- */

hier_status_t hier_chan_open(hier_fabric_t *fab, size_t slots, size_t slot_bytes, hier_chan_t **ch_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_chan_open_locked(fab, slots, slot_bytes, ch_p));
}

void hier_chan_info(const hier_chan_t *ch, hier_chan_info_t *info)
{
    hier_lock_take();
    hier_chan_info_locked(ch, info);
    hier_lock_drop();
}

hier_status_t hier_chan_connect(hier_chan_t *ch, hier_fabric_peer_t peer, const hier_chan_info_t *peer_info)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_chan_connect_locked(ch, peer, peer_info));
}

int hier_chan_sent_done(const void *link, uint64_t msg)
{
    HIER_LOCKED_RETURN(int, hier_chan_sent_done_locked(link, msg));
}



void hier_chan_report(const void *link, const char *why)
{
    const hier_chan_t *ch = link;
    hier_lock_take();
    uint64_t word = hier_chan_credit_acked(ch), acked = word > ch->piggy_acked ? word : ch->piggy_acked;
    HIER_ERROR("channel %u (peer's %u), %s: sent %llu (acked %llu: word %llu, headers %llu; completed %llu), "
               "received %llu (next lands in slot %zu: arrived %u), released %llu (credited %llu%s), set aside %llu, "
               "error %d", ch->id,
               ch->remote.id, why, (unsigned long long)ch->sent, (unsigned long long)acked,
               (unsigned long long)word, (unsigned long long)ch->piggy_acked,
               (unsigned long long)ch->done, (unsigned long long)ch->next_recv, (size_t)(ch->next_recv % ch->slots),
               ch->arrived[ch->next_recv % ch->slots], (unsigned long long)ch->released,
               (unsigned long long)ch->credited, ch->owing ? ", owing" : "", (unsigned long long)ch->set_aside,
               (int)ch->error);
    hier_lock_drop();
}
