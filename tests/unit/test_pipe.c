/* The executor between nodes with several chunks in flight (exec/hier_run.c,
 * hier_net_exec.c): every rank of every node in this one process, each with
 * its own mappings of its node's segments, the network replaced by
 * in-memory channels (the channel calls the executor makes are wrapped at
 * link time, -Wl,--wrap: sends land after a random delay, in order per
 * direction, at most a few unreleased per direction as credits allow; a send
 * from the slots, registered, is read where it lies when it lands, as a
 * NIC reads it, so a source reused before its write completed shows;
 * another mailbox's messages found first are set aside, as hier_chan_recv.c
 * does), every rank advanced without waiting in a seeded random order.
 * Pipeline depth 1..4, every inter-node kind and algorithm, even and uneven
 * layouts, counts and chunk sizes that make many chunks, in place or not,
 * calls back to back; results against references folded here. A node whose
 * ranks leave mid-call ends every request, with no run left in flight. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"
#include "exec/hier_run.h"
#include "net/hier_chan.h"
#include "net/hier_pml.h"
#include "shm/hier_shm.h"

#define MAXN 4
#define MAXP 3
#define CALLS 2
#define TURNS_MAX 40000000u

/* ---- the in-memory network (wrapped channel calls) ---- */

typedef struct fmsg {
    struct fmsg *next;
    uint32_t mbox, tag;
    hier_sig_t sig;
    size_t len;
    unsigned due;   /* the turn it has arrived by */
    int aside;      /* another mailbox's, passed over: its credit went back */
    const uint8_t *src; /* sent in place: read only when it lands (as a NIC reads registered memory) */
    uint64_t num;   /* its number in its direction */
    uint8_t data[];
} fmsg_t;

typedef struct {
    fmsg_t *head, **tail;
    unsigned held, last_due; /* messages holding credit; the last one's arrival */
    uint64_t sent, landed;   /* numbered sends; how many landed (in order) */
} fdir_t;

typedef struct {
    fdir_t *in, *out;
} fend_t;

static unsigned fake_turn, fake_seed, fake_slots = 3, fake_delay = 8;
static const size_t fake_seg = 1000; /* (a multiple of every element size) */

size_t __wrap_hier_chan_segment(const void *ch, size_t len);
hier_status_t __wrap_hier_chan_try_send_from(void *ch, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                             hier_fabric_mr_t *mr, hier_sig_t sig, int *sent_p, uint64_t *msg_p);
int __wrap_hier_chan_sent_done(const void *ch, uint64_t msg);
hier_status_t __wrap_hier_chan_status(const void *ch);
hier_status_t __wrap_hier_chan_try_recv(void *ch, uint32_t mbox, size_t expect, hier_link_msg_t *msg, int *got_p);
hier_status_t __wrap_hier_chan_release(void *ch, hier_link_msg_t *msg);
hier_status_t __wrap_hier_chan_progress(hier_fabric_t *fab);
hier_status_t __wrap_hier_chan_wait_turn(hier_fabric_t *fab, void (*progress)(void), int spin, unsigned every,
                                         unsigned turn, uint64_t *still_since, const char *what);
void __wrap_hier_chan_report(const void *ch, const char *why);

size_t __wrap_hier_chan_segment(const void *ch, size_t len)
{
    (void)ch;
    return len < fake_seg ? len : fake_seg;
}

/* A message sent from registered memory (mr) is read where it lies when it
 * lands: its source must not change until hier_chan_sent_done says so. */
hier_status_t __wrap_hier_chan_try_send_from(void *ch, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                             hier_fabric_mr_t *mr, hier_sig_t sig, int *sent_p, uint64_t *msg_p)
{
    fdir_t *d = ((fend_t *)ch)->out;
    *sent_p = 0;
    if (d->held >= fake_slots) return HIER_OK; /* (no credit) */
    fmsg_t *m = malloc(sizeof(*m) + len);
    cr_assert_not_null(m);
    unsigned due = fake_turn + (unsigned)rand_r(&fake_seed) % fake_delay;
    *m = (fmsg_t){.mbox = mbox, .tag = tag, .sig = sig, .len = len, .due = due > d->last_due ? due : d->last_due,
                  .src = mr ? data : NULL, .num = d->sent++};
    if (!mr) memcpy(m->data, data, len);
    d->last_due = m->due;
    *d->tail = m;
    d->tail = &m->next;
    d->held++;
    *sent_p = 1;
    *msg_p = m->num;
    return HIER_OK;
}

/* Messages due by now land, in order: an in-place one's bytes are read now. */
static void fake_land(fdir_t *d)
{
    for (fmsg_t *m = d->head; m && m->due <= fake_turn; m = m->next)
        if (m->src) {
            memcpy(m->data, m->src, m->len);
            m->src = NULL;
        }
}

