/* test_big: 1 GiB per rank through allreduce, allgather and
 * reduce_scatter_block, every element checked, served by hier.
 *
 *   test_big --bigcount: MPI 4's large-count calls with counts past INT_MAX
 *   (Open MPI 6.0 hands them to components as size_t): an allgather of
 *   2^31 + 64 MPI_BYTEs per rank and an allreduce of 2^31 + 16 MPI_INT8_Ts
 *   (about 6 GiB per rank at np 2); SKIP where the MPI has no MPI_Count
 *   calls. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

#define GIB ((size_t)1 << 30)

#if MPI_VERSION >= 4
static int bigcount(int rank, int n)
{
    MPI_Count count = ((MPI_Count)1 << 31) + 64; /* past INT_MAX */
    size_t c = (size_t)count;
    int8_t *s = malloc(c), *r = malloc(c * (size_t)n);
    if (!s || !r) {
        fprintf(stderr, "test_big --bigcount: no %zu bytes of memory on rank %d\n", c * (size_t)(n + 1), rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check_counters_t c0, c1;
    check_pvars_read(&c0);
    /* allgather: 2^31 + 64 bytes per rank */
    for (size_t i = 0; i < c; i++) s[i] = (int8_t)(rank * 5 + (int)(i % 7));
    MPI_Allgather_c(s, count, MPI_BYTE, r, count, MPI_BYTE, MPI_COMM_WORLD);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < c; i++)
            if (r[(size_t)j * c + i] != (int8_t)(j * 5 + (int)(i % 7))) {
                CHECK(0, "allgather_c of %zu bytes: block %d byte %zu", c, j, i);
                j = n;
                break;
            }
    /* allreduce: 2^31 + 16 int8 elements; sums of small values, exact */
    count = ((MPI_Count)1 << 31) + 16;
    c = (size_t)count;
    for (size_t i = 0; i < c; i++) s[i] = (int8_t)((rank + 1) * (int)(i % 3));
    MPI_Allreduce_c(s, r, count, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < c; i++)
        if (r[i] != (int8_t)(n * (n + 1) / 2 * (int)(i % 3))) {
            CHECK(0, "allreduce_c of %zu elements: element %zu = %d", c, i, r[i]);
            break;
        }
    check_pvars_read(&c1);
    CHECK(c1.served[0] - c0.served[0] == 1, "allreduce_c: hier did not serve it");
    CHECK(c1.served[1] - c0.served[1] == 1, "allgather_c: hier did not serve it");
    free(s);
    free(r);
    check_pvars_close();
    return check_finish("test_big --bigcount");
}
#endif

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    if (argc > 1 && !strcmp(argv[1], "--bigcount")) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
#if MPI_VERSION >= 4
        if (check_pvars_open() != 0) MPI_Abort(MPI_COMM_WORLD, 1);
        return bigcount(rank, n);
#else
        if (rank == 0) printf("SKIP: test_big --bigcount: MPI %d.%d has no large-count calls\n", MPI_VERSION, MPI_SUBVERSION);
        MPI_Finalize();
        return 0;
#endif
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (check_pvars_open() != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    size_t count = GIB / sizeof(float); /* 2^28 elements: 1 GiB per rank */
    float *s = malloc(GIB * (size_t)n), *r = malloc(GIB * (size_t)n);
    check_counters_t c0, c1;
    check_pvars_read(&c0);

    /* allreduce: 1 GiB per rank; values small integers, so sums are exact */
    for (size_t i = 0; i < count; i++) s[i] = (float)((rank + 1) * (int)(i % 5));
    MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < count; i++)
        if (r[i] != (float)(n * (n + 1) / 2 * (int)(i % 5))) {
            CHECK(0, "allreduce 1 GiB: element %zu = %g", i, r[i]);
            break;
        }

    /* allgather: 1 GiB block per rank */
    for (size_t i = 0; i < count; i++) s[i] = (float)(rank * 7 + (int)(i % 11));
    MPI_Allgather(s, (int)count, MPI_FLOAT, r, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < count; i++)
            if (r[(size_t)j * count + i] != (float)(j * 7 + (int)(i % 11))) {
                CHECK(0, "allgather 1 GiB: block %d element %zu", j, i);
                j = n;
                break;
            }

    /* reduce_scatter_block: 1 GiB of result per rank */
    for (size_t i = 0; i < count * (size_t)n; i++) s[i] = (float)((rank + 1) * (int)(i % 3));
    MPI_Reduce_scatter_block(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < count; i++)
        if (r[i] != (float)(n * (n + 1) / 2 * (int)(((size_t)rank * count + i) % 3))) {
            CHECK(0, "reduce_scatter_block 1 GiB: element %zu = %g", i, r[i]);
            break;
        }

    check_pvars_read(&c1);
    for (int k = 0; k < NCOLL; k++)
        if (k != 2) CHECK(c1.served[k] - c0.served[k] == 1, "%s: hier did not serve the 1 GiB call", check_colls[k]);
    free(s);
    free(r);
    check_pvars_close();
    return check_finish("test_big");
}
