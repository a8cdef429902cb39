/* Links over Open MPI's point-to-point (net/hier_pml.c) against an
 * in-memory PML: one mailbox's messages in order and apart from the others', a
 * longer message than awaited is a mismatch that ends the link, sends in
 * flight bounded, a closed link's sends in flight kept until the PML is
 * done with them, failed requests. (The executor over these links:
 * test_pipe.) */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "net/hier_pml.h"

typedef struct fmsg {
    struct fmsg *next;
    size_t len;
    int *sender_done;
    uint8_t data[];
} fmsg_t;

typedef struct {
    int send, done, fail;
    uint32_t mbox;
    void *buf;
    size_t len;
} freq_t;

static fmsg_t *queue[HIER_PML_MBOXES]; /* messages to this end, by mailbox, oldest first */
static int hold_sends;                /* sends complete only when matched */
static int fail_next;                 /* the next request fails */
static int live;                      /* requests not freed */

static int f_isend(const void *buf, size_t len, int to, uint32_t mbox, void *arg, void **req_p)
{
    (void)to, (void)arg;
    freq_t *r = calloc(1, sizeof(*r));
    fmsg_t *m = malloc(sizeof(*m) + len);
    cr_assert(r && m);
    *r = (freq_t){.send = 1, .done = !hold_sends, .fail = fail_next};
    fail_next = 0;
    *m = (fmsg_t){.len = len, .sender_done = hold_sends ? &r->done : NULL};
    memcpy(m->data, buf, len);
    fmsg_t **p = &queue[mbox];
    while (*p) p = &(*p)->next;
    *p = m;
    live++;
    *req_p = r;
    return 0;
}

static int f_irecv(void *buf, size_t len, int from, uint32_t mbox, void *arg, void **req_p)
{
    (void)from, (void)arg;
    freq_t *r = calloc(1, sizeof(*r));
    cr_assert(r);
    *r = (freq_t){.mbox = mbox, .buf = buf, .len = len};
    live++;
    *req_p = r;
    return 0;
}

static int f_test(void *req, size_t *len_p)
{
    freq_t *r = req;
    int ret = 1;
    if (r->send && !r->done) return 0;
    if (!r->send) {
        fmsg_t *m = queue[r->mbox];
        if (!m) return 0;
        queue[r->mbox] = m->next;
        if (m->sender_done) *m->sender_done = 1;
        ret = m->len > r->len ? HIER_PML_TRUNCATED : 1;
        *len_p = m->len > r->len ? r->len : m->len;
        memcpy(r->buf, m->data, *len_p);
        free(m);
    }
    if (r->fail) ret = -1;
    free(r);
    live--;
    return ret;
}

static void f_cancel(void *req)
{
    free(req);
    live--;
}

static const hier_pml_ops_t ops = {.isend = f_isend, .irecv = f_irecv, .test = f_test, .cancel = f_cancel};

static void reset(void)
{
    for (int b = 0; b < HIER_PML_MBOXES; b++)
        while (queue[b]) {
            fmsg_t *m = queue[b];
            queue[b] = m->next;
            free(m);
        }
    hold_sends = fail_next = 0;
}

static hier_sig_t sig_of(uint64_t n)
{
    return hier_sig_make(HIER_COLL_ALLREDUCE, n, HIER_DT_INT32, HIER_OP_SUM, 0, 1);
}

static hier_pml_t *pml_open(int peer, size_t seg)
{
    hier_pml_t *link = malloc(hier_pml_size());
    cr_assert_not_null(link);
    hier_pml_init(link, &ops, peer, seg);
    return link;
}

static void pml_close(hier_pml_t *link)
{
    hier_pml_fini(link);
    free(link);
}

static void send1(void *link, uint32_t mbox, uint32_t tag, const void *data, size_t len)
{
    int sent = 0;
    uint64_t msg;
    cr_assert_eq(hier_link_pml.try_send(link, mbox, tag, data, len, NULL, sig_of(len), &sent, &msg), HIER_OK);
    cr_assert(sent);
    cr_assert(hier_link_pml.sent_done(link, msg)); /* (copied: the caller's bytes are free at once) */
}

static int recv1(void *link, uint32_t mbox, size_t expect, hier_link_msg_t *m)
{
    int got = 0;
    cr_assert_eq(hier_link_pml.try_recv(link, mbox, expect, m, &got), HIER_OK);
    return got;
}