int __wrap_hier_chan_sent_done(const void *ch, uint64_t msg)
{
    fdir_t *d = ((fend_t *)ch)->out;
    fake_land(d);
    for (fmsg_t *m = d->head; m; m = m->next)
        if (m->num == msg) return !m->src; /* (landed, or still in flight) */
    return 1; /* (taken and released by the receiver long ago) */
}

hier_status_t __wrap_hier_chan_status(const void *ch)
{
    (void)ch;
    return HIER_OK;
}

hier_status_t __wrap_hier_chan_try_recv(void *ch, uint32_t mbox, size_t expect, hier_link_msg_t *msg, int *got_p)
{
    fdir_t *d = ((fend_t *)ch)->in;
    (void)expect;
    *got_p = 0;
    fake_land(d);
    for (fmsg_t *m = d->head; m && m->due <= fake_turn; m = m->next) {
        if (m->mbox != mbox) {
            if (!m->aside) d->held--;
            m->aside = 1;
            continue;
        }
        *msg = (hier_link_msg_t){.data = m->data, .len = m->len, .tag = m->tag, .sig = m->sig, .held = m};
        *got_p = 1;
        break;
    }
    return HIER_OK;
}

hier_status_t __wrap_hier_chan_release(void *ch, hier_link_msg_t *msg)
{
    fdir_t *d = ((fend_t *)ch)->in;
    for (fmsg_t **pp = &d->head; *pp; pp = &(*pp)->next) {
        if (*pp != msg->held) continue;
        fmsg_t *m = *pp;
        *pp = m->next;
        if (!*pp) d->tail = pp;
        if (!m->aside) d->held--;
        free(m);
        return HIER_OK;
    }
    cr_assert_fail("a message released twice, or never taken");
    return HIER_ERR_INTERNAL;
}

hier_status_t __wrap_hier_chan_progress(hier_fabric_t *fab)
{
    (void)fab;
    return HIER_OK;
}

hier_status_t __wrap_hier_chan_wait_turn(hier_fabric_t *fab, void (*progress)(void), int spin, unsigned every,
                                         unsigned turn, uint64_t *still_since, const char *what)
{
    (void)fab, (void)progress, (void)spin, (void)every, (void)turn, (void)still_since, (void)what;
    fake_turn++; /* (a blocking wait here would only wait for time to pass) */
    return HIER_OK;
}

void __wrap_hier_chan_report(const void *ch, const char *why)
{
    (void)ch;
    (void)why;
}

/* ---- Open MPI's point-to-point, in memory (the glue's ops for hier_pml.c) ----
 * MPI's matching: a message goes to the oldest receive of the same (source,
 * destination, mailbox) once it has landed (after a random delay, in order per
 * direction and mailbox); a longer message than the receive is truncated. Sends
 * of 1000 bytes and less complete when posted (eager), longer ones when
 * matched (rendezvous: the sender's credit is the receiver's posting). */

typedef struct pmsg {
    struct pmsg *next;
    size_t len;
    unsigned due;
    int *matched;   /* the send's request: set once taken */
    uint8_t data[];
} pmsg_t;

typedef struct {
    pmsg_t *head, **tail;
    unsigned last_due;
} pq_t;

#define PML_EAGER 1000
static pq_t pml_q[MAXN * MAXP][MAXN * MAXP][HIER_PML_MBOXES]; /* [from][to][mailbox] */

typedef struct {
    int send, rank, from, done;
    uint32_t mbox;
    uint8_t *buf;
    size_t len;
} preq_t;

static int pml_fake_isend(const void *buf, size_t len, int to, uint32_t mbox, void *arg, void **req_p)
{
    int me = *(const int *)arg;
    pq_t *q = &pml_q[me][to][mbox];
    preq_t *r = calloc(1, sizeof(*r));
    pmsg_t *m = malloc(sizeof(*m) + len);
    cr_assert(r && m);
    unsigned due = fake_turn + (unsigned)rand_r(&fake_seed) % fake_delay;
    *m = (pmsg_t){.len = len, .due = due > q->last_due ? due : q->last_due, .matched = &r->done};
    memcpy(m->data, buf, len);
    q->last_due = m->due;
    if (!q->tail) q->tail = &q->head;
    *q->tail = m;
    q->tail = &m->next;
    *r = (preq_t){.send = 1, .done = len <= PML_EAGER};
    if (r->done) m->matched = NULL;
    *req_p = r;
    return 0;
}

static int pml_fake_irecv(void *buf, size_t len, int from, uint32_t mbox, void *arg, void **req_p)
{
    preq_t *r = malloc(sizeof(*r));
    cr_assert(r);
    *r = (preq_t){.rank = *(const int *)arg, .from = from, .mbox = mbox, .buf = buf, .len = len};
    *req_p = r;
    return 0;
}

