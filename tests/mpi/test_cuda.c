/* test_cuda: collectives on real CUDA device buffers (cuMemAlloc), results
 * checked against references computed here, and hier's counters must show
 * every call served and staged. The CUDA driver is loaded with dlopen, so the
 * test builds everywhere; without a driver or a device it says SKIP (on
 * stdout, with the reason) and passes. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

typedef int CUresult;
typedef uintptr_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(int *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, int);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
} cu;

/* NULL when CUDA works here, else why not. */
static const char *cuda_open(int rank)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    int n = 0, dev;
    CUcontext ctx;
    if (!lib) return "no libcuda.so.1 (no NVIDIA driver)";
    *(void **)&cu.init = dlsym(lib, "cuInit");
    *(void **)&cu.device_get_count = dlsym(lib, "cuDeviceGetCount");
    *(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
    *(void **)&cu.primary_ctx_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
    *(void **)&cu.ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
    *(void **)&cu.mem_alloc = dlsym(lib, "cuMemAlloc_v2");
    *(void **)&cu.mem_free = dlsym(lib, "cuMemFree_v2");
    *(void **)&cu.memcpy_htod = dlsym(lib, "cuMemcpyHtoD_v2");
    *(void **)&cu.memcpy_dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
    if (!cu.init || !cu.device_get_count || !cu.device_get || !cu.primary_ctx_retain || !cu.ctx_set_current ||
        !cu.mem_alloc || !cu.mem_free || !cu.memcpy_htod || !cu.memcpy_dtoh)
        return "libcuda.so.1 lacks driver API symbols";
    if (cu.init(0) != 0 || cu.device_get_count(&n) != 0 || n < 1) return "no CUDA device";
    if (cu.device_get(&dev, rank % n) != 0 || cu.primary_ctx_retain(&ctx, dev) != 0 || cu.ctx_set_current(ctx) != 0)
        return "cannot make a CUDA context current";
    return NULL;
}

static CUdeviceptr dev_alloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CHECK(cu.mem_alloc(&p, bytes ? bytes : 1) == 0, "cuMemAlloc of %zu bytes failed", bytes);
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
    cu.memcpy_htod(in_place ? r : s, h, count * sizeof(double));
    MPI_Allreduce(in_place ? MPI_IN_PLACE : (void *)s, (void *)r, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    cu.memcpy_dtoh(w, r, count * sizeof(double));
    for (size_t i = 0; i < count; i++)
        CHECK(w[i] == (double)n * (n + 1) / 2 * (double)(i % 13 + 1), "allreduce count %zu [%zu] = %g", count, i,
              w[i]);
    calls[0] += count > 0;

    /* allgather of count elements per rank */
    for (size_t i = 0; i < count; i++) h[i] = val(rank, i) + 1000 * rank;
    cu.memcpy_htod(in_place ? r + (size_t)rank * count * sizeof(double) : s, h, count * sizeof(double));
    MPI_Allgather(in_place ? MPI_IN_PLACE : (void *)s, (int)count, MPI_DOUBLE, (void *)r, (int)count, MPI_DOUBLE,
                  MPI_COMM_WORLD);
    cu.memcpy_dtoh(w, r, total * sizeof(double));
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++)
            CHECK(w[(size_t)q * count + i] == val(q, i) + 1000 * q, "allgather count %zu block %d [%zu]", count, q,
                  i);
    calls[1] += count > 0;

    /* reduce_scatter_block: count elements each */
    for (size_t i = 0; i < total; i++) h[i] = val(rank, i);
    cu.memcpy_htod(in_place ? r : s, h, total * sizeof(double));
    MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : (void *)s, (void *)r, (int)count, MPI_DOUBLE, MPI_SUM,
                             MPI_COMM_WORLD);
    cu.memcpy_dtoh(w, r, count * sizeof(double));
    for (size_t i = 0; i < count; i++) {
        size_t g = (size_t)rank * count + i;
        CHECK(w[i] == (double)n * (n + 1) / 2 * (double)(g % 13 + 1), "reduce_scatter_block count %zu [%zu]",
              count, i);
    }
    calls[3] += count > 0;
    cu.mem_free(s);
    cu.mem_free(r);
    free(h);
    free(w);
}

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *why = cuda_open(rank);
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
    for (int k = 0; k < NCOLL; k++) {
        long served = (long)(c1.served[k] - c0.served[k]), staged = (long)(c1.staged[k] - c0.staged[k]);
        CHECK(served == calls[k] && staged == calls[k], "%s: %ld calls, %ld served by hier, %ld staged",
              check_colls[k], calls[k], served, staged);
    }
    check_pvars_close();
    return check_finish("test_cuda");
}
