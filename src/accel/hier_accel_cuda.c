/* hier_accel_cuda.c: CUDA device memory through the driver API, loaded at
 * run time with dlopen("libcuda.so.1"): no CUDA headers or libraries at build
 * time, nothing at all where the driver is absent. The few prototypes used
 * are declared here with the driver's stable ABI types. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <rdma/fi_domain.h>
#include <stdint.h>

#include "accel/hier_accel.h"
#include "base/hier_log.h"

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef uintptr_t CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum { /* CUpointer_attribute values of the driver API */
    HIER_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    HIER_CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
    HIER_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    HIER_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    HIER_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    HIER_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};
#define HIER_CU_MEMORYTYPE_DEVICE 2
/* Staging streams are created blocking (CU_STREAM_DEFAULT, not
 * CU_STREAM_NON_BLOCKING): their copies start after the work the
 * application queued on the legacy default stream, where cudaMemcpy and
 * PyTorch's kernels run. A synchronous copy from pageable memory returns
 * before its DMA lands; a non-blocking stream read the buffer before it had
 * (seen on an H100: sums of zeros). */
#define HIER_CU_STREAM_ORDERED_AFTER_LEGACY 0
#define HIER_CU_EVENT_DISABLE_TIMING 2
#define HIER_CU_MEMHOSTREGISTER_PORTABLE 1
#define HIER_CU_MAX_DEVICES 64

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
    /* asynchronous copies (optional: without them copies are synchronous) */
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*memcpy_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_synchronize)(CUevent);
    CUresult (*event_destroy)(CUevent);
    CUresult (*mem_host_register)(void *, size_t, unsigned);
    CUresult (*mem_host_unregister)(void *);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*flush_rdma_writes)(int, int); /* CUDA >= 11.3 */
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*device_get_pci_bus_id)(char *, int, CUdevice);
} hier_cu;

/* One stream per device, in its primary context, for staging copies; the
 * primary contexts, retained once. */
static CUstream hier_cu_streams[HIER_CU_MAX_DEVICES];
static CUcontext hier_cu_primary[HIER_CU_MAX_DEVICES];
static pthread_mutex_t hier_cu_lock = PTHREAD_MUTEX_INITIALIZER;

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
    unsigned long long id = 0;
    (void)hier_cu.pointer_get_attribute(&id, HIER_CU_POINTER_ATTRIBUTE_BUFFER_ID, d); /* 0: not cached */
    if (hier_cu.pointer_get_attribute(&base, HIER_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d) != 0 ||
        hier_cu.pointer_get_attribute(&len, HIER_CU_POINTER_ATTRIBUTE_RANGE_SIZE, d) != 0 ||
        hier_cu.pointer_get_attribute(&device, HIER_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d) != 0)
        return 0;
    *range = (hier_accel_range_t){.base = (uintptr_t)base, .len = len, .device = device, .id = id};
    return 1;
}

/* The primary context of `device`, retained once for the process. */
static CUcontext hier_cu_primary_ctx(int device)
{
    CUcontext ctx = NULL;
    CUdevice dev;
    if (device < 0 || device >= HIER_CU_MAX_DEVICES) return NULL;
    pthread_mutex_lock(&hier_cu_lock);
    if (!hier_cu_primary[device] && hier_cu.device_get(&dev, device) == 0 &&
        hier_cu.primary_ctx_retain(&ctx, dev) == 0)
        hier_cu_primary[device] = ctx;
    ctx = hier_cu_primary[device];
    pthread_mutex_unlock(&hier_cu_lock);
    return ctx;
}

/* Copies need a current context: the application's, or, for a thread that
 * has none, the primary context of the buffer's device, pushed for the copy
 * and popped after it so the application's state is left as it was. A copy
 * that writes device memory returns only once it landed (cuMemcpy does not
 * wait for device-to-device copies, nor for the DMA from pageable memory):
 * the caller's next kernel, on any stream, sees the data. */
static hier_status_t hier_cu_copy(void *dst, const void *src, size_t len)
{
    CUcontext ctx = NULL, popped;
    hier_accel_range_t r;
    int pushed = 0, to_device = hier_cu_query(dst, &r);
    if (hier_cu.ctx_get_current(&ctx) == 0 && !ctx) {
        int ordinal = to_device || hier_cu_query(src, &r) ? r.device : 0;
        if (!(ctx = hier_cu_primary_ctx(ordinal)) || hier_cu.ctx_push_current(ctx) != 0) {
            HIER_ERROR("CUDA: no context for a copy on device %d", ordinal);
            return HIER_ERR_INTERNAL;
        }
        pushed = 1;
    }
    CUresult rc = hier_cu.memcpy((CUdeviceptr)dst, (CUdeviceptr)src, len);
    if (rc == 0 && to_device) rc = hier_cu.stream_synchronize(NULL); /* the legacy stream cuMemcpy used */
    if (pushed) (void)hier_cu.ctx_pop_current(&popped);
    if (rc != 0) {
        HIER_ERROR("CUDA: cuMemcpy of %zu bytes failed (CUresult %d)", len, rc);
        return HIER_ERR_INTERNAL;
    }
    return HIER_OK;
}