static int pml_fake_test(void *req, size_t *len_p)
{
    preq_t *r = req;
    if (r->send) {
        if (!r->done) return 0;
        free(r);
        return 1;
    }
    pq_t *q = &pml_q[r->from][r->rank][r->mbox];
    pmsg_t *m = q->head;
    if (!m || m->due > fake_turn) return 0;
    q->head = m->next;
    if (!q->head) q->tail = &q->head;
    if (m->matched) *m->matched = 1;
    int ret = m->len > r->len ? HIER_PML_TRUNCATED : 1;
    memcpy(r->buf, m->data, m->len > r->len ? r->len : m->len);
    *len_p = m->len > r->len ? r->len : m->len;
    free(m);
    free(r);
    return ret;
}

static void pml_fake_cancel(void *req)
{
    free(req);
}

static void pml_fake_clear(void)
{
    for (int f = 0; f < MAXN * MAXP; f++)
        for (int t = 0; t < MAXN * MAXP; t++)
            for (int b = 0; b < HIER_PML_MBOXES; b++) {
                pq_t *q = &pml_q[f][t][b];
                while (q->head) {
                    pmsg_t *m = q->head;
                    q->head = m->next;
                    free(m);
                }
                *q = (pq_t){0};
            }
}

/* ---- a bed of nodes ---- */

typedef struct {
    int nnodes, nlocal[MAXN];
} lay_t;

typedef struct {
    lay_t L;
    int g, pieces;
    unsigned depth;
    size_t chunk, cap;
    uint32_t node_first[MAXN + 1], node_ranks[MAXN * MAXP], order[MAXP];
    hier_shm_t *nseg[MAXN][MAXP], *pseg[MAXN][MAXP]; /* [node][local]: that rank's mappings */
    uint8_t *slots[MAXN][MAXP][MAXP];
    hier_shm_wait_t wait[MAXN][MAXP];
    hier_step_t *steps[MAXN][MAXP][HIER_RUN_DEPTH_MAX + 1];
    hier_net_send_t *sendq[MAXN][MAXP];
    uint64_t chunk_seq[MAXN][MAXP];
    uint8_t *scratch[MAXN][MAXP];
    hier_net_exec_t x[MAXN][MAXP];
    fdir_t dir[MAXN][MAXN][MAXP];      /* [from][to][local] */
    fend_t end[MAXN][MAXP][MAXN];      /* [node][local][peer] */
    void *chans[MAXN][MAXP][MAXN];     /* the links: channels' ends, or PML links */
    int pml;                           /* the transport: Open MPI's point-to-point (else channels) */
    int grank[MAXN][MAXP];             /* a rank's number, for the PML's matching */
    hier_pml_ops_t pml_ops[MAXN][MAXP];
    hier_run_t run[MAXN][MAXP];
} bed_t;

static void open_node(bed_t *b, int n, size_t node_chunk)
{
    int P = b->L.nlocal[n];
    hier_shm_shape_t ns = {.kind = HIER_SHM_NODE, .nranks = P, .chunk_bytes = node_chunk};
    hier_shm_shape_t ps = {.kind = HIER_SHM_PIPE, .nranks = P, .chunk_bytes = b->chunk, .nbufs = b->depth + 1};
    cr_assert_eq(hier_shm_create(NULL, &ns, &b->nseg[n][0]), HIER_OK);
    cr_assert_eq(hier_shm_create(NULL, &ps, &b->pseg[n][0]), HIER_OK);
    for (int l = 1; l < P; l++) {
        cr_assert_eq(hier_shm_attach(NULL, hier_shm_name(b->nseg[n][0]), &ns, &b->nseg[n][l]), HIER_OK);
        cr_assert_eq(hier_shm_attach(NULL, hier_shm_name(b->pseg[n][0]), &ps, &b->pseg[n][l]), HIER_OK);
    }
    for (int l = 0; l < P; l++) {
        cr_assert_eq(hier_shm_claim(b->nseg[n][l], l), HIER_OK);
        cr_assert_eq(hier_shm_claim(b->pseg[n][l], l), HIER_OK);
    }
    hier_shm_unlink(b->nseg[n][0]);
    hier_shm_unlink(b->pseg[n][0]);
    cr_assert_eq(hier_shm_nbufs(b->pseg[n][0]), b->depth + 1);
    for (int l = 0; l < P; l++) {
        for (int q = 0; q < P; q++) b->slots[n][l][q] = hier_shm_slot(b->pseg[n][l], q);
        b->wait[n][l] = (hier_shm_wait_t){.nranks = P, .me = l, .spin_count = 1};
        for (unsigned i = 0; i <= b->depth; i++) cr_assert_not_null(b->steps[n][l][i] = malloc(b->cap * sizeof(hier_step_t)));
        cr_assert_not_null(b->sendq[n][l] = malloc(b->cap * HIER_RUN_DEPTH_MAX * sizeof(hier_net_send_t)));
        cr_assert_not_null(b->scratch[n][l] = malloc(HIER_EXEC_SCRATCH_BYTES));
        hier_net_exec_t *x = &b->x[n][l];
        /* (its slot "registered": sends from it go in place, read when they land) */
        *x = (hier_net_exec_t){.link = b->pml ? &hier_link_pml : &hier_link_chan, .links = b->chans[n][l],
                               .mr = (hier_fabric_mr_t *)&b->x[n][l],
                               .mr_base = b->slots[n][l][l],
                               .mr_len = (b->depth + 1) * hier_shm_buf_stride(b->pseg[n][l])};
        for (unsigned d = 0; d < HIER_RUN_DEPTH_MAX; d++)
            x->run[d].q = (hier_net_queue_t){.q = b->sendq[n][l] + d * b->cap, .cap = b->cap};
        b->run[n][l] = (hier_run_t){.node = b->nseg[n][l], .wait = &b->wait[n][l], .slots = b->slots[n][l],
                                    .buf_stride = hier_shm_buf_stride(b->pseg[n][l]), .scratch = b->scratch[n][l],
                                    .netx = x, .depth = b->depth, .chunk_seq = &b->chunk_seq[n][l]};
        memcpy(b->run[n][l].steps, b->steps[n][l], sizeof(b->run[n][l].steps));
    }
}

