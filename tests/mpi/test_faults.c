/* test_faults: hier never hangs and never guesses.
 *
 *   test_faults mismatch [--odd R] [--limit S]
 *     Rank R (default 0) calls each collective differently from the others
 *     (counts, datatype, op, collective, reduce_scatter's counts; small and
 *     large). Every rank must get an MPI error within S seconds; the next
 *     call on that communicator goes to the previous component (counted as
 *     fallback:mismatch) and is correct; a new communicator is served by
 *     hier again and correct.
 *   test_faults stop [--odd R] [--seconds T]
 *     Rank R stops itself (SIGSTOP, a child sends SIGCONT T seconds later)
 *     in the middle of a loop of large allreduces: every result is correct.
 *   test_faults kill [--odd R] [--nonblocking 1]
 *     Rank R kills itself (SIGKILL) in the middle of a loop of large
 *     allreduces, printing the wall-clock time first; the others print how
 *     long until their call failed (under mpirun --enable-recovery; without
 *     it mpirun ends the job).
 *     --nonblocking 1: the loop's calls are MPI_Iallreduce + MPI_Wait (the
 *     survivors wait on hier's requests). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mpi_check.h"

#define BIG (1 << 20)

static int rank, nprocs, odd, nonblocking;

typedef struct {
    const char *name;
    /* the call, as rank `me` makes it; buffers hold 2 * BIG doubles */
    int (*call)(int me, void *s, void *r, MPI_Comm comm);
} mismatch_t;

static int is_odd(int me) { return me == odd; }

static int ar_count(int me, void *s, void *r, MPI_Comm comm, int n)
{
    return MPI_Allreduce(s, r, is_odd(me) ? 2 * n : n, MPI_INT, MPI_SUM, comm);
}
static int count_small(int me, void *s, void *r, MPI_Comm comm) { return ar_count(me, s, r, comm, 300); }
static int count_large(int me, void *s, void *r, MPI_Comm comm) { return ar_count(me, s, r, comm, BIG); }
static int dtype_large(int me, void *s, void *r, MPI_Comm comm)
{
    return MPI_Allreduce(s, r, BIG, is_odd(me) ? MPI_DOUBLE : MPI_INT, MPI_SUM, comm);
}
static int dtype_small(int me, void *s, void *r, MPI_Comm comm)
{
    return MPI_Allreduce(s, r, 8, is_odd(me) ? MPI_DOUBLE : MPI_INT, MPI_SUM, comm);
}
static int op_small(int me, void *s, void *r, MPI_Comm comm)
{
    return MPI_Allreduce(s, r, 100, MPI_INT, is_odd(me) ? MPI_MAX : MPI_SUM, comm);
}
static int ag_count(int me, void *s, void *r, MPI_Comm comm, int n)
{
    int k = is_odd(me) ? 2 * n : n;
    return MPI_Allgather(s, k, MPI_BYTE, r, k, MPI_BYTE, comm);
}
static int allgather_small(int me, void *s, void *r, MPI_Comm comm) { return ag_count(me, s, r, comm, 1000); }
static int allgather_large(int me, void *s, void *r, MPI_Comm comm) { return ag_count(me, s, r, comm, BIG / nprocs); }
/* one rank's block within the low-latency area, the other's past it (on a
 * fresh communicator: where single copy is probed first) */
static int allgather_across(int me, void *s, void *r, MPI_Comm comm) { return ag_count(me, s, r, comm, 6000); }
/* the same total, split differently on the odd rank */
static int rs_counts(int me, void *s, void *r, MPI_Comm comm, int per)
{
    int counts[64];
    for (int i = 0; i < nprocs; i++) counts[i] = per;
    if (is_odd(me)) counts[0] += per / 2, counts[nprocs - 1] -= per / 2;
    return MPI_Reduce_scatter(s, r, counts, MPI_INT, MPI_SUM, comm);
}
static int rs_small(int me, void *s, void *r, MPI_Comm comm) { return rs_counts(me, s, r, comm, 64); }
static int rs_large(int me, void *s, void *r, MPI_Comm comm) { return rs_counts(me, s, r, comm, BIG / nprocs); }
static int coll_kind(int me, void *s, void *r, MPI_Comm comm)
{
    if (is_odd(me)) return MPI_Allgather(s, 400, MPI_BYTE, r, 400, MPI_BYTE, comm);
    return MPI_Allreduce(s, r, 100, MPI_INT, MPI_SUM, comm);
}

