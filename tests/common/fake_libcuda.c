/* fake_libcuda.c: a stand-in for the CUDA driver (libcuda.so.1), built only
 * for the tests, so that hier's CUDA backend (src/accel/hier_accel_cuda.c) and
 * tests/mpi/test_cuda run in CI on machines without a GPU.
 *
 * It keeps the driver's rules that a careless caller breaks, so that the
 * tests fail where real hardware would:
 *  - "device memory" is a memfd mapped twice: PROT_NONE at the address
 *    handed out (a CPU access from hier segfaults), read-write at a private
 *    alias the fake's copies use;
 *  - allocations and copies need a current context (CUDA_ERROR_INVALID_CONTEXT
 *    otherwise), and contexts are a per-thread stack (push/pop/set);
 *  - copies on a created stream are deferred until an event recorded after
 *    them, or the stream, is synchronised: a caller that reads the result or
 *    reuses the source before waiting sees stale bytes;
 *  - cuMemcpyHtoD returns before its bytes reach the device, as the driver's
 *    does from pageable memory: they land with the legacy stream's next work
 *    (a legacy copy, cuStreamSynchronize(NULL), an event on it) or with work
 *    on a stream created blocking, never before work on a stream created
 *    CU_STREAM_NON_BLOCKING, which reads what was there before (an H100 did
 *    the same to hier's staging copies);
 *  - cuPointerGetAttribute fails on host memory and answers memory type,
 *    range, device ordinal and buffer id for device memory.
 * HIER_FAKE_CUDA_DEVICES sets the device count (default 1); every entry
 * point counts its calls, printed at exit when HIER_FAKE_CUDA_VERBOSE is set.
 * This is not CUDA: it proves hier drives the driver API correctly, not that
 * a GPU does what the API says. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef uintptr_t CUdeviceptr;
typedef int CUdevice;
typedef struct fake_ctx *CUcontext;
typedef struct fake_stream *CUstream;
typedef struct fake_event *CUevent;

enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_OUT_OF_MEMORY = 2, ERR_NOT_INITIALIZED = 3, ERR_INVALID_DEVICE = 101,
       ERR_INVALID_CONTEXT = 201, ERR_INVALID_HANDLE = 400 };
enum { ATTR_MEMORY_TYPE = 2, ATTR_BUFFER_ID = 7, ATTR_IS_MANAGED = 8, ATTR_DEVICE_ORDINAL = 9,
       ATTR_RANGE_START_ADDR = 11, ATTR_RANGE_SIZE = 12 };
#define MEMORYTYPE_DEVICE 2
#define FAKE_MAX_DEVICES 8
#define FAKE_MAX_ALLOCS 256
#define FAKE_CTX_DEPTH 8

struct fake_ctx { int device; };
struct fake_copy { char *dst; const char *src; size_t len; char *owned; /* src, freed once run */ };
struct fake_stream {
    int device, non_blocking;
    struct fake_copy *q; /* deferred copies, executed in order */
    size_t n, cap, done;
};
struct fake_event { struct fake_stream *stream; size_t upto; };

static struct {
    uintptr_t base;   /* address handed out (PROT_NONE) */
    char *alias;      /* read-write view of the same pages */
    size_t len, map_len;
    int device;
    unsigned long long id;
} allocs[FAKE_MAX_ALLOCS];
static struct fake_ctx primary[FAKE_MAX_DEVICES];
static int initialised, ndevices = 1;
static unsigned long long next_id = 1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread CUcontext ctx_stack[FAKE_CTX_DEPTH];
static __thread int ctx_depth;
static unsigned long calls_memcpy, calls_async, calls_event_sync, calls_flush, calls_register;

static void fake_report(void)
{
    if (getenv("HIER_FAKE_CUDA_VERBOSE"))
        fprintf(stderr, "fake libcuda: cuMemcpy %lu, cuMemcpyAsync %lu, cuEventSynchronize %lu, "
                        "cuMemHostRegister %lu, cuFlushGPUDirectRDMAWrites %lu\n",
                calls_memcpy, calls_async, calls_event_sync, calls_register, calls_flush);
}

static CUcontext fake_current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

/* The allocation holding p, or -1. Caller holds the lock. */
static int fake_find(uintptr_t p)
{
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++)
        if (allocs[i].base && p >= allocs[i].base && p - allocs[i].base < allocs[i].len) return i;
    return -1;
}

/* Where the fake may touch [p, p + len): the alias for device memory, p
 * itself for host memory; NULL if the range straddles an allocation's end. */
static char *fake_cpu_view(uintptr_t p, size_t len)
{
    int i = fake_find(p);
    if (i < 0) return (char *)p;
    if (len > allocs[i].len - (p - allocs[i].base)) return NULL;
    return allocs[i].alias + (p - allocs[i].base);
}

static CUresult fake_copy_now(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
    char *d = fake_cpu_view(dst, len);
    const char *s = fake_cpu_view(src, len);
    if (!d || !s) return ERR_INVALID_VALUE;
    memmove(d, s, len);
    return OK;
}

