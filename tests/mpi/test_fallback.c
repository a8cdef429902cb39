/* test_fallback: what hier must not serve goes to the previous component,
 * counted under its reason, with correct results: non-commutative
 * user-defined ops (blocking and persistent), non-contiguous datatypes,
 * intercommunicators (a commutative user-defined op is served:
 * tests/mpi/test_userop). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h>
#endif
#if (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5) || MPI_VERSION >= 4
#define PC_ALLREDUCE_INIT MPI_Allreduce_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define PC_ALLREDUCE_INIT MPIX_Allreduce_init
#endif

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* 2x2 integer matrix product: associative, not commutative. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) {
        int *a = (int *)in + 4 * i, *b = (int *)inout + 4 * i, c[4];
        c[0] = a[0] * b[0] + a[1] * b[2];
        c[1] = a[0] * b[1] + a[1] * b[3];
        c[2] = a[2] * b[0] + a[3] * b[2];
        c[3] = a[2] * b[1] + a[3] * b[3];
        memcpy(b, c, sizeof(c));
    }
}

static unsigned long reason(const check_counters_t *a, const check_counters_t *b, int coll, const char *why)
{
    int p = check_reason_index(why);
    return b->reason_calls[coll][p] - a->reason_calls[coll][p];
}

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (check_pvars_open() != 0) {
        fprintf(stderr, "test_fallback: coll/hier's MPI_T counters are missing\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check_counters_t c0, c1;
    check_pvars_read(&c0);

    /* 1. a user-defined commutative op: served (test_userop checks them on every path) */
    MPI_Op usum, mm;
    MPI_Op_create(user_sum, 1, &usum);
    int x[5] = {rank, 1, 2, 3, rank * 2}, y[5];
    MPI_Allreduce(x, y, 5, MPI_INT, usum, MPI_COMM_WORLD);
    CHECK(y[0] == n * (n - 1) / 2 && y[1] == n && y[4] == n * (n - 1), "user op allreduce wrong: %d %d %d", y[0],
          y[1], y[4]);

    /* 2. a non-commutative op: the product must keep rank order */
    MPI_Op_create(matmul, 0, &mm);
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_INT, &mat);
    MPI_Type_commit(&mat);
    int m[4] = {1, rank, 0, 1}, p[4]; /* [[1 r][0 1]]: the product is [[1 sum r][0 1]] */
    MPI_Allreduce(m, p, 1, mat, mm, MPI_COMM_WORLD);
    CHECK(p[0] == 1 && p[1] == n * (n - 1) / 2 && p[2] == 0 && p[3] == 1, "non-commutative allreduce wrong");
    int rcounts[256];
    for (int i = 0; i < n; i++) rcounts[i] = 1;
    int *mv = malloc(sizeof(int) * 4 * (size_t)n);
    for (int i = 0; i < n; i++) memcpy(mv + 4 * i, m, sizeof(m));
    MPI_Reduce_scatter(mv, p, rcounts, mat, mm, MPI_COMM_WORLD);
    CHECK(p[1] == n * (n - 1) / 2, "non-commutative reduce_scatter wrong");
    MPI_Reduce_scatter_block(mv, p, 1, mat, mm, MPI_COMM_WORLD);
    CHECK(p[1] == n * (n - 1) / 2, "non-commutative reduce_scatter_block wrong");

    /* 3. allgather with a non-contiguous send type on rank 0 only (legal: same
     * signature): every rank must still take the same path, so hier packs */
    MPI_Datatype vec, rvec;
    MPI_Type_vector(3, 1, 2, MPI_INT, &vec); /* ints 0, 2, 4 of a 5-int span */
    MPI_Type_commit(&vec);
    int sv[5] = {rank, -1, rank + 100, -1, rank + 200}, *rv = calloc((size_t)n * 3, sizeof(int));
    int sc[3] = {rank, rank + 100, rank + 200};
    if (rank == 0)
        MPI_Allgather(sv, 1, vec, rv, 3, MPI_INT, MPI_COMM_WORLD);
    else
        MPI_Allgather(sc, 3, MPI_INT, rv, 3, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        CHECK(rv[3 * i] == i && rv[3 * i + 1] == i + 100 && rv[3 * i + 2] == i + 200, "mixed-type allgather wrong");
    /* and a non-contiguous receive type, in place: every other int of a 2x-wide buffer */
    MPI_Type_vector(3, 1, 2, MPI_INT, &rvec);
    MPI_Datatype rvec_r;
    MPI_Type_create_resized(rvec, 0, 6 * (MPI_Aint)sizeof(int), &rvec_r);
    MPI_Type_commit(&rvec_r);
    int *wide = calloc((size_t)n * 6, sizeof(int));
    for (int k = 0; k < 3; k++) wide[6 * rank + 2 * k] = rank * 10 + k;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, wide, 1, rvec_r, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            CHECK(wide[6 * i + 2 * k] == i * 10 + k && wide[6 * i + 2 * k + 1] == 0,
                  "in-place strided allgather wrong at block %d item %d", i, k);

    check_pvars_read(&c1);
    CHECK(reason(&c0, &c1, 0, "fallback_op") == 1, "allreduce: %lu calls counted as fallback:op, expected 1",
          reason(&c0, &c1, 0, "fallback_op"));
    CHECK(reason(&c0, &c1, 2, "fallback_op") == 1, "reduce_scatter: fallback:op not counted");
    CHECK(reason(&c0, &c1, 3, "fallback_op") == 1, "reduce_scatter_block: fallback:op not counted");
    CHECK(c1.served[1] - c0.served[1] == 2 && c1.fallback[1] == c0.fallback[1],
          "allgather with non-contiguous types: %lu served, %lu fell back (expected 2 served)",
          c1.served[1] - c0.served[1], c1.fallback[1] - c0.fallback[1]);
    CHECK(c1.served[0] == c0.served[0] + 1 && c1.served[2] == c0.served[2] && c1.served[3] == c0.served[3],
          "hier served %lu allreduces (the commutative user op's: 1), %lu + %lu reduce_scatters with a "
          "non-commutative op", c1.served[0] - c0.served[0], c1.served[2] - c0.served[2], c1.served[3] - c0.served[3]);

    /* 4. an intercommunicator between the two halves */
    if (n >= 2) {
        MPI_Comm local, inter;
        int color = rank < n / 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local);
        MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color ? n / 2 : 0, 7, &inter);
        int v = rank + 1, w = 0, remote_sum = 0;
        for (int i = 0; i < n; i++)
            if ((i < n / 2) != color) remote_sum += i + 1;
        check_pvars_read(&c0);
        MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_SUM, inter);
        check_pvars_read(&c1);
        CHECK(w == remote_sum, "intercomm allreduce: %d, expected %d", w, remote_sum);
        CHECK(reason(&c0, &c1, 0, "fallback_intercomm") == 1, "intercomm allreduce not counted as fallback");
        MPI_Comm_free(&inter);
        MPI_Comm_free(&local);
    }

    /* 5. NULL buffers that should hold data: an MPI_ERR_BUFFER on every
     * rank (all make the same mistake, so nobody waits), never an in-place
     * call; the receive buffer is untouched. (Open MPI 4.1's argument checks
     * let NULL through: hier's own check answers.) */
    MPI_Comm errs;
    MPI_Comm_dup(MPI_COMM_WORLD, &errs);
    MPI_Comm_set_errhandler(errs, MPI_ERRORS_RETURN);
    int keep[4] = {7, 7, 7, 7}, cls, *rb = calloc((size_t)n * 4, sizeof(int));
    int rc = MPI_Allreduce(NULL, keep, 4, MPI_INT, MPI_SUM, errs);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER && keep[0] == 7 && keep[3] == 7,
          "allreduce from a NULL send buffer: error class %d (want MPI_ERR_BUFFER), result %d", cls, keep[0]);
    rc = MPI_Reduce_scatter_block(NULL, keep, 1, MPI_INT, MPI_SUM, errs);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER && keep[0] == 7, "reduce_scatter_block from NULL: error class %d", cls);
    rc = MPI_Allgather(NULL, 4, MPI_INT, rb, 4, MPI_INT, errs);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "allgather from a NULL send buffer: error class %d", cls);
    rc = MPI_Allreduce(keep, NULL, 4, MPI_INT, MPI_SUM, errs);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "allreduce into a NULL receive buffer: error class %d", cls);
    /* count 0 with NULL is no error, and the communicator still works */
    CHECK(MPI_Allreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, errs) == MPI_SUCCESS, "count 0 NULL allreduce failed");
    int one = 1, all = 0;
    CHECK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, errs) == MPI_SUCCESS && all == n,
          "allreduce after the refused calls: %d, expected %d", all, n);
    free(rb);
    MPI_Comm_free(&errs);