/* The layout, its segments and channels: ranks numbered node by node; the
 * ranks of local index l < pieces talk across nodes. */
static void bed_open(bed_t *b, const lay_t *L, unsigned depth, size_t chunk, size_t cap, int pml)
{
    memset(b, 0, sizeof(*b));
    b->L = *L;
    b->pml = pml;
    b->depth = depth;
    b->chunk = chunk;
    b->cap = cap;
    b->pieces = L->nlocal[0];
    for (int n = 0; n < L->nnodes; n++) {
        b->node_first[n] = (uint32_t)b->g;
        for (int l = 0; l < L->nlocal[n]; l++, b->g++) b->node_ranks[b->g] = (uint32_t)b->g;
        if (L->nlocal[n] < b->pieces) b->pieces = L->nlocal[n];
    }
    b->node_first[L->nnodes] = (uint32_t)b->g;
    for (int l = 0; l < MAXP; l++) b->order[l] = (uint32_t)l;
    for (int f = 0; f < L->nnodes; f++)
        for (int t = 0; t < L->nnodes; t++)
            for (int l = 0; l < MAXP; l++) b->dir[f][t][l].tail = &b->dir[f][t][l].head;
    for (int n = 0; n < L->nnodes; n++)
        for (int l = 0; l < L->nlocal[n]; l++) {
            b->grank[n][l] = (int)b->node_first[n] + l;
            b->pml_ops[n][l] = (hier_pml_ops_t){.isend = pml_fake_isend, .irecv = pml_fake_irecv,
                                                .test = pml_fake_test, .cancel = pml_fake_cancel,
                                                .arg = &b->grank[n][l]};
        }
    for (int n = 0; n < L->nnodes; n++)
        for (int l = 0; l < b->pieces; l++)
            for (int m = 0; m < L->nnodes; m++) {
                if (m == n) continue;
                b->end[n][l][m] = (fend_t){.in = &b->dir[m][n][l], .out = &b->dir[n][m][l]};
                b->chans[n][l][m] = &b->end[n][l][m];
                if (!pml) continue;
                cr_assert_not_null(b->chans[n][l][m] = malloc(hier_pml_size()));
                /* (segments as the channels' fake cuts them) */
                hier_pml_init(b->chans[n][l][m], &b->pml_ops[n][l], (int)b->node_first[m] + l, fake_seg);
            }
    for (int n = 0; n < L->nnodes; n++) open_node(b, n, 4096);
}

static void bed_close(bed_t *b)
{
    for (int n = 0; n < b->L.nnodes; n++)
        for (int l = 0; l < b->pieces && b->pml; l++)
            for (int m = 0; m < b->L.nnodes; m++)
                if (m != n) {
                    hier_pml_fini(b->chans[n][l][m]);
                    free(b->chans[n][l][m]);
                }
    pml_fake_clear();
    for (int n = 0; n < b->L.nnodes; n++)
        for (int l = 0; l < b->L.nlocal[n]; l++) {
            for (unsigned i = 0; i <= b->depth; i++) free(b->steps[n][l][i]);
            free(b->sendq[n][l]);
            free(b->scratch[n][l]);
            hier_shm_detach(b->nseg[n][l]);
            hier_shm_detach(b->pseg[n][l]);
        }
    for (int f = 0; f < MAXN; f++)
        for (int t = 0; t < MAXN; t++)
            for (int l = 0; l < MAXP; l++)
                while (b->dir[f][t][l].head) {
                    fmsg_t *m = b->dir[f][t][l].head;
                    b->dir[f][t][l].head = m->next;
                    free(m);
                }
}

