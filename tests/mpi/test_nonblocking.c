/* test_nonblocking: MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter and
 * MPI_Ireduce_scatter_block through hier's requests. Every result is
 * checked against a reference computed here from the inputs' formula, and
 * the counters must show hier served every call it was given (or, where
 * the case says, why it fell back).
 *
 *   test_nonblocking [--quick] [--expect-fallback REASON] [--first-falls-back]
 *
 * 1. a fresh communicator's first calls, nonblocking, before any blocking
 *    one, several outstanding: its set-up runs without waiting and they are
 *    served, right (--first-falls-back, with coll_hier_nonblocking_setup 0:
 *    they fall back, fallback:nonblocking, right);
 * 2. batches of every kind and several sizes, outstanding together on two
 *    communicators, completed by MPI_Waitall, by MPI_Wait in reverse, and
 *    by MPI_Testany loops;
 * 3. a blocking call on a communicator with requests pending on it and on
 *    another;
 * 4. a user-defined (commutative) operation, in place;
 * 5. a non-contiguous receive type for iallgather (packed, unpacked at the end);
 * 6. the counters. --expect-fallback REASON: every call falls back for
 *    REASON instead (coll_hier_nonblocking 0: fallback_forced).
 * --device: every buffer is "device memory" of the test backend, which the
 * CPU cannot touch: hier stages each rank's own through host mirrors
 * (served, counted), the strided type through mirrors of its span.
 * --mismatch: instead, even ranks start an MPI_Iallreduce where odd ones
 * start an MPI_Iallgather (then a blocking call against a nonblocking one):
 * every rank's wait returns an error, none hangs (the one-line message is
 * run_mpi_tests.sh's to check).
 * --kept-cut-off: instead, a blocking 4 KiB allreduce (the node measures the
 * low-latency cut-off after it), then a new communicator whose first call is
 * a 4 KiB MPI_Iallreduce: its set-up takes the cut-off the process kept (the
 * log line is run_mpi_tests.sh's to check), and both results are right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_calls.h"
#include "mpi_check.h"
#include "test_dev_backend.h"

static int np;
static int device; /* --device */
static unsigned long made[NCOLL];     /* nonblocking calls made after the set-up, by collective */
static unsigned long expect_fb[NCOLL]; /* of them, those that must fall back (fallback_nonblocking) */

static void call_start(call_t *c, int salt)
{
    call_fill(c, salt);
    switch (c->kind) {
    case K_SUM: MPI_Iallreduce(c->in, c->out, c->n, MPI_DOUBLE, MPI_SUM, c->comm, &c->req); break;
    case K_MAX_IN_PLACE: MPI_Iallreduce(MPI_IN_PLACE, c->out, c->n, MPI_DOUBLE, MPI_MAX, c->comm, &c->req); break;
    case K_GATHER: MPI_Iallgather(c->in, c->n, MPI_DOUBLE, c->out, c->n, MPI_DOUBLE, c->comm, &c->req); break;
    case K_GATHER_IN_PLACE:
        MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->out, c->n, MPI_DOUBLE, c->comm, &c->req);
        break;
    case K_RS: MPI_Ireduce_scatter(c->in, c->out, c->counts, MPI_DOUBLE, MPI_SUM, c->comm, &c->req); break;
    case K_RS_BLOCK: MPI_Ireduce_scatter_block(c->in, c->out, c->n, MPI_DOUBLE, MPI_SUM, c->comm, &c->req); break;
    }
    made[call_coll(c->kind)]++;
}

/* 2: a batch of every kind and size over two communicators, completed `how`. */
static void batch(MPI_Comm a, MPI_Comm b, const int *sizes, int nsizes, int how, int salt)
{
    int ncalls = nsizes * K_KINDS;
    call_t *calls = malloc(sizeof(call_t) * (size_t)ncalls);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)ncalls);
    for (int i = 0; i < ncalls; i++) {
        call_alloc(&calls[i], i % K_KINDS, sizes[i / K_KINDS], i % 2 ? b : a);
        call_start(&calls[i], salt + i);
        reqs[i] = calls[i].req;
    }
    call_complete(reqs, ncalls, how);
    for (int i = 0; i < ncalls; i++) {
        CHECK(reqs[i] == MPI_REQUEST_NULL, "request %d not freed by its completion", i);
        call_check(&calls[i], salt + i, call_hows[how]);
        call_free(&calls[i]);
    }
    free(calls);
    free(reqs);
}

/* 3: a blocking allreduce on `a` while requests are pending on it and on `b`. */
static void blocking_between(MPI_Comm a, MPI_Comm b)
{
    call_t x, y;
    call_alloc(&x, K_SUM, 5000, a);
    call_alloc(&y, K_GATHER, 700, b);
    call_start(&x, 11);
    call_start(&y, 12);
    int in = x.rank + 1, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, a);
    CHECK(out == np * (np + 1) / 2, "blocking allreduce between requests: %d, want %d", out, np * (np + 1) / 2);
    MPI_Wait(&y.req, MPI_STATUS_IGNORE);
    MPI_Wait(&x.req, MPI_STATUS_IGNORE);
    call_check(&x, 11, "blocking between");
    call_check(&y, 12, "blocking between");
    call_free(&x);
    call_free(&y);
}

