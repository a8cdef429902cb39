/* hier_dev_mr.h: NIC registrations of device allocations, kept while they are used (internal; docs/design.md,
 * "Device (accelerator) buffers": Peer direct). Peer direct needs the whole allocation a buffer lies in registered
 * with its iface and device, which costs a system call and pinned pages, and a training loop hands the same
 * buffers to every call: registrations of allocations with an id (never reused: CUDA's buffer id) are kept, least
 * recently used out, HIER_DEV_MR_CACHE at most. An entry in use by a call is never evicted; an allocation without
 * an id, or met while every entry is in use, is registered for the call only. A dropped registration first waits
 * for the direct writes in flight (2 s at most). Under the transport lock (hier_lock.h). */
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
