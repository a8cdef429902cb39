/* The libfabric transport alone, with two forked processes over TCP (the
 * native endpoint and tcp;ofi_rxm: remote addresses are offsets, keys ours) and shm (virtual addresses,
 * provider keys): writes with immediates land where they should, a bad key
 * delivers nothing, a peer that left gives a bounded, clean outcome. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dlfcn.h>
#include <stdio.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chan_wait.h"
#include "fabric_reap.h"
#include "fork_pair.h"
#include "base/hier_lock.h"
#include "net/hier_chan.h"
#include "net/hier_chan_impl.h"
#include "exec/hier_net_exec.h"
#include "exec/hier_reduce.h"
#include "sched/hier_sched_net.h"
#include "net/hier_fabric.h"
#include "net/hier_dev_mr.h"
#include "net/hier_fi.h"

#include <rdma/fi_domain.h>

/* Open, connect and register a buffer of `bytes`: 0, or a code to exit with. */
static int setup_pair(int me, xchg_t *x, const char *prov, size_t bytes, hier_fabric_t **fab_p,
                      hier_fabric_peer_t *peer_p, uint8_t **buf_p, hier_fabric_mr_t **mr_p)
{
    if (!(*fab_p = open_fab(prov)) || connect_pair(me, x, *fab_p, peer_p)) return 10;
    if (!(*buf_p = calloc(1, bytes))) return 11;
    return hier_fabric_mr_reg(*fab_p, *buf_p, bytes, mr_p) == HIER_OK ? 0 : 12;
}

#define TARGET_BYTES (1 << 20)
static const uint64_t offs[3] = {0, 4096, 700001};
static const size_t lens[3] = {100, 65536, 1000};
static unsigned contexts_seen; /* bit k: a completion handed back &offs[k], the context its write was given */

static void count_done(const hier_fabric_event_t *ev, size_t n, int *done_p)
{
    for (size_t i = 0; done_p && i < n; i++) {
        if (ev[i].kind != HIER_FABRIC_EV_WRITE_DONE) continue;
        (*done_p)++;
        for (int k = 0; k < 3; k++) contexts_seen |= (unsigned)(ev[i].context == (const void *)&offs[k]) << k;
    }
}

/* Post a write, polling while the provider has no room (until `end`);
 * completions polled meanwhile are counted into *done_p (NULL: dropped). */
static hier_status_t write_polling(hier_fabric_t *fab, hier_fabric_peer_t peer, const void *src, size_t len,
                                   hier_fabric_mr_t *mr, hier_fabric_rkey_t rkey, uint64_t off, uint32_t data,
                                   void *context, double end, int *done_p)
{
    for (;;) {
        int posted;
        hier_fabric_event_t ev[8];
        size_t n;
        hier_status_t st = hier_fabric_try_write(fab, peer, src, len, mr, rkey, off, data, context, &posted);
        if (st != HIER_OK || posted) return st;
        if (now() > end) return HIER_ERR_TIMEOUT;
        if ((st = hier_fabric_poll(fab, ev, 8, &n)) != HIER_OK) return st;
        count_done(ev, n, done_p);
    }
}

/* Both done: wait for the other (still polling: it may need our progress), release. */
static int finish_pair(int me, xchg_t *x, hier_fabric_t *fab, hier_fabric_mr_t *mr, uint8_t *buf)
{
    atomic_store(&x->stage[me], 4);
    wait_stage(x, !me, 4, fab, 20);
    hier_fabric_mr_dereg(mr);
    hier_fabric_close(fab);
    free(buf);
    return 0;
}

static int basic(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_fabric_peer_t peer;
    hier_fabric_mr_t *mr;
    hier_fabric_event_t ev[8];
    uint8_t *buf;
    size_t n;
    int rc = setup_pair(me, x, prov, TARGET_BYTES, &fab, &peer, &buf, &mr);
    if (rc) return rc;
    if (me == 1) { /* target */
        x->rkey = hier_fabric_mr_rkey(mr);
        atomic_store(&x->stage[1], 2);
        unsigned seen = 0;
        for (double end = now() + 20; seen != 0xe && now() < end;) {
            if (hier_fabric_poll(fab, ev, 8, &n) != HIER_OK) return 13;
            for (size_t i = 0; i < n; i++)
                if (ev[i].kind == HIER_FABRIC_EV_REMOTE) seen |= 1u << ev[i].data;
        }
        if (seen != 0xe) return 14;
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < lens[k]; i++)
                if (buf[offs[k] + i] != (uint8_t)(k * 50 + i % 199 + 1)) return 15;
        if (buf[4095] != 0 || buf[offs[2] - 1] != 0) return 16; /* nothing outside */
        atomic_store(&x->stage[1], 3);
    } else { /* initiator */
        if (wait_stage(x, 1, 2, fab, 20)) return 20;
        int done = 0;
        for (int k = 0; k < 3; k++) {
            uint8_t *src = buf + 200000 * (size_t)k;
            for (size_t i = 0; i < lens[k]; i++) src[i] = (uint8_t)(k * 50 + i % 199 + 1);
            if (write_polling(fab, peer, src, lens[k], mr, x->rkey, offs[k], (uint32_t)k + 1, (void *)&offs[k],
                              now() + 20, &done) != HIER_OK)
                return 21;
        }
        for (double end = now() + 20; done < 3 && now() < end;) {
            if (hier_fabric_poll(fab, ev, 8, &n) != HIER_OK) return 22;
            count_done(ev, n, &done);
        }
        if (done != 3) return 23;
        if (contexts_seen != 7) return 25; /* each completion hands back its own write's context */
        if (wait_stage(x, 1, 3, fab, 20)) return 24; /* keep polling until the target saw it all */
    }
    return finish_pair(me, x, fab, mr, buf);
}

