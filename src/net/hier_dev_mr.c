/* hier_dev_mr.c: see hier_dev_mr.h. */
#include "net/hier_dev_mr.h"

#include <string.h>

#include "net/hier_chan.h"
#include "base/hier_lock.h"
#include "base/hier_log.h"

static struct {
    hier_fabric_t *fab;
    uint64_t id;
    uintptr_t base;
    size_t len;
    hier_dev_mr_t reg;
    uint64_t used; /* clock of the last use; 0: free */
    int busy;      /* calls using it now */
} hier_dev_mr_cache[HIER_DEV_MR_CACHE];
static uint64_t hier_dev_mr_clock;
static uint64_t hier_dev_mr_count; /* registrations made */

static hier_status_t hier_dev_mr_reg(hier_fabric_t *fab, const hier_accel_buf_t *b, hier_dev_mr_t *out)
{
    uint8_t *nic = hier_accel_nic_addr(b->backend, (const void *)b->range.base);
    hier_status_t st = hier_fabric_mr_reg_dev(fab, nic, b->range.len, b->backend->fi_iface, b->range.device, &out->mr);
    if (st != HIER_OK) return st;
    out->nic_base = nic;
    hier_dev_mr_count++;
    return HIER_OK;
}

uint64_t hier_dev_mr_registrations(void)
{
    HIER_LOCKED_RETURN(uint64_t, hier_dev_mr_count);
}

/* Deregister a kept registration: the provider may still owe completions of
 * writes from it (on shm they wait for the target's progress). */
static void hier_dev_mr_drop(hier_fabric_t *fab, hier_fabric_mr_t *mr)
{
    hier_chan_quiesce_direct(fab);
    hier_fabric_mr_dereg(mr);
}

/* Under the lock; an evicted registration comes back in *old_p, to be
 * dropped once the lock is released (dropping waits for other processes). */
static hier_status_t hier_dev_mr_get_locked(hier_fabric_t *fab, const hier_accel_buf_t *b, hier_dev_mr_t *out,
                                            hier_fabric_t **old_fab_p, hier_fabric_mr_t **old_p)
{
    int victim = -1;
    hier_dev_mr_clock++;
    for (int i = 0; b->range.id && i < HIER_DEV_MR_CACHE; i++) {
        if (hier_dev_mr_cache[i].used && hier_dev_mr_cache[i].fab == fab && hier_dev_mr_cache[i].id == b->range.id &&
            hier_dev_mr_cache[i].base == b->range.base && hier_dev_mr_cache[i].len == b->range.len) {
            hier_dev_mr_cache[i].used = hier_dev_mr_clock;
            hier_dev_mr_cache[i].busy++;
            *out = hier_dev_mr_cache[i].reg;
            return HIER_OK;
        }
        if (!hier_dev_mr_cache[i].busy && (victim < 0 || hier_dev_mr_cache[i].used < hier_dev_mr_cache[victim].used))
            victim = i;
    }
    hier_dev_mr_t m = {.cached = b->range.id && victim >= 0 ? victim + 1 : 0};
    hier_status_t st = hier_dev_mr_reg(fab, b, &m);
    if (st != HIER_OK || !m.cached) {
        if (st == HIER_OK) *out = m;
        return st;
    }
    if (hier_dev_mr_cache[victim].used) {
        *old_fab_p = hier_dev_mr_cache[victim].fab;
        *old_p = hier_dev_mr_cache[victim].reg.mr;
    }
    hier_dev_mr_cache[victim].fab = fab;
    hier_dev_mr_cache[victim].id = b->range.id;
    hier_dev_mr_cache[victim].base = b->range.base;
    hier_dev_mr_cache[victim].len = b->range.len;
    hier_dev_mr_cache[victim].reg = m;
    hier_dev_mr_cache[victim].used = hier_dev_mr_clock;
    hier_dev_mr_cache[victim].busy = 1;
    *out = m;
    return HIER_OK;
}

hier_status_t hier_dev_mr_get(hier_fabric_t *fab, const hier_accel_buf_t *in, hier_dev_mr_t *out)
{
    hier_fabric_t *old_fab = NULL;
    hier_fabric_mr_t *old = NULL;
    hier_accel_buf_t fresh = *in;
    /* The allocation's id from the runtime now, not from the classification
     * cache: freed and reallocated at the same place, it has a new one. (A
     * runtime call: not under the transport lock.) */
    if (!in->backend->query((const void *)in->range.base, &fresh.range)) fresh.range.id = 0;
    hier_lock_take();
    hier_status_t st = hier_dev_mr_get_locked(fab, &fresh, out, &old_fab, &old);
    hier_lock_drop();
    if (old) hier_dev_mr_drop(old_fab, old);
    return st;
}

void hier_dev_mr_put(hier_dev_mr_t *m)
{
    hier_lock_take();
    if (!m->cached) hier_fabric_mr_dereg(m->mr);
    else if (hier_dev_mr_cache[m->cached - 1].busy > 0) hier_dev_mr_cache[m->cached - 1].busy--;
    hier_lock_drop();
    m->mr = NULL;
}

void hier_dev_mr_flush(void)
{
    hier_fabric_t *fab[HIER_DEV_MR_CACHE];
    hier_fabric_mr_t *mr[HIER_DEV_MR_CACHE];
    int n = 0;
    hier_lock_take();
    for (int i = 0; i < HIER_DEV_MR_CACHE; i++)
        if (hier_dev_mr_cache[i].used) {
            fab[n] = hier_dev_mr_cache[i].fab;
            mr[n++] = hier_dev_mr_cache[i].reg.mr;
        }
    memset(hier_dev_mr_cache, 0, sizeof(hier_dev_mr_cache));
    hier_lock_drop();
    for (int i = 0; i < n; i++) hier_dev_mr_drop(fab[i], mr[i]); /* (waits: not under the lock) */
}
