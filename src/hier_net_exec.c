#include "hier_net_exec.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#include "hier_log.h"

#define HIER_NET_EXEC_TIMEOUT 60 /* seconds without progress */

typedef struct {
    const uint8_t *src;
    size_t len, done;      /* bytes handed to the channel */
    size_t freed;          /* bytes no longer needed: copied, or (in place) their writes completed */
    hier_chan_t *ch;       /* NULL once every byte is freed */
    hier_fabric_mr_t *mr;  /* src is registered: its bytes go from where they are (zero-copy) */
    uint64_t first;        /* in place: the channel's number of the first segment */
} hier_net_send_t;

typedef struct {
    uint8_t *dst;
    size_t len, done; /* bytes */
    int reduce;
    hier_chan_t *ch;
} hier_net_recv_t;

/* Sends not yet handed over in full, oldest first. A send never waits for
 * the ones behind it; it waits only when the queue is full, so a schedule
 * may post every message of a step before receiving any (one latency per
 * step, not one per message) without two peers blocking each other. */
#define HIER_NET_EXEC_QUEUE 256

typedef struct {
    hier_net_send_t q[HIER_NET_EXEC_QUEUE];
    size_t head, n;
} hier_net_queue_t;

/* Push as many segments of one send as credits allow now. */
static hier_status_t hier_net_push(hier_net_exec_t *x, hier_net_send_t *s)
{
    while (s->done < s->len) {
        size_t seg = s->len - s->done, max = hier_chan_slot_bytes(s->ch);
        int sent;
        uint64_t msg;
        if (seg > max) seg = max;
        hier_status_t st = hier_chan_try_send_from(s->ch, s->src + s->done, seg, s->mr, &sent, &msg);
        if (st != HIER_OK) return st;
        if (!sent) break;
        if (!s->done) s->first = msg;
        s->done += seg;
        x->net_bytes += seg;
        if (!s->mr) s->freed = s->done;
    }
    return HIER_OK;
}

/* Sent in place, segments free their bytes as their writes complete, in
 * order (a receive may land on them only then; segments are whole slots but
 * the last). Returns whether the send is over: every byte freed. */
static int hier_net_send_advance(hier_net_send_t *s)
{
    size_t slot = hier_chan_slot_bytes(s->ch);
    while (s->freed < s->done && hier_chan_sent_done(s->ch, s->first + s->freed / slot))
        s->freed += s->done - s->freed < slot ? s->done - s->freed : slot;
    return s->freed == s->len;
}

/* Push every queued send whose channel has no older send still handing
 * bytes over (messages on a channel stay in order), then drop the ones over. */
static hier_status_t hier_net_push_all(hier_net_exec_t *x, hier_net_queue_t *q)
{
    hier_chan_t *blocked[HIER_NET_EXEC_QUEUE];
    size_t nblocked = 0;
    for (size_t i = 0; i < q->n; i++) {
        hier_net_send_t *s = &q->q[(q->head + i) % HIER_NET_EXEC_QUEUE];
        int behind = 0;
        if (!s->ch) continue;
        for (size_t b = 0; b < nblocked && !behind; b++) behind = blocked[b] == s->ch;
        if (behind) continue;
        hier_status_t st = hier_net_push(x, s);
        if (st != HIER_OK) return st;
        if (s->done < s->len) blocked[nblocked++] = s->ch;
        if (hier_net_send_advance(s)) s->ch = NULL;
    }
    while (q->n && !q->q[q->head].ch) {
        q->head = (q->head + 1) % HIER_NET_EXEC_QUEUE;
        q->n--;
    }
    return HIER_OK;
}

/* Whether [p, p + len) overlaps bytes a queued send still needs: not yet
 * copied, or (in place) not yet written by the provider. */
static int hier_net_unsent(const hier_net_queue_t *q, const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < q->n; i++) {
        const hier_net_send_t *s = &q->q[(q->head + i) % HIER_NET_EXEC_QUEUE];
        if (s->ch && p < s->src + s->len && s->src + s->freed < p + len) return 1;
    }
    return 0;
}

/* Take the next segment of the receive if it is there and may land: not on
 * bytes a queued send still has to read. */