/* 4: a user operation (call_pair_add), in place */
static void user_op(MPI_Comm comm)
{
    enum { N = 3000 };
    MPI_Datatype pair;
    MPI_Op op;
    tdev_buf_t b = tdev_buf_alloc(device, 2 * N * sizeof(int));
    int *v = (int *)b.h, me;
    MPI_Comm_rank(comm, &me);
    call_pair_make(&pair, &op);
    for (int i = 0; i < 2 * N; i++) v[i] = me * 2 + i;
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, b.p, N, pair, op, comm, &r);
    made[0]++;
    MPI_Op_free(&op); /* (the request keeps it: MPI lets the application free it now) */
    MPI_Type_free(&pair);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int bad = -1;
    for (int i = 0; i < 2 * N && bad < 0; i++)
        if (v[i] != call_pair_want(np, i, 0)) bad = i;
    CHECK(bad < 0, "user op: element %d is %d, want %d", bad, bad < 0 ? 0 : v[bad], call_pair_want(np, bad, 0));
    tdev_buf_free(device, b);
}

/* 5: the receive side every other double (a vector type) */
static void strided_gather(MPI_Comm comm)
{
    enum { N = 500 };
    MPI_Datatype every_other, resized;
    tdev_buf_t ib = tdev_buf_alloc(device, N * sizeof(double)), ob = tdev_buf_alloc(device, 2 * N * (size_t)np * sizeof(double));
    double *in = (double *)ib.h, *out = (double *)ob.h;
    memset(out, 0, 2 * N * (size_t)np * sizeof(double));
    int me;
    MPI_Comm_rank(comm, &me);
    call_every_other_make(N, &every_other, &resized);
    for (int i = 0; i < N; i++) in[i] = call_val(me, i, 5);
    MPI_Request r;
    MPI_Iallgather(ib.p, N, MPI_DOUBLE, ob.p, 1, resized, comm, &r);
    made[1]++;
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    call_every_other_check(out, N, np, 5, "iallgather");
    MPI_Type_free(&resized);
    MPI_Type_free(&every_other);
    tdev_buf_free(device, ib);
    tdev_buf_free(device, ob);
}

/* Mismatched calls on a communicator of their own: every rank gets an error. */
static int mismatch(void)
{
    MPI_Comm c;
    int me, rc;
    double x[4] = {1, 2, 3, 4}, y[64];
    /* (Open MPI 4.1 reports a collective request's error on MPI_COMM_WORLD's handler) */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_rank(c, &me);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Allreduce(x, y, 1, MPI_DOUBLE, MPI_SUM, c); /* (set up: the next calls are hier's) */
    MPI_Request r;
    if (me % 2 == 0) rc = MPI_Iallreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, c, &r);
    else rc = MPI_Iallgather(x, 4, MPI_DOUBLE, y, 4, MPI_DOUBLE, c, &r);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(rc != MPI_SUCCESS, "mismatched nonblocking calls: rank %d's wait succeeded", me);
    MPI_Comm_free(&c);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Allreduce(x, y, 1, MPI_DOUBLE, MPI_SUM, c);
    if (me % 2 == 0) {
        rc = MPI_Iallreduce(x, y, 2, MPI_DOUBLE, MPI_SUM, c, &r);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Allreduce(x, y, 2, MPI_DOUBLE, MPI_SUM, c);
    }
    CHECK(rc != MPI_SUCCESS, "a blocking call against a nonblocking one: rank %d succeeded", me);
    MPI_Comm_free(&c);
    return check_finish("test_nonblocking --mismatch");
}

