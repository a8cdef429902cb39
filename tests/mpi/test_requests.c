/* test_requests: many nonblocking (or persistent) collectives outstanding at
 * once on several communicators, completed in every order, on the shapes
 * that break request engines: counts 0, 1, odd and large; in place and
 * not; reduce_scatter's uneven, zero and all-to-one recvcounts; 8-bit sums
 * that wrap. Every result is checked against a reference computed here.
 *
 *   test_requests [--seed S] [--rounds R] [--ops N] [--max-count N]
 *                 [--watchdog SECONDS] [--persistent] [--no-counters] [--verbose] [--mismatch ROUND]
 *
 * 1. communicators: world, a dup, a split with keys reversed, two halves
 *    (every other rank), world less its last rank (an odd size);
 * 2. per round (same on every rank from the seed): N calls on them, each a
 *    random collective, type, op, count, in place or not, recvcounts;
 *    started in their order, or (a rank's own draw) interleaved across
 *    communicators differently on every rank, each communicator's calls
 *    in order; a blocking allreduce among them now and then;
 * 3. completed by a rank's own draw: MPI_Waitall, MPI_Wait in order, in
 *    reverse or shuffled, MPI_Waitany, MPI_Testall, MPI_Testany,
 *    MPI_Testsome loops, MPI_Test round robin;
 * 4. every result and its guard bytes checked; an error from a request
 *    fails the case, and later rounds still run (a failed request must not
 *    poison the next ones);
 * 5. a dup made fresh now and then, its first calls nonblocking;
 *    --mismatch ROUND: that round's first call on the dup is an iallreduce
 *    on even ranks and an iallgather on odd ones: it fails on every rank,
 *    and every call after it completes, right (hier hands the dup's to the
 *    previous component from then on);
 * 6. the counters: hier served the calls it was given.
 * The watchdog (no round over in SECONDS): each rank prints its requests
 * not over and hier's account of where each stands in its plan
 * (mca_coll_hier_report, found in the loaded component), then exits 3. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h>
#endif
#if (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5) || MPI_VERSION >= 4
#define RQ_INIT(name) MPI_##name##_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define RQ_INIT(name) MPIX_##name##_init
#else
#define RQ_NO_PERSISTENT 1
#endif

enum { C_AR, C_AG, C_RS, C_RSB, C_BLOCKING_AR, C_KINDS };
static const char *const coll_names[C_KINDS] = {"iallreduce", "iallgather", "ireduce_scatter",
                                                "ireduce_scatter_block", "allreduce(blocking)"};
enum { T_INT, T_DOUBLE, T_FLOAT, T_UINT8, T_INT64, T_USHORT, T_TYPES };
static const char *const type_names[T_TYPES] = {"MPI_INT", "MPI_DOUBLE", "MPI_FLOAT", "MPI_UINT8_T", "MPI_INT64_T",
                                                "MPI_UNSIGNED_SHORT"};
static const size_t type_sizes[T_TYPES] = {4, 8, 4, 1, 8, 2};
enum { O_SUM, O_MAX, O_MIN, O_BOR, O_BXOR, O_OPS };
static const char *const op_names[O_OPS] = {"MPI_SUM", "MPI_MAX", "MPI_MIN", "MPI_BOR", "MPI_BXOR"};
enum { P_EVEN, P_UNEVEN, P_SOME_ZERO, P_ALL_TO_ONE, P_ALL_ZERO, P_PATTERNS };
static const char *const pattern_names[P_PATTERNS] = {"even", "uneven", "some zero", "all to one", "all zero"};
#define NCOMMS 6
static const char *const comm_names[NCOMMS] = {"world", "dup", "reversed", "halves", "world less one", "fresh dup"};
#define GUARD 16
#define MAX_OPS 64

typedef struct {
    int comm, coll, type, op, count, in_place, pattern, salt;
    int mismatch; /* --mismatch: odd ranks make it an iallgather where even ones make an iallreduce */
    /* this rank's */
    MPI_Request req;
    uint8_t *sbuf, *rbuf;
    size_t rbytes;
    int rcounts[256], np, me, started, over, err;
} op_t;

static int wrank, wsize;
static MPI_Comm comms[NCOMMS];
static op_t ops[MAX_OPS];
static int nops, round_no, persistent, verbose, mismatch_round = -1;
static long made[NCOLL], made_empty[NCOLL];

