/* hier_pml.c: links over Open MPI's point-to-point; see hier_pml.h. */
#include "net/hier_pml.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"

/* A message's header, then its segment: one MPI message. */
typedef struct {
    uint64_t len;
    uint32_t tag, pad;
    hier_sig_t sig;
} hier_pml_hdr_t;
_Static_assert(sizeof(hier_pml_hdr_t) == 32, "a message header is 32 bytes");
#define HIER_PML_HDR sizeof(hier_pml_hdr_t)

typedef struct {
    void *req;     /* in flight (NULL: free) */
    uint8_t *buf;
    size_t cap;
} hier_pml_buf_t;

struct hier_pml {
    const hier_pml_ops_t *ops;
    int peer;
    size_t seg;
    hier_pml_buf_t send[HIER_PML_SENDS]; /* message k goes from send[k % HIER_PML_SENDS] */
    uint64_t sent;
    hier_pml_buf_t recv[HIER_PML_MBOXES]; /* a mailbox's receive, posted when asked for */
    size_t awaited[HIER_PML_MBOXES];      /* ... and the bytes it awaits */
    int held[HIER_PML_MBOXES];            /* its message taken, not released yet */
    uint64_t received;
    hier_status_t error;
};

/* ---- sends a closed link left in flight ---- */

typedef struct hier_pml_left {
    struct hier_pml_left *next;
    void *req;
    uint8_t *buf;
    int (*test)(void *req, size_t *len_p);
} hier_pml_left_t;

static hier_pml_left_t *hier_pml_lefts; /* (under the transport lock) */

/* Free what the PML is done with; every one with `all` (the process ends). */
static void hier_pml_reap(int all)
{
    hier_lock_take();
    for (hier_pml_left_t **p = &hier_pml_lefts; *p;) {
        hier_pml_left_t *l = *p;
        size_t len;
        if (!all && l->test(l->req, &len) == 0) {
            p = &l->next;
            continue;
        }
        *p = l->next;
        free(l->buf);
        free(l);
    }
    hier_lock_drop();
}

static void hier_pml_leave(hier_pml_t *link, hier_pml_buf_t *b)
{
    size_t len;
    hier_pml_left_t *l;
    if (!b->req || link->ops->test(b->req, &len) != 0) { /* (over: the request is freed) */
        free(b->buf);
        return;
    }
    if (!(l = malloc(sizeof(*l)))) {
        HIER_LOG(HIER_LOG_DEBUG, "pml: a send to rank %d left in flight, its buffer with it", link->peer);
        return;
    }
    *l = (hier_pml_left_t){.req = b->req, .buf = b->buf, .test = link->ops->test};
    hier_lock_take();
    l->next = hier_pml_lefts;
    hier_pml_lefts = l;
    hier_lock_drop();
}

void hier_pml_finalize(void)
{
    hier_pml_reap(1);
}

/* ---- a link ---- */

size_t hier_pml_size(void)
{
    return sizeof(hier_pml_t);
}

void hier_pml_init(hier_pml_t *link, const hier_pml_ops_t *ops, int peer, size_t seg)
{
    if (hier_pml_lefts) hier_pml_reap(0);
    *link = (hier_pml_t){.ops = ops, .peer = peer, .seg = seg};
}

void hier_pml_fini(hier_pml_t *link)
{
    if (!link || !link->ops) return;
    for (unsigned b = 0; b < HIER_PML_MBOXES; b++) {
        if (link->recv[b].req) link->ops->cancel(link->recv[b].req);
        free(link->recv[b].buf);
    }
    for (unsigned k = 0; k < HIER_PML_SENDS; k++) hier_pml_leave(link, &link->send[k]);
    *link = (hier_pml_t){0};
    if (hier_pml_lefts) hier_pml_reap(0);
}

size_t hier_pml_bytes(const hier_pml_t *link)
{
    size_t n = 0;
    for (unsigned k = 0; k < HIER_PML_SENDS; k++) n += link->send[k].cap;
    for (unsigned b = 0; b < HIER_PML_MBOXES; b++) n += link->recv[b].cap;
    return n;
}

