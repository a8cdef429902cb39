/* test_persistent: MPI_Allreduce_init, MPI_Allgather_init,
 * MPI_Reduce_scatter_init and MPI_Reduce_scatter_block_init (Open MPI 4.1:
 * MPIX_*_init) through hier's persistent requests. Every result is checked
 * against a reference computed here from the inputs' formula, after every
 * start (the inputs change between starts), and the counters must show
 * hier served every start (or, where the case says, why each fell back).
 *
 *   test_persistent [--quick] [--expect-fallback REASON]
 *
 * 1. requests made on a fresh communicator, before any other call on it
 *    (the init sets it up), started again and again;
 * 2. every kind and several sizes made on two communicators, started
 *    together by MPI_Startall, completed by MPI_Waitall, by MPI_Wait in
 *    reverse and by MPI_Testany loops, then started again;
 * 3. blocking and nonblocking calls between starts, on the same
 *    communicator and on the other one;
 * 4. a user-defined (commutative) operation, in place; a non-contiguous
 *    receive type for the allgather (packed at every start);
 * 5. what MPI refuses: freeing a running persistent request, cancelling
 *    it (MPI_ERR_REQUEST); the request still ends right;
 * 6. the counters: every start served. --expect-fallback REASON: every
 *    start falls back for REASON instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_calls.h"
#include "mpi_check.h"

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h>
#endif
#if (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5) || MPI_VERSION >= 4
#define PC_ALLREDUCE_INIT MPI_Allreduce_init
#define PC_ALLGATHER_INIT MPI_Allgather_init
#define PC_REDUCE_SCATTER_INIT MPI_Reduce_scatter_init
#define PC_REDUCE_SCATTER_BLOCK_INIT MPI_Reduce_scatter_block_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define PC_ALLREDUCE_INIT MPIX_Allreduce_init
#define PC_ALLGATHER_INIT MPIX_Allgather_init
#define PC_REDUCE_SCATTER_INIT MPIX_Reduce_scatter_init
#define PC_REDUCE_SCATTER_BLOCK_INIT MPIX_Reduce_scatter_block_init
#else
#define PC_NONE 1
#endif

static int np;
static unsigned long started[NCOLL]; /* starts, by collective */

#ifndef PC_NONE
typedef call_t pcall_t;

static void pcall_make(pcall_t *c, int kind, int n, MPI_Comm comm)
{
    call_alloc(c, kind, n, comm);
    int rc = MPI_SUCCESS;
    switch (kind) {
    case K_SUM:
        rc = PC_ALLREDUCE_INIT(c->in, c->out, n, MPI_DOUBLE, MPI_SUM, comm, MPI_INFO_NULL, &c->req);
        break;
    case K_MAX_IN_PLACE:
        rc = PC_ALLREDUCE_INIT(MPI_IN_PLACE, c->out, n, MPI_DOUBLE, MPI_MAX, comm, MPI_INFO_NULL, &c->req);
        break;
    case K_GATHER:
        rc = PC_ALLGATHER_INIT(c->in, n, MPI_DOUBLE, c->out, n, MPI_DOUBLE, comm, MPI_INFO_NULL, &c->req);
        break;
    case K_GATHER_IN_PLACE:
        rc = PC_ALLGATHER_INIT(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->out, n, MPI_DOUBLE, comm, MPI_INFO_NULL,
                               &c->req);
        break;
    case K_RS:
        rc = PC_REDUCE_SCATTER_INIT(c->in, c->out, c->counts, MPI_DOUBLE, MPI_SUM, comm, MPI_INFO_NULL, &c->req);
        break;
    case K_RS_BLOCK:
        rc = PC_REDUCE_SCATTER_BLOCK_INIT(c->in, c->out, n, MPI_DOUBLE, MPI_SUM, comm, MPI_INFO_NULL, &c->req);
        break;
    }
    CHECK(rc == MPI_SUCCESS, "kind %d, %d elements: init returned %d", kind, n, rc);
}

/* The inputs for this start (salt), the outputs poisoned. */
static void pcall_fill(pcall_t *c, int salt)
{
    call_fill(c, salt);
    started[call_coll(c->kind)]++;
}

#define pcall_check call_check

static void pcall_free(pcall_t *c)
{
    int rc = MPI_Request_free(&c->req);
    CHECK(rc == MPI_SUCCESS && c->req == MPI_REQUEST_NULL, "freeing an inactive persistent request: %d", rc);
    call_free(c);
}