/* ---- draws ---- */

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int draw(uint64_t *s, int n) { return (int)(mix(s) % (uint64_t)n); }

/* ---- values: small integers, exact in every type; 8- and 16-bit sums wrap ---- */

static int64_t val(int rank, int i, int salt) { return ((rank + 1) * 37 + (int64_t)i * 11 + salt * 13) % 101; }

static void put(int t, void *b, size_t i, int64_t v)
{
    switch (t) {
    case T_INT: ((int32_t *)b)[i] = (int32_t)v; break;
    case T_DOUBLE: ((double *)b)[i] = (double)v; break;
    case T_FLOAT: ((float *)b)[i] = (float)v; break;
    case T_UINT8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case T_INT64: ((int64_t *)b)[i] = v; break;
    case T_USHORT: ((uint16_t *)b)[i] = (uint16_t)v; break;
    }
}

static int get(int t, const void *b, size_t i, int64_t *v)
{
    switch (t) {
    case T_INT: *v = ((const int32_t *)b)[i]; return 1;
    case T_DOUBLE: *v = (int64_t)((const double *)b)[i]; return (double)*v == ((const double *)b)[i];
    case T_FLOAT: *v = (int64_t)((const float *)b)[i]; return (float)*v == ((const float *)b)[i];
    case T_UINT8: *v = ((const uint8_t *)b)[i]; return 1;
    case T_INT64: *v = ((const int64_t *)b)[i]; return 1;
    case T_USHORT: *v = ((const uint16_t *)b)[i]; return 1;
    }
    return 0;
}

/* The reduction of element i over np ranks, in the type's arithmetic. */
static int64_t reduced(const op_t *o, int i)
{
    int64_t r = val(0, i, o->salt);
    for (int k = 1; k < o->np; k++) {
        int64_t v = val(k, i, o->salt);
        switch (o->op) {
        case O_SUM: r += v; break;
        case O_MAX: r = v > r ? v : r; break;
        case O_MIN: r = v < r ? v : r; break;
        case O_BOR: r |= v; break;
        case O_BXOR: r ^= v; break;
        }
    }
    if (o->type == T_UINT8) r = (uint8_t)r;
    if (o->type == T_USHORT) r = (uint16_t)r;
    return r;
}

static MPI_Datatype mpi_type(int t)
{
    switch (t) {
    case T_INT: return MPI_INT;
    case T_DOUBLE: return MPI_DOUBLE;
    case T_FLOAT: return MPI_FLOAT;
    case T_UINT8: return MPI_UINT8_T;
    case T_INT64: return MPI_INT64_T;
    default: return MPI_UNSIGNED_SHORT;
    }
}

static MPI_Op mpi_op(int o)
{
    return o == O_SUM ? MPI_SUM : o == O_MAX ? MPI_MAX : o == O_MIN ? MPI_MIN : o == O_BOR ? MPI_BOR : MPI_BXOR;
}

/* ---- one call ---- */

static int64_t total_of(const op_t *o)
{
    int64_t t = 0;
    for (int r = 0; r < o->np; r++) t += o->rcounts[r];
    return t;
}

static void counts_make(op_t *o)
{
    for (int r = 0; r < o->np; r++) {
        int c = o->count;
        switch (o->pattern) {
        case P_EVEN: break;
        case P_UNEVEN: c = o->count * (r % 3) + r % 2; break;
        case P_SOME_ZERO: c = r % 2 ? o->count : 0; break;
        case P_ALL_TO_ONE: c = r == (o->salt % o->np) ? o->count * o->np : 0; break;
        case P_ALL_ZERO: c = 0; break;
        }
        o->rcounts[r] = o->coll == C_RS ? c : o->count;
    }
}

/* Buffers and inputs of o on this rank; the receive buffer poisoned but
 * for in-place inputs, its guard set. */
