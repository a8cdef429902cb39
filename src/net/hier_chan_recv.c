/* hier_chan_recv.c: the receiving side of a channel, shared by every
 * communicator (box) of its two processes.
 *
 * A receiver asks for the next message of its box:
 * 1. the oldest set-aside message of that box, if any (they are older than
 *    anything still in the ring);
 * 2. else the ring's next message, in place, if it is for that box;
 * 3. else that message belongs to another box: it is copied aside (in
 *    arrival order) and its slot marked done, and the next one is looked at.
 * Slots are released in ring order: a slot marked done counts only once
 * every older one is done too, since the sender reuses slot k % slots as
 * soon as its count of released messages passes k. A message taken in place
 * is released by its taker; the set-aside ones are freed when taken and
 * released. Messages of one box keep their order whatever boxes come
 * between them. */
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

/* Slot `slot` is done with: release every done slot from the oldest on. */
static hier_status_t hier_chan_done(hier_chan_t *ch, size_t slot)
{
    ch->consumed[slot] = 1;
    while (ch->released < ch->next_recv && ch->consumed[ch->released % ch->slots]) {
        ch->consumed[ch->released % ch->slots] = 0;
        ch->released++;
    }
    return hier_chan_credit_due(ch);
}

/* Step 3: the ring's next message is another box's. */
static hier_status_t hier_chan_set_aside_head(hier_chan_t *ch)
{
    hier_chan_hdr_t hdr;
    const uint8_t *slot = hier_chan_head(ch, &hdr);
    if (hdr.len > ch->slot_bytes) {
        HIER_ERROR("channel %u: a message of %u bytes in a %zu-byte slot (corrupt ring?)", ch->id, hdr.len,
                   ch->slot_bytes);
        return HIER_ERR_INTERNAL;
    }
    hier_chan_aside_t *a = malloc(sizeof(*a) + hdr.len);
    if (!a) {
        HIER_ERROR("channel %u: no memory to set a %u-byte message aside", ch->id, hdr.len);
        return HIER_ERR_NO_MEMORY;
    }
    *a = (hier_chan_aside_t){.box = hdr.box, .tag = hdr.tag, .sig = hdr.sig, .len = hdr.len};
    memcpy(a->data, slot + HIER_CHAN_HDR, hdr.len);
    *ch->aside_tail = a;
    ch->aside_tail = &a->next;
    ch->set_aside++;
    return hier_chan_done(ch, ch->next_recv++ % ch->slots);
}

static int hier_chan_take_aside(hier_chan_t *ch, uint32_t box, hier_chan_msg_t *msg)
{
    for (hier_chan_aside_t **pp = &ch->aside; *pp; pp = &(*pp)->next) {
        if ((*pp)->box != box) continue;
        hier_chan_aside_t *a = *pp;
        *pp = a->next;
        if (!*pp) ch->aside_tail = pp;
        *msg = (hier_chan_msg_t){.data = a->data, .len = a->len, .tag = a->tag, .sig = a->sig, .held = a};
        return 1;
    }
    return 0;
}

static hier_status_t hier_chan_try_recv_locked(hier_chan_t *ch, uint32_t box, hier_chan_msg_t *msg, int *got_p)
{
    *got_p = 0;
    if (ch->error != HIER_OK) return ch->error;
    if (hier_chan_take_aside(ch, box, msg)) { /* 1 */
        *got_p = 1;
        return HIER_OK;
    }
    while (hier_chan_has_message(ch)) {
        hier_chan_hdr_t hdr;
        const uint8_t *slot = hier_chan_head(ch, &hdr);
        if (hdr.box == box) { /* 2 */
            *msg = (hier_chan_msg_t){.data = slot + HIER_CHAN_HDR, .len = hdr.len, .tag = hdr.tag, .sig = hdr.sig,
                                     .held = NULL};
            ch->next_recv++;
            *got_p = 1;
            return HIER_OK;
        }
        hier_status_t st = hier_chan_set_aside_head(ch); /* 3 */
        if (st != HIER_OK) return st;
    }
    return HIER_OK;
}

hier_status_t hier_chan_try_recv(hier_chan_t *ch, uint32_t box, hier_chan_msg_t *msg, int *got_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_chan_try_recv_locked(ch, box, msg, got_p));
}

static hier_status_t hier_chan_release_locked(hier_chan_t *ch, hier_chan_msg_t *msg)
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

hier_status_t hier_chan_release(hier_chan_t *ch, hier_chan_msg_t *msg)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_chan_release_locked(ch, msg));
}

uint64_t hier_chan_set_aside(const hier_chan_t *ch)
{
    HIER_LOCKED_RETURN(uint64_t, ch->set_aside);
}

void hier_chan_recv_free(hier_chan_t *ch)
{
    while (ch->aside) {
        hier_chan_aside_t *a = ch->aside;
        ch->aside = a->next;
        free(a);
    }
    ch->aside_tail = &ch->aside;
}