/* ---- calls ---- */

typedef struct {
    hier_sched_kind_t kind;
    hier_net_kind_t net;
    int in_place, radix;
    int dbl;                       /* reductions of doubles whose sum depends on the fold order (else int64) */
    size_t count;                  /* allreduce: elements; allgather: bytes per rank; reduce_scatter: all */
    size_t rcounts[MAXN * MAXP], rdispls[MAXN * MAXP];
    uint8_t *in[MAXN * MAXP], *out[MAXN * MAXP];
} call_t;

static int64_t val(int r, int k, size_t i)
{
    return (int64_t)(r + 1) * 1000003 + (int64_t)i * 7 + k;
}

static uint8_t byte_of(int r, int k, size_t i)
{
    return (uint8_t)(r * 37 + i * 11 + (size_t)k + 1);
}

/* Mixed signs, magnitudes 2^-10 .. 2^10 apart between ranks: rounding
 * makes the sum depend on the order it is folded in. */
static double dval(int r, int k, size_t i)
{
    long m = ((long)r * 7919 + (long)i * 104729 + k * 31) % 1000003 + 1;
    return (r % 2 ? -1.0 : 1.0) * (double)m / 1000003.0 * ldexp(1.0, (int)((r * 17 + i * 3) % 21) - 10);
}

static void call_make(call_t *c, const bed_t *b, int k)
{
    int ag = c->kind == HIER_SCHED_HIER_ALLGATHER, rs = c->kind == HIER_SCHED_HIER_REDUCE_SCATTER;
    size_t total = 0;
    for (int r = 0; r < b->g; r++) {
        c->rcounts[r] = r % 3 == 1 ? 0 : c->count / (size_t)b->g + (size_t)(r % 2); /* (uneven, some zero) */
        c->rdispls[r] = total;
        total += c->rcounts[r];
    }
    size_t elems = rs ? total : c->count, in_bytes = ag ? c->count : elems * 8;
    size_t out_bytes = ag ? c->count * (size_t)b->g : elems * 8;
    for (int r = 0; r < b->g; r++) {
        c->in[r] = malloc(in_bytes + 8);
        c->out[r] = malloc(out_bytes + 8);
        memset(c->out[r], 0xEE, out_bytes + 8);
        uint8_t *src = c->in_place ? c->out[r] + (ag ? (size_t)r * c->count : 0) : c->in[r];
        for (size_t i = 0; ag && i < c->count; i++) src[i] = byte_of(r, k, i);
        for (size_t i = 0; !ag && i < elems; i++) {
            int64_t v = val(r, k, i);
            double d = dval(r, k, i);
            if (c->dbl) memcpy(src + i * 8, &d, 8);
            else memcpy(src + i * 8, &v, 8);
        }
    }
    if (rs) c->count = total;
}

static hier_sched_args_t call_args(const call_t *c, const bed_t *b, int n, int l)
{
    int ag = c->kind == HIER_SCHED_HIER_ALLGATHER;
    return (hier_sched_args_t){.kind = c->kind, .nranks = b->L.nlocal[n], .me = l, .esize = ag ? 1 : 8,
                               .count = c->count, .rcounts = c->rcounts, .rdispls = c->rdispls,
                               .in_place = c->in_place, .chunk_bytes = b->chunk, .order = b->order, .node = n,
                               .nnodes = b->L.nnodes, .pieces = b->pieces, .net_kind = c->net, .net_radix = c->radix,
                               .node_first = b->node_first, .node_ranks = b->node_ranks};
}

static void call_check(const call_t *c, const bed_t *b, int k, const char *what)
{
    int ag = c->kind == HIER_SCHED_HIER_ALLGATHER, rs = c->kind == HIER_SCHED_HIER_REDUCE_SCATTER;
    for (int r = 0; r < b->g; r++) {
        if (ag) {
            for (int q = 0; q < b->g; q++)
                for (size_t i = 0; i < c->count; i++)
                    cr_assert_eq(c->out[r][(size_t)q * c->count + i], byte_of(q, k, i),
                                 "%s call %d: rank %d block %d [%zu]", what, k, r, q, i);
            continue;
        }
        size_t lo = rs ? c->rdispls[r] : 0, n = rs ? c->rcounts[r] : c->count;
        for (size_t i = 0; c->dbl && i < n; i++) {
            double want = 0, got;
            for (int q = 0; q < b->g; q++) want += dval(q, k, lo + i);
            memcpy(&got, c->out[r] + i * 8, 8);
            cr_assert(fabs(got - want) <= 1e-12 * 1024 * b->g, "%s call %d: rank %d [%zu]: %a, want about %a", what,
                      k, r, i, got, want);
        }
        for (size_t i = 0; !c->dbl && i < n; i++) {
            int64_t want = 0, got;
            for (int q = 0; q < b->g; q++) want += val(q, k, lo + i);
            memcpy(&got, c->out[r] + i * 8, 8);
            cr_assert_eq(got, want, "%s call %d: rank %d [%zu]: %lld, want %lld", what, k, r, i, (long long)got,
                         (long long)want);
        }
    }
}

