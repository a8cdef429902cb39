/* test_userop: user-defined operations (MPI_Op_create) through coll/hier.
 *
 * Commutative ones are served: a sum and a max-abs on MPI_DOUBLE, a complex
 * sum on MPI_C_DOUBLE_COMPLEX (struct-free), an elementwise max on a
 * contiguous derived type of 4 MPI_INT, and MPI_INT with a sum; each in
 * allreduce (in place and not), reduce_scatter and reduce_scatter_block, at
 * counts that take every path (low latency, through the segment, pipelined,
 * between nodes). Every result is checked against a local fold of every
 * rank's input with the same function (MPI_Reduce_local), bitwise, and
 * equal on every rank; hier's counters must show every call served. The
 * user's function checks it is called with the call's datatype, a positive
 * count, and never by two threads at once.
 * A non-commutative one (composition of affine maps mod 2^32) must fall
 * back (fallback:op) and be right in MPI's canonical order.
 * With HIER_TEST_DEVICE=1 every buffer handed to MPI is "device memory" of
 * the test backend (tests/common/test_dev_backend.c, which the CPU cannot
 * touch directly): every call must be staged through host memory, so the
 * user's function only ever sees host memory (the non-commutative op, which
 * the previous component would apply to device memory, is left out).
 *
 *   test_userop [--quick]
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"
#include "test_dev_backend.h"

static int device; /* HIER_TEST_DEVICE set: buffers handed to MPI are device memory */


static MPI_Datatype expect_type, vec4;
static atomic_int inside;
static long fn_calls;

static void enter(MPI_Datatype *dt, int *len)
{
    CHECK(atomic_fetch_add(&inside, 1) == 0, "a user function called while another runs");
    CHECK(*dt == expect_type, "user function called with another datatype");
    CHECK(*len > 0, "user function called with count %d", *len);
    fn_calls++;
}

static void leave(void) { atomic_fetch_sub(&inside, 1); }

static void fn_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    enter(dt, len);
    for (int i = 0; i < *len; i++) ((double *)inout)[i] += ((double *)in)[i];
    leave();
}

static void fn_maxabs(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    enter(dt, len);
    for (int i = 0; i < *len; i++) {
        double a = ((double *)in)[i], b = ((double *)inout)[i], aa = a < 0 ? -a : a, ab = b < 0 ? -b : b;
        ((double *)inout)[i] = aa > ab || (aa == ab && a > b) ? a : b; /* (ties: the larger: it commutes) */
    }
    leave();
}

static void fn_csum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    enter(dt, len);
    for (int i = 0; i < 2 * *len; i++) ((double *)inout)[i] += ((double *)in)[i]; /* re, im */
    leave();
}

static void fn_vmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    enter(dt, len);
    for (int i = 0; i < 4 * *len; i++)
        if (((int *)in)[i] > ((int *)inout)[i]) ((int *)inout)[i] = ((int *)in)[i];
    leave();
}

static void fn_isum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    enter(dt, len);
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
    leave();
}

/* (a, b) is x -> a x + b; inout = in o inout, applied inout first: not commutative */
static void fn_affine(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    enter(dt, len);
    uint32_t *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        uint32_t a = x[2 * i] * y[2 * i], b = x[2 * i] * y[2 * i + 1] + x[2 * i + 1];
        y[2 * i] = a, y[2 * i + 1] = b;
    }
    leave();
}

typedef struct {
    const char *name;
    MPI_User_function *fn;
    int commute;
    MPI_Datatype *type;
    size_t esize; /* bytes per item of the type */
} userop_t;

static MPI_Datatype dbl = MPI_DOUBLE, cdbl = MPI_C_DOUBLE_COMPLEX, int1 = MPI_INT, pair = MPI_UINT64_T;
static const userop_t ops[] = {
    {"sum(double)", fn_sum, 1, &dbl, 8},
    {"maxabs(double)", fn_maxabs, 1, &dbl, 8},
    {"sum(double complex)", fn_csum, 1, &cdbl, 16},
    {"max(contiguous 4 x int)", fn_vmax, 1, &vec4, 16},
    {"sum(int)", fn_isum, 1, &int1, 4},
    {"affine(non-commutative)", fn_affine, 0, &pair, 8},
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

/* Rank r's input: integer-valued, so every order of a sum is exact. */
static void fill(const userop_t *u, int r, size_t items, void *buf)
{
    size_t words = items * u->esize / 4;
    for (size_t i = 0; i < words; i++) {
        uint32_t v = (uint32_t)((i * 2654435761u + (size_t)r * 40503u) % 1000u);
        if (u->esize / 4 == 2 && *u->type == MPI_DOUBLE) ((double *)buf)[i / 2] = (double)v - 500.0;
        else if (*u->type == MPI_C_DOUBLE_COMPLEX) ((double *)buf)[i / 2] = (double)(v % 97) - 40.0;
        else ((uint32_t *)buf)[i] = v | 1u; /* (odd: affine maps compose without collapsing to 0) */
    }
}

/* The fold of every rank's input in rank order, by the op itself. */
static void reference(const userop_t *u, MPI_Op op, int n, size_t items, void *want, void *tmp)
{
    fill(u, 0, items, want);
    for (int r = 1; r < n; r++) {
        fill(u, r, items, tmp);
        MPI_Reduce_local(want, tmp, (int)items, *u->type, op); /* tmp = want op tmp */
        memcpy(want, tmp, items * u->esize);
    }
}

/* The same bytes on every rank (allreduce). */
static void same_everywhere(const char *what, const void *buf, size_t len)
{
    uint64_t h = 1469598103934665603ull, lo, hi;
    for (size_t i = 0; i < len; i++) h = (h ^ ((const uint8_t *)buf)[i]) * 1099511628211ull;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "%s: ranks hold different results", what);
}

