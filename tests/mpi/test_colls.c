/* test_colls: every predefined type x op x count x in-place for allreduce,
 * reduce_scatter, reduce_scatter_block and allgather, on several
 * communicators, checked against references computed here from each rank's
 * known inputs; MPI_T counters prove which path served each call.
 *
 *   test_colls [--expect served|fallback:<reason>] [--allreduce-path NAME] [--allgather-path NAME]
 *              [--net] [--quick]
 *              [--direct-min BYTES]   (device allgathers with blocks of BYTES or more go peer direct)
 *              [--warm]   (first: allreduces until one goes over libfabric, each before over Open MPI's
 *                          point-to-point)
 *
 * With HIER_TEST_DEVICE=1 in the environment every buffer handed to MPI is
 * "device memory" of the test backend (tests/common/test_dev_backend.c: the
 * CPU faults on it), which this program registers with hier after MPI_Init
 * (tdev_register_with_component); the counters must then show every call staged.
 * HIER_TEST_DEVICE=even: only even ranks' buffers are device memory (ranks
 * may mix host and device buffers in one call).
 */
#include <complex.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "mpi_check.h"
#include "test_dev_backend.h"

/* ---------------------------------------------------------------- buffers */

static int device; /* HIER_TEST_DEVICE set (=even: on even ranks): buffers handed to MPI are device memory */
static int device_even; /* HIER_TEST_DEVICE=even */

/* Whether every rank of comm hands device memory to MPI (no collective:
 * world ranks decide). */
static int comm_all_device(MPI_Comm comm)
{
    if (!device_even) return device;
    MPI_Group world, g;
    int n, ok = 1;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Comm_group(comm, &g);
    MPI_Group_size(g, &n);
    int *mine = malloc(sizeof(int) * (size_t)n), *w = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) mine[i] = i;
    MPI_Group_translate_ranks(g, n, mine, world, w);
    for (int i = 0; i < n; i++) ok &= w[i] % 2 == 0;
    free(mine), free(w);
    MPI_Group_free(&g), MPI_Group_free(&world);
    return ok;
}

typedef tdev_buf_t xbuf_t; /* p: what MPI gets; h: what this program reads and writes */

static xbuf_t xalloc(size_t bytes)
{
    return tdev_buf_alloc(device, bytes);
}

static void xfree(xbuf_t b)
{
    tdev_buf_free(device, b);
}

#include "test_colls_types.h"

/* ---------------------------------------------------------------- values */

typedef struct {
    uint64_t u;           /* integers: bit pattern, normalised to the width */
    long double f;        /* floats, pair values */
    long double _Complex c;
    long k;               /* pair index */
} val_t;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* Truncate to the width and sign-extend signed kinds, so comparisons work in 64 bits. */
static uint64_t norm(const ttype_t *t, uint64_t u)
{
    if (t->size >= 8) return u;
    uint64_t mask = (1ULL << (8 * t->size)) - 1;
    u &= mask;
    if ((t->kind == K_INT || t->kind == K_LOGICAL) && (u >> (8 * t->size - 1)) & 1) u |= ~mask;
    return u;
}

static long double round_to(int sub, long double x)
{
    return sub == 0 ? (long double)(float)x : sub == 1 ? (long double)(double)x : x;
}

/* Input element i of `rank` for op o: chosen so the exact result is known. */
static val_t gen(const ttype_t *t, int o, int rank, size_t i)
{
    val_t v = {0};
    uint64_t h = mix((uint64_t)i * 7919 + (uint64_t)rank * 104729 + (uint64_t)o * 31 + 1);
    switch (t->kind) {
    case K_INT: case K_UINT: case K_BYTE:
        v.u = norm(t, h); /* full range: wraps, sign bits, unsigned top bit */
        if (o >= O_LAND && o <= O_LXOR && h % 3 == 0) v.u = 0;
        break;
    case K_BOOL: case K_LOGICAL: v.u = (h >> 7) % 2; break;
    case K_FLOAT:
        if (o == O_PROD) v.f = (long double)((int)(h % 5) - 2) * 0.5L + (h % 5 == 2 ? 1 : 0); /* -1,-0.5,1,0.5,1 */
        else v.f = (long double)((int64_t)(h % 2001) - 1000) / 4;                           /* exact quarters */
        break;
    case K_COMPLEX: {
        int a = (int)(h % 5) - 2, b = (int)((h >> 8) % 5) - 2;
        if (o == O_PROD) { a = a ? a / abs(a) : 1; b = (h >> 16) % 2; } /* +-1 or +-1+i: products stay exact */
        v.c = (long double)a + (long double)b * I;
        break;
    }
    case K_PAIR:
        v.f = (long double)((int64_t)(h % 4) - 1); /* few distinct values: many ties */
        v.k = (long)((rank * 7 + (int)(i % 5)) % 11);
        break;
    }
    return v;
}

