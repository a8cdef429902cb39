/* hier_net_exec.c: network steps over the links of a run's participants
 * (net/hier_link.h: whichever transport x->link names). */
#include "exec/hier_net_exec.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/hier_log.h"

/* The link to participant p: known already (x->links), or a channel a
 * sender connects on first use and a receiver waits for the sender to
 * (NULL until then), kept in x->links once there: a send or a receive
 * queued after finds it at once. */
static hier_status_t hier_net_link(hier_net_exec_t *x, uint32_t p, int sending, void **link_p)
{
    hier_chan_t *ch = NULL;
    hier_status_t st = HIER_OK;
    if (x->links[p] || !x->peers) {
        *link_p = x->links[p];
        return HIER_OK;
    }
    if (!sending) ch = hier_peer_connected(x->peers[p]);
    else st = hier_peer_chan(x->fab, x->peers[p], &ch);
    x->links[p] = ch;
    *link_p = ch;
    return st;
}


/* Push as many segments of one send of run d as credits allow now. */
static hier_status_t hier_net_push(hier_net_exec_t *x, unsigned d, hier_net_send_t *s)
{
    if (!s->link) {
        hier_status_t st = hier_net_link(x, s->to, 1, &s->link);
        if (st != HIER_OK || !s->link) return st; /* (connecting: later) */
    }
    uint32_t mbox = (x->mboxes ? x->mboxes[s->to] : 0) + d;
    if (!s->seg) s->seg = x->link->segment(s->link, s->len);
    while (s->done < s->len) {
        size_t seg = s->len - s->done, max = s->seg;
        int sent;
        uint64_t msg;
        if (seg > max) seg = max;
        hier_status_t st = x->link->try_send(s->link, mbox, s->tag, s->src + s->done, seg, s->mr, x->sig, &sent,
                                             &msg);
        if (st != HIER_OK) return st;
        if (!sent) break;
        if (!s->done) s->first = msg;
        s->done += seg;
        x->net_bytes += seg;
        x->moved++;
        if (!s->mr) s->freed = s->done;
    }
    return HIER_OK;
}

/* Sent in place, segments free their bytes as their writes complete, in
 * order (a receive may land on them only then; segments are all s->seg
 * but the last). Returns whether the send is over: every byte freed. */
static int hier_net_send_advance(hier_net_exec_t *x, hier_net_send_t *s)
{
    if (!s->link || !s->seg) return s->len == 0;
    size_t slot = s->seg;
    while (s->freed < s->done && x->link->sent_done(s->link, s->first + s->freed / slot)) {
        s->freed += s->done - s->freed < slot ? s->done - s->freed : slot;
        x->moved++;
    }
    return s->freed == s->len;
}

static hier_net_send_t *hier_net_queued(const hier_net_queue_t *q, size_t i)
{
    return &q->q[(q->head + i) % q->cap];
}

/* Whether a send queued before s (in any run) to the same participant
 * still hands bytes over: a channel takes one send's segments at a time, so
 * a stream's messages stay in order and a send's segments have consecutive
 * numbers on the channel (what hier_net_send_advance counts on). */
static int hier_net_behind(const hier_net_exec_t *x, const hier_net_send_t *s)
{
    for (unsigned d = 0; d < HIER_NET_RUNS_MAX; d++) {
        const hier_net_queue_t *q = &x->run[d].q;
        if (!x->run[d].active) continue;
        for (size_t j = 0; j < q->n; j++) {
            const hier_net_send_t *o = hier_net_queued(q, j);
            if (o->order < s->order && !o->over && o->to == s->to && o->done < o->len) return 1;
        }
    }
    return 0;
}

/* Push every queued send of run d whose channel has no older send still
 * handing bytes over (hier_net_behind), then drop the ones over. */