static void op_prepare(op_t *o)
{
    size_t es = type_sizes[o->type], in = 0, out = 0;
    MPI_Comm_size(comms[o->comm], &o->np);
    MPI_Comm_rank(comms[o->comm], &o->me);
    if (o->mismatch && o->me % 2) o->coll = C_AG;
    counts_make(o);
    switch (o->coll) {
    case C_AR: case C_BLOCKING_AR: in = out = (size_t)o->count; break;
    case C_AG: in = (size_t)o->count, out = (size_t)o->count * (size_t)o->np; break;
    default: in = (size_t)total_of(o), out = o->in_place ? in : (size_t)o->rcounts[o->me]; break;
    }
    o->rbytes = out * es;
    o->sbuf = malloc(in * es + 1);
    o->rbuf = malloc(o->rbytes + GUARD);
    if (!o->sbuf || !o->rbuf) {
        fprintf(stderr, "[rank %d] no memory for a call of %zu elements\n", wrank, out);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(o->rbuf, 0x5A, o->rbytes);
    memset(o->rbuf + o->rbytes, 0xA5, GUARD);
    uint8_t *src = o->in_place ? o->rbuf : o->sbuf;
    size_t first = o->coll == C_AG && o->in_place ? (size_t)o->me * (size_t)o->count : 0;
    for (size_t i = 0; i < in; i++) put(o->type, src, first + i, val(o->me, (int)i, o->salt));
    o->req = MPI_REQUEST_NULL;
    o->started = o->over = 0;
    o->err = MPI_SUCCESS;
}

static const void *op_send(const op_t *o) { return o->in_place ? MPI_IN_PLACE : (const void *)o->sbuf; }

/* o's persistent request made (--persistent): its init is collective and
 * may wait (MPI 4.0, 6.13), so every rank makes them in the same order. */
static void op_init(op_t *o)
{
#ifndef RQ_NO_PERSISTENT
    MPI_Comm c = comms[o->comm];
    MPI_Datatype t = mpi_type(o->type);
    MPI_Op op = mpi_op(o->op);
    int rc = MPI_SUCCESS;
    switch (o->coll) {
    case C_AR: rc = RQ_INIT(Allreduce)(op_send(o), o->rbuf, o->count, t, op, c, MPI_INFO_NULL, &o->req); break;
    case C_AG:
        rc = o->in_place ? RQ_INIT(Allgather)(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, o->rbuf, o->count, t, c,
                                              MPI_INFO_NULL, &o->req)
                         : RQ_INIT(Allgather)(o->sbuf, o->count, t, o->rbuf, o->count, t, c, MPI_INFO_NULL, &o->req);
        break;
    case C_RS: rc = RQ_INIT(Reduce_scatter)(op_send(o), o->rbuf, o->rcounts, t, op, c, MPI_INFO_NULL, &o->req); break;
    case C_RSB: rc = RQ_INIT(Reduce_scatter_block)(op_send(o), o->rbuf, o->count, t, op, c, MPI_INFO_NULL, &o->req); break;
    default: return; /* (a blocking call) */
    }
    if (rc != MPI_SUCCESS) {
        o->err = rc;
        o->over = o->started = 1;
    }
#else
    (void)o;
#endif
}

/* Start o (its persistent request, made by op_init); a blocking call runs here. */
static void op_start(op_t *o)
{
    MPI_Comm c = comms[o->comm];
    MPI_Datatype t = mpi_type(o->type);
    MPI_Op op = mpi_op(o->op);
    int rc = MPI_SUCCESS;
    if (o->started) return; /* (its init failed) */
    o->started = 1;
    if (o->coll == C_BLOCKING_AR) {
        o->err = MPI_Allreduce(op_send(o), o->rbuf, o->count, t, op, c);
        o->over = 1;
        return;
    }
    made[o->coll]++;
    if (o->coll != C_AG && total_of(o) == 0) made_empty[o->coll]++; /* (Open MPI may complete these itself) */
    if (persistent) {
        rc = MPI_Start(&o->req);
    } else {
        switch (o->coll) {
        case C_AR: rc = MPI_Iallreduce(op_send(o), o->rbuf, o->count, t, op, c, &o->req); break;
        case C_AG:
            rc = o->in_place ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, o->rbuf, o->count, t, c, &o->req)
                             : MPI_Iallgather(o->sbuf, o->count, t, o->rbuf, o->count, t, c, &o->req);
            break;
        case C_RS: rc = MPI_Ireduce_scatter(op_send(o), o->rbuf, o->rcounts, t, op, c, &o->req); break;
        case C_RSB: rc = MPI_Ireduce_scatter_block(op_send(o), o->rbuf, o->count, t, op, c, &o->req); break;
        }
    }
    if (rc != MPI_SUCCESS) {
        o->err = rc;
        o->over = 1;
    }
}

