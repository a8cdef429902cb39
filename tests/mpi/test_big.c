/* test_big: 1 GiB per rank through allreduce, allgather and
 * reduce_scatter_block, every element checked, served by hier. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

#define GIB ((size_t)1 << 30)

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
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