static hier_status_t hier_net_push_all(hier_net_exec_t *x, unsigned d)
{
    hier_net_queue_t *q = &x->run[d].q;
    for (size_t i = 0; i < q->n; i++) {
        hier_net_send_t *s = hier_net_queued(q, i);
        if (s->over || hier_net_behind(x, s)) continue;
        hier_status_t st = hier_net_push(x, d, s);
        if (st != HIER_OK) return st;
        if (hier_net_send_advance(x, s)) {
            /* over: every write completed, or failed (the channel says which) */
            if (s->link && (st = x->link->status(s->link)) != HIER_OK) return st;
            s->over = 1;
        }
    }
    while (q->n && q->q[q->head].over) {
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    return HIER_OK;
}

/* Whether [p, p + len) overlaps bytes a queued send still needs: not yet
 * copied, or (in place) not yet written by the provider. */
static int hier_net_unsent(const hier_net_queue_t *q, const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < q->n; i++) {
        const hier_net_send_t *s = hier_net_queued(q, i);
        if (!s->over && p < s->src + s->len && s->src + s->freed < p + len) return 1;
    }
    return 0;
}

/* Whether a message is what its step awaits: the call's signature (another collective there: a mismatch),
 * then the tag and the length (schedules that differ). */
static int hier_net_expected(const hier_net_exec_t *x, const hier_link_msg_t *m, uint32_t tag, size_t len)
{
    return hier_sig_same(m->sig, x->sig) && m->len == len && m->tag == tag;
}

/* A message of participant `from` that is not what its step awaits, explained and released. */
static hier_status_t hier_net_refuse(const hier_net_exec_t *x, void *link, uint32_t from, hier_link_msg_t *m,
                                     uint32_t tag, size_t len)
{
    hier_status_t st = HIER_ERR_INTERNAL;
    if (!hier_sig_same(m->sig, x->sig)) {
        char theirs[128], mine[128];
        hier_sig_describe(m->sig, theirs, sizeof(theirs));
        hier_sig_describe(x->sig, mine, sizeof(mine));
        HIER_ERROR("mismatched collective: a message of participant %u (another node) is of its %s; this rank "
                   "runs %s", from, theirs, mine);
        st = HIER_ERR_MISMATCH;
    } else {
        HIER_ERROR("inter-node step expected a %zu-byte segment of message %u from participant %u, got %zu bytes "
                   "of message %u (schedules differ between nodes?)", len, tag, from, m->len, m->tag);
    }
    x->link->release(link, m);
    return st;
}

/* Take the next segment of run d's receive if it is there and may land: not
 * on bytes a queued send of the run still has to read. *got_p: whether it did. */
static hier_status_t hier_net_pull(hier_net_exec_t *x, unsigned d, int *got_p)
{
    hier_net_recv_t *r = &x->run[d].r;
    const hier_net_queue_t *q = &x->run[d].q;
    hier_link_msg_t m;
    int got;
    *got_p = 0;
    if (!r->link) {
        hier_status_t st = hier_net_link(x, r->from, 0, &r->link);
        if (st != HIER_OK || !r->link) return st; /* (the sender has not connected yet) */
    }
    if (!r->seg) r->seg = x->link->segment(r->link, r->len);
    size_t seg = r->seg;
    if (seg > r->len - r->done) seg = r->len - r->done;
    if (hier_net_unsent(q, r->dst + r->done, seg)) return HIER_OK;
    hier_status_t st = x->link->try_recv(r->link, x->mbox + d, seg, &m, &got);
    if (st != HIER_OK || !got) return st;
    *got_p = 1;
    if (!hier_net_expected(x, &m, r->tag, seg)) return hier_net_refuse(x, r->link, r->from, &m, r->tag, seg);
    if (r->reduce)
        x->bufs->kernel.acc(r->dst + r->done, m.data, m.len / x->bufs->esize);
    else
        memcpy(r->dst + r->done, m.data, m.len);
    r->done += m.len;
    return x->link->release(r->link, &m);
}

/* Queue a send of run d (its queue has room): len bytes at src to
 * participant `to`, labelled `tag`. */
static hier_status_t hier_net_enqueue(hier_net_exec_t *x, unsigned d, const uint8_t *src, size_t len, uint32_t to,
                                      uint32_t tag)
{
    hier_net_queue_t *q = &x->run[d].q;
    int in_place = x->mr && src >= x->mr_base && src + len <= x->mr_base + x->mr_len;
    *hier_net_queued(q, q->n++) = (hier_net_send_t){.src = src, .len = len, .to = to, .tag = tag,
                                                    .link = x->links[to], .mr = in_place ? x->mr : NULL,
                                                    .order = x->queued++};
    return hier_net_push_all(x, d);
}