static void op_describe(const op_t *o, char *s, size_t n)
{
    snprintf(s, n, "round %d: %s on %s (%d ranks, me %d), %s %s, count %d%s%s%s, salt %d", round_no,
             coll_names[o->coll], comm_names[o->comm], o->np, o->me, type_names[o->type], op_names[o->op], o->count,
             o->in_place ? ", in place" : "", o->coll == C_RS ? ", recvcounts " : "",
             o->coll == C_RS ? pattern_names[o->pattern] : "", o->salt);
}

/* o's result against the reference (4). */
static void op_check(op_t *o)
{
    char what[256];
    op_describe(o, what, sizeof(what));
    if (o->mismatch) {
        CHECK(o->err != MPI_SUCCESS, "%s: a mismatched call (iallreduce on even ranks, iallgather on odd) succeeded",
              what);
        return;
    }
    if (o->err != MPI_SUCCESS) {
        char es[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(o->err, es, &len);
        CHECK(0, "%s: error %d (%s)", what, o->err, es);
        return;
    }
    for (int g = 0; g < GUARD; g++)
        if (o->rbuf[o->rbytes + g] != 0xA5) {
            CHECK(0, "%s: written past the receive buffer", what);
            return;
        }
    size_t n = 0, first = 0;
    if (o->coll == C_AR || o->coll == C_BLOCKING_AR) n = (size_t)o->count;
    else if (o->coll == C_AG) n = (size_t)o->count * (size_t)o->np;
    else {
        n = (size_t)o->rcounts[o->me];
        for (int r = 0; r < o->me; r++) first += (size_t)o->rcounts[r];
    }
    for (size_t i = 0; i < n; i++) {
        int64_t want, got = 0;
        if (o->coll == C_AG) want = val((int)(i / (size_t)o->count), (int)(i % (size_t)o->count), o->salt);
        else want = reduced(o, (int)(first + i));
        if (!get(o->type, o->rbuf, i, &got) || got != want) {
            CHECK(0, "%s: element %zu is %lld, not %lld", what, i, (long long)got, (long long)want);
            return;
        }
    }
}

static void op_free(op_t *o)
{
    if (persistent && o->req != MPI_REQUEST_NULL) MPI_Request_free(&o->req);
    free(o->sbuf);
    free(o->rbuf);
    o->sbuf = o->rbuf = NULL;
}

/* ---- completion (3) ---- */

enum { W_ALL, W_ORDER, W_REVERSE, W_SHUFFLED, W_ANY, T_ALL, T_ANY, T_SOME, T_ROUND, HOWS };
static const char *const how_names[HOWS] = {"MPI_Waitall", "MPI_Wait in order", "MPI_Wait in reverse",
                                            "MPI_Wait shuffled", "MPI_Waitany", "MPI_Testall", "MPI_Testany",
                                            "MPI_Testsome", "MPI_Test round robin"};

/* The requests not over, and which op each is. */
static int pending(MPI_Request *reqs, int *which)
{
    int n = 0;
    for (int k = 0; k < nops; k++)
        if (ops[k].started && !ops[k].over) {
            reqs[n] = ops[k].req;
            which[n++] = k;
        }
    return n;
}

/* op_t's request back from reqs[i] (MPI_REQUEST_NULL once over, persistent ones inactive), its status. */
static void landed(MPI_Request *reqs, const int *which, int i, const MPI_Status *st, int rc)
{
    op_t *o = &ops[which[i]];
    o->req = reqs[i];
    o->over = 1;
    o->err = rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS ? rc : st ? st->MPI_ERROR : MPI_SUCCESS;
}

static void wait_one(MPI_Request *reqs, const int *which, int i)
{
    MPI_Status st;
    st.MPI_ERROR = MPI_SUCCESS;
    int rc = MPI_Wait(&reqs[i], &st);
    landed(reqs, which, i, NULL, rc);
}

static void complete(int how, uint64_t *mine)
{
    MPI_Request reqs[MAX_OPS];
    MPI_Status sts[MAX_OPS];
    int which[MAX_OPS], idx[MAX_OPS], n = pending(reqs, which), done, out;
    for (int i = 0; i < n; i++) sts[i].MPI_ERROR = MPI_SUCCESS;
    switch (how) {
    case W_ALL: {
        int rc = MPI_Waitall(n, reqs, sts);
        for (int i = 0; i < n; i++)
            if (rc != MPI_ERR_IN_STATUS || sts[i].MPI_ERROR != MPI_ERR_PENDING) landed(reqs, which, i, &sts[i], rc);
        break;
    }
    case W_ORDER: for (int i = 0; i < n; i++) wait_one(reqs, which, i); break;
    case W_REVERSE: for (int i = n - 1; i >= 0; i--) wait_one(reqs, which, i); break;
    case W_SHUFFLED:
        for (int i = 0; i < n; i++) idx[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = draw(mine, i + 1), t = idx[i];
            idx[i] = idx[j], idx[j] = t;
        }
        for (int i = 0; i < n; i++) wait_one(reqs, which, idx[i]);
        break;
    case W_ANY:
        for (int left = n; left > 0; left--) {
            int i, rc = MPI_Waitany(n, reqs, &i, &sts[0]);
            if (i == MPI_UNDEFINED) break;
            landed(reqs, which, i, rc == MPI_SUCCESS ? NULL : &sts[0], rc);
        }
        break;
    case T_ALL:
        do {
            int rc = MPI_Testall(n, reqs, &done, sts);
            if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) done = 1;
            if (done || rc == MPI_ERR_IN_STATUS) {
                for (int i = 0; i < n; i++)
                    if (!done && rc == MPI_ERR_IN_STATUS && sts[i].MPI_ERROR == MPI_ERR_PENDING) continue;
                    else if (!ops[which[i]].over) landed(reqs, which, i, &sts[i], rc);
                done = 1;
                for (int i = 0; i < n; i++) done &= ops[which[i]].over;
            }
        } while (!done);
        break;
    case T_ANY:
        for (int left = n; left > 0;) {
            int i, rc = MPI_Testany(n, reqs, &i, &done, &sts[0]);
            if (done && i == MPI_UNDEFINED) break;
            if (done || rc != MPI_SUCCESS) {
                if (i == MPI_UNDEFINED) break;
                landed(reqs, which, i, rc == MPI_SUCCESS ? NULL : &sts[0], rc);
                left--;
            }
        }
        break;
    case T_SOME:
        for (int left = n; left > 0;) {
            int rc = MPI_Testsome(n, reqs, &out, idx, sts);
            if (out == MPI_UNDEFINED) break;
            for (int j = 0; j < out; j++) landed(reqs, which, idx[j], rc == MPI_SUCCESS ? NULL : &sts[j], rc);
            left -= out;
        }
        break;
    case T_ROUND:
        for (int left = n; left > 0;)
            for (int i = 0; i < n; i++) {
                if (ops[which[i]].over) continue;
                int rc = MPI_Test(&reqs[i], &done, &sts[0]);
                if (done || rc != MPI_SUCCESS) {
                    landed(reqs, which, i, NULL, rc);
                    left--;
                }
            }
        break;
    }
    for (int k = 0; k < nops; k++) /* (an error that left a request behind: finish it) */
        if (ops[k].started && !ops[k].over) {
            MPI_Status st;
            ops[k].err = MPI_Wait(&ops[k].req, &st);
            ops[k].over = 1;
        }
}