static int bad_key(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_fabric_peer_t peer;
    hier_fabric_mr_t *mr;
    hier_fabric_event_t ev[8];
    uint8_t *buf;
    size_t n;
    int rc = setup_pair(me, x, prov, 65536, &fab, &peer, &buf, &mr);
    if (rc) return rc;
    if (me == 1) {
        x->rkey = hier_fabric_mr_rkey(mr);
        atomic_store(&x->stage[1], 2);
        for (double end = now() + 2; now() < end;) { /* nothing may arrive */
            if (hier_fabric_poll(fab, ev, 8, &n) != HIER_OK) continue; /* an error report is fine */
            for (size_t i = 0; i < n; i++)
                if (ev[i].kind == HIER_FABRIC_EV_REMOTE) return 30;
        }
        for (size_t i = 0; i < 65536; i++)
            if (buf[i]) return 31;
    } else {
        if (wait_stage(x, 1, 2, fab, 20)) return 20;
        memset(buf, 7, 4096);
        hier_fabric_rkey_t bad = x->rkey;
        bad.key[0] ^= 0x5a5a5a5aull;
        write_polling(fab, peer, buf, 4096, mr, bad, 0, 9, (void *)&offs[0], now() + 2, NULL); /* fails now or later */
        for (double end = now() + 2; now() < end;) hier_fabric_poll(fab, ev, 8, &n);
    }
    return finish_pair(me, x, fab, mr, buf);
}

static int peer_leaves(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_fabric_peer_t peer;
    hier_fabric_mr_t *mr;
    hier_fabric_event_t ev[8];
    uint8_t *buf;
    size_t n;
    int rc = setup_pair(me, x, prov, 65536, &fab, &peer, &buf, &mr);
    if (rc) return rc;
    if (me == 1) {
        x->rkey = hier_fabric_mr_rkey(mr);
        atomic_store(&x->stage[1], 2);
        _exit(0); /* gone without a word */
    }
    if (wait_stage(x, 1, 2, NULL, 20)) return 20;
    usleep(200000);
    double start = now();
    for (int i = 0; i < 50; i++) /* (a write with no room for 3 s counts as failed) */
        if (write_polling(fab, peer, buf, 4096, mr, x->rkey, 0, (uint32_t)i, (void *)&offs[0], start + 3, NULL) !=
            HIER_OK)
            break;
    for (double end = now() + 3; now() < end;)
        if (hier_fabric_poll(fab, ev, 8, &n) != HIER_OK) break; /* an error is the expected outcome */
    if (now() - start > 10) return 40; /* bounded, whatever the provider does */
    hier_fabric_mr_dereg(mr);
    hier_fabric_close(fab);
    free(buf);
    return 0;
}


/* A long stream through an 8-slot channel, with a receiver that stops now
 * and then: the sender must run out of credit and wait, and every message
 * must arrive intact and in order. */