/* Queue note step s of run d: a key names the registration of the buffer
 * s->dst lies in, and where in it s->dst starts. */
static hier_status_t hier_net_note(hier_net_exec_t *x, unsigned d, const hier_step_t *s)
{
    const hier_net_direct_t *dw = x->direct;
    unsigned kind = s->tag, b = s->dst.kind;
    if (kind >= HIER_NOTE_KINDS || (kind == HIER_NOTE_KEY && (!dw || b > HIER_BUF_RECV || !dw->mr[b]))) {
        HIER_ERROR("inter-node executor: note %u cannot be sent (no registered buffer to give a key to)", kind);
        return HIER_ERR_INVALID_ARG;
    }
    hier_net_note_t *note = &x->run[d].note_out[kind];
    *note = (hier_net_note_t){.kind = kind};
    if (kind == HIER_NOTE_KEY) {
        note->rkey = hier_fabric_mr_rkey(dw->mr[b]);
        note->off = dw->reg_off[b] + s->dst.off;
    }
    return hier_net_enqueue(x, d, (const uint8_t *)note, sizeof(*note), s->peer, kind);
}

/* Post the pieces of write step s of run d while the provider takes them
 * (*all_p: every piece posted), with the key its target sent. */
static hier_status_t hier_net_write(hier_net_exec_t *x, hier_net_run_t *run, const hier_step_t *s, int *all_p)
{
    const hier_net_direct_t *dw = x->direct;
    unsigned b = s->src.kind;
    void *link;
    *all_p = 0;
    if (!dw || b > HIER_BUF_RECV || !dw->mr[b] || !run->has_key || run->key_from != s->peer || !dw->max_write ||
        x->link != &hier_link_chan) {
        HIER_ERROR("inter-node executor: a direct write to participant %u without its key, a registered source "
                   "or a libfabric channel", s->peer);
        return HIER_ERR_INVALID_ARG;
    }
    hier_status_t st = hier_net_link(x, s->peer, 1, &link);
    hier_chan_t *ch = link;
    if (st != HIER_OK || !ch) return st;
    run->wrote = ch;
    const uint8_t *src = dw->nic[b] + s->src.off;
    while (run->wdone < s->len) {
        size_t n = s->len - run->wdone < dw->max_write ? s->len - run->wdone : dw->max_write;
        int posted;
        st = hier_chan_try_write_direct(ch, src + run->wdone, n, dw->mr[b], run->key.rkey,
                                        run->key.off + s->dst.off + run->wdone, s->tag, &posted);
        if (st != HIER_OK || !posted) return st;
        run->wdone += n;
        x->net_bytes += n;
        x->moved++;
    }
    run->wdone = 0;
    *all_p = 1;
    return HIER_OK;
}

/* Whether every piece of the writes step s waits for landed here (pieces
 * landing count as progress for the executor's clock). */
static int hier_net_writes_in(hier_net_exec_t *x, hier_net_run_t *run, const hier_step_t *s, hier_status_t *st_p)
{
    const hier_net_direct_t *dw = x->direct;
    if (!dw || !dw->max_write || s->tag >= dw->ntags) {
        HIER_ERROR("inter-node executor: a wait for direct writes tagged %u, which nothing counts", s->tag);
        *st_p = HIER_ERR_INVALID_ARG;
        return 0;
    }
    size_t pieces = s->len / dw->max_write + (s->len % dw->max_write != 0);
    uint32_t got = hier_chan_direct_count(dw->counts, s->tag);
    if (got != run->wseen) {
        run->wseen = got;
        x->moved++;
    }
    if (got < pieces) return 0;
    run->wseen = 0;
    return 1;
}

/* Run d stops: over (HIER_OK) or failed. */
static hier_status_t hier_net_stop(hier_net_run_t *run, hier_status_t st)
{
    run->active = 0;
    run->failed = st;
    return st;
}