/* ---- a round (2) ---- */

static int max_count = 70000;

static int count_draw(uint64_t *g)
{
    switch (draw(g, 10)) {
    case 0: return 0;
    case 1: case 2: return 1;
    case 3: return 2 + draw(g, 8);
    case 4: case 5: case 6: return 11 + 2 * draw(g, 495);
    case 7: case 8: return 1000 + draw(g, 9000);
    default: return (max_count / 2 + draw(g, max_count / 2 + 1)) | 1;
    }
}

/* The round's calls, the same on every rank (g); no blocking call with `interleaved`. */
static void round_make(uint64_t *g, int n, int interleaved)
{
    nops = 0;
    for (int k = 0; k < n; k++) {
        op_t o = {.comm = draw(g, NCOMMS), .salt = draw(g, 1000)};
        int c = draw(g, 20);
        o.coll = c < 7 ? C_AR : c < 12 ? C_AG : c < 16 ? C_RS : c < 19 ? C_RSB : C_BLOCKING_AR;
        if (o.coll == C_BLOCKING_AR && (interleaved || persistent)) o.coll = C_AR;
        o.type = draw(g, T_TYPES);
        o.op = draw(g, o.type == T_DOUBLE || o.type == T_FLOAT ? O_BOR : O_OPS);
        o.count = count_draw(g);
        o.in_place = draw(g, 10) < 3;
        o.pattern = draw(g, P_PATTERNS);
        if (o.coll == C_AG || o.coll == C_RSB || o.coll == C_RS) o.count = o.count / 4 + (o.count & 1);
        if (comms[o.comm] == MPI_COMM_NULL) continue; /* (not a member: every member draws the same) */
        if (mismatch_round >= 0 && round_no >= mismatch_round && o.comm == 1 && o.op == O_SUM &&
            (o.type == T_UINT8 || o.type == T_USHORT))
            o.type = T_INT; /* (the previous component's then: Open MPI 4.1 and 5.0 saturate these sums) */
        ops[nops++] = o;
    }
    if (round_no == mismatch_round && nops < MAX_OPS) { /* first, on the dup: the calls after it must still complete */
        memmove(&ops[1], &ops[0], (size_t)nops * sizeof(ops[0]));
        ops[0] = (op_t){.comm = 1, .coll = C_AR, .type = T_INT, .op = O_SUM, .count = 5, .salt = 7, .mismatch = 1};
        nops++;
    }
}

