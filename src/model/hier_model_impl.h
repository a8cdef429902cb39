/* hier_model_impl.h: the simulation's state (hier_model.c) and its two
 * containers, a heap of thread clocks and a table of messages in flight
 * (hier_model_queue.c). */
#ifndef HIER_MODEL_IMPL_H
#define HIER_MODEL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_nic.h"
#include "exec/hier_run.h"
#include "model/hier_model.h"
#include "sched/hier_sched.h"

/* Ranks (fewer than) and network tags the message table's keys hold: a
 * key stores dst + 1 in 20 bits. */
#define HIER_MODEL_MAX_RANKS (1 << 20)
#define HIER_MODEL_MAX_TAG (1 << 16)

enum { HIER_MODEL_WORK, HIER_MODEL_BARRIER, HIER_MODEL_SEND, HIER_MODEL_RECV };

/* A compacted step: local work (cost in us), a barrier, or one message. */
typedef struct {
    uint8_t kind, reduce;
    uint32_t peer, tag;
    size_t bytes;
    double cost;
} hier_model_rec_t;

/* One chunk of one rank: records, cut at[HIER_PLAN_CUT_*] as the run cuts steps. */
typedef struct {
    hier_model_rec_t *rec;
    size_t n, cap, range_start;
    size_t at[HIER_PLAN_CUTS];
} hier_model_chunk_t;

/* A rank's network run d: the chunk it carries, where it is, its clock. */
typedef struct {
    size_t k, pos;
    double t;
    int active;
} hier_model_net_t;

/* A rank: its main thread (the run's plan) and a network thread per run
 * in flight (thread ids: rank * (depth + 1), then + 1 + d). */
typedef struct {
    int node, local;
    hier_model_chunk_t chunk[HIER_RUN_DEPTH_MAX + 1]; /* chunk j's in [j % (depth + 1)] */
    hier_model_net_t net[HIER_RUN_DEPTH_MAX];         /* chunk j's run is net[j % depth] */
    double t;              /* the main thread's clock */
    hier_plan_t plan;
    int blocked, finished, main_waits_net;
    size_t copied_out;     /* k + 1: chunk k's copy out is under way (0: none) */
    size_t pos, end;
    int buf;
    unsigned next_lane;
} hier_model_rank_t;

typedef struct {
    int bar_n;
    double bar_t;
} hier_model_node_t;

typedef struct {
    double *t;
    int *id;
    size_t n, cap;
} hier_model_heap_t;

typedef struct {
    uint64_t *key; /* 0: empty */
    double *at;    /* < 0: a receiver waits for it */
    size_t cap, n;
} hier_model_msgs_t;

typedef struct {
    hier_model_machine_t m;
    hier_sched_args_t args;
    hier_step_t *steps;
    hier_nic_plan_t plan;
    int nnodes, ppn, rails;
    unsigned depth;        /* chunks whose network runs are in flight at once */
    size_t esize, slot, simulate;
    double copy_Bus, reduce_Bus, rail_Bus; /* bytes per microsecond */
    hier_model_rank_t *ranks;
    hier_model_node_t *nodes;
    double *tx_free, *rx_free, *chunk_done;
    hier_model_heap_t heap;
    hier_model_msgs_t msgs;
    int oom;
} hier_model_sim_t;

hier_status_t hier_model_heap_push(hier_model_heap_t *h, double t, int id);
int hier_model_heap_pop(hier_model_heap_t *h, double *t_p, int *id_p);
void hier_model_heap_free(hier_model_heap_t *h);

/* A message from src to dst (chunk k, tag) lands at `at`; *waiter_p: dst's
 * run already waits for it. */
hier_status_t hier_model_msgs_post(hier_model_msgs_t *m, int dst, int src, size_t k, uint32_t tag, double at,
                                   int *waiter_p);
/* 1 and its time when it has landed (it is gone from the table then); 0:
 * not yet, and dst now waits for it. */
int hier_model_msgs_take(hier_model_msgs_t *m, int dst, int src, size_t k, uint32_t tag, double *at_p);
void hier_model_msgs_free(hier_model_msgs_t *m);

#endif