hier_status_t hier_net_exec_start(hier_net_exec_t *x, unsigned d, const hier_step_t *steps, size_t n)
{
    if (d >= HIER_NET_RUNS_MAX || !x->run[d].q.cap || x->run[d].active || !x->link || !x->links) {
        HIER_ERROR("inter-node executor: run %u cannot start (no send queue, transport or links, or still running)",
                   d);
        return HIER_ERR_INVALID_ARG;
    }
    hier_net_run_t *run = &x->run[d];
    run->steps = steps;
    run->n = n;
    run->next = 0;
    run->q.head = run->q.n = 0;
    run->receiving = 0;
    run->failed = HIER_OK;
    run->has_key = 0;
    run->wdone = 0;
    run->wseen = 0;
    run->wrote = NULL;
    run->active = 1;
    return hier_net_exec_poll(x);
}

/* Run d's steps in order as far as they can go without waiting, on what
 * the endpoint last delivered: a send waits only for room in the queue, a
 * receive for its segments. */
static hier_status_t hier_net_advance(hier_net_exec_t *x, unsigned d)
{
    hier_net_run_t *run = &x->run[d];
    if (!run->active) return HIER_OK;
    hier_status_t st = hier_net_push_all(x, d);
    if (st == HIER_OK && run->wrote) st = hier_chan_status(run->wrote); /* (a write of ours failed) */
    while (st == HIER_OK && run->next < run->n) {
        const hier_step_t *s = &run->steps[run->next];
        if (s->op == HIER_STEP_NET_SEND || s->op == HIER_STEP_NET_NOTE_SEND) {
            if (run->q.n == run->q.cap) break;
            st = s->op == HIER_STEP_NET_NOTE_SEND
                     ? hier_net_note(x, d, s)
                     : hier_net_enqueue(x, d, hier_exec_ref(x->bufs, s->src), s->len, s->peer, s->tag);
        } else if (s->op == HIER_STEP_NET_RECV || s->op == HIER_STEP_NET_NOTE_RECV) {
            int got = 1, note = s->op == HIER_STEP_NET_NOTE_RECV;
            if (!run->receiving && note)
                run->r = (hier_net_recv_t){.dst = (uint8_t *)&run->note_in, .len = sizeof(run->note_in),
                                           .from = s->peer, .tag = s->tag, .link = x->links[s->peer]};
            else if (!run->receiving)
                run->r = (hier_net_recv_t){.dst = hier_exec_ref(x->bufs, s->dst), .reduce = s->net_reduce,
                                           .len = s->net_reduce ? s->len * x->bufs->esize : s->len,
                                           .from = s->peer, .tag = s->tag, .link = x->links[s->peer]};
            run->receiving = 1;
            while (st == HIER_OK && got && run->r.done < run->r.len) {
                st = hier_net_pull(x, d, &got);
                x->moved += got;
            }
            if (run->r.done < run->r.len) break;
            run->receiving = 0;
            if (note && s->tag == HIER_NOTE_KEY) { /* (the tag was checked on arrival: hier_net_pull) */
                run->key = run->note_in;
                run->key_from = s->peer;
                run->has_key = 1;
            }
        } else if (s->op == HIER_STEP_NET_WRITE) {
            int all;
            st = hier_net_write(x, run, s, &all);
            if (!all) break;
        } else if (s->op == HIER_STEP_NET_WRITES_WAIT) {
            if (!hier_net_writes_in(x, run, s, &st)) break;
        } else {
            HIER_ERROR("inter-node executor: step %d is not a network step", (int)s->op);
            st = HIER_ERR_INVALID_ARG;
            break;
        }
        run->next++;
        x->moved++;
    }
    if (st != HIER_OK || (run->next == run->n && !run->q.n)) return hier_net_stop(run, st);
    return HIER_OK;
}

/* Every run in flight on what the endpoint last delivered; the first error. */
static hier_status_t hier_net_advance_all(hier_net_exec_t *x)
{
    hier_status_t first = HIER_OK;
    for (unsigned d = 0; d < HIER_NET_RUNS_MAX; d++) {
        hier_status_t st = hier_net_advance(x, d);
        if (first == HIER_OK) first = st;
    }
    return first;
}

