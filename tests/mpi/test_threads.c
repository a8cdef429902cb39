/* test_threads: MPI_THREAD_MULTIPLE with collectives running at the same
 * time from several threads, each on its own duplicate of MPI_COMM_WORLD
 * (what mpi4py, which asks for THREAD_MULTIPLE by default, or a framework
 * with a communication thread per process group does). Every thread runs
 * allreduce, allgather and reduce_scatter_block over small, split and
 * multi-chunk sizes and checks each result against a reference computed
 * locally; hier must have served every call (MPI_T counters). Half the
 * communicators are laid out before the threads start, so the threads meet
 * both in hier's set-up and in its steady state. --persistent: each
 * thread then makes persistent allreduce, allgather and
 * reduce_scatter_block requests on its communicator per size and starts
 * them together (MPI_Startall) every iteration, while the other threads do
 * the same; hier must have served every start too.
 *
 *   test_threads [--threads N] [--iters N] [--persistent] [--times]
 * (--times: each thread's time in each phase, on stderr)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h>
#endif
#if (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5) || MPI_VERSION >= 4
#define PC_INIT(name) MPI_##name##_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define PC_INIT(name) MPIX_##name##_init
#endif

#define MAX_THREADS 8

static int nthreads = 3, iters = 6, rank, size, persistent, times;
static const int counts[] = {1, 700, 9000, 70000, 300000};
#define NCOUNTS ((int)(sizeof(counts) / sizeof(counts[0])))

typedef struct {
    int id;
    MPI_Comm comm;
    long calls, failures;
    long starts; /* --persistent */
    double blocking_s, persistent_s; /* how long each phase took (printed with --times) */
} worker_t;

/* What rank r contributes at element i in iteration it of thread t. */
static int value(int r, int t, int it, long i)
{
    return (int)((r + 1) * (i % 1009 + 1) + t * 7 + it);
}

static long sum_value(int t, int it, long i)
{
    long s = 0;
    for (int r = 0; r < size; r++) s += value(r, t, it, i);
    return s;
}

static void fail(worker_t *w, const char *what, int count, long i, long got, long want)
{
    if (w->failures++ < 5)
        fprintf(stderr, "[rank %d thread %d] FAIL %s count %d: element %ld is %ld, want %ld\n", rank, w->id, what,
                count, i, got, want);
}

static void run_one(worker_t *w, int it, int count, int *in, int *out)
{
    for (long i = 0; i < count; i++) in[i] = value(rank, w->id, it, i);
    MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, w->comm);
    for (long i = 0; i < count; i++)
        if (out[i] != (int)sum_value(w->id, it, i)) {
            fail(w, "allreduce", count, i, out[i], sum_value(w->id, it, i));
            break;
        }
    MPI_Allgather(in, count, MPI_INT, out, count, MPI_INT, w->comm);
    for (int r = 0; r < size; r++)
        for (long i = 0; i < count; i++)
            if (out[(long)r * count + i] != value(r, w->id, it, i)) {
                fail(w, "allgather", count, i, out[(long)r * count + i], value(r, w->id, it, i));
                r = size;
                break;
            }
    int block = count / size ? count / size : 1;
    for (long i = 0; i < (long)block * size; i++) in[i] = value(rank, w->id, it, i);
    MPI_Reduce_scatter_block(in, out, block, MPI_INT, MPI_SUM, w->comm);
    for (long i = 0; i < block; i++) {
        long g = (long)rank * block + i;
        if (out[i] != (int)sum_value(w->id, it, g)) {
            fail(w, "reduce_scatter_block", count, i, out[i], sum_value(w->id, it, g));
            break;
        }
    }
    w->calls += 3;
}

#ifdef PC_INIT
/* --persistent: the three kinds made once per size, started together every iteration. */
static void run_persistent(worker_t *w, int count, int *in, int *out)
{
    int block = count / size ? count / size : 1, n = count > block * size ? count : block * size;
    int *ag = malloc(sizeof(int) * (size_t)count * (size_t)size), *rs = malloc(sizeof(int) * (size_t)block);
    int *ain = malloc(sizeof(int) * (size_t)n);
    MPI_Request reqs[3];
    PC_INIT(Allreduce)(ain, out, count, MPI_INT, MPI_SUM, w->comm, MPI_INFO_NULL, &reqs[0]);
    PC_INIT(Allgather)(ain, count, MPI_INT, ag, count, MPI_INT, w->comm, MPI_INFO_NULL, &reqs[1]);
    PC_INIT(Reduce_scatter_block)(in, rs, block, MPI_INT, MPI_SUM, w->comm, MPI_INFO_NULL, &reqs[2]);
    for (int it = 0; it < iters; it++) {
        for (long i = 0; i < n; i++) ain[i] = in[i] = value(rank, w->id, it + 100, i);
        MPI_Startall(3, reqs);
        MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
        w->starts += 3;
        for (long i = 0; i < count; i++)
            if (out[i] != (int)sum_value(w->id, it + 100, i)) {
                fail(w, "persistent allreduce", count, i, out[i], sum_value(w->id, it + 100, i));
                break;
            }
        for (int r = 0; r < size; r++)
            for (long i = 0; i < count; i++)
                if (ag[(long)r * count + i] != value(r, w->id, it + 100, i)) {
                    fail(w, "persistent allgather", count, i, ag[(long)r * count + i], value(r, w->id, it + 100, i));
                    r = size;
                    break;
                }
        for (long i = 0; i < block; i++)
            if (rs[i] != (int)sum_value(w->id, it + 100, (long)rank * block + i)) {
                fail(w, "persistent reduce_scatter_block", count, i, rs[i],
                     sum_value(w->id, it + 100, (long)rank * block + i));
                break;
            }
    }
    for (int k = 0; k < 3; k++) MPI_Request_free(&reqs[k]);
    free(ag);
    free(rs);
    free(ain);
}
#endif