/* Each device's legacy default stream: only cuMemcpyHtoD's DMA waits there. */
static struct fake_stream legacy[FAKE_MAX_DEVICES];

static void fake_stream_run(struct fake_stream *s, size_t upto)
{
    for (; s->done < upto; s->done++) {
        memmove(s->q[s->done].dst, s->q[s->done].src, s->q[s->done].len);
        free(s->q[s->done].owned);
        s->q[s->done].owned = NULL;
    }
}

/* Work on the legacy stream, or on a blocking stream, starts after the
 * legacy stream's earlier work. Caller holds the lock. */
static void fake_legacy_drain(int device) { fake_stream_run(&legacy[device], legacy[device].n); }

/* Appends a copy to s's queue. Caller holds the lock. */
static CUresult fake_stream_push(struct fake_stream *s, char *dst, const char *src, size_t len, char *owned)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct fake_copy *q = realloc(s->q, cap * sizeof(*q));
        if (!q) return ERR_OUT_OF_MEMORY;
        s->q = q, s->cap = cap;
    }
    s->q[s->n++] = (struct fake_copy){dst, src, len, owned};
    return OK;
}

FAKE_EXPORT CUresult cuInit(unsigned flags)
{
    if (flags) return ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!initialised) {
        const char *e = getenv("HIER_FAKE_CUDA_DEVICES");
        ndevices = e ? atoi(e) : 1;
        if (ndevices < 0 || ndevices > FAKE_MAX_DEVICES) ndevices = 1;
        for (int d = 0; d < FAKE_MAX_DEVICES; d++) primary[d].device = d;
        initialised = 1;
        atexit(fake_report);
    }
    pthread_mutex_unlock(&lock);
    return OK;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (!initialised) return ERR_NOT_INITIALIZED;
    *n = ndevices;
    return OK;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!initialised) return ERR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= ndevices) return ERR_INVALID_DEVICE;
    *dev = ordinal;
    return OK;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (!initialised) return ERR_NOT_INITIALIZED;
    if (dev < 0 || dev >= ndevices) return ERR_INVALID_DEVICE;
    *ctx = &primary[dev];
    return OK;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    *ctx = fake_current();
    return OK;
}

FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    *dev = ctx->device;
    return OK;
}

/* Device d sits at bus 0x10 x (d + 1), as "dddd:bb:dd.f", the driver's
 * format; HIER_FAKE_CUDA_BUSID names every device's instead (tests: a
 * device this machine has, to be found by hwloc). */
FAKE_EXPORT CUresult cuDeviceGetPCIBusId(char *busid, int len, CUdevice dev)
{
    const char *all = getenv("HIER_FAKE_CUDA_BUSID");
    if (!initialised) return ERR_NOT_INITIALIZED;
    if (dev < 0 || dev >= ndevices || len < 13) return ERR_INVALID_VALUE;
    if (all) snprintf(busid, (size_t)len, "%s", all);
    else snprintf(busid, (size_t)len, "0000:%02x:00.0", (0x10u * (unsigned)(dev + 1)) & 0xff);
    return OK;
}

FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (!ctx) {
        if (ctx_depth) ctx_depth--;
        return OK;
    }
    if (!ctx_depth) ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return OK;
}

FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    if (!ctx || ctx_depth == FAKE_CTX_DEPTH) return ERR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = ctx;
    return OK;
}

FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
    if (!ctx_depth) return ERR_INVALID_CONTEXT;
    CUcontext top = ctx_stack[--ctx_depth];
    if (ctx) *ctx = top;
    return OK;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t len)
{
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    if (!len) return ERR_INVALID_VALUE;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), map_len = (len + page - 1) / page * page;
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0) return ERR_OUT_OF_MEMORY;
    void *alias = MAP_FAILED, *dev = MAP_FAILED;
    if (ftruncate(fd, (off_t)map_len) == 0) {
        alias = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        dev = mmap(NULL, map_len, PROT_NONE, MAP_SHARED, fd, 0);
    }
    close(fd);
    CUresult rc = ERR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (int i = 0; alias != MAP_FAILED && dev != MAP_FAILED && i < FAKE_MAX_ALLOCS; i++) {
        if (allocs[i].base) continue;
        allocs[i].base = (uintptr_t)dev;
        allocs[i].alias = alias;
        allocs[i].len = len;
        allocs[i].map_len = map_len;
        allocs[i].device = ctx->device;
        allocs[i].id = next_id++;
        *p = (CUdeviceptr)dev;
        rc = OK;
        break;
    }
    pthread_mutex_unlock(&lock);
    if (rc != OK) {
        if (alias != MAP_FAILED) munmap(alias, map_len);
        if (dev != MAP_FAILED) munmap(dev, map_len);
    }
    return rc;
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    int i = fake_find(p);
    if (i >= 0 && allocs[i].base == p) {
        fake_legacy_drain(allocs[i].device); /* cuMemFree waits for the device */
        munmap(allocs[i].alias, allocs[i].map_len);
        munmap((void *)allocs[i].base, allocs[i].map_len);
        memset(&allocs[i], 0, sizeof(allocs[i]));
    }
    pthread_mutex_unlock(&lock);
    return i >= 0 ? OK : ERR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    calls_memcpy++;
    fake_legacy_drain(ctx->device);
    CUresult rc = fake_copy_now(dst, src, len);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* From pageable memory: the source is taken at once, the device written
 * later (see the header). */
FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t len)
{
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    char *owned = malloc(len ? len : 1);
    if (!owned) return ERR_OUT_OF_MEMORY;
    memcpy(owned, src, len);
    pthread_mutex_lock(&lock);
    calls_memcpy++;
    char *d = fake_cpu_view(dst, len);
    CUresult rc = d ? fake_stream_push(&legacy[ctx->device], d, owned, len, owned) : ERR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    if (rc != OK) free(owned);
    return rc;
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t len)
{
    return cuMemcpy((CUdeviceptr)dst, src, len);
}

FAKE_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags)
{
    enum { STREAM_NON_BLOCKING = 1 };
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    if (flags & ~(unsigned)STREAM_NON_BLOCKING) return ERR_INVALID_VALUE;
    struct fake_stream *st = calloc(1, sizeof(*st));
    if (!st) return ERR_OUT_OF_MEMORY;
    st->device = ctx->device;
    st->non_blocking = (flags & STREAM_NON_BLOCKING) != 0;
    *s = st;
    return OK;
}

/* Deferred: runs when the stream, or an event recorded after it, is waited for. */
FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t len, CUstream s)
{
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    if (!s) return cuMemcpy(dst, src, len);
    if (s->device != ctx->device) return ERR_INVALID_HANDLE; /* a stream belongs to its context */
    CUresult rc = OK;
    pthread_mutex_lock(&lock);
    calls_async++;
    char *d = fake_cpu_view(dst, len);
    const char *sv = fake_cpu_view(src, len);
    if (!d || !sv) rc = ERR_INVALID_VALUE;
    else {
        if (!s->non_blocking) fake_legacy_drain(s->device);
        rc = fake_stream_push(s, d, sv, len, NULL);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    if (!s) s = &legacy[ctx->device];
    fake_stream_run(s, s->n);
    pthread_mutex_unlock(&lock);
    return OK;
}

FAKE_EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags)
{
    (void)flags;
    if (!fake_current()) return ERR_INVALID_CONTEXT;
    *e = calloc(1, sizeof(**e));
    return *e ? OK : ERR_OUT_OF_MEMORY;
}

FAKE_EXPORT CUresult cuEventRecord(CUevent e, CUstream s)
{
    CUcontext ctx = fake_current();
    if (!ctx) return ERR_INVALID_CONTEXT;
    if (!e) return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    if (!s) s = &legacy[ctx->device];
    e->stream = s;
    e->upto = s->n;
    pthread_mutex_unlock(&lock);
    return OK;
}

FAKE_EXPORT CUresult cuEventSynchronize(CUevent e)
{
    if (!e) return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    calls_event_sync++;
    if (e->stream) fake_stream_run(e->stream, e->upto);
    pthread_mutex_unlock(&lock);
    return OK;
}

FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
    free(e);
    return OK;
}

FAKE_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t len, unsigned flags)
{
    (void)flags;
    if (!fake_current()) return ERR_INVALID_CONTEXT;
    if (!p || !len) return ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    calls_register++;
    pthread_mutex_unlock(&lock);
    return OK;
}

FAKE_EXPORT CUresult cuMemHostUnregister(void *p)
{
    return p ? OK : ERR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuFlushGPUDirectRDMAWrites(int target, int scope)
{
    if (!fake_current()) return ERR_INVALID_CONTEXT;
    (void)target;
    (void)scope;
    pthread_mutex_lock(&lock);
    calls_flush++;
    pthread_mutex_unlock(&lock);
    return OK;
}

FAKE_EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    int i = fake_find(p);
    CUresult rc = OK;
    if (i < 0) rc = ERR_INVALID_VALUE; /* host memory the driver does not know */
    else switch (attr) {
        case ATTR_MEMORY_TYPE: *(unsigned *)data = MEMORYTYPE_DEVICE; break;
        case ATTR_BUFFER_ID: *(unsigned long long *)data = allocs[i].id; break;
        case ATTR_IS_MANAGED: *(unsigned char *)data = 0; break;
        case ATTR_DEVICE_ORDINAL: *(int *)data = allocs[i].device; break;
        case ATTR_RANGE_START_ADDR: *(CUdeviceptr *)data = allocs[i].base; break;
        case ATTR_RANGE_SIZE: *(size_t *)data = allocs[i].len; break;
        default: rc = ERR_INVALID_VALUE;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}
