/* hier_peers.c: see hier_peers.h. Entries live in an open-addressing table
 * keyed by process id (allocated one by one, so pointers stay valid as it
 * grows); everything runs under the transport lock, the control handler
 * from whichever thread's progress found the message. */
#include "net/hier_peers.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"

typedef enum {
    HIER_PEER_NONE,      /* no channel */
    HIER_PEER_REQUESTED, /* our end is open, our REQUEST sent (or owed) */
    HIER_PEER_CONNECTED,
    HIER_PEER_FAILED,    /* our end could not be opened or connected */
} hier_peer_state_t;

enum { HIER_PEER_MSG_REQUEST = 0x68510001u, HIER_PEER_MSG_ACCEPT = 0x68510002u };

typedef struct {
    uint32_t kind;
    uint32_t addr_len;
    uint64_t from;          /* the sender's process id */
    hier_chan_info_t info;  /* the sender's channel end */
    uint8_t addr[HIER_FABRIC_ADDR_MAX];
} hier_peer_msg_t;
static_assert(sizeof(hier_peer_msg_t) <= HIER_FABRIC_CTL_MAX, "a connection message is one control message");

struct hier_peer {
    hier_peer_head_t head;  /* (first: hier_peers.h reads it) */
    uint64_t proc;
    hier_peer_state_t state;
    int known;              /* its address is in the AV */
    hier_fabric_peer_t addr;
    hier_chan_t *ch;
    uint32_t owed;          /* a control message the provider had no room for: its kind */
    hier_status_t error;
};

static struct {
    hier_peer_t **slot;     /* cap entries, NULL where free */
    size_t cap, n, connected;
    uint64_t self;
    size_t slots, slot_bytes;
    uint8_t my_addr[HIER_FABRIC_ADDR_MAX];
    size_t my_addr_len;
    hier_fabric_t *addr_of; /* the endpoint my_addr belongs to */
    unsigned owing;         /* entries with a message owed */
} hier_peers;

/* A peer whose channel could not be made or kept: calls get the error, not the channel. */
static void hier_peer_fail(hier_peer_t *p, hier_status_t st)
{
    p->error = st;
    p->state = HIER_PEER_FAILED;
    atomic_store_explicit(&p->head.ch, NULL, memory_order_release);
}

static size_t hier_peers_hash(uint64_t proc, size_t cap)
{
    proc ^= proc >> 33;
    proc *= 0xff51afd7ed558ccdull;
    proc ^= proc >> 33;
    return (size_t)proc & (cap - 1);
}

static int hier_peers_grow(void)
{
    size_t cap = hier_peers.cap ? 2 * hier_peers.cap : 64;
    hier_peer_t **slot = calloc(cap, sizeof(*slot));
    if (!slot) return 0;
    for (size_t i = 0; i < hier_peers.cap; i++) {
        hier_peer_t *p = hier_peers.slot[i];
        if (!p) continue;
        size_t j = hier_peers_hash(p->proc, cap);
        while (slot[j]) j = (j + 1) & (cap - 1);
        slot[j] = p;
    }
    free(hier_peers.slot);
    hier_peers.slot = slot;
    hier_peers.cap = cap;
    return 1;
}

static hier_peer_t *hier_peers_get_locked(uint64_t proc)
{
    size_t j = hier_peers.cap ? hier_peers_hash(proc, hier_peers.cap) : 0;
    while (hier_peers.cap && hier_peers.slot[j]) {
        if (hier_peers.slot[j]->proc == proc) return hier_peers.slot[j];
        j = (j + 1) & (hier_peers.cap - 1);
    }
    if (2 * (hier_peers.n + 1) > hier_peers.cap) {
        if (!hier_peers_grow()) return NULL;
        j = hier_peers_hash(proc, hier_peers.cap);
        while (hier_peers.slot[j]) j = (j + 1) & (hier_peers.cap - 1);
    }
    hier_peer_t *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->proc = proc;
    hier_peers.slot[j] = p;
    hier_peers.n++;
    return p;
}

hier_peer_t *hier_peers_get(uint64_t proc)
{
    HIER_LOCKED_RETURN(hier_peer_t *, hier_peers_get_locked(proc));
}