/* 1: made first thing on a fresh communicator, started `starts` times. */
static void fresh_first(MPI_Comm fresh, int starts)
{
    pcall_t c;
    pcall_make(&c, K_SUM, 257, fresh);
    for (int s = 0; s < starts; s++) {
        pcall_fill(&c, s);
        MPI_Start(&c.req);
        MPI_Wait(&c.req, MPI_STATUS_IGNORE);
        CHECK(c.req != MPI_REQUEST_NULL, "a persistent request's wait freed it");
        pcall_check(&c, s, "fresh communicator");
    }
    pcall_free(&c);
}

/* 2: every kind and size on a and b, started together `rounds` times, completed `how`. */
static void batch(MPI_Comm a, MPI_Comm b, const int *sizes, int nsizes, int rounds)
{
    int ncalls = nsizes * K_KINDS;
    pcall_t *calls = malloc(sizeof(pcall_t) * (size_t)ncalls);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)ncalls);
    for (int i = 0; i < ncalls; i++) {
        pcall_make(&calls[i], i % K_KINDS, sizes[i / K_KINDS], i % 2 ? b : a);
        reqs[i] = calls[i].req;
    }
    for (int round = 0; round < rounds; round++) {
        int how = round % 3, salt = 1000 * round;
        for (int i = 0; i < ncalls; i++) pcall_fill(&calls[i], salt + i);
        MPI_Startall(ncalls, reqs);
        call_complete(reqs, ncalls, how);
        for (int i = 0; i < ncalls; i++) {
            CHECK(reqs[i] != MPI_REQUEST_NULL, "persistent request %d freed by its completion", i);
            pcall_check(&calls[i], salt + i, call_hows[how]);
        }
    }
    for (int i = 0; i < ncalls; i++) {
        calls[i].req = reqs[i];
        pcall_free(&calls[i]);
    }
    free(calls);
    free(reqs);
}

/* 3: a blocking allreduce on a and an Iallgather on b while a persistent call runs on a. */
static void calls_between(MPI_Comm a, MPI_Comm b)
{
    pcall_t x;
    pcall_make(&x, K_RS, 3000, a);
    for (int s = 0; s < 3; s++) {
        pcall_fill(&x, 40 + s);
        MPI_Start(&x.req);
        int in = x.rank + 1, out = 0, me_b, gathered[64];
        MPI_Comm_rank(b, &me_b);
        MPI_Request r;
        MPI_Iallgather(&me_b, 1, MPI_INT, gathered, 1, MPI_INT, b, &r);
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, a);
        CHECK(out == np * (np + 1) / 2, "blocking allreduce between starts: %d, want %d", out, np * (np + 1) / 2);
        MPI_Wait(&x.req, MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        for (int q = 0; q < np && q < 64; q++) CHECK(gathered[q] == q, "iallgather between starts: %d at %d", gathered[q], q);
        pcall_check(&x, 40 + s, "calls between");
    }
    pcall_free(&x);
}

/* 4: a user operation (call_pair_add), in place */
static void user_op(MPI_Comm comm)
{
    enum { N = 3000 };
    MPI_Datatype pair;
    MPI_Op op;
    int *v = malloc(2 * N * sizeof(int)), me;
    MPI_Comm_rank(comm, &me);
    call_pair_make(&pair, &op);
    MPI_Request r;
    PC_ALLREDUCE_INIT(MPI_IN_PLACE, v, N, pair, op, comm, MPI_INFO_NULL, &r);
    MPI_Op_free(&op); /* (the request keeps it) */
    MPI_Type_free(&pair);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < 2 * N; i++) v[i] = me * 2 + i + s;
        MPI_Start(&r);
        started[0]++;
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        int bad = -1;
        for (int i = 0; i < 2 * N && bad < 0; i++)
            if (v[i] != call_pair_want(np, i, s)) bad = i;
        CHECK(bad < 0, "user op, start %d: element %d is %d, want %d", s, bad, bad < 0 ? 0 : v[bad],
              call_pair_want(np, bad, s));
    }
    MPI_Request_free(&r);
    free(v);
}

