/* hier_chan_recv.c: a channel's receiving side, shared by every mailbox
 * of its two processes (docs/design.md, "Between nodes", channels). A
 * receiver asks for the next message of its mailbox:
 * 1. the oldest set-aside message of that mailbox, if any;
 * 2. else the ring's next message, in place, if it is for that mailbox;
 * 3. else it is set aside (parked where it landed while at most half the
 *    ring is parked, copied out past that), and the next is looked at.
 * Slots are released in ring order, so a parked message holds back every
 * later slot: a receiver that looks in vain while half the ring is taken
 * copies the parked ones out and releases their slots. */
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "net/hier_chan_impl.h"

static int hier_chan_has_message(const hier_chan_t *ch)
{
    return ch->arrived[ch->next_recv % ch->slots] == (uint32_t)((ch->next_recv & HIER_CHAN_SEQ_MASK) + 1);
}

static const uint8_t *hier_chan_head(const hier_chan_t *ch, hier_chan_hdr_t *hdr)
{
    const uint8_t *slot = ch->ring + (ch->next_recv % ch->slots) * ch->stride;
    memcpy(hdr, slot, sizeof(*hdr));
    return slot;
}

/* Slot `slot` is done with: release every done slot from the oldest on, and give the sender credit once half
 * a ring was released without any. */
static hier_status_t hier_chan_done(hier_chan_t *ch, size_t slot)
{
    ch->consumed[slot] = 1;
    while (ch->released < ch->next_recv && ch->consumed[ch->released % ch->slots]) {
        ch->consumed[ch->released % ch->slots] = 0;
        ch->released++;
    }
    return ch->released - ch->credited < ch->slots / 2 ? HIER_OK : hier_chan_return_credit(ch);
}

/* A copy of a message out of its slot (step 3, or a parked one unparked). */
static hier_chan_aside_t *hier_chan_copy_out(hier_chan_t *ch, const hier_chan_hdr_t *hdr, const uint8_t *slot)
{
    hier_chan_aside_t *a = malloc(sizeof(*a) + hdr->len);
    if (!a) {
        HIER_ERROR("channel %u: no memory to set a %u-byte message aside", ch->id, hdr->len);
        return NULL;
    }
    *a = (hier_chan_aside_t){.mbox = hdr->mbox, .tag = hdr->tag, .sig = hdr->sig, .len = hdr->len};
    memcpy(a->data, slot + HIER_CHAN_HDR, hdr->len);
    ch->set_aside++;
    return a;
}

/* Step 3: the ring's next message is another mailbox's: parked, or copied. */
static hier_status_t hier_chan_set_aside_head(hier_chan_t *ch)
{
    hier_chan_hdr_t hdr;
    const uint8_t *slot = hier_chan_head(ch, &hdr);
    if (hdr.len > ch->slot_bytes) {
        HIER_ERROR("channel %u: a message of %u bytes in a %zu-byte slot (corrupt ring?)", ch->id, hdr.len,
                   ch->slot_bytes);
        return HIER_ERR_INTERNAL;
    }
    int park = ch->parked < ch->slots / 2;
    hier_chan_aside_t *a = park ? malloc(sizeof(*a)) : hier_chan_copy_out(ch, &hdr, slot);
    if (!a) return HIER_ERR_NO_MEMORY;
    if (park) {
        *a = (hier_chan_aside_t){.mbox = hdr.mbox, .tag = hdr.tag, .sig = hdr.sig, .len = hdr.len, .in_ring = slot};
        ch->parked++;
    }
    *ch->aside_tail = a;
    ch->aside_tail = &a->next;
    size_t at = ch->next_recv++ % ch->slots;
    return park ? HIER_OK : hier_chan_done(ch, at);
}

/* Half the ring taken and not released (see the file's comment: credit
 * goes back only past half a ring released, so the sender may be stalled
 * from there): the parked messages are copied out, oldest first, and their
 * slots marked done. */