/* The primary context of `device`, made current until hier_cu_leave. */
static hier_status_t hier_cu_enter(int device)
{
    CUcontext ctx = hier_cu_primary_ctx(device);
    if (!ctx || hier_cu.ctx_push_current(ctx) != 0) {
        HIER_ERROR("CUDA: cannot make device %d's primary context current", device);
        return HIER_ERR_INTERNAL;
    }
    return HIER_OK;
}

static void hier_cu_leave(void)
{
    CUcontext popped;
    (void)hier_cu.ctx_pop_current(&popped);
}

/* A recorded fence: its event, and the device whose context owns it. */
typedef struct {
    CUevent event;
    int device;
} hier_cu_fence_t;

/* The device's staging stream, created in its primary context (current),
 * ordered after the legacy default stream's work. */
static CUstream hier_cu_stream(int device)
{
    pthread_mutex_lock(&hier_cu_lock);
    if (!hier_cu_streams[device] &&
        hier_cu.stream_create(&hier_cu_streams[device], HIER_CU_STREAM_ORDERED_AFTER_LEGACY) != 0)
        hier_cu_streams[device] = NULL;
    CUstream stream = hier_cu_streams[device];
    pthread_mutex_unlock(&hier_cu_lock);
    return stream;
}

/* Asynchronous copy on the device's staging stream, in its primary context;
 * the host side is pinned staging memory (hier_cu_host_pin). */
static hier_status_t hier_cu_copy_start(int device, void *dst, const void *src, size_t len)
{
    if (device < 0 || device >= HIER_CU_MAX_DEVICES) return hier_cu_copy(dst, src, len);
    hier_status_t st = hier_cu_enter(device);
    if (st != HIER_OK) return st;
    CUstream stream = hier_cu_stream(device);
    CUresult rc = stream ? hier_cu.memcpy_async((CUdeviceptr)dst, (CUdeviceptr)src, len, stream) : -1;
    hier_cu_leave();
    if (rc != 0) {
        HIER_ERROR("CUDA: asynchronous copy of %zu bytes on device %d failed (CUresult %d)", len, device, rc);
        return HIER_ERR_INTERNAL;
    }
    return HIER_OK;
}

static hier_status_t hier_cu_fence_record(int device, hier_accel_fence_t *fence)
{
    if (device < 0 || device >= HIER_CU_MAX_DEVICES) return HIER_OK; /* its copies were synchronous */
    hier_cu_fence_t *f = malloc(sizeof(*f));
    if (!f) return HIER_ERR_NO_MEMORY;
    f->device = device;
    hier_status_t st = hier_cu_enter(device);
    if (st != HIER_OK) {
        free(f);
        return st;
    }
    CUstream stream = hier_cu_stream(device);
    CUresult rc = stream ? hier_cu.event_create(&f->event, HIER_CU_EVENT_DISABLE_TIMING) : -1;
    if (rc == 0 && (rc = hier_cu.event_record(f->event, stream)) != 0) (void)hier_cu.event_destroy(f->event);
    hier_cu_leave();
    if (rc != 0) {
        HIER_ERROR("CUDA: cannot record an event on device %d (CUresult %d)", device, rc);
        free(f);
        return HIER_ERR_INTERNAL;
    }
    fence->event = f;
    return HIER_OK;
}

static hier_status_t hier_cu_fence_wait(hier_accel_fence_t *fence)
{
    hier_cu_fence_t *f = fence->event;
    hier_status_t st = hier_cu_enter(f->device);
    if (st == HIER_OK) {
        CUresult rc = hier_cu.event_synchronize(f->event);
        (void)hier_cu.event_destroy(f->event);
        hier_cu_leave();
        if (rc != 0) {
            HIER_ERROR("CUDA: waiting for copies on device %d failed (CUresult %d)", f->device, rc);
            st = HIER_ERR_INTERNAL;
        }
    }
    free(f);
    return st;
}

