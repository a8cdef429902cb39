/* hier_accel.h: accelerator (device) memory, behind one small interface (docs/design.md, "Device
 * (accelerator) buffers").
 *
 * A backend knows its runtime's memory: whether a pointer is device memory (which device, which allocation
 * range), how to copy between it and host memory, and the libfabric `iface` to register it with. Backends
 * register at start-up; one whose runtime is absent never registers, so it costs nothing. The CUDA backend
 * loads libcuda.so.1 at run time (no CUDA headers or libraries at build time); tests register their own. The
 * CPU never touches device memory: the core copies it through a backend into host staging buffers and runs the
 * host algorithms there. */
#ifndef HIER_ACCEL_H
#define HIER_ACCEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hier_status.h"

#define HIER_ACCEL_MAX_BACKENDS 4

/* What a backend reports about one pointer. */
typedef struct {
    uintptr_t base; /* the allocation the pointer lies in */
    size_t len;
    int device;     /* device ordinal */
    uint64_t id;    /* unique per allocation, never reused (0: unknown): a NIC registration of it may be kept */
} hier_accel_range_t;

/* A point in a backend's stream of asynchronous copies; what it holds is
 * the backend's. */
typedef struct {
    void *event;
    uint64_t ticket;
} hier_accel_fence_t;

typedef struct {
    const char *name; /* "cuda", "test", ... */
    int fi_iface;     /* enum fi_hmem_iface to register its memory with (FI_HMEM_CUDA, ...) */
    /* 1 when its device addresses never become host memory (CUDA's unified
     * address space): a range seen once may be remembered */
    int stable_ranges;
    /* 1 and *range when p is this backend's device memory, else 0. Must be
     * cheap for host pointers: it runs on every collective. */
    int (*query)(const void *p, hier_accel_range_t *range);
    hier_status_t (*to_host)(void *dst, const void *src, size_t len);
    hier_status_t (*from_host)(void *dst, const void *src, size_t len);
    /* Optional, NULL where the runtime has none: */
    /* device to device (else through host memory) */
    hier_status_t (*copy)(void *dst, const void *src, size_t len);
    /* asynchronous copies, either way, run in the order started (per
     * device); a fence recorded after some passes when they are all done:
     * staging overlaps copies with the network (else copies are synchronous) */
    hier_status_t (*copy_start)(int device, void *dst, const void *src, size_t len);
    hier_status_t (*fence_record)(int device, hier_accel_fence_t *fence);
    hier_status_t (*fence_wait)(hier_accel_fence_t *fence);
    /* pin host staging memory (for device `device`'s copies) so copies to
     * and from it run asynchronously */
    hier_status_t (*host_pin)(int device, void *p, size_t len);
    void (*host_unpin)(int device, void *p);
    /* make RDMA writes the NIC placed in device memory visible to the
     * device's later work (GPUDirect RDMA writes may sit in the PCIe
     * hierarchy after the NIC reported them: cuFlushGPUDirectRDMAWrites) */
    hier_status_t (*flush_rdma)(int device);
    /* the address the NIC is given for device address p (else p) */
    void *(*nic_addr)(const void *p);
    /* the PCI bus id ("dddd:bb:dd.f") of the device the calling thread
     * works on (its current context's): NICs are placed near it;
     * HIER_ERR_NOT_SUPPORTED when none is current */
    hier_status_t (*device_busid)(char *busid, size_t len);
} hier_accel_backend_t;

/* One buffer of a collective as the core sees it. */
typedef struct {
    const hier_accel_backend_t *backend; /* NULL: host memory */
    hier_accel_range_t range;
} hier_accel_buf_t;

/* A call's two buffers, classified (sbuf unused in place). */
typedef struct {
    hier_accel_buf_t sbuf, rbuf;
} hier_accel_pair_t;

/* Add a backend (process-wide; the same one twice is a no-op). The one
 * entry point mca_coll_hier.so exports besides its component: a program
 * (the tests, hier_bench --device test) hands it a backend of its own after
 * MPI_Init, before its first collective. */