static hier_status_t hier_net_pull(hier_net_exec_t *x, hier_net_recv_t *r, const hier_net_queue_t *q)
{
    const void *data;
    size_t len;
    int got;
    size_t seg = hier_chan_slot_bytes(r->ch);
    if (seg > r->len - r->done) seg = r->len - r->done;
    if (hier_net_unsent(q, r->dst + r->done, seg)) return HIER_OK;
    hier_status_t st = hier_chan_try_recv(r->ch, &data, &len, &got);
    if (st != HIER_OK || !got) return st;
    if (len != seg) {
        HIER_ERROR("inter-node step expected a %zu-byte segment, got %zu (schedules differ between nodes?)", seg,
                   len);
        return HIER_ERR_INTERNAL;
    }
    if (r->reduce)
        x->bufs->kernel.acc(r->dst + r->done, data, len / x->bufs->esize);
    else
        memcpy(r->dst + r->done, data, len);
    r->done += len;
    return hier_chan_release(r->ch);
}

/* One turn of a waiting loop: the endpoint every time; past `spin` turns
 * the CPU goes to whoever shares it (oversubscribed, the peer we wait for
 * may be the one waiting for a core) and Open MPI progresses; and the clock:
 * a peer that is gone must not hang us. */
static hier_status_t hier_net_progress(hier_net_exec_t *x, unsigned turn, time_t *deadline, const char *what)
{
    if (x->spin && turn >= (unsigned)x->spin) {
        sched_yield();
        if (x->progress) x->progress();
    } else if (x->progress && turn % 64 == 63) {
        x->progress();
    }
    if (turn % 65536 == 65535) {
        if (!*deadline) {
            *deadline = time(NULL) + HIER_NET_EXEC_TIMEOUT;
        } else if (time(NULL) > *deadline) {
            HIER_ERROR("inter-node step: no progress for %d s while %s", HIER_NET_EXEC_TIMEOUT, what);
            return HIER_ERR_TIMEOUT;
        }
    }
    return hier_chan_progress(x->fab);
}

/* Wait until at most `keep` sends are queued. */
static hier_status_t hier_net_flush(hier_net_exec_t *x, hier_net_queue_t *q, size_t keep)
{
    time_t deadline = 0;
    for (unsigned k = 0;; k++) {
        hier_status_t st = hier_net_push_all(x, q);
        if (st != HIER_OK || q->n <= keep) return st;
        if ((st = hier_net_progress(x, k, &deadline, "sending (no credit from the peer)")) != HIER_OK) return st;
    }
}

hier_status_t hier_net_exec_run(hier_net_exec_t *x, const hier_step_t *steps, size_t n)
{
    hier_net_queue_t q = {.head = 0, .n = 0};
    hier_status_t st = HIER_OK;

    for (size_t i = 0; i < n && st == HIER_OK; i++) {
        const hier_step_t *s = &steps[i];
        if (s->op == HIER_STEP_NET_SEND) {
            if ((st = hier_net_flush(x, &q, HIER_NET_EXEC_QUEUE - 1)) != HIER_OK) break; /* room for one more */
            const uint8_t *src = hier_exec_ref(x->bufs, s->src);
            int in_place = x->mr && src >= x->mr_base && src + s->len <= x->mr_base + x->mr_len;
            q.q[(q.head + q.n++) % HIER_NET_EXEC_QUEUE] = (hier_net_send_t){
                .src = src, .len = s->len, .ch = x->chans[s->peer], .mr = in_place ? x->mr : NULL};
            st = hier_net_push_all(x, &q);
        } else if (s->op == HIER_STEP_NET_RECV) {
            hier_net_recv_t r = {.dst = hier_exec_ref(x->bufs, s->dst), .reduce = s->net_reduce,
                                 .len = s->net_reduce ? s->len * x->bufs->esize : s->len, .ch = x->chans[s->peer]};
            time_t deadline = 0;
            for (unsigned k = 0; st == HIER_OK && r.done < r.len; k++)
                if ((st = hier_net_push_all(x, &q)) == HIER_OK && (st = hier_net_pull(x, &r, &q)) == HIER_OK)
                    st = hier_net_progress(x, k, &deadline, "receiving");
        } else {
            HIER_ERROR("inter-node executor: step %d is not a network step", (int)s->op);
            st = HIER_ERR_INVALID_ARG;
        }
    }
    if (st == HIER_OK) st = hier_net_flush(x, &q, 0);
    return st;
}
