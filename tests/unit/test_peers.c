/* Channels shared by communicators: mailboxes, messages parked in place, releases in ring order, the
 * connection handshake between processes, and the executor refusing a
 * message that is not the one its schedule expects. Two forked processes
 * over the tcp and shm providers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>
#include <unistd.h>

#include "chan_wait.h"
#include "exec/hier_net_exec.h"
#include "fork_pair.h"
#include "net/hier_peers.h"

static const char *const providers[] = {"tcp", "shm"};

/* Rank 0 sends 300 messages, every third to mailbox 2, the others to mailbox 1;
 * rank 1 takes mailbox 2's first, then mailbox 1's: each mailbox's come in order, the
 * ones in between are set aside, and their slots freed (the sender, on 4
 * slots, would stall otherwise). */
static int mboxes(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch;
    int ret = chan_pair(me, x, prov, 4, 64, &fab, &ch);
    if (ret) return ret;
    if (me == 0) {
        for (uint32_t i = 0; i < 300; i++)
            if (tchan_send(fab, ch, i % 3 == 0 ? 2 : 1, i, &i, sizeof(i), NULL) != HIER_OK) return 14;
    } else {
        for (int mbox = 2; mbox >= 1; mbox--)
            for (uint32_t i = 0; i < 300; i++) {
                if ((i % 3 == 0) != (mbox == 2)) continue;
                hier_link_msg_t m;
                uint32_t v;
                if (tchan_recv(fab, ch, (uint32_t)mbox, &m) != HIER_OK) return 20;
                memcpy(&v, m.data, sizeof(v));
                if (m.tag != i || v != i || m.len != sizeof(v)) return 21;
                if (hier_chan_release(ch, &m) != HIER_OK) return 22;
            }
        if (hier_chan_set_aside(ch) < 150) return 23; /* mailbox 1's, found on the way to mailbox 2's */
    }
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

/* Two mailboxes read alternately against their arrival (a communicator's two
 * chunks in flight): rank 0 sends pairs (mailbox 1, mailbox 2), rank 1 asks mailbox 2
 * first each time. Mailbox 1's message waits parked in its slot and is taken
 * there: none is copied out, every value and tag right, and the sender
 * never stalls for good on 4 slots. */
static int parked(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch;
    int ret = chan_pair(me, x, prov, 4, 64, &fab, &ch);
    if (ret) return ret;
    if (me == 0) {
        for (uint32_t i = 0; i < 200; i++)
            if (tchan_send(fab, ch, 1 + i % 2, i, &i, sizeof(i), NULL) != HIER_OK) return 14;
    } else {
        for (uint32_t i = 0; i < 200; i += 2)
            for (int k = 1; k >= 0; k--) { /* (mailbox 2's, i + 1, then mailbox 1's, i) */
                hier_link_msg_t m;
                uint32_t v, want = i + (uint32_t)k;
                if (tchan_recv(fab, ch, (uint32_t)(1 + k), &m) != HIER_OK) return 20;
                memcpy(&v, m.data, sizeof(v));
                if (m.tag != want || v != want) return 21;
                if (hier_chan_release(ch, &m) != HIER_OK) return 22;
            }
        if (hier_chan_set_aside(ch) != 0) return 23; /* (taken where they landed) */
    }
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

/* A message taken in place and not released keeps the sender off its
 * slot, though a later one was released: rank 1 takes m0 (mailbox 1) and m1
 * (mailbox 2), releases m1 only; rank 0 cannot send m2 into 2 slots; m0's bytes
 * stay intact; released, both slots free at once. */
static int held(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch;
    uint32_t v[3] = {0xaaaa0000u, 0xbbbb0001u, 0xcccc0002u};
    int ret = chan_pair(me, x, prov, 2, 64, &fab, &ch);
    if (ret) return ret;
    if (me == 0) {
        if (tchan_send(fab, ch, 1, 0, &v[0], 4, NULL) || tchan_send(fab, ch, 2, 1, &v[1], 4, NULL)) return 10;
        if (wait_stage(x, 1, 5, NULL, 20)) return 11; /* m1 released, m0 held */
        for (double end = now() + 0.3; now() < end;) {
            int sent;
            if (hier_chan_progress(fab) != HIER_OK) return 12;
            if (hier_chan_try_send(ch, 1, 2, &v[2], 4, &sent) != HIER_OK || sent) return 13; /* no room yet */
        }
        atomic_store(&x->stage[0], 6);
        if (tchan_send(fab, ch, 1, 2, &v[2], 4, NULL) != HIER_OK) return 14; /* once m0 is released */
    } else {
        hier_link_msg_t m0, m1, m2;
        if (tchan_recv(fab, ch, 1, &m0) || tchan_recv(fab, ch, 2, &m1)) return 20;
        if (hier_chan_release(ch, &m1) != HIER_OK) return 21;
        atomic_store(&x->stage[1], 5);
        if (wait_stage(x, 0, 6, fab, 20)) return 22;
        uint32_t got;
        memcpy(&got, m0.data, 4);
        if (got != v[0]) return 23; /* not overwritten */
        if (hier_chan_release(ch, &m0) != HIER_OK) return 24;
        if (tchan_recv(fab, ch, 1, &m2) != HIER_OK) return 25;
        memcpy(&got, m2.data, 4);
        if (got != v[2] || hier_chan_release(ch, &m2) != HIER_OK) return 26;
    }
    atomic_store(&x->stage[me], 7);
    if (wait_stage(x, !me, 7, fab, 30)) return 30;
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

/* Both processes learn each other's address; `initiators` of them ask for
 * the channel (both: at the same time), the other only polls. Exactly one
 * channel results, and 100 messages go each way through it. */
static int handshake(int me, xchg_t *x, const char *prov, int initiators)
{
    hier_fabric_t *fab = open_fab(prov);
    hier_fabric_peer_t unused;
    if (!fab || connect_pair(me, x, fab, &unused)) return 10;
    hier_peers_configure((uint64_t)me + 1, 4, 4096);
    hier_peer_t *p = hier_peers_get((uint64_t)!me + 1);
    if (!p || hier_peer_learn(fab, p, x->addr[!me], HIER_FABRIC_ADDR_MAX) != HIER_OK) return 11;
    atomic_store(&x->stage[me], 2);
    if (wait_stage(x, !me, 2, fab, 20)) return 12;
    hier_chan_t *ch = NULL;
    for (double end = now() + 20; !ch; usleep(50)) {
        if (now() > end) return 13;
        if (me < initiators && hier_peer_chan(fab, p, &ch) != HIER_OK) return 14;
        if (!ch) ch = hier_peer_connected(p);
        if (hier_chan_progress(fab) != HIER_OK) return 15;
    }
    for (uint32_t i = 0; i < 100; i++) {
        hier_link_msg_t m;
        uint32_t v = i * 2 + (uint32_t)me, got;
        if (tchan_send(fab, ch, 0, i, &v, sizeof(v), NULL) != HIER_OK) return 20;
        if (tchan_recv(fab, ch, 0, &m) != HIER_OK) return 21;
        memcpy(&got, m.data, sizeof(got));
        if (got != i * 2 + (uint32_t)!me || m.tag != i || hier_chan_release(ch, &m) != HIER_OK) return 22;
    }
    size_t known, connected;
    hier_peers_count(&known, &connected);
    if (known != 1 || connected != 1) return 23;
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    hier_peers_clear();
    hier_fabric_close(fab);
    return 0;
}

static int both_ask(int me, xchg_t *x, const char *prov)
{
    return handshake(me, x, prov, 2);
}

static int one_asks(int me, xchg_t *x, const char *prov)
{
    return handshake(me, x, prov, 1);
}

/* The executor takes only the message its step names: rank 0 sends tag 5
 * where rank 1's schedule expects tag 6. */
static int wrong_tag(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch, *chans[2] = {NULL, NULL};
    uint8_t buf[256] = {0};
    int ret = chan_pair(me, x, prov, 4, 256, &fab, &ch);
    if (ret) return ret;
    chans[!me] = ch;
    hier_exec_bufs_t bufs = {.rbuf = buf, .esize = 1};
    hier_net_send_t sendq[1];
    void *links[2] = {chans[0], chans[1]};
    hier_net_exec_t nx = {.link = &hier_link_chan, .fab = fab, .links = links, .bufs = &bufs,
                          .run[0].q = {.q = sendq, .cap = 1}};
    hier_step_t step = {.op = me == 0 ? HIER_STEP_NET_SEND : HIER_STEP_NET_RECV, .peer = (uint32_t)!me,
                        .tag = me == 0 ? 5 : 6, .len = 100, .src = {.kind = HIER_BUF_RECV},
                        .dst = {.kind = HIER_BUF_RECV}};
    hier_status_t st = hier_net_exec_start(&nx, 0, &step, 1);
    if (st == HIER_OK) st = hier_net_exec_finish(&nx, 0);
    if (me == 0 ? st != HIER_OK : st != HIER_ERR_INTERNAL) return 20;
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

ParameterizedTestParameters(peers, channel_behaviour)
{
    static int p[] = {0, 1};
    return cr_make_param_array(int, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(int *p, peers, channel_behaviour, .timeout = 120)
{
    const char *prov = providers[*p];
    cr_assert_eq(run_pair(mboxes, prov), 2, "%s: mailboxes", prov);
    cr_assert_eq(run_pair(parked, prov), 2, "%s: parked in place", prov);
    cr_assert_eq(run_pair(held, prov), 2, "%s: a held message", prov);
    cr_assert_eq(run_pair(both_ask, prov), 2, "%s: both ask at once", prov);
    cr_assert_eq(run_pair(one_asks, prov), 2, "%s: one asks", prov);
    cr_assert_eq(run_pair(wrong_tag, prov), 2, "%s: a wrong tag", prov);
}