/* Calls of one op at one count: allreduce (twice: one in place), reduce_scatter, _block. */
static int one_count(const userop_t *u, MPI_Op op, size_t items, int rank, int n)
{
    size_t bytes = items * u->esize, per = items / (size_t)n;
    tdev_buf_t xin = tdev_buf_alloc(device, bytes + 1), xout = tdev_buf_alloc(device, bytes + 1);
    char *in = xin.h, *out = xout.h, *want = malloc(bytes + 1), *tmp = malloc(bytes + 1);
    int *rc = malloc(sizeof(int) * (size_t)n), calls = 0;
    char what[96];
    expect_type = *u->type;
    reference(u, op, n, items, want, tmp);

    fill(u, rank, items, in);
    MPI_Allreduce(xin.p, xout.p, (int)items, *u->type, op, MPI_COMM_WORLD), calls++;
    snprintf(what, sizeof(what), "%s allreduce of %zu", u->name, items);
    CHECK(!memcmp(out, want, bytes), "%s: wrong result", what);
    if (u->commute) same_everywhere(what, out, bytes);
    memcpy(out, in, bytes);
    MPI_Allreduce(MPI_IN_PLACE, xout.p, (int)items, *u->type, op, MPI_COMM_WORLD), calls++;
    CHECK(!memcmp(out, want, bytes), "%s in place: wrong result", what);

    size_t first = 0; /* reduce_scatter: rank r gets per + (r < items % n) */
    for (int r = 0; r < n; r++) rc[r] = (int)(per + ((size_t)r < items % (size_t)n));
    for (int r = 0; r < rank; r++) first += (size_t)rc[r];
    MPI_Reduce_scatter(xin.p, xout.p, rc, *u->type, op, MPI_COMM_WORLD), calls++;
    CHECK(!memcmp(out, want + first * u->esize, (size_t)rc[rank] * u->esize), "%s reduce_scatter of %zu: wrong",
          u->name, items);
    if (per > 0) {
        MPI_Reduce_scatter_block(xin.p, xout.p, (int)per, *u->type, op, MPI_COMM_WORLD), calls++;
        reference(u, op, n, per * (size_t)n, want, tmp); /* (the first n x per items, folded alike) */
        CHECK(!memcmp(out, want + (size_t)rank * per * u->esize, per * u->esize),
              "%s reduce_scatter_block of %zu: wrong", u->name, per);
    }
    tdev_buf_free(device, xin), tdev_buf_free(device, xout), free(want), free(tmp), free(rc);
    return calls;
}

int main(int argc, char **argv)
{
    int rank, n, quick = argc > 1 && !strcmp(argv[1], "--quick");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Type_contiguous(4, MPI_INT, &vec4);
    MPI_Type_commit(&vec4);
    device = getenv("HIER_TEST_DEVICE") != NULL;
    if (device && tdev_register_with_component() != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    if (check_pvars_open() != 0) {
        fprintf(stderr, "test_userop: coll/hier's MPI_T counters are missing: the component was not loaded\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    static const size_t full[] = {1, 3, 64, 700, 5000, 70000}, small[] = {1, 64, 5000, 70000};
    const size_t *counts = quick ? small : full;
    size_t ncounts = quick ? sizeof(small) / sizeof(small[0]) : sizeof(full) / sizeof(full[0]);
    int op_index = check_reason_index("fallback_op");

    for (size_t k = 0; k < NOPS; k++) {
        const userop_t *u = &ops[k];
        MPI_Op op;
        if (device && !u->commute) continue; /* (the previous component would apply it to device memory) */
        check_counters_t a, b;
        long calls = 0, served = 0, fell = 0, before = fn_calls, fn_all;
        MPI_Op_create(u->fn, u->commute, &op);
        check_pvars_read(&a);
        for (size_t c = 0; c < ncounts; c++) calls += one_count(u, op, counts[c] * (size_t)n / 2 + 1, rank, n);
        check_pvars_read(&b);
        for (int i = 0; i < NCOLL; i++) {
            served += (long)(b.served[i] - a.served[i]);
            CHECK(!device || i == 1 || b.staged[i] - a.staged[i] == b.served[i] - a.served[i] - (i == 0 ? 2 * ncounts : 0),
                  "%s: %s: %lu of %lu served calls staged from device memory", u->name, check_colls[i],
                  b.staged[i] - a.staged[i], b.served[i] - a.served[i]);
            fell += (long)(b.reason_calls[i][op_index] - a.reason_calls[i][op_index]);
            CHECK(b.fallback[i] - a.fallback[i] == b.reason_calls[i][op_index] - a.reason_calls[i][op_index],
                  "%s: %s fell back for another reason than the op", u->name, check_colls[i]);
        }
        /* (the checks' own allreduces on predefined ops count as served) */
        if (u->commute) CHECK(fell == 0 && served >= calls, "%s: %ld of %ld calls served, %ld fell back", u->name, served, calls, fell);
        else CHECK(fell == calls, "%s: %ld of %ld calls fell back (fallback:op)", u->name, fell, calls);
        MPI_Allreduce(&(long){fn_calls - before}, &fn_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        CHECK(fn_all > 0, "%s: the user's function was never called", u->name);
        if (rank == 0)
            printf("%s: %ld calls %s, the user's function called %ld times on all ranks\n", u->name, calls,
                   u->commute ? "served by hier" : "fell back (fallback:op)", fn_all);
        MPI_Op_free(&op);
    }
    check_pvars_close();
    MPI_Type_free(&vec4);
    return check_finish("test_userop");
}
