/* hier_shm_pool.h: segments no communicator uses any more, kept mapped (process-wide) for the next one of the
 * same shape and the same local processes, in local rank order (docs/design.md, "A communicator's life"). The
 * next communicator's leader offers a pooled segment by name and its peers take it from their own pools, which
 * may differ: a rank that lacks it says so and the set-up makes a fresh one. Every mapped segment, in use or
 * pooled, counts towards one budget (hier_shm_mapped_total). */
#ifndef HIER_SHM_POOL_H
#define HIER_SHM_POOL_H

#include <stdint.h>

#include "shm/hier_shm.h"

/* What the pool keeps with a segment for its owner (a NIC registration, say), released with it. */
typedef struct {
    void *data;
    void (*release)(void *data);
} hier_shm_pool_user_t;

/* The pool takes shm and user, for the local processes procs[0 .. nprocs) (identities in local rank order), and
 * evicts its oldest while the process maps more than `budget` bytes; a segment over the budget alone is detached. */
void hier_shm_pool_put(hier_shm_t *shm, const uint64_t *procs, int nprocs, hier_shm_pool_user_t user,
                       size_t budget);
/* The pooled segment of this shape and these processes named `name` (NULL: any), taken out of the pool with what
 * was kept with it (*user_p); NULL if none. */
hier_shm_t *hier_shm_pool_take(const hier_shm_shape_t *shape, const uint64_t *procs, int nprocs, const char *name,
                               hier_shm_pool_user_t *user_p);
/* Give pooled segments back, oldest first, until at most `budget` bytes are mapped. */
void hier_shm_pool_trim(size_t budget);
/* Segments pooled now. */
int hier_shm_pool_count(void);

#endif