int hier_peer_known(const hier_peer_t *p)
{
    HIER_LOCKED_RETURN(int, p->known);
}

static hier_status_t hier_peer_learn_locked(hier_fabric_t *fab, hier_peer_t *p, const void *addr, size_t len)
{
    uint8_t buf[HIER_FABRIC_ADDR_MAX] = {0};
    if (p->known) return HIER_OK;
    if (len > sizeof(buf)) return HIER_ERR_INVALID_ARG;
    memcpy(buf, addr, len);
    hier_status_t st = hier_fabric_insert(fab, buf, &p->addr);
    p->known = st == HIER_OK;
    return st;
}

hier_status_t hier_peer_learn(hier_fabric_t *fab, hier_peer_t *p, const void *addr, size_t len)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_peer_learn_locked(fab, p, addr, len));
}

hier_status_t hier_peer_addr(const hier_peer_t *p, hier_fabric_peer_t *addr_p)
{
    hier_lock_take();
    hier_status_t st = p->known ? HIER_OK : HIER_ERR_INVALID_ARG;
    if (st == HIER_OK) *addr_p = p->addr;
    hier_lock_drop();
    return st;
}

/* Send (or owe) a control message of this kind describing my end of p's channel. */
static void hier_peer_say(hier_fabric_t *fab, hier_peer_t *p, uint32_t kind)
{
    hier_peer_msg_t m = {.kind = kind, .from = hier_peers.self};
    int posted = 0;
    if (hier_peers.addr_of != fab) {
        hier_peers.my_addr_len = sizeof(hier_peers.my_addr);
        if (hier_fabric_addr(fab, hier_peers.my_addr, &hier_peers.my_addr_len) == HIER_OK) hier_peers.addr_of = fab;
    }
    m.addr_len = (uint32_t)hier_peers.my_addr_len;
    memcpy(m.addr, hier_peers.my_addr, hier_peers.my_addr_len);
    hier_chan_info(p->ch, &m.info);
    hier_status_t st = hier_fabric_try_send_ctl(fab, p->addr, &m, sizeof(m), &posted);
    if (st != HIER_OK) hier_peer_fail(p, st);
    if (!p->owed && !posted && st == HIER_OK) hier_peers.owing++;
    if (p->owed && (posted || st != HIER_OK)) hier_peers.owing--;
    p->owed = posted || st != HIER_OK ? 0 : kind;
}

static hier_status_t hier_peer_open(hier_fabric_t *fab, hier_peer_t *p, size_t slots, size_t slot_bytes)
{
    hier_status_t st = hier_chan_open(fab, slots, slot_bytes, &p->ch);
    if (st == HIER_OK) return HIER_OK;
    p->ch = NULL;
    hier_peer_fail(p, st);
    return st;
}

static void hier_peer_connect_to(hier_fabric_t *fab, hier_peer_t *p, const hier_chan_info_t *info)
{
    hier_status_t st = hier_chan_connect(p->ch, p->addr, info);
    if (st != HIER_OK) {
        hier_peer_fail(p, st);
        return;
    }
    p->state = HIER_PEER_CONNECTED;
    atomic_store_explicit(&p->head.ch, p->ch, memory_order_release);
    hier_peers.connected++;
    HIER_LOG(HIER_LOG_DEBUG, "channel to process %#llx connected (%zu in all)", (unsigned long long)p->proc,
             hier_peers.connected);
    (void)fab;
}

/* A REQUEST or an ACCEPT from another process. */
static void hier_peers_on_msg(hier_fabric_t *fab, const hier_peer_msg_t *m)
{
    hier_peer_t *p = hier_peers_get_locked(m->from);
    if (!p || hier_peer_learn_locked(fab, p, m->addr, m->addr_len) != HIER_OK) {
        HIER_ERROR("no room for process %#llx's connection request", (unsigned long long)m->from);
        return;
    }
    if (m->kind == HIER_PEER_MSG_ACCEPT) {
        if (p->state == HIER_PEER_REQUESTED) hier_peer_connect_to(fab, p, &m->info);
        return;
    }
    if (p->state == HIER_PEER_CONNECTED || p->state == HIER_PEER_FAILED) return;
    /* (requests crossed: the end I opened for mine is the one the peer
     * connects to mine, as it gets my request; its ACCEPT finds me connected) */
    if (!p->ch && hier_peer_open(fab, p, m->info.slots, m->info.slot_bytes) != HIER_OK) return;
    hier_peer_connect_to(fab, p, &m->info);
    if (p->state == HIER_PEER_CONNECTED) hier_peer_say(fab, p, HIER_PEER_MSG_ACCEPT);
}