static val_t apply(const ttype_t *t, int o, val_t a, val_t b)
{
    val_t r = a;
    int is_signed = t->kind == K_INT;
    switch (t->kind) {
    case K_INT: case K_UINT: case K_BYTE: case K_BOOL: case K_LOGICAL:
        switch (o) {
        case O_SUM: r.u = a.u + b.u; break;
        case O_PROD: r.u = a.u * b.u; break;
        case O_MIN: r.u = is_signed ? ((int64_t)a.u < (int64_t)b.u ? a.u : b.u) : (a.u < b.u ? a.u : b.u); break;
        case O_MAX: r.u = is_signed ? ((int64_t)a.u > (int64_t)b.u ? a.u : b.u) : (a.u > b.u ? a.u : b.u); break;
        case O_LAND: r.u = a.u && b.u; break;
        case O_LOR: r.u = a.u || b.u; break;
        case O_LXOR: r.u = !a.u != !b.u; break;
        case O_BAND: r.u = a.u & b.u; break;
        case O_BOR: r.u = a.u | b.u; break;
        case O_BXOR: r.u = a.u ^ b.u; break;
        }
        r.u = norm(t, r.u);
        break;
    case K_FLOAT:
        switch (o) {
        case O_SUM: r.f = a.f + b.f; break;
        case O_PROD: r.f = a.f * b.f; break;
        case O_MIN: r.f = a.f < b.f ? a.f : b.f; break;
        case O_MAX: r.f = a.f > b.f ? a.f : b.f; break;
        }
        r.f = round_to(t->sub, r.f);
        break;
    case K_COMPLEX: r.c = o == O_SUM ? a.c + b.c : a.c * b.c; break;
    case K_PAIR:
        if ((o == O_MINLOC && b.f < a.f) || (o == O_MAXLOC && b.f > a.f)) r = b;
        else if (a.f == b.f) r.k = a.k < b.k ? a.k : b.k;
        break;
    }
    return r;
}

static void store(const ttype_t *t, void *buf, size_t i, val_t v)
{
    char *p = (char *)buf + i * t->size;
    switch (t->kind) {
    case K_INT: case K_UINT: case K_BYTE: case K_LOGICAL: memcpy(p, &v.u, t->size); break; /* little endian */
    case K_BOOL: *(_Bool *)p = v.u != 0; break;
    case K_FLOAT:
        if (t->sub == 0) *(float *)p = (float)v.f;
        else if (t->sub == 1) *(double *)p = (double)v.f;
        else *(long double *)p = v.f;
        break;
    case K_COMPLEX:
        if (t->sub == 0) *(float _Complex *)p = (float _Complex)v.c;
        else if (t->sub == 1) *(double _Complex *)p = (double _Complex)v.c;
        else *(long double _Complex *)p = v.c;
        break;
    case K_PAIR:
        switch (t->sub) {
        case V_F: ((p_fi *)p)->v = (float)v.f; ((p_fi *)p)->k = (int)v.k; break;
        case V_D: ((p_di *)p)->v = (double)v.f; ((p_di *)p)->k = (int)v.k; break;
        case V_LD: ((p_ldi *)p)->v = v.f; ((p_ldi *)p)->k = (int)v.k; break;
        case V_L: ((p_li *)p)->v = (long)v.f; ((p_li *)p)->k = (int)v.k; break;
        case V_I: ((p_ii *)p)->v = (int)v.f; ((p_ii *)p)->k = (int)v.k; break;
        case V_S: ((p_si *)p)->v = (short)v.f; ((p_si *)p)->k = (int)v.k; break;
        case V_FF: ((p_ff *)p)->v = (float)v.f; ((p_ff *)p)->k = (float)v.k; break;
        case V_DD: ((p_dd *)p)->v = (double)v.f; ((p_dd *)p)->k = (double)v.k; break;
        }
        break;
    }
}

