/* hier_shm_pool.h: segments no communicator uses any more, kept mapped for
 * the next one of the same shape and the same local processes.
 *
 * Frameworks create and free communicators by the hundred (a dup per
 * object, process groups, split storms at start-up); each would otherwise
 * create, size, map and touch a file. A freed communicator's segments go to
 * this process-wide pool instead, keyed by their shape and by the processes
 * that map them, in local rank order (so a rank's control line, barrier count
 * and low-latency sequence stay its own). The local leader of the next
 * communicator with that key offers the segment by name; its peers take it
 * from their own pools. Pools of different processes may differ (budgets,
 * other communicators): a rank that lacks an offered segment says so and the
 * set-up makes a fresh one instead.
 *
 * Every mapped segment, in use or pooled, counts towards one budget
 * (hier_shm_mapped_total); the pool gives back its oldest segments first. */
#ifndef HIER_SHM_POOL_H
#define HIER_SHM_POOL_H

#include <stdint.h>

#include "shm/hier_shm.h"

/* What the pool keeps with a segment for its owner (a registration with
 * the NIC, say), released with it. */
typedef struct {
    void *data;
    void (*release)(void *data);
} hier_shm_pool_user_t;

/* Keep shm for the local processes procs[0 .. nprocs) (their identities, in
 * local rank order); evicts the oldest pooled segments while the process maps
 * more than `budget` bytes. A segment that alone exceeds the budget is detached. */
void hier_shm_pool_put(hier_shm_t *shm, const uint64_t *procs, int nprocs, hier_shm_pool_user_t user,
                       size_t budget);
/* The pooled segment of this shape and these processes, named `name` (NULL:
 * any), out of the pool; NULL if none. *user_p gets what was kept with it. */
hier_shm_t *hier_shm_pool_take(const hier_shm_shape_t *shape, const uint64_t *procs, int nprocs, const char *name,
                               hier_shm_pool_user_t *user_p);
/* Give pooled segments back, oldest first, until at most `budget` bytes are mapped. */
void hier_shm_pool_trim(size_t budget);
/* Segments pooled now. */
int hier_shm_pool_count(void);

#endif