static const mismatch_t mismatches[] = {
    {"allreduce count 300 vs 600 int", count_small},
    {"allreduce count 1M vs 2M int", count_large},
    {"allreduce 1M int vs double", dtype_large},
    {"allreduce 8 int vs double", dtype_small},
    {"allreduce 100 int sum vs max", op_small},
    {"allgather 1000 vs 2000 bytes", allgather_small},
    {"allgather 1 MiB / n vs twice", allgather_large},
    {"allgather 6000 vs 12000 bytes", allgather_across},
    {"reduce_scatter counts (small)", rs_small},
    {"reduce_scatter counts (large)", rs_large},
    {"allreduce vs allgather", coll_kind},
};

/* A correct allreduce on comm: the sum of ranks; 0 if right. */
static int sum_ok(MPI_Comm comm, int count)
{
    int *x = malloc(sizeof(int) * (size_t)count), *y = malloc(sizeof(int) * (size_t)count), bad = 0, n, rc;
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < count; i++) x[i] = rank + i;
    rc = MPI_Allreduce(x, y, count, MPI_INT, MPI_SUM, comm);
    for (int i = 0; rc == MPI_SUCCESS && i < count; i++) bad += y[i] != n * (n - 1) / 2 + n * i;
    free(x);
    free(y);
    return rc != MPI_SUCCESS ? -1 : bad;
}

static unsigned long calls(const check_counters_t *c, int served)
{
    unsigned long t = 0;
    for (int k = 0; k < NCOLL; k++) t += served ? c->served[k] : c->fallback[k];
    return t;
}

static int run_mismatch(double limit)
{
    double *s = calloc(2 * BIG, sizeof(double)), *r = calloc(2 * BIG * (size_t)nprocs, sizeof(double));
    for (size_t i = 0; i < 2 * BIG; i++) s[i] = 1;
    for (size_t m = 0; m < sizeof(mismatches) / sizeof(mismatches[0]); m++) {
        MPI_Comm comm, fresh;
        check_counters_t a, b;
        int mismatch_reason = check_reason_index("fallback_mismatch");
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        CHECK(sum_ok(comm, 16) == 0, "%s: warm-up allreduce wrong", mismatches[m].name);
        double t0 = MPI_Wtime();
        int rc = mismatches[m].call(rank, s, r, comm);
        double dt = MPI_Wtime() - t0;
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0, cls = 0;
        if (rc != MPI_SUCCESS) MPI_Error_string(rc, msg, &len), MPI_Error_class(rc, &cls);
        printf("mismatch \"%s\": rank %d got %s (class %d) after %.2f s\n", mismatches[m].name, rank,
               rc == MPI_SUCCESS ? "MPI_SUCCESS" : msg, cls, dt);
        fflush(stdout);
        CHECK(rc != MPI_SUCCESS, "%s: rank %d got MPI_SUCCESS from a mismatched call", mismatches[m].name, rank);
        CHECK(dt < limit, "%s: rank %d waited %.1f s (limit %.0f)", mismatches[m].name, rank, dt, limit);
        /* the same communicator: the previous component from now on, correct */
        check_pvars_read(&a);
        CHECK(sum_ok(comm, 1000) == 0, "%s: the next allreduce on the communicator is wrong", mismatches[m].name);
        check_pvars_read(&b);
        /* (a rank that only timed out waiting, its node never told of the
         * mismatch, counts its call under the failure it saw: fallback:shm) */
        int failed_reason = rc == MPI_ERR_ARG ? mismatch_reason : check_reason_index("fallback_shm");
        CHECK(b.reason_calls[0][failed_reason] == a.reason_calls[0][failed_reason] + 1,
              "%s: the next call was not counted under %s", mismatches[m].name, check_fallback_paths[failed_reason]);
        int cls_ok = rc == MPI_ERR_ARG || (dt > limit / 3 && rc != MPI_SUCCESS);
        CHECK(cls_ok, "%s: rank %d got error %d without waiting out the timeout (MPI_ERR_ARG expected)",
              mismatches[m].name, rank, rc);
        /* a new communicator: hier again */
        MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
        check_pvars_read(&a);
        CHECK(sum_ok(fresh, 1000) == 0 && sum_ok(fresh, BIG) == 0, "%s: a new communicator's allreduce is wrong",
              mismatches[m].name);
        check_pvars_read(&b);
        CHECK(calls(&b, 1) >= calls(&a, 1) + 2, "%s: hier did not serve the new communicator", mismatches[m].name);
        MPI_Comm_free(&fresh);
        MPI_Comm_free(&comm);
    }
    free(s);
    free(r);
    return 0;
}

