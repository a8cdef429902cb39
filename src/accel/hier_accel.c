/* hier_accel.c: the backend registry and pointer classification. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "accel/hier_accel.h"

#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/hier_log.h"

static const hier_accel_backend_t *hier_accel_backends[HIER_ACCEL_MAX_BACKENDS];
/* An accelerator runtime is loaded whose device addresses no backend can
 * tell from host pointers: every unclaimed buffer is checked. */
static _Atomic int hier_accel_guard;
static _Atomic(hier_accel_foreign_fn_t) hier_accel_foreign;
static _Atomic int hier_accel_nbackends;
_Atomic int hier_accel_any; /* any of the three above: see hier_accel_maybe_device */

static void hier_accel_any_update(void)
{
    atomic_store(&hier_accel_any, atomic_load(&hier_accel_nbackends) > 0 || atomic_load(&hier_accel_foreign) ||
                                      atomic_load(&hier_accel_guard));
}
/* The runtimes found here are registered once per life of the core: again
 * after hier_accel_reset (a new session after a finalize). */
static _Atomic int hier_accel_loaded;
static pthread_mutex_t hier_accel_load_lock = PTHREAD_MUTEX_INITIALIZER;

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
    hier_accel_any_update();
    HIER_LOG(HIER_LOG_COMM, "device memory backend %s registered", backend->name);
    return HIER_OK;
}

void hier_accel_reset(void)
{
    atomic_store(&hier_accel_nbackends, 0);
    atomic_store(&hier_accel_loaded, 0);
    atomic_store(&hier_accel_foreign, NULL);
    hier_accel_any_update();
    hier_accel_last.backend = NULL;
}

/* The runtimes present here (others come through hier_accel_register). */
static void hier_accel_load(void)
{
    const hier_accel_backend_t *cuda = hier_accel_cuda_backend();
    if (cuda) (void)hier_accel_register(cuda);
}

int hier_accel_has_backend(void)
{
    return atomic_load_explicit(&hier_accel_nbackends, memory_order_acquire) > 0;
}