/* b holds at least `need` bytes (its contents go). */
static hier_status_t hier_pml_room(hier_pml_buf_t *b, size_t need)
{
    if (b->cap >= need) return HIER_OK;
    size_t cap = need < 256 ? 256 : need;
    uint8_t *p = malloc(cap);
    if (!p) return HIER_ERR_NO_MEMORY;
    free(b->buf);
    b->buf = p;
    b->cap = cap;
    return HIER_OK;
}

/* The link's end: every later operation returns st. */
static hier_status_t hier_pml_fail(hier_pml_t *link, hier_status_t st)
{
    if (link->error == HIER_OK) link->error = st;
    return link->error;
}

static size_t hier_pml_segment(const void *l, size_t len)
{
    (void)len;
    return ((const hier_pml_t *)l)->seg;
}

static hier_status_t hier_pml_try_send(void *l, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                       hier_fabric_mr_t *mr, hier_sig_t sig, int *sent_p, uint64_t *msg_p)
{
    hier_pml_t *link = l;
    hier_pml_buf_t *b = &link->send[link->sent % HIER_PML_SENDS];
    size_t got;
    (void)mr; /* (copied whatever it is) */
    *sent_p = 0;
    if (link->error != HIER_OK) return link->error;
    if (mbox >= HIER_PML_MBOXES || len > link->seg) {
        HIER_ERROR("pml: a %zu-byte message to mailbox %u (at most %zu bytes, %d mailboxes)", len, mbox, link->seg,
                   HIER_PML_MBOXES);
        return hier_pml_fail(link, HIER_ERR_INVALID_ARG);
    }
    if (b->req) {
        int done = link->ops->test(b->req, &got);
        if (done == 0) return HIER_OK; /* (the oldest send is still in flight: no room) */
        b->req = NULL;
        if (done < 0) {
            HIER_ERROR("pml: a send to rank %d failed", link->peer);
            return hier_pml_fail(link, HIER_ERR_INTERNAL);
        }
    }
    if (hier_pml_room(b, HIER_PML_HDR + len) != HIER_OK) {
        HIER_ERROR("pml: no memory for a %zu-byte message to rank %d", len, link->peer);
        return hier_pml_fail(link, HIER_ERR_NO_MEMORY);
    }
    hier_pml_hdr_t hdr = {.len = len, .tag = tag, .sig = sig};
    memcpy(b->buf, &hdr, HIER_PML_HDR);
    if (len) memcpy(b->buf + HIER_PML_HDR, data, len);
    if (link->ops->isend(b->buf, HIER_PML_HDR + len, link->peer, mbox, link->ops->arg, &b->req) != 0) {
        b->req = NULL;
        HIER_ERROR("pml: a send to rank %d could not be posted", link->peer);
        return hier_pml_fail(link, HIER_ERR_INTERNAL);
    }
    *msg_p = link->sent++;
    *sent_p = 1;
    return HIER_OK;
}

static int hier_pml_sent_done(const void *l, uint64_t msg)
{
    (void)l;
    (void)msg;
    return 1; /* (copied when sent) */
}

static hier_status_t hier_pml_status(const void *l)
{
    return ((const hier_pml_t *)l)->error;
}

/* Post mailbox's receive for `expect` bytes, its buffer grown to them. */
static hier_status_t hier_pml_post(hier_pml_t *link, uint32_t mbox, size_t expect)
{
    hier_pml_buf_t *b = &link->recv[mbox];
    if (hier_pml_room(b, HIER_PML_HDR + expect) != HIER_OK) {
        HIER_ERROR("pml: no memory to receive %zu bytes from rank %d", expect, link->peer);
        return hier_pml_fail(link, HIER_ERR_NO_MEMORY);
    }
    if (link->ops->irecv(b->buf, HIER_PML_HDR + expect, link->peer, mbox, link->ops->arg, &b->req) != 0) {
        b->req = NULL;
        HIER_ERROR("pml: a receive from rank %d could not be posted", link->peer);
        return hier_pml_fail(link, HIER_ERR_INTERNAL);
    }
    link->awaited[mbox] = expect;
    return HIER_OK;
}