/* Compare element i by value (padding bytes of long double and pairs are not data). */
static int same(const ttype_t *t, const void *got, const void *want, size_t i)
{
    const char *g = (const char *)got + i * t->size, *w = (const char *)want + i * t->size;
    switch (t->kind) {
    case K_FLOAT:
        if (t->sub == 2) return *(const long double *)g == *(const long double *)w;
        return !memcmp(g, w, t->size);
    case K_COMPLEX: /* by value: the sign of a zero part depends on association order */
        if (t->sub == 2) return *(const long double _Complex *)g == *(const long double _Complex *)w;
        if (t->sub == 1) return *(const double _Complex *)g == *(const double _Complex *)w;
        return *(const float _Complex *)g == *(const float _Complex *)w;
    case K_PAIR:
        switch (t->sub) {
        case V_F: return ((p_fi *)g)->v == ((p_fi *)w)->v && ((p_fi *)g)->k == ((p_fi *)w)->k;
        case V_D: return ((p_di *)g)->v == ((p_di *)w)->v && ((p_di *)g)->k == ((p_di *)w)->k;
        case V_LD: return ((p_ldi *)g)->v == ((p_ldi *)w)->v && ((p_ldi *)g)->k == ((p_ldi *)w)->k;
        case V_L: return ((p_li *)g)->v == ((p_li *)w)->v && ((p_li *)g)->k == ((p_li *)w)->k;
        case V_I: return ((p_ii *)g)->v == ((p_ii *)w)->v && ((p_ii *)g)->k == ((p_ii *)w)->k;
        case V_S: return ((p_si *)g)->v == ((p_si *)w)->v && ((p_si *)g)->k == ((p_si *)w)->k;
        case V_FF: return ((p_ff *)g)->v == ((p_ff *)w)->v && ((p_ff *)g)->k == ((p_ff *)w)->k;
        case V_DD: return ((p_dd *)g)->v == ((p_dd *)w)->v && ((p_dd *)g)->k == ((p_dd *)w)->k;
        }
        return 0;
    default: return !memcmp(g, w, t->size);
    }
}

/* ---------------------------------------------------------------- runs */

typedef struct {
    long calls[NCOLL]; /* calls that reach the component */
    long single[NCOLL]; /* those on one-rank communicators (path self) */
    long direct[NCOLL]; /* device allgathers that must go NIC to NIC (path net_direct) */
} expect_t;

static int quick;
static int skip_ompi_bugs;
static size_t direct_min; /* --direct-min: device allgathers with blocks this large go peer direct */
static size_t chunk = 4096; /* must match coll_hier_shm_chunk_size of the run */

/* Counts: 0, 1, 3, a prime, more than one chunk, more than the whole segment. */
static size_t counts_for(const ttype_t *t, int n, size_t *out)
{
    size_t k = 0;
    out[k++] = 0;
    out[k++] = 1;
    out[k++] = 3;
    out[k++] = 97;
    out[k++] = chunk / t->size + 17;
    if (t->big && !quick) out[k++] = (size_t)n * 2 * chunk / t->size + 1001;
    return k;
}

static void fold_expect(const ttype_t *t, int o, int n, size_t first, size_t count, void *want)
{
    for (size_t i = 0; i < count; i++) {
        val_t acc = gen(t, o, 0, first + i);
        for (int r = 1; r < n; r++) acc = apply(t, o, acc, gen(t, o, r, first + i));
        store(t, want, i, acc);
    }
}

static void fill_input(const ttype_t *t, int o, int rank, size_t count, void *buf)
{
    for (size_t i = 0; i < count; i++) store(t, buf, i, gen(t, o, rank, i));
}

static void compare(const char *what, const ttype_t *t, int o, size_t count, int inplace, MPI_Comm comm,
                    const void *got, const void *want)
{
    for (size_t i = 0; i < count; i++)
        if (!same(t, got, want, i)) {
            char cname[MPI_MAX_OBJECT_NAME];
            int len;
            MPI_Comm_get_name(comm, cname, &len);
            CHECK(0, "%s %s %s count %zu inplace %d comm %s: element %zu differs", what, t->name, ops[o].name,
                  count, inplace, cname, i);
            return;
        }
}

