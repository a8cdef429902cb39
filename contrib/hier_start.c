/* hier_start: what a job pays once, around its first collective — the
 * costs an application sees that no per-call benchmark shows.
 *
 *   hier_start [--empty] [--label NAME] [--workload N] [--skew N]
 *
 * Rows (hier_bench's format, so hier-bench-compare and hier-churn-compare
 * read them; values in microseconds):
 *   init             MPI_Init, rank 0's
 *   first_allreduce  the first MPI_Allreduce on MPI_COMM_WORLD (8 bytes,
 *                    after a barrier: the slowest rank's time in the call)
 *   second_allreduce the next one (what the first cost beyond a call)
 *   slowest_call     --workload N: N allreduces after those two, a barrier
 *                    before each, 8 bytes but every 64th of 1 MiB (what
 *                    makes hier open libfabric): the slowest call's time,
 *                    the slowest rank's (where an opening would stall one)
 *   workload_call    ... and their mean
 *   skewed_iter      --skew N: N iterations of an 8-byte allreduce after
 *                    50 us x (rank + 1) of work, no barrier (ranks arrive
 *                    apart, as in an application): us per iteration
 *   finalize         MPI_Finalize, rank 0's (printed after it)
 *   init_finalize    MPI_Init + the rest + MPI_Finalize on rank 0: with
 *                    --empty the program makes no other MPI call, the
 *                    "empty program" every job pays
 * One job gives one sample: run it several times (hier-churn-compare --bench).
 * Exit status: 0, 1 on a wrong result, 2 on a usage error. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static void row(const char *label, const char *name, double ms, int ok)
{
    printf("%-10s %-16s %6d %6d %12.1f - - %s\n", label, name, 8, 1, ms * 1e3, ok ? "ok" : "FAIL");
}

/* One timed allreduce of n doubles after a barrier; the slowest rank's time. */
static double timed_allreduce_n(int rank, int np, double *in, double *out, int n, int *ok)
{
    double t, tmax;
    for (int i = 0; i < n; i++) in[i] = rank + 1 + i % 7;
    MPI_Barrier(MPI_COMM_WORLD);
    t = now_ms();
    MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t = now_ms() - t;
    for (int i = 0; i < n; i++)
        if (out[i] != (double)np * (np + 1) / 2 + (double)np * (i % 7)) *ok = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static double timed_allreduce(int rank, int np, int *ok)
{
    double in, out;
    return timed_allreduce_n(rank, np, &in, &out, 1, ok);
}

/* --workload: the slowest call and the mean (ms). */
#define START_BIG (1 << 17) /* doubles: 1 MiB */
static void workload(int rank, int np, int calls, double *slowest, double *mean, int *ok)
{
    double *in = malloc(START_BIG * sizeof(double)), *out = malloc(START_BIG * sizeof(double)), sum = 0;
    *slowest = 0;
    for (int i = 0; in && out && i < calls; i++) {
        double t = timed_allreduce_n(rank, np, in, out, i % 64 == 63 ? START_BIG : 1, ok);
        sum += t;
        if (t > *slowest) *slowest = t;
    }
    *mean = calls ? sum / calls : 0;
    free(in);
    free(out);
}

/* --skew: work for `us` microseconds (spinning, as computation does). */
static void busy_us(double us)
{
    double end = now_ms() + us / 1e3;
    while (now_ms() < end) continue;
}

/* ms per iteration of the skewed loop, the slowest rank's. */
static double skewed(int rank, int np, int iters, int *ok)
{
    double in = rank + 1, out, t, tmax;
    MPI_Barrier(MPI_COMM_WORLD);
    t = now_ms();
    for (int i = 0; i < iters; i++) {
        busy_us(50.0 * (rank + 1));
        MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (out != (double)np * (np + 1) / 2) *ok = 0;
    }
    t = (now_ms() - t) / (iters ? iters : 1);
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv)
{
    const char *label = "hier_start";
    int empty = 0, rank = 0, np = 1, ok = 1, calls = 0, skew = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--empty")) empty = 1;
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
        else if (!strcmp(argv[i], "--workload") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skew") && i + 1 < argc) skew = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: hier_start [--empty] [--label NAME] [--workload N] [--skew N]\n");
            return 2;
        }
    }
    double t0 = now_ms();
    MPI_Init(&argc, &argv);
    double t_init = now_ms() - t0, first = 0, second = 0, slowest = 0, mean = 0, iter = 0;
    if (!empty) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &np);
        first = timed_allreduce(rank, np, &ok);
        second = timed_allreduce(rank, np, &ok);
        if (calls) workload(rank, np, calls, &slowest, &mean, &ok);
        if (skew) iter = skewed(rank, np, skew, &ok);
        int all_ok;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        ok = all_ok;
    } else {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank); /* (local: no communication) */
    }
    double t1 = now_ms();
    MPI_Finalize();
    double t_fin = now_ms() - t1, total = now_ms() - t0;
    if (rank == 0) {
        row(label, "init", t_init, ok);
        if (!empty) {
            row(label, "first_allreduce", first, ok);
            row(label, "second_allreduce", second, ok);
        }
        if (calls) {
            row(label, "slowest_call", slowest, ok);
            row(label, "workload_call", mean, ok);
        }
        if (skew) row(label, "skewed_iter", iter, ok);
        row(label, "finalize", t_fin, ok);
        row(label, empty ? "init_finalize" : "job", total, ok);
        fflush(stdout);
    }
    return ok ? 0 : 1;
}
