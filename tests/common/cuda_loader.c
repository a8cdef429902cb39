/* cuda_loader.c: see cuda_loader.h. */
#include "cuda_loader.h"

#include <dlfcn.h>

typedef int CUresult;
typedef struct CUctx_st *CUcontext;

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(int *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, int);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*mem_alloc)(cul_ptr_t *, size_t);
    CUresult (*mem_free)(cul_ptr_t);
    CUresult (*memcpy_htod)(cul_ptr_t, const void *, size_t);
    CUresult (*memcpy_dtoh)(void *, cul_ptr_t, size_t);
} cu;

const char *cul_open(int rank)
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

cul_ptr_t cul_alloc(size_t bytes)
{
    cul_ptr_t p = 0;
    return cu.mem_alloc(&p, bytes ? bytes : 1) == 0 ? p : 0;
}

void cul_free(cul_ptr_t p)
{
    if (p) cu.mem_free(p);
}

int cul_htod(cul_ptr_t dst, const void *src, size_t bytes)
{
    return bytes ? cu.memcpy_htod(dst, src, bytes) : 0;
}

int cul_dtoh(void *dst, cul_ptr_t src, size_t bytes)
{
    return bytes ? cu.memcpy_dtoh(dst, src, bytes) : 0;
}