static void call_free(call_t *c, int g)
{
    for (int r = 0; r < g; r++) {
        free(c->in[r]);
        free(c->out[r]);
    }
}

/* The bytes every rank's calls left in their receive buffers, one after
 * the other (run_calls' `keep`). */
typedef struct {
    uint8_t *bytes;
    size_t len;
} kept_t;

static void keep_outputs(kept_t *keep, const call_t *calls, const bed_t *b)
{
    int ag = calls[0].kind == HIER_SCHED_HIER_ALLGATHER, rs = calls[0].kind == HIER_SCHED_HIER_REDUCE_SCATTER;
    size_t at = keep->len;
    for (int k = 0; k < CALLS; k++)
        for (int r = 0; r < b->g; r++) {
            size_t n = ag ? calls[k].count * (size_t)b->g : (rs ? calls[k].rcounts[r] : calls[k].count) * 8;
            cr_assert_not_null(keep->bytes = realloc(keep->bytes, at + n + 1));
            memcpy(keep->bytes + at, calls[k].out[r], n);
            at += n;
        }
    keep->len = at;
}

/* CALLS calls of one shape back to back over the bed (its links channels,
 * or PML links with `pml`), every rank advanced in a random order, a rank
 * starting its next call once its last is over; their results added to
 * `keep` (may be NULL). */
static void run_calls(const lay_t *L, unsigned depth, size_t chunk, const call_t *shape, unsigned seed, int pml,
                      kept_t *keep)
{
    static bed_t b;
    call_t calls[CALLS];
    hier_run_req_t q[MAXN * MAXP];
    hier_sched_args_t args[MAXN * MAXP];
    int at[MAXN * MAXP] = {0}, started[MAXN * MAXP] = {0}, node_of[MAXN * MAXP], local_of[MAXN * MAXP];
    hier_reduce_kernel_t kernel;
    cr_assert_eq(hier_reduce_kernel_get(shape->dbl ? HIER_DT_DOUBLE : HIER_DT_INT64, HIER_OP_SUM, &kernel), HIER_OK);
    char what[192];
    snprintf(what, sizeof(what), "kind %d net %d nodes %d (%d,%d,...) depth %u chunk %zu count %zu in place %d%s",
             (int)shape->kind, (int)shape->net, L->nnodes, L->nlocal[0], L->nlocal[1], depth, chunk, shape->count,
             shape->in_place, pml ? " over the PML" : "");
    /* the reserved memory: the most steps any rank's chunk has */
    bed_t *probe = &b;
    bed_open(probe, L, depth, chunk, 1, 0);
    size_t cap = 1;
    for (int k = 0; k < CALLS; k++) {
        calls[k] = *shape;
        call_make(&calls[k], probe, k);
    }
    for (int n = 0; n < L->nnodes; n++)
        for (int l = 0; l < L->nlocal[n]; l++) {
            hier_sched_args_t a = call_args(&calls[0], probe, n, l);
            size_t need = hier_sched_max_steps(&a);
            cap = need > cap ? need : cap;
        }
    bed_close(probe);
    bed_open(&b, L, depth, chunk, cap, pml);
    for (int n = 0; n < L->nnodes; n++)
        for (int l = 0; l < L->nlocal[n]; l++) {
            node_of[b.node_first[n] + (uint32_t)l] = n;
            local_of[b.node_first[n] + (uint32_t)l] = l;
        }
    fake_seed = seed;
    int left = b.g * CALLS;
    for (unsigned turn = 0; left && turn < TURNS_MAX; turn++) {
        fake_turn++;
        int r = (int)(rand_r(&fake_seed) % (unsigned)b.g), n = node_of[r], l = local_of[r];
        if (at[r] == CALLS) continue;
        call_t *c = &calls[at[r]];
        if (!started[r]) {
            args[r] = call_args(c, &b, n, l);
            hier_run_begin(&q[r], &b.run[n][l], &args[r], c->in_place ? NULL : c->in[r], c->out[r], kernel);
            started[r] = 1;
        }
        uint64_t net = 0;
        hier_status_t st = hier_run_advance(&q[r], 0, &net);
        if (st == HIER_IN_PROGRESS) continue;
        cr_assert_eq(st, HIER_OK, "%s: rank %d's call %d ended with %d", what, r, at[r], st);
        for (unsigned d = 0; d < HIER_RUN_DEPTH_MAX; d++)
            cr_assert(!hier_net_exec_busy(&b.x[n][l], d), "%s: rank %d's call over with run %u in flight", what, r, d);
        started[r] = 0;
        at[r]++;
        left--;
    }
    cr_assert_eq(left, 0, "%s: calls not over after %u turns (a hang)", what, TURNS_MAX);
    for (int k = 0; k < CALLS; k++) call_check(&calls[k], &b, k, what);
    if (keep) keep_outputs(keep, calls, &b);
    for (int k = 0; k < CALLS; k++) call_free(&calls[k], b.g);
    bed_close(&b);
}