static hier_status_t hier_chan_unpark(hier_chan_t *ch)
{
    if (!ch->parked || ch->next_recv - ch->released < (ch->slots + 1) / 2) return HIER_OK;
    for (hier_chan_aside_t **pp = &ch->aside; *pp && ch->parked; pp = &(*pp)->next) {
        hier_chan_aside_t *p = *pp;
        if (!p->in_ring) continue;
        hier_chan_hdr_t hdr = {.len = (uint32_t)p->len, .mbox = p->mbox, .tag = p->tag, .sig = p->sig};
        hier_chan_aside_t *a = hier_chan_copy_out(ch, &hdr, p->in_ring);
        if (!a) return HIER_ERR_NO_MEMORY;
        size_t slot = (size_t)(p->in_ring - ch->ring) / ch->stride;
        a->next = p->next;
        *pp = a;
        if (ch->aside_tail == &p->next) ch->aside_tail = &a->next;
        free(p);
        ch->parked--;
        hier_status_t st = hier_chan_done(ch, slot);
        if (st != HIER_OK) return st;
    }
    return HIER_OK;
}

static int hier_chan_take_aside(hier_chan_t *ch, uint32_t mbox, hier_link_msg_t *msg)
{
    for (hier_chan_aside_t **pp = &ch->aside; *pp; pp = &(*pp)->next) {
        if ((*pp)->mbox != mbox) continue;
        hier_chan_aside_t *a = *pp;
        *pp = a->next;
        if (!*pp) ch->aside_tail = pp;
        if (a->in_ring) { /* (taken in place: released as one from the ring) */
            *msg = (hier_link_msg_t){.data = a->in_ring + HIER_CHAN_HDR, .len = a->len, .tag = a->tag, .sig = a->sig,
                                     .held = NULL};
            ch->parked--;
            free(a);
        } else {
            *msg = (hier_link_msg_t){.data = a->data, .len = a->len, .tag = a->tag, .sig = a->sig, .held = a};
        }
        return 1;
    }
    return 0;
}

static hier_status_t hier_chan_try_recv_locked(hier_chan_t *ch, uint32_t mbox, hier_link_msg_t *msg, int *got_p)
{
    *got_p = 0;
    if (ch->error != HIER_OK) return ch->error;
    if (hier_chan_take_aside(ch, mbox, msg)) { /* 1 */
        *got_p = 1;
        return HIER_OK;
    }
    while (hier_chan_has_message(ch)) {
        hier_chan_hdr_t hdr;
        const uint8_t *slot = hier_chan_head(ch, &hdr);
        if (hdr.mbox == mbox) { /* 2 */
            *msg = (hier_link_msg_t){.data = slot + HIER_CHAN_HDR, .len = hdr.len, .tag = hdr.tag, .sig = hdr.sig,
                                     .held = NULL};
            ch->next_recv++;
            *got_p = 1;
            return HIER_OK;
        }
        hier_status_t st = hier_chan_set_aside_head(ch); /* 3 */
        if (st != HIER_OK) return st;
    }
    return hier_chan_unpark(ch);
}

hier_status_t hier_chan_try_recv(void *link, uint32_t mbox, size_t expect, hier_link_msg_t *msg, int *got_p)
{
    (void)expect;
    HIER_LOCKED_RETURN(hier_status_t, hier_chan_try_recv_locked(link, mbox, msg, got_p));
}

static hier_status_t hier_chan_release_locked(hier_chan_t *ch, hier_link_msg_t *msg)
{
    if (msg->held) { /* a set-aside copy: its slot went long ago */
        free(msg->held);
        msg->held = NULL;
        return ch->error;
    }
    if (ch->error != HIER_OK) return ch->error;
    size_t slot = (size_t)((const uint8_t *)msg->data - HIER_CHAN_HDR - ch->ring) / ch->stride;
    return hier_chan_done(ch, slot);
}

hier_status_t hier_chan_release(void *link, hier_link_msg_t *msg)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_chan_release_locked(link, msg));
}

uint64_t hier_chan_set_aside(const hier_chan_t *ch)
{
    HIER_LOCKED_RETURN(uint64_t, ch->set_aside);
}
