/* test_dlopen: MPI loaded the way Python, Julia and R bindings load it,
 * dlopen(libmpi, RTLD_LOCAL) from a program not linked with it (mpi4py 4's
 * wheels do this). libmpi's symbols are then not global: a component that
 * relies on the executable to provide them fails to load ("undefined symbol:
 * ompi_mpi_op_sum") and Open MPI goes on without it, silently slower. The
 * runner's check reads the stats lines coll/hier prints at finalize: they
 * exist only if it loaded and served the allreduces.
 *
 *   test_dlopen /path/to/libmpi.so
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *mpi_handle_t; /* Open MPI's handles are pointers to its objects */

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_dlopen LIBMPI\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "test_dlopen: %s\n", dlerror());
        return 1;
    }
    int (*init)(int *, char ***) = (int (*)(int *, char ***))dlsym(lib, "MPI_Init");
    int (*finalize)(void) = (int (*)(void))dlsym(lib, "MPI_Finalize");
    int (*rank_of)(mpi_handle_t, int *) = (int (*)(mpi_handle_t, int *))dlsym(lib, "MPI_Comm_rank");
    int (*size_of)(mpi_handle_t, int *) = (int (*)(mpi_handle_t, int *))dlsym(lib, "MPI_Comm_size");
    int (*allreduce)(const void *, void *, int, mpi_handle_t, mpi_handle_t, mpi_handle_t) =
        (int (*)(const void *, void *, int, mpi_handle_t, mpi_handle_t, mpi_handle_t))dlsym(lib, "MPI_Allreduce");
    /* MPI_COMM_WORLD, MPI_DOUBLE and MPI_SUM are the addresses of these objects in Open MPI */
    mpi_handle_t world = dlsym(lib, "ompi_mpi_comm_world"), dbl = dlsym(lib, "ompi_mpi_double"),
                 sum = dlsym(lib, "ompi_mpi_op_sum");
    if (!init || !finalize || !rank_of || !size_of || !allreduce || !world || !dbl || !sum) {
        fprintf(stderr, "test_dlopen: %s lacks an MPI symbol (not Open MPI?)\n", argv[1]);
        return 1;
    }
    int rank, n, bad = 0;
    init(&argc, &argv);
    rank_of(world, &rank);
    size_of(world, &n);
    enum { COUNT = 1000 };
    static double in[COUNT], out[COUNT];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < COUNT; i++) in[i] = (rank + 1) * (i % 7 + round);
        allreduce(in, out, COUNT, dbl, sum, world);
        for (int i = 0; i < COUNT; i++) bad += out[i] != (double)n * (n + 1) / 2 * (i % 7 + round);
    }
    if (bad) fprintf(stderr, "test_dlopen: rank %d: %d wrong sums\n", rank, bad);
    else if (rank == 0) printf("test_dlopen: 3 allreduces right through a libmpi loaded RTLD_LOCAL\n");
    finalize();
    return bad != 0;
}