static int kept_cut_off(void)
{
    enum { N = 512 }; /* (4 KiB of doubles) */
    MPI_Comm a, b;
    MPI_Request r;
    int me;
    double x[N], y[N];
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_rank(a, &me);
    for (int i = 0; i < N; i++) x[i] = me + i;
    for (int k = 0; k < 2; k++) {
        if (k == 0) {
            MPI_Allreduce(x, y, N, MPI_DOUBLE, MPI_SUM, a);
        } else {
            MPI_Comm_dup(MPI_COMM_WORLD, &b);
            MPI_Iallreduce(x, y, N, MPI_DOUBLE, MPI_SUM, b, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < N; i++)
            CHECK(y[i] == (double)np * (np - 1) / 2 + (double)np * i, "%s allreduce: y[%d] = %g",
                  k ? "nonblocking" : "blocking", i, y[i]);
    }
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    return check_finish("test_nonblocking --kept-cut-off");
}

int main(int argc, char **argv)
{
    int quick = 0, fb = -1, first_fb = 0;
    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--expect-fallback") && i + 1 < argc) fb = check_nb_reason_index(argv[++i]);
        else if (!strcmp(argv[i], "--mismatch")) return mismatch();
        else if (!strcmp(argv[i], "--kept-cut-off")) return MPI_Comm_size(MPI_COMM_WORLD, &np), kept_cut_off();
        else if (!strcmp(argv[i], "--first-falls-back")) first_fb = 1;
        else if (!strcmp(argv[i], "--device")) device = 1;
    }
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (check_pvars_open() != 0) { /* (not loaded is a failure, not a missing requirement) */
        fprintf(stderr, "test_nonblocking: coll/hier's MPI_T counters are missing: the component was not loaded\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (device && call_on_device() != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    check_nb_counters_t before, after;
    MPI_Comm a, b, fresh;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_split(MPI_COMM_WORLD, 0, np - me, &b); /* (reversed ranks) */
    MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
    /* (from here on no communicator is made: Open MPI agrees on a new one's
     * id with MPI_Iallreduce on its parent, which hier serves too) */
    check_nb_read(&before);

    /* 1. before any blocking call: its set-up without waiting, every kind
     * outstanding. Between nodes the set-up may find some rank's endpoint
     * still opening (coll_hier_fabric_warmup): then they fall back too. */
    call_t first[K_KINDS];
    MPI_Request freqs[K_KINDS];
    check_nb_counters_t mid;
    for (int k = 0; k < K_KINDS; k++) {
        call_alloc(&first[k], k, 64 + 1000 * k, fresh);
        call_start(&first[k], 1 + k);
        freqs[k] = first[k].req;
    }
    MPI_Waitall(K_KINDS, freqs, MPI_STATUSES_IGNORE);
    for (int k = 0; k < K_KINDS; k++) {
        call_check(&first[k], 1 + k, "first calls on a fresh communicator");
        call_free(&first[k]);
    }
    check_nb_read(&mid);
    for (int k = 0; k < NCOLL; k++) {
        int nbfb = check_nb_reason_index("fallback_nonblocking");
        unsigned long fellback = mid.reason_calls[k][nbfb] - before.reason_calls[k][nbfb];
        if (first_fb) CHECK(fellback == made[k], "%s: %lu of the first %lu fell back, want all", check_nb_colls[k],
                            fellback, made[k]);
        expect_fb[k] = fellback;
    }
    int warming = 0;
    for (int k = 0; k < NCOLL; k++) warming |= !first_fb && expect_fb[k] > 0;
    if (warming && me == 0) printf("test_nonblocking: the first calls fell back (an endpoint was still opening)\n");

    /* the set-up: blocking calls (one large enough for the pipeline segment on a) */
    double *big = calloc(1 << 18, sizeof(double)), *big2 = malloc((1 << 18) * sizeof(double));
    MPI_Allreduce(big, big2, 1 << 18, MPI_DOUBLE, MPI_SUM, a);
    MPI_Allreduce(big, big2, 1, MPI_DOUBLE, MPI_SUM, b);
    free(big);
    free(big2);

    /* 2. b has no pipeline segment yet: its large calls pipeline through the small slots */
    static const int sizes_full[] = {1, 3, 100, 1000, 9000, 70000}, sizes_quick[] = {1, 100, 9000};
    const int *sizes = quick ? sizes_quick : sizes_full;
    int nsizes = quick ? 3 : 6;
    for (int how = 0; how < 3; how++) batch(a, b, sizes, nsizes, how, 100 * how);
    blocking_between(a, b); /* 3 */
    blocking_between(b, a);
    user_op(a); /* 4 */
    strided_gather(b); /* 5 */

    /* 6. the counters */
    check_nb_read(&after);
    for (int k = 0; k < NCOLL; k++) {
        unsigned long served = after.served[k] - before.served[k];
        unsigned long fellback = after.fallback[k] - before.fallback[k];
        int nbfb = check_nb_reason_index("fallback_nonblocking");
        unsigned long for_nb = after.reason_calls[k][nbfb] - before.reason_calls[k][nbfb];
        if (fb >= 0) {
            unsigned long why = after.reason_calls[k][fb] - before.reason_calls[k][fb];
            CHECK(served == 0 && why == made[k], "%s: %lu served, %lu fell back for %s; want all %lu to", check_nb_colls[k],
                  served, why, check_nb_fallback_paths[fb], made[k]);
            continue;
        }
        CHECK(served == made[k] - expect_fb[k] && fellback == expect_fb[k] && for_nb == expect_fb[k],
              "%s: %lu served, %lu fell back (%lu fallback_nonblocking); want %lu served, %lu fallback_nonblocking",
              check_nb_colls[k], served, fellback, for_nb, made[k] - expect_fb[k], expect_fb[k]);
    }
    if (me == 0)
        printf("test_nonblocking: %lu iallreduce, %lu iallgather, %lu ireduce_scatter, %lu ireduce_scatter_block\n",
               made[0], made[1], made[2], made[3]);
    MPI_Comm_free(&fresh);
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    check_pvars_close();
    return check_finish("test_nonblocking");
}
