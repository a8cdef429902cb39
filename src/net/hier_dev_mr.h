/* hier_dev_mr.h: NIC registrations of device allocations, kept while they
 * are used (internal).
 *
 * Peer-direct transfers need the whole allocation a buffer lies in
 * registered with its iface and device. Registering costs a system call and
 * pins pages (on EFA, microseconds to milliseconds), and a training loop
 * hands the same buffers to every call: registrations of allocations with an
 * id (never reused by the runtime: CUDA's buffer id) are kept in a small
 * cache, least recently used out, and bounded to HIER_DEV_MR_CACHE of them.
 * An allocation without an id is registered for the call only. A dropped
 * registration waits first for the direct writes still in flight (2 s at
 * most). Under the transport lock (hier_lock.h), and an entry in use by
 * a call (another thread's, under MPI_THREAD_MULTIPLE) is never evicted: with
 * every entry in use, the newcomer is registered for the call only. */
#ifndef HIER_DEV_MR_H
#define HIER_DEV_MR_H

#include "accel/hier_accel.h"
#include "net/hier_fabric.h"

#define HIER_DEV_MR_CACHE 16

typedef struct {
    hier_fabric_mr_t *mr;
    uint8_t *nic_base; /* the address the NIC knows the allocation's first byte by */
    int cached;        /* 1 + its cache entry; 0: the caller deregisters it after the call (hier_dev_mr_put) */
} hier_dev_mr_t;

/* The registration of buffer b's allocation (b device memory). */
hier_status_t hier_dev_mr_get(hier_fabric_t *fab, const hier_accel_buf_t *b, hier_dev_mr_t *out);
/* Done with it for this call. */
void hier_dev_mr_put(hier_dev_mr_t *m);
/* Registrations made so far (a cache hit makes none). */
uint64_t hier_dev_mr_registrations(void);
/* Drop every kept registration (before the fabric closes). */
void hier_dev_mr_flush(void);

#endif
