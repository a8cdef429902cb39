/* hier_accel.c: the backend registry and pointer classification. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "hier_accel.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "hier_log.h"

static const hier_accel_backend_t *hier_accel_backends[HIER_ACCEL_MAX_BACKENDS];
static _Atomic int hier_accel_nbackends;
static pthread_once_t hier_accel_once = PTHREAD_ONCE_INIT;

/* The last device allocation classified, per thread: a training loop hands
 * the same buffers to every call. */
static _Thread_local struct {
    const hier_accel_backend_t *backend;
    hier_accel_range_t range;
} hier_accel_last;

hier_status_t hier_accel_register(const hier_accel_backend_t *backend)
{
    int n = atomic_load(&hier_accel_nbackends);
    for (int i = 0; i < n; i++)
        if (hier_accel_backends[i] == backend) return HIER_OK;
    if (n == HIER_ACCEL_MAX_BACKENDS) return HIER_ERR_NO_MEMORY;
    hier_accel_backends[n] = backend;
    atomic_store(&hier_accel_nbackends, n + 1);
    HIER_LOG(HIER_LOG_COMM, "device memory backend %s registered", backend->name);
    return HIER_OK;
}

void hier_accel_reset(void)
{
    atomic_store(&hier_accel_nbackends, 0);
    hier_accel_last.backend = NULL;
}

/* The runtimes present here, and a backend the application itself offers
 * (tests make device memory the CPU cannot touch, without a GPU: they export
 * `const hier_accel_backend_t *hier_test_accel_backend(void)`). */
static void hier_accel_load(void)
{
    const hier_accel_backend_t *cuda = hier_accel_cuda_backend();
    if (cuda) (void)hier_accel_register(cuda);
    const hier_accel_backend_t *(*test)(void);
    *(void **)&test = dlsym(RTLD_DEFAULT, "hier_test_accel_backend");
    if (test && test()) (void)hier_accel_register(test());
}

int hier_accel_has_backend(void)
{
    return atomic_load_explicit(&hier_accel_nbackends, memory_order_acquire) > 0;
}

void hier_accel_init(void)
{
    pthread_once(&hier_accel_once, hier_accel_load);
}

static int hier_accel_within(const hier_accel_range_t *r, uintptr_t p, size_t len)
{
    return p >= r->base && len <= r->len && p - r->base <= r->len - len;
}

hier_status_t hier_accel_classify(const void *p, size_t len, hier_accel_buf_t *buf)
{
    int n = atomic_load_explicit(&hier_accel_nbackends, memory_order_acquire);
    uintptr_t a = (uintptr_t)p;
    hier_accel_buf_t out = {.backend = NULL};

    if (n == 0 || !p) {
        *buf = out;
        return HIER_OK;
    }
    if (hier_accel_last.backend && hier_accel_within(&hier_accel_last.range, a, len ? len : 1)) {
        out.backend = hier_accel_last.backend;
        out.range = hier_accel_last.range;
        *buf = out;
        return HIER_OK;
    }
    for (int i = 0; i < n; i++) {
        hier_accel_range_t r;
        if (!hier_accel_backends[i]->query(p, &r)) continue;
        if (!hier_accel_within(&r, a, len ? len : 1)) {
            HIER_ERROR("a %zu-byte buffer at %p runs past its %s allocation (%zu bytes at 0x%llx)", len, p,
                       hier_accel_backends[i]->name, r.len, (unsigned long long)r.base);
            return HIER_ERR_INVALID_ARG;
        }
        out.backend = hier_accel_backends[i];
        out.range = r;
        if (out.backend->stable_ranges) { /* (other backends' freed ranges may turn into host memory) */
            hier_accel_last.backend = out.backend;
            hier_accel_last.range = r;
        }
        break;
    }
    *buf = out;
    return HIER_OK;
}

hier_status_t hier_accel_copy_d2d(const hier_accel_backend_t *dev, void *dst, const void *src, size_t len)
{
    if (!len) return HIER_OK;
    if (dev->copy) return dev->copy(dst, src, len);
    uint8_t *bounce = malloc(len);
    if (!bounce) {
        HIER_ERROR("no %zu bytes of host memory for a device-to-device copy", len);
        return HIER_ERR_NO_MEMORY;
    }
    hier_status_t st = dev->to_host(bounce, src, len);
    if (st == HIER_OK) st = dev->from_host(dst, bounce, len);
    free(bounce);
    return st;
}

static int hier_accel_async(const hier_accel_backend_t *dev)
{
    return dev->copy_start && dev->fence_record && dev->fence_wait;
}

hier_status_t hier_accel_copy_start(const hier_accel_backend_t *dev, int device, void *dst, const void *src,
                                    size_t len, int to_host)
{
    if (!len) return HIER_OK;
    if (hier_accel_async(dev)) return dev->copy_start(device, dst, src, len);
    return to_host ? dev->to_host(dst, src, len) : dev->from_host(dst, src, len);
}

hier_status_t hier_accel_fence(const hier_accel_backend_t *dev, int device, hier_accel_fence_t *fence)
{
    *fence = (hier_accel_fence_t){.event = NULL, .ticket = 0};
    return hier_accel_async(dev) ? dev->fence_record(device, fence) : HIER_OK;
}

hier_status_t hier_accel_fence_wait(const hier_accel_backend_t *dev, hier_accel_fence_t *fence)
{
    if (!dev || (!fence->event && !fence->ticket)) return HIER_OK;
    hier_status_t st = dev->fence_wait(fence);
    *fence = (hier_accel_fence_t){.event = NULL, .ticket = 0};
    return st;
}

void *hier_accel_nic_addr(const hier_accel_backend_t *dev, const void *p)
{
    return dev && dev->nic_addr ? dev->nic_addr(p) : (void *)p;
}