static void run_allreduce(const ttype_t *t, int o, size_t count, int inplace, MPI_Comm comm, expect_t *e)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t bytes = count * t->size + 1;
    xbuf_t s = xalloc(bytes), r = xalloc(bytes);
    char *w = malloc(bytes);
    memset(r.h, 0x5a, bytes);
    fill_input(t, o, rank, count, inplace ? r.h : s.h);
    MPI_Allreduce(inplace ? MPI_IN_PLACE : s.p, r.p, (int)count, t->dt, ops[o].op, comm);
    fold_expect(t, o, n, 0, count, w);
    compare("allreduce", t, o, count, inplace, comm, r.h, w);
    e->calls[0] += count > 0; /* Open MPI returns before the component when there is nothing to do */
    e->single[0] += count > 0 && n == 1;
    xfree(s), xfree(r), free(w);
}

/* rcounts: uneven, with zeros; block: the _block variant */
static void run_reduce_scatter(const ttype_t *t, int o, size_t count, int inplace, int block, MPI_Comm comm,
                               expect_t *e)
{
    int rank, n, rc[256];
    size_t total = 0, mine = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    for (int j = 0; j < n; j++) {
        rc[j] = block ? (int)count : (int)((j + count) % 3 == 0 ? 0 : count + (size_t)j);
        if (j < rank) mine += (size_t)rc[j];
        total += (size_t)rc[j];
    }
    size_t bytes = total * t->size + 1;
    xbuf_t s = xalloc(bytes), r = xalloc(bytes);
    char *w = malloc(bytes);
    memset(r.h, 0x5a, bytes);
    fill_input(t, o, rank, total, inplace ? r.h : s.h);
    /* the input vector of rank r is gen(r, i) for i over the whole vector */
    if (block)
        MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : s.p, r.p, (int)count, t->dt, ops[o].op, comm);
    else
        MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : s.p, r.p, rc, t->dt, ops[o].op, comm);
    fold_expect(t, o, n, mine, (size_t)rc[rank], w);
    compare(block ? "reduce_scatter_block" : "reduce_scatter", t, o, (size_t)rc[rank], inplace, comm, r.h, w);
    e->calls[block ? 3 : 2] += total > 0;
    e->single[block ? 3 : 2] += total > 0 && n == 1;
    xfree(s), xfree(r), free(w);
}

static void run_allgather(MPI_Datatype sdt, size_t ssize, MPI_Datatype rdt, size_t rsize, size_t scount,
                          int inplace, MPI_Comm comm, expect_t *e)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t block = scount * ssize, rcount = block / rsize;
    xbuf_t sx = xalloc(block + 1), rx = xalloc(block * (size_t)n + 1);
    unsigned char *s = (unsigned char *)sx.h, *r = (unsigned char *)rx.h;
    memset(r, 0x5a, block * (size_t)n + 1);
    unsigned char *mine = inplace ? r + (size_t)rank * block : s;
    for (size_t i = 0; i < block; i++) mine[i] = (unsigned char)mix((uint64_t)rank * 1000003 + i);
    MPI_Allgather(inplace ? MPI_IN_PLACE : sx.p, (int)scount, sdt, rx.p, (int)rcount, rdt, comm);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < block; i++)
            if (r[(size_t)j * block + i] != (unsigned char)mix((uint64_t)j * 1000003 + i)) {
                CHECK(0, "allgather count %zu inplace %d: block %d byte %zu differs", scount, inplace, j, i);
                j = n;
                break;
            }
    CHECK(r[block * (size_t)n] == 0x5a, "allgather wrote past the receive buffer");
    e->calls[1] += rcount > 0;
    e->single[1] += rcount > 0 && n == 1;
    e->direct[1] += direct_min && rcount > 0 && n > 1 && block >= direct_min && comm_all_device(comm);
    xfree(sx), xfree(rx);
}

/* Allgather with strided layouts: ints at even positions, sent as one
 * vector of k (receive contiguous), then received as one vector per rank
 * (send contiguous). Packed on the host, or, for device buffers, through
 * host mirrors of the whole span. */
