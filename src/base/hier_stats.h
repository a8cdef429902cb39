/* hier_stats.h: per-process counters of what served each collective.
 * Counters are plain uint64_t updated with relaxed atomics so MPI_T
 * performance variables can point straight at them. */
#ifndef HIER_STATS_H
#define HIER_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "base/hier_coll.h"
#include "base/hier_lock.h"


typedef struct {
    uint64_t calls;
    uint64_t bytes;
    uint64_t net_bytes; /* bytes this process put on the fabric */
    uint64_t staged;    /* calls whose buffers were device memory, staged through host memory */
} hier_stats_cell_t;

extern hier_stats_cell_t hier_stats[HIER_COLL_COUNT][HIER_PATH_COUNT];

/* Per rail this process drives (net/hier_fabric*.c fills them in): its NIC's
 * name (empty: no such rail) and the bytes written through it. */
#define HIER_STATS_RAILS 8
typedef struct {
    char nic[32];
    uint64_t bytes;
} hier_stats_rail_t;
extern hier_stats_rail_t hier_stats_rails[HIER_STATS_RAILS];

/* Collective exchanges hier made for itself (a communicator's set-up,
 * agreements inside calls): what creating and first using communicators
 * costs beyond Open MPI's own work, one round trip between nodes each. */
extern uint64_t hier_stats_exchanges;

static inline void hier_stats_count_exchange(void)
{
    __atomic_fetch_add(&hier_stats_exchanges, 1, __ATOMIC_RELAXED);
}

/* Communicators of this process whose calls between nodes go over Open
 * MPI's point-to-point while they wait for every rank's libfabric endpoint
 * (a level: benchmarks wait for 0 before timing, contrib/hier_settle.h). */
extern uint64_t hier_stats_pml_waiting;


/* A call counted: locked read-modify-writes only where threads may count
 * at once (MPI_THREAD_MULTIPLE, hier's progress thread); otherwise the one
 * writer's plain adds (MPI_T's readers still load whole values). */
static inline void hier_stats_count(hier_coll_t coll, hier_path_t path, uint64_t bytes, uint64_t net_bytes,
                                    int staged)
{
    hier_stats_cell_t *cell = &hier_stats[coll][path];
    if (hier_lock_threaded()) {
        if (staged) __atomic_fetch_add(&cell->staged, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cell->calls, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cell->bytes, bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cell->net_bytes, net_bytes, __ATOMIC_RELAXED);
        return;
    }
    uint64_t calls = cell->calls + 1, total = cell->bytes + bytes, net = cell->net_bytes + net_bytes;
    __atomic_store_n(&cell->calls, calls, __ATOMIC_RELAXED);
    __atomic_store_n(&cell->bytes, total, __ATOMIC_RELAXED);
    __atomic_store_n(&cell->net_bytes, net, __ATOMIC_RELAXED);
    if (staged) __atomic_store_n(&cell->staged, cell->staged + 1, __ATOMIC_RELAXED);
}

/* One "coll:hier:stats coll=... path=... calls=... bytes=... net_bytes=... staged=..." line per
 * non-empty cell of `cells` (a table shaped like hier_stats). */
void hier_stats_print(FILE *out, const hier_stats_cell_t cells[HIER_COLL_COUNT][HIER_PATH_COUNT]);
/* One "coll:hier:nic rank=R rail=J nic=NAME bytes=N" line per rail of `rails`. */
void hier_stats_print_rails(FILE *out, int rank, const hier_stats_rail_t rails[HIER_STATS_RAILS]);

#endif