static const lay_t layouts[] = {{2, {1, 1}}, {2, {2, 2}}, {3, {2, 1, 3}}, {4, {1, 2, 1, 2}}};

/* Every kind, algorithm and depth: counts of one chunk and of many (small
 * chunks against the channel's 1000-byte segments and 3 credits), in place
 * or not. */
static void sweep(hier_sched_kind_t kind, const hier_net_kind_t *nets, int nnets, const size_t *counts, int ncounts)
{
    unsigned seed = 7;
    for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++)
        for (unsigned depth = 1; depth <= HIER_RUN_DEPTH_MAX; depth++)
            for (int ni = 0; ni < nnets; ni++)
                for (int ci = 0; ci < ncounts; ci++)
                    for (int ip = 0; ip < 2; ip++) {
                        call_t shape = {.kind = kind, .net = nets[ni], .in_place = ip, .count = counts[ci],
                                        .radix = ni == 2 ? 3 : 2};
                        run_calls(&layouts[li], depth, ci % 2 ? 512 : 2048, &shape, seed++, 0, NULL);
                    }
}

Test(pipe, allreduce_every_depth_and_algorithm, .timeout = 300)
{
    static const hier_net_kind_t nets[] = {HIER_NET_RING_ALLREDUCE, HIER_NET_RD_ALLREDUCE, HIER_NET_RH_ALLREDUCE};
    static const size_t counts[] = {1, 301, 5000};
    sweep(HIER_SCHED_HIER_ALLREDUCE, nets, 3, counts, 3);
}

Test(pipe, allgather_every_depth_and_algorithm, .timeout = 300)
{
    static const hier_net_kind_t nets[] = {HIER_NET_RING_ALLGATHER, HIER_NET_RD_ALLGATHER, HIER_NET_RH_ALLGATHER};
    static const size_t counts[] = {3, 700, 9000};
    sweep(HIER_SCHED_HIER_ALLGATHER, nets, 3, counts, 3);
}

Test(pipe, reduce_scatter_every_depth_and_algorithm, .timeout = 300)
{
    static const hier_net_kind_t nets[] = {HIER_NET_RING_REDUCE_SCATTER, HIER_NET_RD_ALLREDUCE,
                                           HIER_NET_RH_REDUCE_SCATTER};
    static const size_t counts[] = {5, 900, 12000};
    sweep(HIER_SCHED_HIER_REDUCE_SCATTER, nets, 3, counts, 3);
}

/* A node's ranks leave in the middle of a call with several chunks in
 * flight (what ranks do that cannot wait any more): the other nodes' ranks
 * time out on the network, the leavers' node mates on their barriers;
 * every request ends with an error on its own looks, none hangs, and none
 * leaves a run in flight. */
Test(pipe, a_node_that_leaves_ends_every_request, .timeout = 60)
{
    static bed_t b;
    const lay_t L = {2, {2, 2}};
    call_t c = {.kind = HIER_SCHED_HIER_ALLREDUCE, .net = HIER_NET_RING_ALLREDUCE, .count = 200000};
    hier_run_req_t q[4];
    hier_sched_args_t args[4];
    hier_status_t st[4];
    hier_reduce_kernel_t kernel;
    hier_params_defaults(&hier_params);
    hier_params.timeout = 1;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_INT64, HIER_OP_SUM, &kernel), HIER_OK);
    bed_open(&b, &L, 3, 1024, 1, 0);
    call_make(&c, &b, 0);
    size_t cap = 1;
    for (int r = 0; r < 4; r++) {
        hier_sched_args_t a = call_args(&c, &b, r / 2, r % 2);
        size_t need = hier_sched_max_steps(&a);
        cap = need > cap ? need : cap;
    }
    bed_close(&b);
    bed_open(&b, &L, 3, 1024, cap, 0);
    for (int r = 0; r < 4; r++) {
        args[r] = call_args(&c, &b, r / 2, r % 2);
        hier_run_begin(&q[r], &b.run[r / 2][r % 2], &args[r], c.in[r], c.out[r], kernel);
        st[r] = HIER_IN_PROGRESS;
    }
    uint64_t net;
    for (int turn = 0; turn < 400; turn++, fake_turn++) /* (some chunks in) */
        for (int r = 0; r < 4; r++) st[r] = hier_run_advance(&q[r], 0, &net);
    for (int r = 0; r < 4; r++) cr_assert_eq(st[r], HIER_IN_PROGRESS, "rank %d's call over too soon", r);
    int inflight = 0;
    for (unsigned d = 0; d < HIER_RUN_DEPTH_MAX; d++) inflight += hier_net_exec_busy(&b.x[0][0], d);
    cr_assert_geq(inflight, 2, "depth 3, yet %d run(s) in flight", inflight);
    hier_shm_leave(b.nseg[1][1], &b.wait[1][1], HIER_ERR_TIMEOUT); /* node 1's rank 1 leaves, rank 2 stops */
    int left = 3;
    for (unsigned turn = 0; left && turn < TURNS_MAX; turn++, fake_turn++)
        for (int r = 0; r < 3; r++) {
            if (st[r] != HIER_IN_PROGRESS) continue;
            st[r] = hier_run_advance(&q[r], 0, &net);
            if (st[r] != HIER_IN_PROGRESS) left--;
        }
    cr_assert_eq(left, 0, "a request still waits");
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(st[r], HIER_ERR_TIMEOUT, "rank %d ended with %d", r, st[r]);
        for (unsigned d = 0; d < HIER_RUN_DEPTH_MAX; d++)
            cr_assert(!hier_net_exec_busy(&b.x[r / 2][r % 2], d), "rank %d left run %u in flight", r, d);
    }
    call_free(&c, b.g);
    bed_close(&b);
    hier_params_defaults(&hier_params);
}