/* 4: the receive side every other double (a vector type), packed at every start */
static void strided_gather(MPI_Comm comm)
{
    enum { N = 500 };
    MPI_Datatype every_other, resized;
    double *in = malloc(N * sizeof(double)), *out = malloc(2 * N * (size_t)np * sizeof(double));
    int me;
    MPI_Comm_rank(comm, &me);
    call_every_other_make(N, &every_other, &resized);
    MPI_Request r;
    PC_ALLGATHER_INIT(in, N, MPI_DOUBLE, out, 1, resized, comm, MPI_INFO_NULL, &r);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < N; i++) in[i] = call_val(me, i, 5 + s);
        memset(out, 0, 2 * N * (size_t)np * sizeof(double));
        MPI_Start(&r);
        started[1]++;
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        call_every_other_check(out, N, np, 5 + s, "persistent");
    }
    MPI_Request_free(&r);
    MPI_Type_free(&resized);
    MPI_Type_free(&every_other);
    free(in);
    free(out);
}

/* 5: MPI refuses to free or cancel a running persistent collective; it ends right. */
static void refusals(MPI_Comm comm)
{
    pcall_t c;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* (4.1 reports a request's errors there) */
    pcall_make(&c, K_GATHER, 2000, comm);
    pcall_fill(&c, 77);
    MPI_Start(&c.req);
    int rc = MPI_Cancel(&c.req);
    CHECK(rc != MPI_SUCCESS, "MPI_Cancel of a running persistent collective succeeded");
    MPI_Request keep = c.req;
    int flag = 0;
    MPI_Test(&c.req, &flag, MPI_STATUS_IGNORE);
    if (!flag) {
        rc = MPI_Request_free(&c.req);
        CHECK(rc != MPI_SUCCESS && c.req == keep, "MPI_Request_free of a running persistent collective: %d", rc);
        MPI_Wait(&c.req, MPI_STATUS_IGNORE);
    }
    pcall_check(&c, 77, "after refusals");
    pcall_free(&c);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}
#endif

int main(int argc, char **argv)
{
    int quick = 0, fb = -1;
    MPI_Init(&argc, &argv);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
#ifdef PC_NONE
    (void)quick;
    (void)fb;
    if (me == 0) printf("SKIP: this MPI has no persistent collectives (MPI 4.0 or Open MPI's MPIX)\n");
    MPI_Finalize();
    return 0; /* (run_mpi_tests.sh reports the SKIP line) */
#else
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--expect-fallback") && i + 1 < argc) fb = check_nb_reason_index(argv[++i]);
        else if (!strcmp(argv[i], "--device") && call_on_device() != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (check_pvars_open() != 0) { /* (not loaded is a failure, not a missing requirement) */
        fprintf(stderr, "test_persistent: coll/hier's MPI_T counters are missing: the component was not loaded\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check_nb_counters_t before, after;
    MPI_Comm a, b, fresh;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_split(MPI_COMM_WORLD, 0, np - me, &b); /* (reversed ranks) */
    MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
    check_pc_read(&before);

    fresh_first(fresh, quick ? 5 : 50); /* 1 */
    static const int sizes_full[] = {1, 3, 100, 1000, 9000, 70000}, sizes_quick[] = {1, 100, 9000};
    batch(a, b, quick ? sizes_quick : sizes_full, quick ? 3 : 6, quick ? 3 : 6); /* 2 */
    calls_between(a, b); /* 3 */
    calls_between(b, a);
    user_op(a); /* 4 */
    strided_gather(b);
    refusals(a); /* 5 */

    /* 6. the counters */
    check_pc_read(&after);
    for (int k = 0; k < NCOLL; k++) {
        unsigned long served = after.served[k] - before.served[k];
        unsigned long fellback = after.fallback[k] - before.fallback[k];
        if (fb >= 0) {
            unsigned long why = after.reason_calls[k][fb] - before.reason_calls[k][fb];
            CHECK(served == 0 && why == started[k], "%s: %lu served, %lu fell back for %s; want all %lu to",
                  check_pc_colls[k], served, why, check_nb_fallback_paths[fb], started[k]);
            continue;
        }
        CHECK(served == started[k] && fellback == 0, "%s: %lu served, %lu fell back; want all %lu served",
              check_pc_colls[k], served, fellback, started[k]);
    }
    if (me == 0)
        printf("test_persistent: %lu pallreduce, %lu pallgather, %lu preduce_scatter, %lu preduce_scatter_block "
               "starts\n",
               started[0], started[1], started[2], started[3]);
    MPI_Comm_free(&fresh);
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    check_pvars_close();
    return check_finish("test_persistent");
#endif
}