/* Start every call: in order, or each communicator's in order with the
 * communicators interleaved by this rank's draw (mine). */
static void round_start(int interleaved, uint64_t *mine)
{
    int next[NCOMMS] = {0};
    if (!interleaved) {
        for (int k = 0; k < nops; k++) op_start(&ops[k]);
        return;
    }
    for (int left = nops; left > 0; left--) {
        int c, k;
        do { /* a communicator with calls left */
            c = draw(mine, NCOMMS);
            for (k = next[c]; k < nops && ops[k].comm != c; k++) {}
        } while (k >= nops);
        op_start(&ops[k]);
        next[c] = k + 1;
    }
}

/* ---- the watchdog ---- */

static void (*hier_report)(void); /* coll_hier's account of its requests, where it has one */

static void watchdog(int sig)
{
    char line[512];
    (void)sig;
    int len = snprintf(line, sizeof(line), "[rank %d] WATCHDOG: round %d not over; requests not over:\n", wrank,
                       round_no);
    (void)!write(2, line, (size_t)len);
    for (int k = 0; k < nops; k++)
        if (ops[k].started && !ops[k].over) {
            char what[256];
            op_describe(&ops[k], what, sizeof(what));
            len = snprintf(line, sizeof(line), "[rank %d]   call %d: %s\n", wrank, k, what);
            (void)!write(2, line, (size_t)len);
        }
    if (hier_report) hier_report();
    _exit(3);
}

static int find_hier(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (!strstr(info->dlpi_name, "mca_coll_hier")) return 0;
    void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (h) *(void **)arg = dlsym(h, "mca_coll_hier_report");
    return 1;
}

/* ---- communicators (1, 5) ---- */

static void comms_make(void)
{
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, -wrank, &comms[2]);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &comms[3]);
    MPI_Comm_split(MPI_COMM_WORLD, wrank < wsize - 1 || wsize == 1 ? 0 : MPI_UNDEFINED, wrank, &comms[4]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[5]);
    for (int c = 0; c < NCOMMS; c++)
        if (comms[c] != MPI_COMM_NULL) MPI_Comm_set_errhandler(comms[c], MPI_ERRORS_RETURN);
}

static void comms_free(void)
{
    for (int c = 1; c < NCOMMS; c++)
        if (comms[c] != MPI_COMM_NULL) MPI_Comm_free(&comms[c]);
}

/* The counters now (their handles made at the first read: counting starts then). */
static void counters_read(check_nb_counters_t *nb)
{
    if (persistent) check_pc_read(nb);
    else check_nb_read(nb);
}