static int hier_net_any_active(const hier_net_exec_t *x)
{
    for (unsigned d = 0; d < HIER_NET_RUNS_MAX; d++)
        if (x->run[d].active) return 1;
    return 0;
}

hier_status_t hier_net_exec_poll(hier_net_exec_t *x)
{
    if (!hier_net_any_active(x)) return HIER_OK;
    hier_status_t st = x->link->poll(x->fab);
    if (st == HIER_OK) return hier_net_advance_all(x);
    for (unsigned d = 0; d < HIER_NET_RUNS_MAX; d++)
        if (x->run[d].active) hier_net_stop(&x->run[d], st);
    return st;
}

/* What a run that is not over waits for, in words. */
static const char *hier_net_waiting(const hier_net_run_t *run)
{
    hier_step_op_t op = run->next < run->n ? run->steps[run->next].op : HIER_STEP_NET_SEND;
    if (op == HIER_STEP_NET_WRITE) return "room for a direct write to a peer";
    if (op == HIER_STEP_NET_WRITES_WAIT) return "waiting for a peer's direct writes";
    return run->receiving ? "receiving" : "sending (no credit from the peer)";
}

/* Where a run that stands still stood; why: what its end saw ("timed out"). */
static void hier_net_exec_report(const hier_net_exec_t *x, const hier_net_run_t *run, const char *why)
{
    char what[64];
    if (run->next < run->n && run->steps[run->next].op == HIER_STEP_NET_WRITES_WAIT && x->direct) {
        const hier_step_t *s = &run->steps[run->next];
        HIER_ERROR("direct writes tagged %u from participant %u: %u pieces landed, %zu bytes awaited", s->tag, s->peer,
                   s->tag < x->direct->ntags ? hier_chan_direct_count(x->direct->counts, s->tag) : 0, s->len);
    }
    if (run->wrote) {
        snprintf(what, sizeof(what), "direct writes %s", why);
        hier_chan_report(run->wrote, what);
    }
    snprintf(what, sizeof(what), "receive %s", why);
    if (run->receiving && run->r.link) x->link->report(run->r.link, what);
    else if (run->receiving) HIER_ERROR("receive from participant %u %s: it never connected", run->r.from, why);
    snprintf(what, sizeof(what), "send %s", why);
    for (size_t i = 0; i < run->q.n; i++) {
        const hier_net_send_t *s = hier_net_queued(&run->q, i);
        if (s->over) continue;
        if (s->link) x->link->report(s->link, what);
        else HIER_ERROR("send to participant %u %s: its channel never connected", s->to, why);
    }
}

void hier_net_exec_describe(const hier_net_exec_t *x)
{
    for (unsigned d = 0; d < HIER_NET_RUNS_MAX; d++) {
        const hier_net_run_t *run = &x->run[d];
        if (!run->active) continue;
        const hier_step_t *s = run->next < run->n ? &run->steps[run->next] : NULL;
        HIER_ERROR("network run %u (over %s): step %zu of %zu, participant %d, tag %u: %s; %zu sends queued", d,
                   x->link->name, run->next, run->n, s ? (int)s->peer : -1, s ? s->tag : 0, hier_net_waiting(run),
                   run->q.n);
        hier_net_exec_report(x, run, "not over");
    }
}

/* Run d's end as its finish or test sees it: HIER_OK, or why it failed. */
static hier_status_t hier_net_ended(hier_net_run_t *run)
{
    hier_status_t st = run->failed;
    run->failed = HIER_OK;
    run->steps = NULL;
    return st;
}

/* Waits until run d is over, advancing the others. The clock restarts
 * whenever something moved (a segment sent, freed or received, a step
 * done, in any run), so only an executor that stands still for the timeout
 * fails; the turns keep counting, so Open MPI progresses and the CPU is
 * yielded however busy the runs are. */