/* A receive that is over: its message, or why it is not one. */
static hier_status_t hier_pml_take(hier_pml_t *link, uint32_t mbox, int done, size_t got, hier_link_msg_t *msg)
{
    hier_pml_buf_t *b = &link->recv[mbox];
    hier_pml_hdr_t hdr;
    if (done == HIER_PML_TRUNCATED) {
        HIER_ERROR("mismatched collective: a message from rank %d (another node) is longer than the %zu bytes this "
                   "rank's call awaits (the ranks called different collectives, or with different counts)",
                   link->peer, link->awaited[mbox]);
        return hier_pml_fail(link, HIER_ERR_MISMATCH);
    }
    if (done < 0) {
        HIER_ERROR("pml: a receive from rank %d failed", link->peer);
        return hier_pml_fail(link, HIER_ERR_INTERNAL);
    }
    if (got >= HIER_PML_HDR) memcpy(&hdr, b->buf, HIER_PML_HDR);
    if (got < HIER_PML_HDR || hdr.len != got - HIER_PML_HDR) {
        HIER_ERROR("pml: a malformed %zu-byte message from rank %d", got, link->peer);
        return hier_pml_fail(link, HIER_ERR_INTERNAL);
    }
    *msg = (hier_link_msg_t){.data = b->buf + HIER_PML_HDR, .len = hdr.len, .tag = hdr.tag, .sig = hdr.sig,
                             .held = b};
    link->held[mbox] = 1;
    link->received++;
    return HIER_OK;
}

static hier_status_t hier_pml_try_recv(void *l, uint32_t mbox, size_t expect, hier_link_msg_t *msg, int *got_p)
{
    hier_pml_t *link = l;
    size_t got = 0;
    *got_p = 0;
    if (link->error != HIER_OK) return link->error;
    if (mbox >= HIER_PML_MBOXES || link->held[mbox]) {
        HIER_ERROR("pml: a receive on mailbox %u %s", mbox, mbox < HIER_PML_MBOXES ? "whose last message is still held"
                                                                             : "the link does not have");
        return hier_pml_fail(link, HIER_ERR_INVALID_ARG);
    }
    hier_pml_buf_t *b = &link->recv[mbox];
    if (!b->req) {
        hier_status_t st = hier_pml_post(link, mbox, expect);
        if (st != HIER_OK) return st;
    }
    int done = link->ops->test(b->req, &got);
    if (done == 0) return HIER_OK;
    b->req = NULL;
    hier_status_t st = hier_pml_take(link, mbox, done, got, msg);
    *got_p = st == HIER_OK;
    return st;
}

static hier_status_t hier_pml_release(void *l, hier_link_msg_t *msg)
{
    hier_pml_t *link = l;
    hier_pml_buf_t *b = msg->held;
    link->held[b - link->recv] = 0;
    return HIER_OK;
}

static void hier_pml_report(const void *l, const char *why)
{
    const hier_pml_t *link = l;
    unsigned inflight = 0;
    for (unsigned k = 0; k < HIER_PML_SENDS; k++) inflight += link->send[k].req != NULL;
    HIER_ERROR("pml link to rank %d, %s: sent %llu (%u in flight), received %llu, receives posted on mailboxes "
               "%s%s%s%s, error %d", link->peer, why, (unsigned long long)link->sent, inflight,
               (unsigned long long)link->received, link->recv[0].req ? "0 " : "", link->recv[1].req ? "1 " : "",
               link->recv[2].req ? "2 " : "", link->recv[3].req ? "3" : "", (int)link->error);
}

/* (Open MPI's progress moves the PML: the waits run it) */
static hier_status_t hier_pml_poll(hier_fabric_t *fab)
{
    (void)fab;
    return HIER_OK;
}

/* Open MPI's progress every turn (it is what moves these messages), the
 * CPU yielded past the spin. */
static hier_status_t hier_pml_wait_turn(hier_fabric_t *fab, void (*progress)(void), int spin, unsigned every, unsigned turn,
                                        uint64_t *still_since, const char *what)
{
    (void)fab;
    (void)every;
    if (progress) progress();
    if (spin && turn >= (unsigned)spin) sched_yield();
    return hier_link_clock(turn, still_since, what);
}

const hier_link_ops_t hier_link_pml = {
    .name = "pml",
    .segment = hier_pml_segment,
    .try_send = hier_pml_try_send,
    .sent_done = hier_pml_sent_done,
    .status = hier_pml_status,
    .try_recv = hier_pml_try_recv,
    .release = hier_pml_release,
    .report = hier_pml_report,
    .poll = hier_pml_poll,
    .wait_turn = hier_pml_wait_turn,
};