#define STREAM_MESSAGES 20000
static int stream(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch;
    uint8_t msg[1024];
    int ret = chan_pair(me, x, prov, 8, sizeof(msg), &fab, &ch);
    if (ret) return ret;
    if (me == 0) {
        for (int i = 0; i < STREAM_MESSAGES; i++) {
            size_t len = (size_t)(i * 37 % 1000) + 1;
            for (size_t j = 0; j < len; j++) msg[j] = (uint8_t)(i + j * 3);
            if (tchan_send(fab, ch, 0, (uint32_t)i, msg, len, &x->waited) != HIER_OK) return 14;
        }
    } else {
        for (int i = 0; i < STREAM_MESSAGES; i++) {
            hier_link_msg_t m;
            if (tchan_recv(fab, ch, 0, &m) != HIER_OK) return 20;
            const uint8_t *p = m.data;
            if (m.len != (size_t)(i * 37 % 1000) + 1 || m.tag != (uint32_t)i) return 21;
            for (size_t j = 0; j < m.len; j++)
                if (p[j] != (uint8_t)(i + j * 3)) return 22;
            if (i % 2500 == 0) usleep(20000); /* a slow consumer: credits run out */
            if (hier_chan_release(ch, &m) != HIER_OK) return 23;
        }
    }
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    if (me == 0 && x->waited == 0) return 31; /* the test must have exhausted the credits */
    if (me == 0 && !strcmp(prov, PAIR_RAILS)) { /* striped: both rails carried about half */
        uint64_t bytes[2] = {0, 0};
        if (hier_fabric_nrails(fab) < 2) {
            fprintf(stderr, "stream over %s: one network interface here, no striping to test\n", prov);
        } else {
            for (unsigned j = 0; j < 2; j++) {
                const char *name;
                int nic, near;
                hier_fabric_rail_info(fab, j, &name, &nic, &near, &bytes[j]);
            }
            if (bytes[0] < 1000000 || bytes[1] < 1000000 || bytes[0] > 2 * bytes[1] || bytes[1] > 2 * bytes[0])
                return 33;
        }
    }
    if (me == 1 && hier_chan_credit_writes(ch) == 0) return 32; /* one way: credit needs writes of its own */
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

/* Both ways in turn, as recursive doubling does: every message carries
 * the credit for the other direction, so no credit write is ever needed
 * (if the credit were not taken from the headers, the senders would stall
 * for good; if it were not put there, credit writes would be counted). */
#define EXCHANGE_ROUNDS 3000
static int exchange(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch;
    uint32_t v;
    int ret = chan_pair(me, x, prov, 4, 64, &fab, &ch);
    if (ret) return ret;
    uint32_t next_in = 0, out = 0;
    for (int i = 0; i < EXCHANGE_ROUNDS; i++) {
        hier_link_msg_t m;
        v = out++ * 2 + (uint32_t)me;
        if (tchan_send(fab, ch, 0, 0, &v, sizeof(v), NULL) != HIER_OK) return 14;
        if (tchan_recv(fab, ch, 0, &m) != HIER_OK) return 20;
        memcpy(&v, m.data, sizeof(v));
        if (m.len != sizeof(v) || v != next_in++ * 2 + (uint32_t)!me) return 21;
        if (hier_chan_release(ch, &m) != HIER_OK) return 22;
    }
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    if (hier_chan_credit_writes(ch) != 0) return 31;
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

/* A credit return that lands after the sender closed its channel (the
 * receiver released the last messages late) must not break the connection
 * that other channels between the two processes share: rank 0 sends 2
 * messages on channel A and closes it; then rank 1 takes them, which writes
 * a credit return into rank 0's closed channel; then 200 messages go each
 * way on channel B. (A write to a deregistered key made tcp drop the
 * connection, with B's messages on it.) */
/* wait_stage, dispatching what lands to the channels (a raw poll drops it). */
static int wait_stage_chan(xchg_t *x, int other, int v, hier_fabric_t *fab, double seconds)
{
    double end = now() + seconds;
    while (atomic_load(&x->stage[other]) < v) {
        if (hier_chan_progress(fab) != HIER_OK || now() > end) return -1;
        usleep(100);
    }
    return 0;
}

static int late_credit(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab = open_fab(prov);
    hier_fabric_peer_t peer;
    hier_chan_t *ch[2];
    if (!fab || connect_pair(me, x, fab, &peer)) return 10;
    for (int k = 0; k < 2; k++) { /* channels A and B, one exchange area used twice */
        if (hier_chan_open(fab, 4, 64, &ch[k]) != HIER_OK) return 11;
        hier_chan_info(ch[k], &x->chan[me]);
        atomic_store(&x->stage[me], 2 + 2 * k);
        if (wait_stage_chan(x, !me, 2 + 2 * k, fab, 20)) return 12;
        hier_chan_connect(ch[k], peer, &x->chan[!me]);
        atomic_store(&x->stage[me], 3 + 2 * k);
        if (wait_stage_chan(x, !me, 3 + 2 * k, fab, 20)) return 13;
    }
    hier_chan_t *a = ch[0], *b = ch[1];
    uint32_t v;
    hier_link_msg_t m;
    if (me == 0) {
        for (v = 0; v < 2; v++)
            if (tchan_send(fab, a, 0, 0, &v, sizeof(v), NULL) != HIER_OK) return 20;
        hier_chan_close(a);
        atomic_store(&x->stage[me], 6);
    } else {
        if (wait_stage_chan(x, !me, 6, fab, 20)) return 21;
        for (uint32_t i = 0; i < 2; i++) {
            if (tchan_recv(fab, a, 0, &m) != HIER_OK) return 22;
            if (hier_chan_release(a, &m) != HIER_OK) return 23; /* the second writes a credit return */
        }
        hier_chan_close(a);
    }
    for (uint32_t i = 0; i < 200; i++) {
        v = i * 2 + (uint32_t)me;
        if (tchan_send(fab, b, 0, 0, &v, sizeof(v), NULL) != HIER_OK) return 30;
        if (tchan_recv(fab, b, 0, &m) != HIER_OK) return 31;
        memcpy(&v, m.data, sizeof(v));
        if (v != i * 2 + (uint32_t)!me) return 32;
        if (hier_chan_release(b, &m) != HIER_OK) return 33;
    }
    atomic_store(&x->stage[me], 7);
    if (wait_stage_chan(x, !me, 7, fab, 30)) return 40;
    hier_chan_close(b);
    hier_fabric_close(fab);
    return 0;
}

/* Past 2^14 messages, several times (the immediate carries 14 bits of the
 * message number) through a channel of 3 slots, not a power of two: the
 * receiver must place each landing by its whole number, not by the 14 bits. */
#define WRAP_MESSAGES ((1 << 17) + 3000)
static int wrap(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch;
    int ret = chan_pair(me, x, prov, 3, 64, &fab, &ch);
    if (ret) return ret;
    for (uint32_t i = 0; i < WRAP_MESSAGES; i++) {
        if (me == 0) {
            if (tchan_send(fab, ch, 0, 0, &i, sizeof(i), NULL) != HIER_OK) return 14;
            continue;
        }
        hier_link_msg_t m;
        uint32_t v;
        if (tchan_recv(fab, ch, 0, &m) != HIER_OK) return 20;
        memcpy(&v, m.data, sizeof(v));
        if (m.len != sizeof(v) || v != i) return 21;
        if (hier_chan_release(ch, &m) != HIER_OK) return 22;
    }
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

/* A provider that orders no writes (efa) may land an older credit return
 * after a newer one. The sender here, whenever a newer return has landed,
 * lands the one before it again, late, where that one was written (the
 * previous credit word), while the receiver, sending nothing back, returns
 * credit only by writes: the stream must still flow. (With one credit word
 * the late return went over the newer count and the stream stopped.) */
#define STALE_MESSAGES 3000
static int stale_credit(int me, xchg_t *x, const char *prov)
{
    hier_fabric_t *fab;
    hier_chan_t *ch;
    int ret = chan_pair(me, x, prov, 4, 64, &fab, &ch);
    if (ret) return ret;
    unsigned long overwritten = 0;
    uint64_t last_top = 0;
    double end = now() + 60;
    for (uint32_t i = 0; i < STALE_MESSAGES; i++) {
        if (me == 1) {
            hier_link_msg_t m;
            uint32_t v;
            if (tchan_recv(fab, ch, 0, &m) != HIER_OK) return 20;
            memcpy(&v, m.data, sizeof(v));
            if (v != i) return 21;
            if (hier_chan_release(ch, &m) != HIER_OK) return 22;
            continue;
        }
        for (int sent = 0; !sent;) {
            if (hier_chan_try_send(ch, 0, 0, &i, sizeof(i), &sent) != HIER_OK) return 14;
            if (sent) break;
            if (hier_chan_progress(fab) != HIER_OK) return 15;
            if (now() > end) return 16; /* stalled: credit that was returned never came back into use */
            hier_lock_take(); /* (the newest count; the test's to read and write, under the lock) */
            uint64_t *w = ch->credit_word, top = 0;
            size_t at = 0;
            for (size_t k = 0; k < HIER_CHAN_CREDIT_WORDS; k++)
                if (w[k] > top) top = w[at = k];
            if (top > last_top) { /* a newer return: the one seen before lands again, late, in its word */
                if (last_top) {
                    w[(at + HIER_CHAN_CREDIT_WORDS - 1) % HIER_CHAN_CREDIT_WORDS] = last_top;
                    overwritten++;
                }
                last_top = top;
            }
            hier_lock_drop();
        }
    }
    atomic_store(&x->stage[me], 4);
    if (wait_stage(x, !me, 4, fab, 30)) return 30;
    if (me == 0 && overwritten < 10) return 31; /* the test must have overwritten returns */
    hier_chan_close(ch);
    hier_fabric_close(fab);
    return 0;
}

Test(fabric, message_numbers_past_14_bits_with_3_slots, .timeout = 120)
{
    cr_assert_eq(run_pair(wrap, "shm"), 2);
}

/* Peer direct: rank 0 writes tagged blocks straight into memory rank 1
 * registered as device memory (FI_HMEM_SYSTEM: the test backend's kind),
 * in reverse order; rank 1 counts them by tag and finds every byte; rank 0
 * sees its writes complete while rank 1 keeps polling. */
#define DIRECT_BLOCK 65536
#define DIRECT_BLOCKS 3
static int direct(int me, xchg_t *x, const char *prov)
{
    hier_fabric_config_t cfg = fab_config(prov);
    cfg.hmem = 1;
    hier_fabric_t *fab;
    hier_fabric_peer_t peer;
    hier_chan_t *ch;
    hier_fabric_mr_t *mr;
    uint32_t counts[DIRECT_BLOCKS] = {0};
    uint8_t *buf = aligned_alloc(4096, DIRECT_BLOCK * DIRECT_BLOCKS);
    if (hier_fabric_open(&cfg, &fab) != HIER_OK || connect_pair(me, x, fab, &peer)) return 10;
    if (!hier_fabric_hmem(fab, FI_HMEM_SYSTEM)) return 0; /* a provider without FI_HMEM: nothing to test */
    if (hier_fabric_mr_reg_dev(fab, buf, DIRECT_BLOCK * DIRECT_BLOCKS, FI_HMEM_SYSTEM, 0, &mr) != HIER_OK) return 11;
    if (hier_chan_open(fab, 2, 64, &ch) != HIER_OK) return 12;
    hier_chan_direct_counts(ch, counts, DIRECT_BLOCKS);
    hier_chan_info(ch, &x->chan[me]);
    x->rkey = me == 1 ? hier_fabric_mr_rkey(mr) : x->rkey;
    for (size_t i = 0; i < DIRECT_BLOCK * DIRECT_BLOCKS; i++) buf[i] = me ? 0 : (uint8_t)(i * 7 + 1);
    atomic_store(&x->stage[me], 2);
    if (wait_stage(x, !me, 2, NULL, 20)) return 13;
    hier_chan_connect(ch, peer, &x->chan[!me]);
    double end = now() + 20;
    if (me == 0) {
        for (int b = DIRECT_BLOCKS - 1; b >= 0; b--)
            for (int posted = 0; !posted;) {
                if (hier_chan_try_write_direct(ch, buf + b * DIRECT_BLOCK, DIRECT_BLOCK, mr, x->rkey,
                                               (uint64_t)b * DIRECT_BLOCK, (uint32_t)b, &posted) != HIER_OK)
                    return 14;
                if (!posted && (hier_chan_progress(fab) != HIER_OK || now() > end)) return 16;
            }
        while (hier_chan_direct_pending(ch))
            if (hier_chan_progress(fab) != HIER_OK || now() > end) return 15;
    } else {
        for (int b = 0; b < DIRECT_BLOCKS; b++)
            while (counts[b] < 1)
                if (hier_chan_progress(fab) != HIER_OK || now() > end) return 20;
        for (size_t i = 0; i < DIRECT_BLOCK * DIRECT_BLOCKS; i++)
            if (buf[i] != (uint8_t)(i * 7 + 1)) return 21;
        for (int b = 0; b < DIRECT_BLOCKS; b++)
            if (counts[b] != 1) return 22;
    }
    atomic_store(&x->stage[me], 4);
    while (atomic_load(&x->stage[!me]) < 4) /* the writer may need our progress to complete */
        if (hier_chan_progress(fab) != HIER_OK || now() > end) return 30;
    hier_chan_close(ch);
    hier_fabric_mr_dereg(mr);
    hier_fabric_close(fab);
    free(buf);
    return 0;
}

/* Parameters cross into Criterion's worker processes by value: indexes, not pointers. */
static const char *const providers[] = {"tcp", "tcp;ofi_rxm", "shm", PAIR_RAILS};
static int provider_ids[] = {0, 1, 2, 3};
#define NPROVIDERS 4

/* One test per scenario, run once per provider. */
#define PAIR_TEST(name, body, seconds)                                                  \
    ParameterizedTestParameters(fabric, name)                                           \
    {                                                                                   \
        return cr_make_param_array(int, provider_ids, NPROVIDERS);                      \
    }                                                                                   \
    ParameterizedTest(int *p, fabric, name, .timeout = seconds)                         \
    {                                                                                   \
        cr_assert_eq(run_pair(body, providers[*p]), 2, "provider %s", providers[*p]);   \
    }

PAIR_TEST(writes_land_with_their_immediates, basic, 60)
PAIR_TEST(bad_key_delivers_nothing, bad_key, 60)
PAIR_TEST(peer_that_left_ends_cleanly, peer_leaves, 60)
PAIR_TEST(long_stream_waits_for_credit, stream, 120)
PAIR_TEST(exchange_returns_credit_in_messages, exchange, 120)
PAIR_TEST(late_credit_return_to_a_closed_channel_is_harmless, late_credit, 120)
PAIR_TEST(credit_return_landing_late_does_not_stall, stale_credit, 120)
PAIR_TEST(direct_writes_land_in_device_memory_by_tag, direct, 60)

/* efa-direct's rules kept on the providers here (coll_hier_fabric_profile
 * efa-direct): the endpoint opens under them (FI_CONTEXT2 offered, control
 * messages within the message limit), writes and credit flow as under the
 * default, and a write from unregistered memory is refused before it
 * reaches the provider (FI_MR_LOCAL), where the default profile lets the
 * provider take it. */
static int unregistered_write(hier_fabric_t *fab)
{
    uint8_t addr[HIER_FABRIC_ADDR_MAX], src[64] = {0};
    size_t len = sizeof(addr);
    hier_fabric_peer_t self;
    hier_fabric_rkey_t rkey = {0};
    int posted = 0;
    if (hier_fabric_addr(fab, addr, &len) != HIER_OK || hier_fabric_insert(fab, addr, &self) != HIER_OK) return -1;
    return hier_fabric_try_write(fab, self, src, sizeof(src), NULL, rkey, 0, 1, NULL, &posted) == HIER_ERR_INTERNAL &&
           !posted;
}

ParameterizedTestParameters(fabric, efa_direct_rules_hold_on_every_provider)
{
    return cr_make_param_array(int, provider_ids, NPROVIDERS);
}
ParameterizedTest(int *p, fabric, efa_direct_rules_hold_on_every_provider, .timeout = 180)
{
    fab_profile = "efa-direct";
    hier_fabric_t *fab = open_fab(providers[*p]);
    cr_assert(fab, "provider %s does not open under efa-direct's rules", providers[*p]);
    cr_assert(hier_fabric_efa_direct(fab));
    cr_assert_eq(unregistered_write(fab), 1, "an unregistered write went to the provider");
    hier_fabric_close(fab);
    cr_assert_eq(run_pair(basic, providers[*p]), 2, "writes under efa-direct's rules, %s", providers[*p]);
    cr_assert_eq(run_pair(stream, providers[*p]), 2, "a stream under efa-direct's rules, %s", providers[*p]);
    fab_profile = "default";
    cr_assert((fab = open_fab(providers[*p])));
    cr_assert(!hier_fabric_efa_direct(fab));
    hier_fabric_close(fab);
}

Test(fabric, offsets_or_addresses_as_the_provider_says)
{
    int buf[64];
    hier_fabric_mr_t *mr;
    hier_fabric_t *rxm = open_fab("tcp;ofi_rxm"), *tcp = open_fab("tcp"), *shm = open_fab("shm");
    cr_assert(rxm && tcp && shm, "tcp;ofi_rxm, tcp and shm must all open here");
    cr_assert_str_eq(hier_fabric_provider(rxm), "tcp;ofi_rxm");
    /* "tcp" is the native TCP endpoint: "net" in libfabric 1.17, "tcp" later */
    cr_assert(!strcmp(hier_fabric_provider(tcp), "net") || !strcmp(hier_fabric_provider(tcp), "tcp"), "%s",
              hier_fabric_provider(tcp));
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(hier_fabric_mr_reg(i ? tcp : rxm, buf, sizeof(buf), &mr), HIER_OK);
        cr_assert_eq(hier_fabric_mr_rkey(mr).base, 0, "TCP has no FI_MR_VIRT_ADDR: offsets");
        hier_fabric_mr_dereg(mr);
    }
    cr_assert_eq(hier_fabric_mr_reg(shm, buf, sizeof(buf), &mr), HIER_OK);
    cr_assert_eq(hier_fabric_mr_rkey(mr).base, (uint64_t)(uintptr_t)buf, "shm uses virtual addresses");
    hier_fabric_mr_dereg(mr);
    hier_fabric_close(rxm);
    hier_fabric_close(tcp);
    hier_fabric_close(shm);
}

Test(fabric, unknown_provider_is_a_clean_error)
{
    hier_fabric_t *fab;
    hier_fabric_config_t cfg = {.provider = "no-such-provider"};
    cr_assert_eq(hier_fabric_open(&cfg, &fab), HIER_ERR_NOT_SUPPORTED);
}

/* Whether hier may call libfabric from a thread of its own (fabric_warmup):
 * only where it loaded the library itself. (Each test is its own process.) */
Test(fabric, libfabric_loaded_before_hier_is_shared)
{
    void *lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    cr_assert(lib, "libfabric.so.1: %s", dlerror());
    cr_assert(hier_fi_shared(), "a libfabric the process had before hier is another user's");
}

/* Asking loads nothing: loading runs its providers' constructors (0.2 s
 * with Debian's psm), which hier's thread pays, not MPI's. */
Test(fabric, asking_whether_shared_loads_nothing)
{
    cr_assert(!hier_fi_shared(), "nothing had libfabric: nobody else calls it");
    void *lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    cr_assert_null(lib, "asking loaded libfabric");
}

Test(fabric, libfabric_loaded_by_hier_alone_is_its_own)
{
    cr_assert_eq(hier_fi_load(), HIER_OK);
    cr_assert(!hier_fi_shared(), "hier loaded libfabric first: nobody else calls it");
}

Test(fabric, fork_safety_is_reported)
{
    const char *f = hier_fabric_fork_safety();
    cr_assert(!strcmp(f, "fork-safe") || !strcmp(f, "fork-safe (kernel)") || !strcmp(f, "not fork-safe"), "%s", f);
    /* without an RDMA device rdma-core cannot tell that the kernel makes fork
     * safe, so on these machines it says "not fork-safe" */
    cr_log_info("fork safety here: %s", f);
}

/* ---- inter-node schedules over the transport: several processes run the
 * ring and recursive-doubling allreduces through per-peer channels, with
 * vectors several times what a channel holds ---------------------------- */

#define NP_MAX 4
typedef struct {
    _Atomic int stage[NP_MAX];
    char addr[NP_MAX][HIER_FABRIC_ADDR_MAX];
    hier_chan_info_t info[NP_MAX][NP_MAX]; /* [owner][peer] */
    int in_place;                          /* the vector is registered: sends go from it, no copy */
} group_t;

static int group_wait(group_t *g, int np, int v, hier_fabric_t *fab)
{
    for (int r = 0; r < np; r++)
        for (double end = now() + 30; atomic_load(&g->stage[r]) < v;) {
            if (fab) hier_chan_progress(fab);
            if (now() > end) return -1;
            usleep(50);
        }
    return 0;
}

static int net_member(int me, int np, group_t *g, const char *prov, hier_net_kind_t kind, size_t count)
{
    hier_fabric_t *fab = open_fab(prov);
    hier_chan_t *chans[NP_MAX] = {0};
    hier_fabric_peer_t peers[NP_MAX];
    size_t len;
    if (!fab || hier_fabric_addr(fab, g->addr[me], &len) != HIER_OK) return 10;
    for (int p = 0; p < np; p++) /* one channel per peer; ids are per process and exchanged */
        if (p != me) {
            if (hier_chan_open(fab, 4, 16384, &chans[p]) != HIER_OK) return 11;
            hier_chan_info(chans[p], &g->info[me][p]);
        }
    atomic_store(&g->stage[me], 1);
    if (group_wait(g, np, 1, NULL)) return 12;
    for (int p = 0; p < np; p++)
        if (p != me) {
            if (hier_fabric_insert(fab, g->addr[p], &peers[p]) != HIER_OK) return 13;
            hier_chan_connect(chans[p], peers[p], &g->info[p][me]);
        }
    double *v = malloc(count * sizeof(double) + 8);
    for (size_t i = 0; i < count; i++) v[i] = (double)((me + 1) * (int)(i % 1001));
    hier_net_args_t a = {.kind = kind, .nparts = np, .me = me, .base = {.kind = HIER_BUF_RECV},
                         .esize = sizeof(double), .count = count, .blocks = HIER_NET_BLOCKS_EVEN};
    hier_step_t steps[64];
    size_t n = hier_sched_net_build(&a, steps);
    hier_exec_bufs_t bufs = {.rbuf = (uint8_t *)v, .esize = sizeof(double)};
    hier_net_send_t sendq[64];
    void *links[NP_MAX];
    for (int p = 0; p < NP_MAX; p++) links[p] = chans[p];
    hier_net_exec_t x = {.link = &hier_link_chan, .fab = fab, .links = links, .bufs = &bufs,
                         .run[0].q = {.q = sendq, .cap = n}};
    hier_fabric_mr_t *mr = NULL;
    if (g->in_place) { /* recursive doubling then reduces onto bytes still being sent: they must wait */
        if (hier_fabric_mr_reg(fab, v, count * sizeof(double) + 8, &mr) != HIER_OK) return 19;
        x.mr = mr;
        x.mr_base = (const uint8_t *)v;
        x.mr_len = count * sizeof(double) + 8;
    }
    if (hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &bufs.kernel) != HIER_OK) return 14;
    if (hier_net_exec_start(&x, 0, steps, n) != HIER_OK || hier_net_exec_finish(&x, 0) != HIER_OK) return 15;
    for (size_t i = 0; i < count; i++)
        if (v[i] != (double)(np * (np + 1) / 2 * (int)(i % 1001))) return 16;
    if (np > 1 && count && !x.net_bytes) return 17;
    atomic_store(&g->stage[me], 2);
    if (group_wait(g, np, 2, fab)) return 18; /* keep serving credits until everyone is done */
    for (int p = 0; p < np; p++) hier_chan_close(chans[p]);
    hier_fabric_mr_dereg(mr);
    hier_fabric_close(fab);
    free(v);
    return 0;
}

static int run_group(int np, const char *prov, hier_net_kind_t kind, size_t count, int in_place)
{
    group_t *g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(g, 0, sizeof(*g));
    g->in_place = in_place;
    pid_t pids[NP_MAX];
    int ok = 0;
    for (int r = 0; r < np; r++)
        if ((pids[r] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            fabric_reap_self();
            _exit(net_member(r, np, g, prov, kind, count));
        }
    for (int r = 0; r < np; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        fabric_reap(pids[r]);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        else fprintf(stderr, "%s np %d kind %d count %zu in place %d: rank %d ended with %d\n", prov, np, kind, count,
                     in_place, r, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    }
    munmap(g, sizeof(*g));
    return ok;
}

ParameterizedTestParameters(fabric, inter_node_allreduce_schedules_run_over_channels)
{
    return cr_make_param_array(int, provider_ids, NPROVIDERS);
}
ParameterizedTest(int *p, fabric, inter_node_allreduce_schedules_run_over_channels, .timeout = 120)
{
    /* 100003 doubles: 800 KB, twelve times what a 4 x 16 KiB channel holds */
    static const size_t counts[] = {1, 1000, 100003};
    for (int np = 2; np <= 3; np++)
        for (size_t c = 0; c < 3; c++)
            for (int zc = 0; zc <= 1; zc++) {
                cr_assert_eq(run_group(np, providers[*p], HIER_NET_RING_ALLREDUCE, counts[c], zc), np,
                             "%s ring np %d in place %d", providers[*p], np, zc);
                cr_assert_eq(run_group(np, providers[*p], HIER_NET_RD_ALLREDUCE, counts[c], zc), np,
                             "%s rd np %d in place %d", providers[*p], np, zc);
            }
}

/* Registrations of device allocations are kept by allocation id (asked of
 * the backend at each call): the same allocation is registered once, an
 * allocation without an id for the call only, one reallocated at the same
 * address anew, and at most HIER_DEV_MR_CACHE are kept (least recently
 * used out). "Device" allocations here: pages of one host buffer. */
enum { CACHE_N = HIER_DEV_MR_CACHE + 1 };
static uint8_t *cache_mem;
static uint64_t cache_ids[CACHE_N]; /* the runtime's id of allocation i now */
static int cache_query(const void *p, hier_accel_range_t *range)
{
    size_t i = (size_t)((const uint8_t *)p - cache_mem) / 4096;
    if ((const uint8_t *)p < cache_mem || i >= CACHE_N) return 0;
    *range = (hier_accel_range_t){.base = (uintptr_t)(cache_mem + i * 4096), .len = 4096, .id = cache_ids[i]};
    return 1;
}

Test(fabric, device_registrations_are_cached_by_allocation)
{
    hier_fabric_config_t cfg = {.provider = "shm", .hmem = 1};
    hier_fabric_t *fab;
    cr_assert_eq(hier_fabric_open(&cfg, &fab), HIER_OK);
    if (!hier_fabric_hmem(fab, FI_HMEM_SYSTEM)) { /* shm without FI_HMEM here: nothing to cache */
        hier_fabric_close(fab);
        return;
    }
    enum { N = CACHE_N };
    uint8_t *mem = cache_mem = aligned_alloc(4096, (size_t)N * 4096);
    hier_accel_backend_t host_dev = {.name = "host-as-device", .fi_iface = FI_HMEM_SYSTEM, .query = cache_query};
    hier_accel_buf_t b[N];
    hier_dev_mr_t m, again, first;
    for (int i = 0; i < N; i++) {
        cache_ids[i] = (uint64_t)i + 1;
        cr_assert(cache_query(mem + i * 4096, &b[i].range));
        b[i].backend = &host_dev;
    }
    uint64_t regs = hier_dev_mr_registrations();
    cr_assert_eq(hier_dev_mr_get(fab, &b[0], &first), HIER_OK);
    cr_assert(first.cached && first.nic_base == mem);
    cr_assert_eq(hier_dev_mr_get(fab, &b[0], &again), HIER_OK);
    cr_assert_eq(again.mr, first.mr, "the same allocation is registered once");
    cr_assert_eq(hier_dev_mr_registrations(), regs + 1);
    hier_dev_mr_put(&again);
    hier_dev_mr_put(&first);
    cache_ids[1] = 0;
    cr_assert_eq(hier_dev_mr_get(fab, &b[1], &m), HIER_OK);
    cr_assert(!m.cached, "no id: registered for the call only");
    hier_dev_mr_put(&m);
    cache_ids[1] = 2;
    for (int i = 1; i < N; i++) { /* N - 1 more: the cache is full, b[0] the oldest */
        cr_assert_eq(hier_dev_mr_get(fab, &b[i], &m), HIER_OK);
        hier_dev_mr_put(&m);
    }
    regs = hier_dev_mr_registrations();
    cr_assert_eq(hier_dev_mr_get(fab, &b[0], &again), HIER_OK);
    cr_assert_eq(hier_dev_mr_registrations(), regs + 1,
                 "the least recently used registration was dropped and b[0] registered anew");
    hier_dev_mr_put(&again);
    cr_assert_eq(hier_dev_mr_get(fab, &b[2], &first), HIER_OK);
    cache_ids[2] = 1000; /* freed and reallocated at the same address: a new id, though b[2] still says 3 */
    cr_assert_eq(hier_dev_mr_get(fab, &b[2], &m), HIER_OK);
    cr_assert_neq(m.mr, first.mr, "a new allocation at an old address gets its own registration");
    hier_dev_mr_put(&m);
    hier_dev_mr_put(&first);
    /* every entry in use by a call (threads): a newcomer is registered for
     * its call only, and no registration in use is dropped */
    hier_dev_mr_t held[HIER_DEV_MR_CACHE];
    for (int i = 0; i < HIER_DEV_MR_CACHE; i++) {
        cache_ids[i] = 5000 + (uint64_t)i;
        cr_assert_eq(hier_dev_mr_get(fab, &b[i], &held[i]), HIER_OK);
        cr_assert(held[i].cached);
    }
    cache_ids[HIER_DEV_MR_CACHE] = 6000;
    cr_assert_eq(hier_dev_mr_get(fab, &b[HIER_DEV_MR_CACHE], &m), HIER_OK);
    cr_assert(!m.cached, "every entry is in use: registered for the call only");
    hier_dev_mr_put(&m);
    regs = hier_dev_mr_registrations();
    for (int i = 0; i < HIER_DEV_MR_CACHE; i++) {
        cr_assert_eq(hier_dev_mr_get(fab, &b[i], &again), HIER_OK);
        cr_assert_eq(again.mr, held[i].mr, "entry %d was kept while in use", i);
        cr_assert_eq(hier_dev_mr_registrations(), regs, "entry %d: a hit registers nothing", i);
        hier_dev_mr_put(&again);
        hier_dev_mr_put(&held[i]);
    }
    hier_dev_mr_flush();
    hier_fabric_close(fab);
    free(mem);
}

/* A network wait past its spin yields every turn and calls Open MPI's
 * progress every `every` turns (crowded: 16; hier_wait.h), every 64 while
 * it spins; the endpoint every turn. */
static int chan_turn_progress;

static void chan_turn_on_progress(void)
{
    chan_turn_progress++;
}

Test(fabric, a_crowded_network_wait_calls_open_mpis_progress_every_16th_turn)
{
    hier_fabric_config_t cfg = {.provider = "shm"};
    hier_fabric_t *fab;
    cr_assert_eq(hier_fabric_open(&cfg, &fab), HIER_OK);
    uint64_t still_since = 0;
    for (unsigned every = 1; every <= 16; every += 15) {
        chan_turn_progress = 0;
        for (unsigned turn = 0; turn < 128 + 64; turn++) /* (spin 128: turns 63, 127 while spinning) */
            cr_assert_eq(hier_chan_wait_turn(fab, chan_turn_on_progress, 128, every, turn, &still_since, "test"),
                         HIER_OK);
        cr_assert_eq(chan_turn_progress, every == 1 ? 2 + 64 : 2 + 4, "every %u: %d", every, chan_turn_progress);
    }
    hier_fabric_close(fab);
}