/* SIGCONT to the parent after `seconds`, from a child (a stopped process
 * cannot wake itself). */
static void stop_for(int seconds)
{
    pid_t parent = getpid(), child = fork();
    if (child == 0) {
        sleep((unsigned)seconds);
        kill(parent, SIGCONT);
        _exit(0);
    }
    raise(SIGSTOP);
    waitpid(child, NULL, 0);
}

static int run_loop(int stop_seconds, int die)
{
    int n = BIG, iters = 12;
    int *x = malloc(sizeof(int) * (size_t)n), *y = malloc(sizeof(int) * (size_t)n);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* (Open MPI 4.1 reports a collective request's error on MPI_COMM_WORLD's handler) */
    if (nonblocking) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) x[i] = rank + it + (i & 7);
        if (rank == odd && it == iters / 2) {
            if (die) { /* the harness times the job's end from here, not from a start slowed by load */
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                printf("rank %d: killed itself at %.3f\n", rank, (double)now.tv_sec + now.tv_nsec * 1e-9);
                fflush(stdout);
                raise(SIGKILL);
            }
            stop_for(stop_seconds);
        }
        double t0 = MPI_Wtime();
        int rc, bad = 0;
        if (nonblocking) {
            MPI_Request req;
            rc = MPI_Iallreduce(x, y, n, MPI_INT, MPI_SUM, comm, &req);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Allreduce(x, y, n, MPI_INT, MPI_SUM, comm);
        }
        double dt = MPI_Wtime() - t0;
        if (rc != MPI_SUCCESS) {
            printf("rank %d: %s %d failed after %.2f s (rc %d)\n", rank, nonblocking ? "iallreduce" : "allreduce", it,
                   dt, rc);
            fflush(stdout);
            CHECK(die, "rank %d: allreduce %d failed", rank, it);
            break;
        }
        for (int i = 0; i < n; i++) bad += y[i] != nprocs * (nprocs - 1) / 2 + nprocs * (it + (i & 7));
        CHECK(!bad, "rank %d: allreduce %d: %d wrong elements", rank, it, bad);
    }
    free(x);
    free(y);
    if (die) { /* the survivors: nothing more to agree on with a dead rank */
        printf("rank %d: done\n", rank);
        fflush(stdout);
        _exit(check_failures ? 1 : 0);
    }
    MPI_Comm_free(&comm);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "mismatch";
    double limit = 30;
    int seconds = 3;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--odd")) odd = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--limit")) limit = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--nonblocking")) nonblocking = atoi(argv[i + 1]);
    }
    if (check_pvars_open() != 0 || nprocs > 64) {
        fprintf(stderr, "test_faults: coll/hier's MPI_T counters are missing (or more than 64 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!strcmp(mode, "mismatch")) run_mismatch(limit);
    else if (!strcmp(mode, "stop")) run_loop(seconds, 0);
    else if (!strcmp(mode, "kill")) run_loop(0, 1);
    check_pvars_close();
    return check_finish("test_faults");
}