/* 6: hier served every nonblocking (persistent) call it was given since `before`. */
static void counters_check(const check_nb_counters_t *before)
{
    check_nb_counters_t nb;
    counters_read(&nb);
    for (int c = 0; c < NCOLL; c++) {
        nb.served[c] -= before->served[c];
        nb.fallback[c] -= before->fallback[c];
        /* (Open MPI's communicator ids are agreed by iallreduces of its own: more than made) */
        long least = made[c] - made_empty[c];
        int ok = nb.served[c] >= (unsigned long)least && (c == 0 || nb.served[c] <= (unsigned long)made[c]);
        if (mismatch_round >= 0) { /* (the dup's calls from the mismatch on go to the previous component) */
            int why = check_nb_reason_index("fallback_mismatch");
            ok = nb.fallback[c] == (why >= 0 ? nb.reason_calls[c][why] - before->reason_calls[c][why] : 0);
            CHECK(ok, "%s: calls fell back for another reason than the mismatch", check_nb_colls[c]);
            continue;
        }
        CHECK(ok && !nb.fallback[c], "%s: hier served %lu of the %ld calls made, %lu fell back",
              persistent ? check_pc_colls[c] : check_nb_colls[c], nb.served[c], made[c], nb.fallback[c]);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    int rounds = 40, per_round = 12, secs = 120, counters = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) per_round = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-count") && i + 1 < argc) max_count = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--watchdog") && i + 1 < argc) secs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--persistent")) persistent = 1;
        else if (!strcmp(argv[i], "--no-counters")) counters = 0;
        else if (!strcmp(argv[i], "--verbose")) verbose = 1;
        else if (!strcmp(argv[i], "--mismatch") && i + 1 < argc) mismatch_round = atoi(argv[++i]);
        else {
            fprintf(stderr, "test_requests: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (per_round < 1 || per_round > MAX_OPS || max_count < 2) {
        fprintf(stderr, "test_requests: --ops 1..%d, --max-count 2 or more\n", MAX_OPS);
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
#ifdef RQ_NO_PERSISTENT
    if (persistent) {
        if (wrank == 0) printf("SKIP: this MPI has no persistent collectives (MPI 4.0 or Open MPI's MPIX)\n");
        MPI_Finalize();
        return 0; /* (run_mpi_tests.sh reports the SKIP line) */
    }
#endif
    int have_hier = check_pvars_open() == 0;
    if (counters && !have_hier) {
        if (wrank == 0) fprintf(stderr, "test_requests: coll/hier is not loaded (its counters are missing)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check_nb_counters_t before;
    if (have_hier) counters_read(&before);
    dl_iterate_phdr(find_hier, &hier_report);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    signal(SIGALRM, watchdog);
    comms_make();
    uint64_t g = seed * 0x2545F4914F6CDD1Dull, mine = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)wrank << 32;
    int hows[HOWS] = {0};
    for (round_no = 0; round_no < rounds; round_no++) {
        alarm((unsigned)secs);
        if (round_no % 5 == 4) { /* 5: a fresh dup, its first calls nonblocking */
            MPI_Comm_free(&comms[5]);
            MPI_Comm_dup(MPI_COMM_WORLD, &comms[5]);
            MPI_Comm_set_errhandler(comms[5], MPI_ERRORS_RETURN);
        }
        int interleaved = draw(&g, 2) && round_no != mismatch_round;
        round_make(&g, 1 + draw(&g, per_round), interleaved);
        for (int k = 0; k < nops; k++) op_prepare(&ops[k]);
        for (int k = 0; persistent && k < nops; k++) op_init(&ops[k]);
        for (int k = 0; verbose && k < nops; k++) {
            char what[256];
            op_describe(&ops[k], what, sizeof(what));
            fprintf(stderr, "[rank %d] call %d: %s\n", wrank, k, what);
        }
        round_start(interleaved, &mine);
        int how = draw(&mine, HOWS);
        hows[how]++;
        complete(how, &mine);
        long before = check_failures;
        for (int k = 0; k < nops; k++) op_check(&ops[k]);
        if (check_failures > before && before < 20)
            fprintf(stderr, "[rank %d] (round %d: %d calls, %s, completed by %s)\n", wrank, round_no, nops,
                    interleaved ? "started interleaved" : "started in order", how_names[how]);
        for (int k = 0; k < nops; k++) op_free(&ops[k]);
    }
    alarm(0);
    if (counters) counters_check(&before);
    comms_free();
    if (wrank == 0) {
        printf("test_requests: seed %llu, %d rounds on %d ranks%s; completions:", (unsigned long long)seed, rounds,
               wsize, persistent ? ", persistent" : "");
        for (int h = 0; h < HOWS; h++) printf(" %s %d%s", how_names[h], hows[h], h + 1 < HOWS ? "," : "\n");
    }
    return check_finish(persistent ? "test_requests --persistent" : "test_requests");
}