hier_status_t hier_net_exec_finish(hier_net_exec_t *x, unsigned d)
{
    hier_net_run_t *run = &x->run[d];
    uint64_t still_since = 0;
    uint64_t seen = x->moved;
    hier_status_t st = hier_net_exec_poll(x);
    for (unsigned k = 0; run->active; k++) {
        if (x->moved != seen) {
            seen = x->moved;
            still_since = 0;
        }
        st = x->link->wait_turn(x->fab, x->progress, x->spin, x->progress_every, k, &still_since,
                                hier_net_waiting(run));
        if (st != HIER_OK) {
            if (st == HIER_ERR_TIMEOUT) hier_net_exec_report(x, run, "timed out");
            hier_net_stop(run, st);
            break;
        }
        (void)hier_net_advance_all(x); /* (the turn polled the endpoint; each run keeps its own error) */
    }
    return hier_net_ended(run);
}

/* finish's loop body as one look: the executor's clock in x (still_since, seen). */
hier_status_t hier_net_exec_test(hier_net_exec_t *x, unsigned d)
{
    hier_net_run_t *run = &x->run[d];
    if (run->active) (void)hier_net_exec_poll(x);
    if (run->active) {
        if (x->moved != x->seen) {
            x->seen = x->moved;
            x->still_since = 0;
        } else if (!x->still_since) {
            x->still_since = hier_wait_now_ms();
        } else if (hier_wait_expired(x->still_since)) {
            HIER_ERROR("inter-node transfer: no progress for %d s while %s", hier_wait_timeout_s(),
                       hier_net_waiting(run));
            hier_net_exec_report(x, run, "timed out");
            hier_net_stop(run, HIER_ERR_TIMEOUT);
        }
        if (run->active) return HIER_IN_PROGRESS;
    }
    if (!hier_net_any_active(x)) x->still_since = 0;
    return hier_net_ended(run);
}

void hier_net_exec_abandon(hier_net_exec_t *x)
{
    for (unsigned d = 0; d < HIER_NET_RUNS_MAX; d++) x->run[d] = (hier_net_run_t){.q = x->run[d].q};
    x->still_since = 0;
}

/* The swap's wait: both ends' links, each once connected (a channel's
 * receiver waits for its sender to connect). The send goes first, so a
 * refused message (a mismatch, which may end the link) leaves the peer
 * one to refuse too; the receive is posted before any progress runs. */
hier_status_t hier_net_exec_swap(hier_net_exec_t *x, uint32_t p, uint32_t tag, const void *src, size_t len,
                                 size_t expect, hier_net_swap_t *sw_p)
{
    void *out = NULL, *in = NULL;
    uint32_t mbox = x->mboxes ? x->mboxes[p] : 0;
    int sent = 0, got = 0;
    uint64_t msg, still_since = 0;
    hier_link_msg_t m;
    hier_status_t st = HIER_OK;
    for (unsigned k = 0;; k++) {
        uint64_t seen = x->moved;
        if (!out && (st = hier_net_link(x, p, 1, &out)) != HIER_OK) break;
        if (out && !sent) { /* (copied: mr NULL, so src is free once sent) */
            if ((st = x->link->try_send(out, mbox, tag, src, len, NULL, x->sig, &sent, &msg)) != HIER_OK) break;
            x->moved += (unsigned)sent;
            x->net_bytes += sent ? len : 0;
        }
        if (!in && (st = hier_net_link(x, p, 0, &in)) != HIER_OK) break;
        if (in && !got) {
            if ((st = x->link->try_recv(in, x->mbox, expect, &m, &got)) != HIER_OK) break;
            if (got && !hier_net_expected(x, &m, tag, expect)) { /* (released) */
                st = hier_net_refuse(x, in, p, &m, tag, expect);
                got = 0;
                break;
            }
            x->moved += (unsigned)got;
        }
        if (got && sent) {
            *sw_p = (hier_net_swap_t){.link = in, .msg = m};
            return HIER_OK;
        }
        if (x->moved != seen) still_since = 0;
        st = x->link->wait_turn(x->fab, x->progress, x->spin, x->progress_every, k, &still_since,
                                got ? "sending one message (pair)" : "receiving one message (pair)");
        if (st != HIER_OK) break;
    }
    if (got) x->link->release(in, &m);
    if (st == HIER_ERR_TIMEOUT && in) x->link->report(in, "timed out");
    return st;
}

hier_status_t hier_net_exec_swap_done(hier_net_exec_t *x, hier_net_swap_t *sw)
{
    return x->link->release(sw->link, &sw->msg);
}
