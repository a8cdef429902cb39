/* fork_ranks.h: forked "ranks" of one core communicator for unit tests,
 * with the glue's services (allgather, agree, point-to-point) over
 * anonymous shared mappings: test_shm, test_mismatch, test_piggyback. */
#ifndef FORK_RANKS_H
#define FORK_RANKS_H

#include <stdatomic.h>
#include <stdint.h>

#include "comm/hier_comm.h"

typedef struct {
    _Atomic int arrived;
    _Atomic int generation;
    int nranks;
    int values[64][8];
    char buf[16384];
} fork_world_t;

typedef struct {
    fork_world_t *w;
    int me;
} fork_rank_t;

/* Ranks per node for the next run_ranks: 0 = all on one node; K = nodes of
 * K consecutive ranks, joined by the libfabric provider in hier_params. */
extern int fork_ranks_per_node;
/* In a forked rank: the services, for the communicators a body makes itself. */
extern hier_comm_ops_t fork_ops;
/* In a forked rank: the allgathers and agreements it has made (each a
 * round trip between nodes under MPI). */
extern int fork_exchanges;

void fork_barrier(fork_world_t *w);

typedef int (*rank_body_t)(hier_comm_t *comm, int me, int n, fork_world_t *w);
/* Fork n ranks running body; statuses[r]: rank r's exit status (128 +
 * signal when killed). Returns how many exited with status 0. */
int run_ranks(int n, rank_body_t body, int *statuses);

#endif
