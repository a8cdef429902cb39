/* test_cuda: collectives on real CUDA device buffers (cuMemAlloc), results
 * checked against references computed here, and hier's counters must show
 * every call served, staged or (allgather, --expect-direct: some) NIC to NIC.
 * Sizes reach past a staging chunk (the pipeline) and the peer-direct
 * minimum. The CUDA driver is loaded with dlopen, so the
 * test builds everywhere; without a driver or a device it says SKIP (on
 * stdout, with the reason) and passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_loader.h"
#include "mpi_check.h"

typedef cul_ptr_t CUdeviceptr;

static CUdeviceptr dev_alloc(size_t bytes)
{
    CUdeviceptr p = cul_alloc(bytes);
    CHECK(p != 0, "cuMemAlloc of %zu bytes failed", bytes);
    return p;
}

/* double sums of small integers: exact, so every rank's result is checked bit for bit */
static double val(int rank, size_t i)
{
    return (double)((rank + 1) * (int)(i % 13 + 1));
}

static void run(size_t count, int in_place, int rank, int n, long *calls)
{
    size_t total = count * (size_t)n;
    double *h = malloc(total * sizeof(double) + 8), *w = malloc(total * sizeof(double) + 8);
    CUdeviceptr s = dev_alloc(total * sizeof(double)), r = dev_alloc(total * sizeof(double));

    /* allreduce of count elements */
    for (size_t i = 0; i < count; i++) h[i] = val(rank, i);
    cul_htod(in_place ? r : s, h, count * sizeof(double));
    MPI_Allreduce(in_place ? MPI_IN_PLACE : (void *)s, (void *)r, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    cul_dtoh(w, r, count * sizeof(double));
    for (size_t i = 0; i < count; i++)
        CHECK(w[i] == (double)n * (n + 1) / 2 * (double)(i % 13 + 1), "allreduce count %zu [%zu] = %g", count, i,
              w[i]);
    calls[0] += count > 0;

    /* allgather of count elements per rank */
    for (size_t i = 0; i < count; i++) h[i] = val(rank, i) + 1000 * rank;
    cul_htod(in_place ? r + (size_t)rank * count * sizeof(double) : s, h, count * sizeof(double));
    MPI_Allgather(in_place ? MPI_IN_PLACE : (void *)s, (int)count, MPI_DOUBLE, (void *)r, (int)count, MPI_DOUBLE,
                  MPI_COMM_WORLD);
    cul_dtoh(w, r, total * sizeof(double));
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++)
            CHECK(w[(size_t)q * count + i] == val(q, i) + 1000 * q, "allgather count %zu block %d [%zu]", count, q,
                  i);
    calls[1] += count > 0;

    /* reduce_scatter_block: count elements each */
    for (size_t i = 0; i < total; i++) h[i] = val(rank, i);
    cul_htod(in_place ? r : s, h, total * sizeof(double));
    MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : (void *)s, (void *)r, (int)count, MPI_DOUBLE, MPI_SUM,
                             MPI_COMM_WORLD);
    cul_dtoh(w, r, count * sizeof(double));
    for (size_t i = 0; i < count; i++) {
        size_t g = (size_t)rank * count + i;
        CHECK(w[i] == (double)n * (n + 1) / 2 * (double)(g % 13 + 1), "reduce_scatter_block count %zu [%zu]",
              count, i);
    }
    calls[3] += count > 0;
    cul_free(s);
    cul_free(r);
    free(h);
    free(w);
}

int main(int argc, char **argv)
{
    int rank, n, expect_direct = argc > 1 && !strcmp(argv[1], "--expect-direct");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *why = cul_open(rank);
    int ok = why == NULL, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (rank == 0) printf("SKIP: test_cuda: %s\n", why ? why : "CUDA unusable on some rank");
        MPI_Finalize();
        return 0;
    }
    if (check_pvars_open() != 0) {
        fprintf(stderr, "test_cuda: coll/hier's MPI_T counters are missing: the component was not loaded\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    static const size_t counts[] = {1, 7, 1000, 300000};
    check_counters_t c0, c1;
    long calls[NCOLL] = {0};
    check_pvars_read(&c0);
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
        for (int ip = 0; ip < 2; ip++) run(counts[k], ip, rank, n, calls);
    check_pvars_read(&c1);
    int pd = check_path_index("net_direct");
    long direct_all = 0;
    for (int k = 0; k < NCOLL; k++) {
        long served = (long)(c1.served[k] - c0.served[k]), staged = (long)(c1.staged[k] - c0.staged[k]);
        long direct = (long)(c1.path_calls[k][pd] - c0.path_calls[k][pd]);
        CHECK(served == calls[k] && staged + direct == calls[k] && (k == 1 || !direct),
              "%s: %ld calls, %ld served by hier, %ld staged, %ld peer direct", check_colls[k], calls[k], served,
              staged, direct);
        direct_all += direct;
    }
    if (rank == 0) printf("test_cuda: %ld allgathers went NIC to NIC (peer direct), the rest staged\n", direct_all);
    CHECK(!expect_direct || direct_all > 0, "--expect-direct: no call went peer direct");
    check_pvars_close();
    return check_finish("test_cuda");
}