#ifdef PC_ALLREDUCE_INIT
    /* 6. a persistent allreduce hier does not serve (an operation declared
     * non-commutative): every start runs libnbc's nonblocking call, correct,
     * counted under pallreduce's fallback_op; the blocking counters untouched */
    MPI_Request req;
    MPI_Op noncomm;
    int pv[3], pr[3];
    check_nb_counters_t p0, p1;
    MPI_Op_create(user_sum, 0, &noncomm);
    check_pvars_read(&c0);
    check_pc_read(&p0);
    PC_ALLREDUCE_INIT(pv, pr, 3, MPI_INT, noncomm, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    for (int it = 0; it < 3; it++) {
        for (int k = 0; k < 3; k++) pv[k] = rank * (it + 1) + k;
        MPI_Start(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int k = 0; k < 3; k++)
            CHECK(pr[k] == (it + 1) * n * (n - 1) / 2 + n * k, "persistent allreduce start %d item %d: %d", it, k,
                  pr[k]);
    }
    MPI_Request_free(&req);
    MPI_Op_free(&noncomm);
    check_pvars_read(&c1);
    check_pc_read(&p1);
    int op_reason = check_nb_reason_index("fallback_op");
    CHECK(c1.served[0] == c0.served[0] && c1.fallback[0] == c0.fallback[0],
          "a persistent allreduce counted as a blocking one (%lu served, %lu fell back)", c1.served[0] - c0.served[0],
          c1.fallback[0] - c0.fallback[0]);
    CHECK(p1.served[0] == p0.served[0] && p1.reason_calls[0][op_reason] - p0.reason_calls[0][op_reason] == 3,
          "persistent allreduce, non-commutative: %lu served, %lu fallback_op; want 0 and 3", p1.served[0] - p0.served[0],
          p1.reason_calls[0][op_reason] - p0.reason_calls[0][op_reason]);
#endif

    MPI_Type_free(&vec);
    MPI_Type_free(&rvec);
    MPI_Type_free(&rvec_r);
    free(wide);
    MPI_Type_free(&mat);
    MPI_Op_free(&usum);
    MPI_Op_free(&mm);
    free(mv);
    free(rv);
    check_pvars_close();
    return check_finish("test_fallback");
}