/* Page-locked for every context: copies to and from it are asynchronous. */
static hier_status_t hier_cu_host_pin(int device, void *p, size_t len)
{
    hier_status_t st = hier_cu_enter(device);
    if (st != HIER_OK) return st;
    CUresult rc = hier_cu.mem_host_register(p, len, HIER_CU_MEMHOSTREGISTER_PORTABLE);
    hier_cu_leave();
    if (rc != 0) {
        HIER_LOG(HIER_LOG_COMM, "CUDA: cannot pin %zu bytes of staging memory (CUresult %d): copies wait", len, rc);
        return HIER_ERR_NOT_SUPPORTED;
    }
    return HIER_OK;
}

static void hier_cu_host_unpin(int device, void *p)
{
    if (hier_cu_enter(device) != HIER_OK) return;
    (void)hier_cu.mem_host_unregister(p);
    hier_cu_leave();
}

/* RDMA writes into this device's memory, complete for the NIC, made visible
 * to the device's later work, as NCCL does after a peer-direct receive. */
static hier_status_t hier_cu_flush_rdma(int device)
{
    enum { TARGET_CURRENT_CTX = 0, TO_OWNER = 100 }; /* CUflushGPUDirectRDMAWrites* values */
    hier_status_t st = hier_cu_enter(device);
    if (st != HIER_OK) return st;
    CUresult rc = hier_cu.flush_rdma_writes(TARGET_CURRENT_CTX, TO_OWNER);
    hier_cu_leave();
    if (rc != 0) {
        HIER_ERROR("CUDA: cuFlushGPUDirectRDMAWrites on device %d failed (CUresult %d)", device, rc);
        return HIER_ERR_INTERNAL;
    }
    return HIER_OK;
}

/* The current context's device: where this rank's GPU sits on the PCI tree. */
static hier_status_t hier_cu_device_busid(char *busid, size_t len)
{
    CUcontext ctx = NULL;
    CUdevice dev;
    if (hier_cu.ctx_get_current(&ctx) != 0 || !ctx || hier_cu.ctx_get_device(&dev) != 0 ||
        hier_cu.device_get_pci_bus_id(busid, (int)len, dev) != 0)
        return HIER_ERR_NOT_SUPPORTED;
    return HIER_OK;
}

static hier_accel_backend_t hier_cu_backend = {
    .name = "cuda", .fi_iface = FI_HMEM_CUDA, .stable_ranges = 1, .query = hier_cu_query, .to_host = hier_cu_copy,
    .from_host = hier_cu_copy, .copy = hier_cu_copy,
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
    HIER_CU_SYM(stream_synchronize, "cuStreamSynchronize");
    if (hier_cu.init(0) != 0 || hier_cu.device_get_count(&ndev) != 0 || ndev < 1) goto close_lib;
    /* optional: asynchronous staging copies */
    *(void **)&hier_cu.stream_create = dlsym(lib, "cuStreamCreate");
    *(void **)&hier_cu.memcpy_async = dlsym(lib, "cuMemcpyAsync");
    *(void **)&hier_cu.event_create = dlsym(lib, "cuEventCreate");
    *(void **)&hier_cu.event_record = dlsym(lib, "cuEventRecord");
    *(void **)&hier_cu.event_synchronize = dlsym(lib, "cuEventSynchronize");
    *(void **)&hier_cu.event_destroy = dlsym(lib, "cuEventDestroy_v2");
    *(void **)&hier_cu.mem_host_register = dlsym(lib, "cuMemHostRegister_v2");
    *(void **)&hier_cu.mem_host_unregister = dlsym(lib, "cuMemHostUnregister");
    if (hier_cu.stream_create && hier_cu.memcpy_async && hier_cu.event_create && hier_cu.event_record &&
        hier_cu.event_synchronize && hier_cu.event_destroy) {
        hier_cu_backend.copy_start = hier_cu_copy_start;
        hier_cu_backend.fence_record = hier_cu_fence_record;
        hier_cu_backend.fence_wait = hier_cu_fence_wait;
    }
    *(void **)&hier_cu.flush_rdma_writes = dlsym(lib, "cuFlushGPUDirectRDMAWrites");
    if (hier_cu.flush_rdma_writes) hier_cu_backend.flush_rdma = hier_cu_flush_rdma;
    *(void **)&hier_cu.ctx_get_device = dlsym(lib, "cuCtxGetDevice");
    *(void **)&hier_cu.device_get_pci_bus_id = dlsym(lib, "cuDeviceGetPCIBusId");
    if (hier_cu.ctx_get_device && hier_cu.device_get_pci_bus_id) hier_cu_backend.device_busid = hier_cu_device_busid;
    if (hier_cu.mem_host_register && hier_cu.mem_host_unregister) {
        hier_cu_backend.host_pin = hier_cu_host_pin;
        hier_cu_backend.host_unpin = hier_cu_host_unpin;
    }
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
