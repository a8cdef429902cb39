/* hier_accel_cuda.c: CUDA device memory through the driver API, loaded at
 * run time with dlopen("libcuda.so.1"): no CUDA headers or libraries at build
 * time, nothing at all where the driver is absent. The few prototypes used
 * are declared here with the driver's stable ABI types. */
#include <dlfcn.h>
#include <pthread.h>
#include <rdma/fi_domain.h>
#include <stdint.h>

#include "hier_accel.h"
#include "hier_log.h"

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef uintptr_t CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;

enum { /* CUpointer_attribute values of the driver API */
    HIER_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    HIER_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    HIER_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    HIER_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    HIER_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};
#define HIER_CU_MEMORYTYPE_DEVICE 2

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get_count)(int *);
    CUresult (*pointer_get_attribute)(void *, int, CUdeviceptr);
    CUresult (*memcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_push_current)(CUcontext);
    CUresult (*ctx_pop_current)(CUcontext *);
} hier_cu;

static int hier_cu_query(const void *p, hier_accel_range_t *range)
{
    unsigned type = 0, managed = 0;
    int device = 0;
    CUdeviceptr base = 0;
    size_t len = 0;
    CUdeviceptr d = (CUdeviceptr)p;
    if (hier_cu.pointer_get_attribute(&type, HIER_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) != 0) return 0; /* host */
    (void)hier_cu.pointer_get_attribute(&managed, HIER_CU_POINTER_ATTRIBUTE_IS_MANAGED, d);
    if (type != HIER_CU_MEMORYTYPE_DEVICE && !managed) return 0;
    if (hier_cu.pointer_get_attribute(&base, HIER_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d) != 0 ||
        hier_cu.pointer_get_attribute(&len, HIER_CU_POINTER_ATTRIBUTE_RANGE_SIZE, d) != 0 ||
        hier_cu.pointer_get_attribute(&device, HIER_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d) != 0)
        return 0;
    *range = (hier_accel_range_t){.base = (uintptr_t)base, .len = len, .device = device};
    return 1;
}

/* Copies need a current context: the application's, or, for a thread that
 * has none, the primary context of the buffer's device, pushed for the copy
 * and popped after it so the application's state is left as it was. */
static hier_status_t hier_cu_copy(void *dst, const void *src, size_t len)
{
    CUcontext ctx = NULL, popped;
    int pushed = 0;
    if (hier_cu.ctx_get_current(&ctx) == 0 && !ctx) {
        hier_accel_range_t r;
        CUdevice dev;
        int ordinal = hier_cu_query(src, &r) || hier_cu_query(dst, &r) ? r.device : 0;
        if (hier_cu.device_get(&dev, ordinal) != 0 || hier_cu.primary_ctx_retain(&ctx, dev) != 0 ||
            hier_cu.ctx_push_current(ctx) != 0) {
            HIER_ERROR("CUDA: no context for a copy on device %d", ordinal);
            return HIER_ERR_INTERNAL;
        }
        pushed = 1;
    }
    CUresult rc = hier_cu.memcpy((CUdeviceptr)dst, (CUdeviceptr)src, len);
    if (pushed) (void)hier_cu.ctx_pop_current(&popped);
    if (rc != 0) {
        HIER_ERROR("CUDA: cuMemcpy of %zu bytes failed (CUresult %d)", len, rc);
        return HIER_ERR_INTERNAL;
    }
    return HIER_OK;
}

static const hier_accel_backend_t hier_cu_backend = {
    .name = "cuda", .fi_iface = FI_HMEM_CUDA, .stable_ranges = 1, .query = hier_cu_query, .to_host = hier_cu_copy,
    .from_host = hier_cu_copy,
};

static const hier_accel_backend_t *hier_cu_found;

#define HIER_CU_SYM(field, name)                                                       \
    do {                                                                               \
        *(void **)&hier_cu.field = dlsym(lib, name);                                   \
        if (!hier_cu.field) {                                                          \
            HIER_LOG(HIER_LOG_COMM, "libcuda.so.1 lacks %s: no CUDA device buffers", name); \
            goto close_lib;                                                            \
        }                                                                              \
    } while (0)

static void hier_cu_load(void)
{
    int ndev = 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return; /* no driver: no backend, no cost */
    HIER_CU_SYM(init, "cuInit");
    HIER_CU_SYM(device_get_count, "cuDeviceGetCount");
    HIER_CU_SYM(pointer_get_attribute, "cuPointerGetAttribute");
    HIER_CU_SYM(memcpy, "cuMemcpy");
    HIER_CU_SYM(ctx_get_current, "cuCtxGetCurrent");
    HIER_CU_SYM(device_get, "cuDeviceGet");
    HIER_CU_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain"); /* (only Release/Reset/SetFlags have _v2) */
    HIER_CU_SYM(ctx_push_current, "cuCtxPushCurrent_v2");
    HIER_CU_SYM(ctx_pop_current, "cuCtxPopCurrent_v2");
    if (hier_cu.init(0) != 0 || hier_cu.device_get_count(&ndev) != 0 || ndev < 1) goto close_lib;
    HIER_LOG(HIER_LOG_COMM, "CUDA driver found: %d device(s)", ndev);
    hier_cu_found = &hier_cu_backend;
    return; /* the library stays loaded for the life of the process */

close_lib:
    dlclose(lib);
}

const hier_accel_backend_t *hier_accel_cuda_backend(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, hier_cu_load);
    return hier_cu_found;
}