Test(pml, messages_of_a_mailbox_in_order_and_mailboxes_apart)
{
    hier_pml_t *link;
    hier_link_msg_t m;
    reset();
    link = pml_open(1, 4096);
    cr_assert_eq(hier_link_pml.segment(link, 1 << 20), 4096);
    send1(link, 1, 7, "mbox #1", 8);
    cr_assert(!recv1(link, 0, 6, &m), "mailbox 0 took mailbox 1's message");
    send1(link, 0, 3, "first", 6);
    send1(link, 0, 4, "second", 7);
    cr_assert(recv1(link, 0, 6, &m));
    cr_assert_eq(m.len, 6);
    cr_assert_eq(m.tag, 3);
    cr_assert(hier_sig_same(m.sig, sig_of(6)));
    cr_assert_str_eq(m.data, "first");
    hier_link_msg_t again;
    int got;
    cr_assert_eq(hier_link_pml.try_recv(link, 0, 7, &again, &got), HIER_ERR_INVALID_ARG,
                 "a second message taken while the first is held");
    pml_close(link);
    link = pml_open(1, 4096);
    send1(link, 0, 4, "second", 7); /* (a fresh link: its mailbox is free) */
    cr_assert(recv1(link, 0, 7, &m));
    cr_assert_str_eq(m.data, "second");
    cr_assert_eq(hier_link_pml.release(link, &m), HIER_OK);
    cr_assert(recv1(link, 1, 8, &m));
    cr_assert_str_eq(m.data, "mbox #1");
    cr_assert_eq(m.tag, 7);
    hier_link_pml.release(link, &m);
    cr_assert(recv1(link, 0, 7, &m)); /* the first link's "second", still queued */
    hier_link_pml.release(link, &m);
    cr_assert(!recv1(link, 0, 16, &m));
    pml_close(link); /* (its posted receive cancelled) */
    hier_pml_finalize();
    cr_assert_eq(live, 0, "%d requests left", live);
}

Test(pml, a_longer_message_than_awaited_is_a_mismatch)
{
    hier_pml_t *link;
    hier_link_msg_t m;
    int got;
    reset();
    link = pml_open(1, 4096);
    send1(link, 0, 1, "twelve bytes", 13);
    cr_assert_eq(hier_link_pml.try_recv(link, 0, 8, &m, &got), HIER_ERR_MISMATCH);
    cr_assert(!got);
    cr_assert_eq(hier_link_pml.status(link), HIER_ERR_MISMATCH);
    cr_assert_eq(hier_link_pml.try_recv(link, 0, 16, &m, &got), HIER_ERR_MISMATCH, "the link ended");
    uint64_t msg;
    int sent;
    cr_assert_eq(hier_link_pml.try_send(link, 0, 2, "x", 1, NULL, sig_of(1), &sent, &msg), HIER_ERR_MISMATCH);
    pml_close(link);
    hier_pml_finalize();
    cr_assert_eq(live, 0);
}

Test(pml, sends_in_flight_are_bounded_and_outlive_their_link)
{
    hier_pml_t *link;
    hier_link_msg_t m;
    int sent;
    uint64_t msg;
    char data[64] = "payload";
    reset();
    hold_sends = 1;
    link = pml_open(1, 4096);
    for (int k = 0; k < HIER_PML_SENDS; k++) send1(link, 0, (uint32_t)k, data, sizeof(data));
    cr_assert_eq(hier_link_pml.try_send(link, 0, 99, data, sizeof(data), NULL, sig_of(1), &sent, &msg), HIER_OK);
    cr_assert(!sent, "a send past %d in flight", HIER_PML_SENDS);
    cr_assert(recv1(link, 0, sizeof(data), &m)); /* matches the oldest: its buffer is free */
    hier_link_pml.release(link, &m);
    send1(link, 0, 99, data, sizeof(data));
    cr_assert_gt(hier_pml_bytes(link), HIER_PML_SENDS * sizeof(data));
    pml_close(link); /* eight sends still in flight: their buffers stay */
    cr_assert_eq(live, HIER_PML_SENDS);
    hold_sends = 0;
    hier_pml_t *other;
    other = pml_open(2, 4096);
    for (int k = 0; k < HIER_PML_SENDS; k++) {
        cr_assert(recv1(other, 0, sizeof(data), &m));
        hier_link_pml.release(other, &m);
    }
    pml_close(other); /* reaps the first link's sends, matched now */
    cr_assert_eq(live, 0, "%d requests left", live);
    hier_pml_finalize();
}

Test(pml, a_failed_send_ends_the_link)
{
    hier_pml_t *link;
    int sent;
    uint64_t msg;
    reset();
    fail_next = 1;
    link = pml_open(1, 64);
    for (int k = 0; k < HIER_PML_SENDS; k++) send1(link, 0, (uint32_t)k, "x", 1);
    cr_assert_eq(hier_link_pml.try_send(link, 0, 9, "x", 1, NULL, sig_of(1), &sent, &msg), HIER_ERR_INTERNAL);
    cr_assert_eq(hier_link_pml.try_send(link, 0, 9, "y", 100, NULL, sig_of(1), &sent, &msg), HIER_ERR_INTERNAL);
    pml_close(link);
    link = pml_open(1, 64);
    cr_assert_eq(hier_link_pml.try_send(link, 0, 9, "y", 100, NULL, sig_of(1), &sent, &msg), HIER_ERR_INVALID_ARG,
                 "a message longer than a segment");
    pml_close(link);
    reset();
    hier_pml_finalize();
}