HIER_EXPORT hier_status_t hier_accel_register(const hier_accel_backend_t *backend);
/* Forget every backend (at finalize; the next hier_accel_init looks for the
 * runtimes again). */
void hier_accel_reset(void);
/* Whether any backend is registered (device buffers may come). */
int hier_accel_has_backend(void);
/* The PCI bus id of the device this thread works on, from the first
 * backend that knows; HIER_ERR_NOT_SUPPORTED when none does. */
hier_status_t hier_accel_device_busid(char *busid, size_t len);
/* Load the runtimes present on this machine (CUDA), once. */
void hier_accel_init(void);

/* Check unclaimed buffers for host memory as when an opaque runtime
 * (SynapseAI, Neuron) is loaded (tests). */
void hier_accel_guard_set(int on);

/* A query from the MPI library (Open MPI 5's accelerator framework) that
 * tells device memory of any runtime it knows: > 0 device, 0 host. A buffer
 * no backend claims and this query calls device memory is
 * HIER_ERR_NOT_SUPPORTED from classify (the caller falls back). NULL
 * removes it. */
typedef int (*hier_accel_foreign_fn_t)(const void *p);
void hier_accel_set_foreign(hier_accel_foreign_fn_t is_device);

/* 0 while no buffer can be device memory here (no backend registered, no
 * foreign check, no opaque runtime loaded): every buffer is host memory,
 * and a call need not ask (the common case, one load). */
extern _Atomic int hier_accel_any;
static inline int hier_accel_maybe_device(void)
{
    return atomic_load_explicit(&hier_accel_any, memory_order_acquire);
}
/* Classify [p, p + len): host, or one backend's device memory. A device
 * buffer must lie within one allocation (HIER_ERR_BUFFER otherwise).
 * With an opaque runtime loaded, a buffer no backend claims that is not
 * mapped host memory is HIER_ERR_NOT_SUPPORTED (the caller falls back), as
 * is one the foreign query calls device memory.
 * While no buffer can be device memory it is one load and a branch; the last device
 * allocation of a backend with stable ranges is remembered, so repeated calls
 * on it skip the runtime. */
hier_status_t hier_accel_classify_asked(const void *p, size_t len, hier_accel_buf_t *buf);
static inline hier_status_t hier_accel_classify(const void *p, size_t len, hier_accel_buf_t *buf)
{
    if (!hier_accel_maybe_device()) {
        *buf = (hier_accel_buf_t){.backend = NULL};
        return HIER_OK;
    }
    return hier_accel_classify_asked(p, len, buf);
}

static inline int hier_accel_is_device(const hier_accel_buf_t *buf)
{
    return buf->backend != NULL;
}

/* A call's send and receive buffers, classified: 1 when either is device
 * memory, or classifying failed (*st_p, always set: HIER_OK or the first
 * buffer's error). */
int hier_accel_classify_pair(const void *sbuf, size_t slen, const void *rbuf, size_t rlen, hier_accel_buf_t *sb,
                             hier_accel_buf_t *rb, hier_status_t *st_p);

/* Copies with the optional operations' fallbacks: a device-to-device copy
 * through host memory; an asynchronous copy done at once, and its fence
 * already passed. `dev` is the backend of the device side. */
hier_status_t hier_accel_copy_d2d(const hier_accel_backend_t *dev, void *dst, const void *src, size_t len);
hier_status_t hier_accel_copy_start(const hier_accel_backend_t *dev, int device, void *dst, const void *src,
                                    size_t len, int to_host);
hier_status_t hier_accel_fence(const hier_accel_backend_t *dev, int device, hier_accel_fence_t *fence);
/* Wait for a fence (and forget it); one never recorded passes at once. */
hier_status_t hier_accel_fence_wait(const hier_accel_backend_t *dev, hier_accel_fence_t *fence);
void *hier_accel_nic_addr(const hier_accel_backend_t *dev, const void *p);

/* The CUDA backend, when libcuda.so.1 and a device are present (hier_accel_cuda.c). */
const hier_accel_backend_t *hier_accel_cuda_backend(void);

#endif