hier_status_t hier_accel_device_busid(char *busid, size_t len)
{
    int n = atomic_load_explicit(&hier_accel_nbackends, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (hier_accel_backends[i]->device_busid && hier_accel_backends[i]->device_busid(busid, len) == HIER_OK)
            return HIER_OK;
    return HIER_ERR_NOT_SUPPORTED;
}

/* Runtimes with no pointer query in their public API (Gaudi's SynapseAI,
 * AWS Neuron): their device addresses are not host pointers, and nothing
 * says which is which. Looked for among the objects the application has
 * already loaded (never loaded here) at every communicator's set-up, so a
 * framework imported after MPI_Init is seen by the communicators made
 * after it; the loader's count of objects ever loaded tells whether there
 * is anything new to look at, so a set-up costs one call when nothing was
 * loaded since the last. (dlopen with RTLD_NOLOAD would search the library
 * path for every name, every time: most of a communicator's set-up.) */
static const char *const hier_accel_opaque_libs[] = {"libSynapse.so", "libnrt.so"};
static unsigned long long hier_accel_seen_adds;

static int hier_accel_adds(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* (the same in every entry: the first says it) */
}

static int hier_accel_opaque_in(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    const char *base = slash ? slash + 1 : info->dlpi_name ? info->dlpi_name : "";
    for (size_t i = 0; i < sizeof(hier_accel_opaque_libs) / sizeof(hier_accel_opaque_libs[0]); i++)
        if (!strncmp(base, hier_accel_opaque_libs[i], strlen(hier_accel_opaque_libs[i]))) {
            *(const char **)data = hier_accel_opaque_libs[i];
            return 1;
        }
    return 0;
}

static void hier_accel_find_opaque(void)
{
    unsigned long long adds = 0;
    const char *found = NULL;
    if (atomic_load(&hier_accel_guard)) return;
    dl_iterate_phdr(hier_accel_adds, &adds);
    if (adds == __atomic_load_n(&hier_accel_seen_adds, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&hier_accel_seen_adds, adds, __ATOMIC_RELAXED);
    dl_iterate_phdr(hier_accel_opaque_in, &found);
    if (!found) return;
    atomic_store(&hier_accel_guard, 1);
    hier_accel_any_update();
    HIER_LOG(HIER_LOG_COMM, "%s is loaded: its device buffers cannot be told from host pointers, so every buffer no "
             "backend claims is checked to be host memory; others go to the previous component", found);
}

void hier_accel_init(void)
{
    if (!atomic_load_explicit(&hier_accel_loaded, memory_order_acquire)) {
        pthread_mutex_lock(&hier_accel_load_lock);
        if (!atomic_load_explicit(&hier_accel_loaded, memory_order_relaxed)) hier_accel_load();
        atomic_store_explicit(&hier_accel_loaded, 1, memory_order_release);
        pthread_mutex_unlock(&hier_accel_load_lock);
    }
    hier_accel_find_opaque();
}

void hier_accel_guard_set(int on)
{
    atomic_store(&hier_accel_guard, on);
    hier_accel_any_update();
}

void hier_accel_set_foreign(hier_accel_foreign_fn_t is_device)
{
    atomic_store(&hier_accel_foreign, is_device);
    hier_accel_any_update();
}

/* Whether the pages of [p, p + len) at both ends are mapped here (mincore:
 * ENOMEM for addresses with no mapping). */
static int hier_accel_host_mapped(const void *p, size_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char vec;
    uintptr_t first = (uintptr_t)p & ~(uintptr_t)(page - 1);
    uintptr_t last = ((uintptr_t)p + (len ? len - 1 : 0)) & ~(uintptr_t)(page - 1);
    return mincore((void *)first, (size_t)page, &vec) == 0 && mincore((void *)last, (size_t)page, &vec) == 0;
}

static int hier_accel_within(const hier_accel_range_t *r, uintptr_t p, size_t len)
{
    return p >= r->base && len <= r->len && p - r->base <= r->len - len;
}

hier_status_t hier_accel_classify_asked(const void *p, size_t len, hier_accel_buf_t *buf)
{
    int n = atomic_load_explicit(&hier_accel_nbackends, memory_order_acquire);
    uintptr_t a = (uintptr_t)p;
    hier_accel_buf_t out = {.backend = NULL};
    hier_accel_foreign_fn_t foreign = atomic_load_explicit(&hier_accel_foreign, memory_order_relaxed);

    if ((n == 0 && !foreign && !atomic_load_explicit(&hier_accel_guard, memory_order_relaxed)) || !p) {
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
            return HIER_ERR_BUFFER;
        }
        out.backend = hier_accel_backends[i];
        out.range = r;
        if (out.backend->stable_ranges) { /* (other backends' freed ranges may turn into host memory) */
            hier_accel_last.backend = out.backend;
            hier_accel_last.range = r;
        }
        break;
    }
    if (!out.backend && foreign && foreign(p) > 0) {
        HIER_LOG(HIER_LOG_COMM, "a %zu-byte buffer at %p is device memory by Open MPI's accelerator framework "
                 "and no backend of hier's claims it: the previous component serves the call", len, p);
        return HIER_ERR_NOT_SUPPORTED;
    }
    if (!out.backend && atomic_load_explicit(&hier_accel_guard, memory_order_relaxed) &&
        !hier_accel_host_mapped(p, len)) {
        HIER_LOG(HIER_LOG_COMM, "a %zu-byte buffer at %p is not host memory and no backend claims it (device "
                 "memory of a runtime hier cannot query): the previous component serves the call", len, p);
        return HIER_ERR_NOT_SUPPORTED;
    }
    *buf = out;
    return HIER_OK;
}

int hier_accel_classify_pair(const void *sbuf, size_t slen, const void *rbuf, size_t rlen, hier_accel_buf_t *sb,
                             hier_accel_buf_t *rb, hier_status_t *st_p)
{
    hier_status_t st = hier_accel_classify(sbuf, slen, sb);
    if (st == HIER_OK) st = hier_accel_classify(rbuf, rlen, rb);
    *st_p = st;
    return st != HIER_OK || hier_accel_is_device(sb) || hier_accel_is_device(rb);
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
    return dev && hier_accel_async(dev) ? dev->fence_record(device, fence) : HIER_OK;
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