static void *worker(void *arg)
{
    worker_t *w = arg;
    int max = counts[NCOUNTS - 1];
    int *in = malloc(sizeof(int) * (size_t)max * (size_t)size), *out = malloc(sizeof(int) * (size_t)max * (size_t)size);
    if (!in || !out) {
        w->failures++;
        return NULL;
    }
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++)
        for (int k = 0; k < NCOUNTS; k++) run_one(w, it, counts[(k + w->id) % NCOUNTS], in, out);
    double t1 = MPI_Wtime();
#ifdef PC_INIT
    for (int k = 0; persistent && k < NCOUNTS; k++) run_persistent(w, counts[(k + w->id) % NCOUNTS], in, out);
#endif
    w->blocking_s = t1 - t0;
    w->persistent_s = MPI_Wtime() - t1;
    free(in);
    free(out);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--persistent")) persistent = 1;
        else if (!strcmp(argv[i], "--times")) times = 1;
    }
#ifndef PC_INIT
    if (persistent) {
        if (rank == 0) printf("SKIP: test_threads --persistent: this MPI has no persistent collectives\n");
        MPI_Finalize();
        return 0;
    }
#endif
    if (nthreads < 1 || nthreads > MAX_THREADS) nthreads = 2;
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("SKIP: test_threads: the MPI library gives thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
        MPI_Finalize();
        return 0;
    }
    CHECK(check_pvars_open() == 0, "coll/hier's MPI_T variables are missing: hier is not loaded");
    check_counters_t before, after;
    check_nb_counters_t pbefore, pafter;
    check_pvars_read(&before);
    check_pc_read(&pbefore);

    worker_t w[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    for (int t = 0; t < nthreads; t++) {
        w[t] = (worker_t){.id = t};
        MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
        if (t % 2) { /* laid out now (hier sets a communicator up at its first call): these threads meet
                      * in the steady state at once, the others in their set-up */
            int one = 1, all;
            MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, w[t].comm);
            CHECK(all == size, "warm-up allreduce gave %d, want %d", all, size);
            w[t].calls++;
        }
    }
    for (int t = 0; t < nthreads; t++) pthread_create(&tid[t], NULL, worker, &w[t]);
    long calls = 0, starts = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(tid[t], NULL);
        check_failures += w[t].failures;
        calls += w[t].calls;
        starts += w[t].starts;
        MPI_Comm_free(&w[t].comm);
        if (times)
            fprintf(stderr, "test_threads: rank %d thread %d: blocking calls %.2f s, persistent starts %.2f s\n", rank,
                    t, w[t].blocking_s, w[t].persistent_s);
    }

    /* every call served: counted per collective, none sent to the fallback */
    check_pvars_read(&after);
    long served = 0, fallback = 0;
    for (int k = 0; k < NCOLL; k++) {
        served += (long)(after.served[k] - before.served[k]);
        fallback += (long)(after.fallback[k] - before.fallback[k]);
    }
    CHECK(served == calls && fallback == 0, "%ld calls: hier served %ld, the fallback %ld", calls, served, fallback);
    check_pc_read(&pafter);
    served = fallback = 0;
    for (int k = 0; k < NCOLL; k++) {
        served += (long)(pafter.served[k] - pbefore.served[k]);
        fallback += (long)(pafter.fallback[k] - pbefore.fallback[k]);
    }
    CHECK(served == starts && fallback == 0, "%ld persistent starts: hier served %ld, the fallback %ld", starts,
          served, fallback);
    check_pvars_close();
    if (rank == 0)
        printf("test_threads: %d threads x %ld calls each (and %ld persistent starts)\n", nthreads, calls / nthreads,
               starts / nthreads);
    return check_finish("test_threads");
}