/* The same schedules over Open MPI's point-to-point (hier_pml.c, its MPI
 * calls in memory) and over channels give the same bytes: every kind and
 * algorithm, even and uneven layouts, one chunk and many, in place or not,
 * reductions of doubles whose sum depends on the fold order. */
static void same_bytes(hier_sched_kind_t kind, const hier_net_kind_t *nets, int nnets, const size_t *counts,
                       int ncounts)
{
    unsigned seed = 11;
    for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++)
        for (unsigned depth = 1; depth <= HIER_RUN_DEPTH_MAX; depth += 2)
            for (int ni = 0; ni < nnets; ni++)
                for (int ci = 0; ci < ncounts; ci++)
                    for (int ip = 0; ip < 2; ip++) {
                        call_t shape = {.kind = kind, .net = nets[ni], .in_place = ip, .count = counts[ci],
                                        .radix = ni == 2 ? 3 : 2, .dbl = kind != HIER_SCHED_HIER_ALLGATHER};
                        kept_t chan = {0}, pml = {0};
                        size_t chunk = ci % 2 ? 512 : 2048;
                        run_calls(&layouts[li], depth, chunk, &shape, seed, 0, &chan);
                        run_calls(&layouts[li], depth, chunk, &shape, seed++, 1, &pml);
                        cr_assert_eq(chan.len, pml.len);
                        cr_assert(!memcmp(chan.bytes, pml.bytes, chan.len),
                                  "kind %d net %d layout %zu depth %u count %zu in place %d: the PML's result "
                                  "differs from the channels'", (int)kind, (int)nets[ni], li, depth, counts[ci], ip);
                        free(chan.bytes);
                        free(pml.bytes);
                    }
}

/* (the doubles above do depend on the order: the test can fail) */
Test(pipe, the_doubles_depend_on_the_fold_order)
{
    int differ = 0;
    for (size_t i = 0; i < 64; i++) {
        double up = 0, down = 0;
        for (int r = 0; r < 6; r++) up += dval(r, 0, i);
        for (int r = 5; r >= 0; r--) down += dval(r, 0, i);
        differ += up != down;
    }
    cr_assert_gt(differ, 8);
}

Test(pipe, allreduce_bitwise_the_same_over_the_pml, .timeout = 300)
{
    static const hier_net_kind_t nets[] = {HIER_NET_RING_ALLREDUCE, HIER_NET_RD_ALLREDUCE, HIER_NET_RH_ALLREDUCE};
    static const size_t counts[] = {1, 301, 5000};
    same_bytes(HIER_SCHED_HIER_ALLREDUCE, nets, 3, counts, 3);
}

Test(pipe, allgather_bitwise_the_same_over_the_pml, .timeout = 300)
{
    static const hier_net_kind_t nets[] = {HIER_NET_RING_ALLGATHER, HIER_NET_RD_ALLGATHER, HIER_NET_RH_ALLGATHER};
    static const size_t counts[] = {3, 700, 9000};
    same_bytes(HIER_SCHED_HIER_ALLGATHER, nets, 3, counts, 3);
}

Test(pipe, reduce_scatter_bitwise_the_same_over_the_pml, .timeout = 300)
{
    static const hier_net_kind_t nets[] = {HIER_NET_RING_REDUCE_SCATTER, HIER_NET_RD_ALLREDUCE,
                                           HIER_NET_RH_REDUCE_SCATTER};
    static const size_t counts[] = {5, 900, 12000};
    same_bytes(HIER_SCHED_HIER_REDUCE_SCATTER, nets, 3, counts, 3);
}