static void strided_allgather(MPI_Comm comm, int k, expect_t *e)
{
    int rank, n;
    MPI_Datatype vec;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    MPI_Type_vector(k, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    size_t span = (size_t)n * (size_t)(2 * k) + 2;
    xbuf_t s = xalloc(span * sizeof(int)), r = xalloc(span * sizeof(int));
    int *sh = (int *)s.h, *rh = (int *)r.h;
    for (size_t i = 0; i < span; i++) sh[i] = rh[i] = -7;
    for (int i = 0; i < k; i++) sh[2 * i] = rank * 1000 + i;
    /* Open MPI 5.0.7's han (the component under hier there) gets both
     * wrong between nodes, without hier too (it moves the blocks as if both
     * sides' types had the same layout): when the fallback computes
     * (--skip-ompi-bugs), they are not checked */
    int check = !skip_ompi_bugs;
    MPI_Allgather(s.p, 1, vec, r.p, k, MPI_INT, comm); /* 1. strided send */
    for (int j = 0; j < n && check; j++)
        for (int i = 0; i < k; i++)
            CHECK(rh[j * k + i] == j * 1000 + i, "strided-send allgather k %d: block %d [%d] = %d", k, j, i,
                  rh[j * k + i]);
    for (size_t i = 0; i < span; i++) rh[i] = -7;
    for (int i = 0; i < k; i++) sh[i] = rank * 1000 + i;
    MPI_Allgather(s.p, k, MPI_INT, r.p, 1, vec, comm); /* 2. strided receive: block j at j (2k - 1) */
    for (int j = 0; j < n && check; j++)
        for (int i = 0; i < k; i++)
            CHECK(rh[j * (2 * k - 1) + 2 * i] == j * 1000 + i, "strided-receive allgather k %d: block %d [%d]", k,
                  j, i);
    CHECK(!check || rh[0 * (2 * k - 1) + 1] == -7 || k == 1, "strided-receive allgather wrote into a gap");
    e->calls[1] += 2;
    e->single[1] += 2 * (n == 1);
    xfree(s), xfree(r);
    MPI_Type_free(&vec);
}

/* Every type x op x count x in-place on one communicator. */
static void sweep(MPI_Comm comm, expect_t *e)
{
    int n;
    MPI_Comm_size(comm, &n);
    for (int ti = 0; ti < ntypes; ti++) {
        const ttype_t *t = &types[ti];
        size_t counts[8], nc = counts_for(t, n, counts);
        for (int o = 0; o < NOPS; o++) {
            if (!sweep_checks(t, o)) continue;
            /* Open MPI 4.1.4 compares MPI_UNSIGNED_LONG as signed and MPI_OFFSET as
             * unsigned in MIN/MAX: when the fallback computes (--skip-ompi-bugs),
             * that is its bug, not ours */
            if (skip_ompi_bugs && (t->dt == MPI_UNSIGNED_LONG || t->dt == MPI_OFFSET) && (o == O_MIN || o == O_MAX))
                continue;
            for (size_t ci = 0; ci < nc; ci++)
                for (int ip = 0; ip < 2; ip++) {
                    run_allreduce(t, o, counts[ci], ip, comm, e);
                    if (counts[ci] > 100 && o != O_SUM && o != O_MINLOC) continue; /* keep it short */
                    run_reduce_scatter(t, o, counts[ci] / (size_t)n + (counts[ci] > 3), ip, 0, comm, e);
                    run_reduce_scatter(t, o, counts[ci] / (size_t)n, ip, 1, comm, e);
                }
        }
    }
    /* allgather moves bytes: a few layouts, mixed send and receive types */
    MPI_Datatype c3;
    MPI_Type_contiguous(3, MPI_INT, &c3);
    MPI_Type_commit(&c3);
    size_t gcounts[] = {0, 1, 3, 97, chunk + 5, quick ? 7 : (size_t)n * 2 * chunk + 11};
    for (size_t ci = 0; ci < sizeof(gcounts) / sizeof(gcounts[0]); ci++)
        for (int ip = 0; ip < 2; ip++) {
            run_allgather(MPI_BYTE, 1, MPI_BYTE, 1, gcounts[ci], ip, comm, e);
            run_allgather(MPI_DOUBLE, 8, MPI_DOUBLE, 8, gcounts[ci] / 8 + 1, ip, comm, e);
            run_allgather(c3, 12, MPI_INT, 4, gcounts[ci] / 12 + 1, ip, comm, e);
        }
    MPI_Type_free(&c3);
    strided_allgather(comm, 1, e);
    strided_allgather(comm, 37, e);
}

/* A contiguous derived type reduces like its base type. */
static void derived(MPI_Comm comm, expect_t *e)
{
    int rank, n;
    MPI_Datatype c4;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    MPI_Type_contiguous(4, MPI_DOUBLE, &c4);
    MPI_Type_commit(&c4);
    for (size_t count = 1; count < 3000; count = count * 7 + 3) {
        double *s = malloc(count * 4 * 8), *r = malloc(count * 4 * 8);
        for (size_t i = 0; i < count * 4; i++) s[i] = (double)((rank + 1) * (int)(i % 17));
        MPI_Allreduce(s, r, (int)count, c4, MPI_SUM, comm);
        for (size_t i = 0; i < count * 4; i++)
            if (r[i] != (double)(n * (n + 1) / 2 * (int)(i % 17))) {
                CHECK(0, "contiguous(4, MPI_DOUBLE) allreduce count %zu: [%zu] = %g", count, i, r[i]);
                break;
            }
        e->calls[0]++;
        free(s), free(r);
    }
    MPI_Type_free(&c4);
    /* A derived type freed, and another made (Open MPI's allocator hands the
     * same address back): its own layout, never the freed one's (hier maps
     * predefined handles once; derived ones every call). */
    for (int round = 0; round < 6; round++) {
        int width = round % 2 ? 3 : 2, count = 50;
        MPI_Datatype d;
        MPI_Type_contiguous(width, round % 2 ? MPI_INT : MPI_INT64_T, &d);
        MPI_Type_commit(&d);
        int64_t s64[150], r64[150];
        int s32[150], r32[150];
        void *sb = round % 2 ? (void *)s32 : (void *)s64, *rb = round % 2 ? (void *)r32 : (void *)r64;
        for (int i = 0; i < count * width; i++) s32[i] = rank + i, s64[i] = (int64_t)(rank + i) << 33;
        MPI_Allreduce(sb, rb, count, d, MPI_SUM, comm);
        for (int i = 0; i < count * width; i++) {
            int64_t want = (int64_t)n * i + (int64_t)n * (n - 1) / 2, got = round % 2 ? r32[i] : r64[i] >> 33;
            if (got != want) {
                CHECK(0, "contiguous(%d, %s) made after a freed one: [%d] = %lld, want %lld", width,
                      round % 2 ? "MPI_INT" : "MPI_INT64_T", i, (long long)got, (long long)want);
                break;
            }
        }
        e->calls[0]++;
        MPI_Type_free(&d);
    }
}

/* Collectives alternating between two communicators with different members. */
static void interleaved(MPI_Comm a, MPI_Comm b, expect_t *ea, expect_t *eb)
{
    const ttype_t *t = &types[0];
    for (int ti = 0; ti < ntypes; ti++)
        if (types[ti].dt == MPI_INT) t = &types[ti];
    for (int i = 0; i < (quick ? 20 : 100); i++) {
        size_t count = (size_t)(i * 37 % 3000);
        run_allreduce(t, O_SUM, count, i % 2, a, ea);
        run_allreduce(t, O_MAX, count + 1, 0, b, eb);
        run_reduce_scatter(t, O_SUM, count / 8, 0, 1, a, ea);
        run_allgather(MPI_BYTE, 1, MPI_BYTE, 1, count, i % 3 == 0, b, eb);
    }
}

static void verify(const char *label, const check_counters_t *before, const check_counters_t *after,
                   const expect_t *e, const char *expect, const char *const *paths)
{
    char ident[64];
    int served = !strcmp(expect, "served");
    snprintf(ident, sizeof(ident), "fallback_%s", served ? "" : expect + strlen("fallback:"));
    int reason = served ? -1 : check_reason_index(ident);
    CHECK(served || (!strncmp(expect, "fallback:", 9) && reason >= 0), "unknown expectation %s", expect);
    if (!served && reason < 0) return;
    for (int k = 0; k < NCOLL; k++) {
        long got_served = (long)(after->served[k] - before->served[k]);
        long got_fb = (long)(after->fallback[k] - before->fallback[k]);
        if (served) {
            CHECK(got_served == e->calls[k] && got_fb == 0, "%s: %s: hier served %ld of %ld calls, %ld fell back",
                  label, check_colls[k], got_served, e->calls[k], got_fb);
            long got_staged = (long)(after->staged[k] - before->staged[k]);
            CHECK(got_staged == (device ? e->calls[k] - e->direct[k] : 0),
                  "%s: %s: %ld of %ld calls staged from device memory (%ld peer direct)", label, check_colls[k],
                  got_staged, e->calls[k], e->direct[k]);
            int pd = check_path_index("net_direct");
            long got_direct = (long)(after->path_calls[k][pd] - before->path_calls[k][pd]);
            CHECK(got_direct == e->direct[k], "%s: %s: %ld calls peer direct, expected %ld", label, check_colls[k],
                  got_direct, e->direct[k]);
        } else {
            /* one-rank communicators need no segment: they stay served when it is missing */
            long single = !strcmp(expect, "fallback:shm") ? e->single[k] : 0;
            long got_reason = (long)(after->reason_calls[k][reason] - before->reason_calls[k][reason]);
            CHECK(got_served == single && got_reason == e->calls[k] - got_served,
                  "%s: %s: expected %ld calls as %s, got %ld (served %ld)", label, check_colls[k], e->calls[k],
                  expect, got_reason, got_served);
        }
    }
    for (int k = 0; served && k < NCOLL; k++) {
        if (!paths[k]) continue;
        int p = check_path_index(paths[k]), self = check_path_index("self"), setup = check_path_index("setup");
        CHECK(p >= 0, "unknown path %s", paths[k]);
        if (p < 0) continue;
        /* one-rank communicators always take the self path; under auto (a rules file) a communicator's
         * first call may be piggybacked on its set-up's exchange (path setup: served, with the set-up) */
        long want = p == self ? e->calls[k] : e->calls[k] - e->single[k];
        long got = (long)(after->path_calls[k][p] - before->path_calls[k][p]);
        long got_self = (long)(after->path_calls[k][self] - before->path_calls[k][self]);
        long got_setup = p == self ? 0 : (long)(after->path_calls[k][setup] - before->path_calls[k][setup]);
        CHECK(got + got_setup == want && (p == self || got_self == e->single[k]),
              "%s: %s: %ld of %ld calls via %s (and %ld piggybacked on set-ups), %ld of %ld via self", label,
              check_colls[k], got, want, paths[k], got_setup, got_self, e->single[k]);
    }
}

/* Several nodes: the inter-node level must have carried bytes through
 * libfabric for every collective on the communicator (summed over ranks:
 * small calls go through one rank per node). */
static void verify_net(const char *label, const check_counters_t *before, const check_counters_t *after,
                       const expect_t *e)
{
    unsigned long mine[NCOLL], all[NCOLL];
    for (int k = 0; k < NCOLL; k++) mine[k] = after->net_bytes[k] - before->net_bytes[k];
    MPI_Allreduce(mine, all, NCOLL, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < NCOLL; k++)
        CHECK(!e->calls[k] || all[k] > 0, "%s: %s: %ld calls put no bytes on the fabric", label, check_colls[k],
              e->calls[k]);
}

int main(int argc, char **argv)
{
    const char *expect = "served", *paths[NCOLL] = {0}; /* --<coll>-path: every call of it via this path */
    static const struct option longopts[] = {{"expect", required_argument, 0, 'e'},
                                             {"allreduce-path", required_argument, 0, 'p'},
                                             {"allgather-path", required_argument, 0, 'g'},
                                             {"chunk", required_argument, 0, 'c'},
                                             {"quick", no_argument, 0, 'q'},
                                             {"derived", no_argument, 0, 'd'},
                                             {"skip-ompi-bugs", no_argument, 0, 's'},
                                             {"world-only", no_argument, 0, 'w'},
                                             {"net", no_argument, 0, 'n'},
                                             {"direct-min", required_argument, 0, 'D'},
                                             {"warm", no_argument, 0, 'W'},
                                             {0, 0, 0, 0}};
    int opt, rank, n, derived_types = 0, world_only = 0, net = 0, warm = 0;

    MPI_Init(&argc, &argv);
    const char *dev_env = getenv("HIER_TEST_DEVICE");
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'e': expect = optarg; break;
        case 'p': paths[0] = optarg; break;
        case 'g': paths[1] = optarg; break;
        case 'c': chunk = (size_t)atol(optarg); break;
        case 'q': quick = 1; break;
        case 'd': derived_types = 1; break;
        case 's': skip_ompi_bugs = 1; break;
        case 'w': world_only = 1; break;
        case 'n': net = 1; break;
        case 'D': direct_min = (size_t)atol(optarg); break;
        case 'W': warm = 1; break;
        default: MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    device_even = dev_env && !strcmp(dev_env, "even");
    device = dev_env && (!device_even || rank % 2 == 0);
    init_types();
    init_ops();
    if (check_pvars_open() != 0) {
        fprintf(stderr, "test_colls: coll/hier's MPI_T counters are missing: the component was not loaded\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (dev_env && tdev_register_with_component() != 0) MPI_Abort(MPI_COMM_WORLD, 1);

    check_counters_t c0, c1;
    expect_t e = {{0}, {0}, {0}};
    MPI_Comm dup, split, half;

    /* 0. --warm: libfabric opening in the background, the first calls between
     * nodes go over Open MPI's point-to-point until every rank's endpoint is open */
    if (warm) {
        double t = MPI_Wtime();
        long pml = check_moved(MPI_COMM_WORLD, 1000000);
        if (rank == 0 && pml >= 0)
            printf("warm-up: %ld allreduce(s) over Open MPI's point-to-point in %.0f ms, then over libfabric\n", pml,
                   (MPI_Wtime() - t) * 1e3);
    }

    /* 1. every type Open MPI reduces: in the sweep's table, or known to fall back */
    if (!strcmp(expect, "served") && !dev_env && param_check_on()) {
        expect_t declined = {{0}, {0}, {0}};
        const char *nopaths[NCOLL] = {0};
        check_pvars_read(&c0);
        declined.calls[0] = every_reducible_type(MPI_COMM_WORLD);
        check_pvars_read(&c1);
        verify("types without a kernel in hier", &c0, &c1, &declined, "fallback:datatype", nopaths);
    }

    /* 1b. MPI_COMM_WORLD, the full sweep, then a contiguous derived type */
    check_pvars_read(&c0);
    sweep(MPI_COMM_WORLD, &e);
    /* Open MPI's argument checks refuse predefined ops on derived types; with
     * mpi_param_check=0 they reach the component, which must handle them */
    if (derived_types && !device) derived(MPI_COMM_WORLD, &e);
    check_pvars_read(&c1);
    verify("MPI_COMM_WORLD", &c0, &c1, &e, expect, paths);
    if (net) verify_net("MPI_COMM_WORLD", &c0, &c1, &e);
    CHECK(!direct_min || !comm_all_device(MPI_COMM_WORLD) || e.direct[1] > 0,
          "--direct-min %zu: no allgather large enough to go peer direct", direct_min);

    if (world_only) { /* sub-communicators may land on one node and be served */
        check_pvars_close();
        char label[96];
        snprintf(label, sizeof(label), "test_colls expect=%s world-only", expect);
        return check_finish(label);
    }

    /* 2. a dup and a split with reversed rank order, quick sweeps */
    int saved_quick = quick;
    quick = 1;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "dup(WORLD)");
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, n - rank, &split);
    MPI_Comm_set_name(split, "split(parity, reversed)");
    memset(&e, 0, sizeof(e));
    check_pvars_read(&c0);
    sweep(dup, &e);
    sweep(split, &e);
    check_pvars_read(&c1);
    verify("dup+split", &c0, &c1, &e, expect, paths);

    /* 3. two communicators interleaved */
    MPI_Comm_split(MPI_COMM_WORLD, rank < (n + 1) / 2, rank, &half);
    MPI_Comm_set_name(half, "split(halves)");
    expect_t ea = {{0}, {0}, {0}}, eb = {{0}, {0}, {0}};
    check_pvars_read(&c0);
    interleaved(dup, half, &ea, &eb);
    check_pvars_read(&c1);
    for (int k = 0; k < NCOLL; k++) ea.calls[k] += eb.calls[k];
    for (int k = 0; k < NCOLL; k++) ea.single[k] += eb.single[k];
    for (int k = 0; k < NCOLL; k++) ea.direct[k] += eb.direct[k];
    verify("interleaved", &c0, &c1, &ea, expect, paths);
    quick = saved_quick;

    MPI_Comm_free(&half);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    check_pvars_close();

    char label[96];
    snprintf(label, sizeof(label), "test_colls expect=%s", expect);
    return check_finish(label);
}