/* Progress calls this with every control message, and with none after
 * each poll while some are owed: they go out as soon as the provider has room. */
static void hier_peers_on_ctl(hier_fabric_t *fab, const void *msg, size_t len)
{
    if (msg) {
        hier_peer_msg_t m;
        if (len != sizeof(m)) return;
        memcpy(&m, msg, sizeof(m));
        if (m.kind == HIER_PEER_MSG_REQUEST || m.kind == HIER_PEER_MSG_ACCEPT) hier_peers_on_msg(fab, &m);
        return;
    }
    for (size_t i = 0; hier_peers.owing && i < hier_peers.cap; i++) {
        hier_peer_t *p = hier_peers.slot[i];
        if (p && p->owed) hier_peer_say(fab, p, p->owed);
    }
}

void hier_peers_configure(uint64_t self, size_t slots, size_t slot_bytes)
{
    hier_lock_take();
    hier_peers.self = self;
    hier_peers.slots = slots;
    hier_peers.slot_bytes = slot_bytes;
    hier_chan_set_ctl_handler(hier_peers_on_ctl, &hier_peers.owing);
    hier_lock_drop();
}

static hier_status_t hier_peer_chan_locked(hier_fabric_t *fab, hier_peer_t *p, hier_chan_t **ch_p)
{
    *ch_p = NULL;
    switch (p->state) {
    case HIER_PEER_CONNECTED: *ch_p = p->ch; return HIER_OK;
    case HIER_PEER_FAILED: return p->error;
    case HIER_PEER_REQUESTED: return HIER_OK;
    case HIER_PEER_NONE: break;
    }
    if (!p->known) {
        HIER_ERROR("no address for process %#llx: the set-up should have exchanged it", (unsigned long long)p->proc);
        return HIER_ERR_INTERNAL;
    }
    /* a ring of slots per lane: cut a message across rails and each still has as many in flight */
    size_t slots = hier_peers.slots * hier_fabric_lanes(fab, p->addr);
    if (slots > HIER_CHAN_MAX_SLOTS) slots = HIER_CHAN_MAX_SLOTS;
    if (hier_peer_open(fab, p, slots, hier_peers.slot_bytes) != HIER_OK) return p->error;
    p->state = HIER_PEER_REQUESTED;
    hier_peer_say(fab, p, HIER_PEER_MSG_REQUEST);
    return p->state == HIER_PEER_FAILED ? p->error : HIER_OK;
}

hier_status_t hier_peer_connect(hier_fabric_t *fab, hier_peer_t *p, hier_chan_t **ch_p)
{
    HIER_LOCKED_RETURN(hier_status_t, hier_peer_chan_locked(fab, p, ch_p));
}

void hier_peers_count(size_t *known_p, size_t *connected_p)
{
    hier_lock_take();
    *known_p = hier_peers.n;
    *connected_p = hier_peers.connected;
    hier_lock_drop();
}

void hier_peers_clear(void)
{
    hier_lock_take();
    hier_peer_t **slot = hier_peers.slot;
    size_t cap = hier_peers.cap;
    hier_peers.slot = NULL;
    hier_peers.cap = hier_peers.n = hier_peers.connected = 0;
    hier_peers.owing = 0;
    hier_peers.addr_of = NULL;
    hier_lock_drop();
    for (size_t i = 0; i < cap; i++) { /* (closing drains: not under the lock) */
        if (!slot[i]) continue;
        hier_chan_close(slot[i]->ch);
        free(slot[i]);
    }
    free(slot);
}
