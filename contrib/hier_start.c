/* hier_start: what a job pays once, around its first collective — the
 * costs an application sees that no per-call benchmark shows.
 *
 *   hier_start [--empty] [--label NAME]
 *
 * Rows (hier_bench's format, so hier-bench-compare and hier-churn-compare
 * read them; values in microseconds):
 *   init             MPI_Init, rank 0's
 *   first_allreduce  the first MPI_Allreduce on MPI_COMM_WORLD (8 bytes,
 *                    after a barrier: the slowest rank's time in the call)
 *   second_allreduce the next one (what the first cost beyond a call)
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

/* One timed 8-byte allreduce after a barrier; the slowest rank's time. */
static double timed_allreduce(int rank, int np, int *ok)
{
    double in = rank + 1, out = 0, t, tmax;
    MPI_Barrier(MPI_COMM_WORLD);
    t = now_ms();
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t = now_ms() - t;
    if (out != (double)np * (np + 1) / 2) *ok = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv)
{
    const char *label = "hier_start";
    int empty = 0, rank = 0, np = 1, ok = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--empty")) empty = 1;
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
        else {
            fprintf(stderr, "usage: hier_start [--empty] [--label NAME]\n");
            return 2;
        }
    }
    double t0 = now_ms();
    MPI_Init(&argc, &argv);
    double t_init = now_ms() - t0, first = 0, second = 0;
    if (!empty) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &np);
        first = timed_allreduce(rank, np, &ok);
        second = timed_allreduce(rank, np, &ok);
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
        row(label, "finalize", t_fin, ok);
        row(label, empty ? "init_finalize" : "job", total, ok);
        fflush(stdout);
    }
    return ok ? 0 : 1;
}
