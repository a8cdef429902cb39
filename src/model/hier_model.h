/* hier_model.h: predicted time of a collective on N nodes x P ranks x R rails, from the schedules production
 * runs (docs/model.md, "What it is"). The communicator's own decisions make the call (hier_select, the
 * pieces, hier_select_chunk, hier_nic_assign), the builders give every rank its steps, and a discrete-event
 * simulation (hier_model.c) times them on a machine description, keeping the executor's overlap of chunk k's
 * network run with chunk k+1's copy in. Not modelled: the channels' credit (rings are taken as deep enough)
 * and the provider's progress (a receive is served as soon as its bytes are there). */
#ifndef HIER_MODEL_H
#define HIER_MODEL_H

#include <stddef.h>

#include "base/hier_stats.h"
#include "base/hier_status.h"
#include "select/hier_select.h"

/* A machine: one node's resources and its links. Text form: "key = value"
 * lines, '#' comments (hier_model_machine_parse). */
typedef struct {
    char name[64];
    char provider[32];      /* the libfabric provider of its NICs ("efa", "tcp"): what hier's choices read */
    int rails;              /* NICs per node */
    double rail_gbps;       /* Gbit/s per NIC, each way */
    double latency_us;      /* one message, NIC to NIC, beyond its bytes */
    double msg_us;          /* software cost of posting or taking one message */
    double copy_gbs;        /* memcpy, one core, GB/s */
    double node_copy_gbs;   /* memcpy, all cores of a node at once, GB/s */
    double reduce_gbs;      /* operand bytes one core folds per second, GB/s */
    double barrier_us;      /* a node barrier */
    int cores;              /* per node */
    double cache_mb;        /* last-level cache of a node; 0: none. A call whose buffers and segment fit
                             * copies and folds at the cache's rates below */
    double cache_copy_gbs, cache_reduce_gbs;
} hier_model_machine_t;

/* Defaults (the namespace cluster's node on this machine), then the text's keys. */
void hier_model_machine_default(hier_model_machine_t *m);
/* Keys: name, provider, rails, rail_gbps, latency_us, msg_us, copy_gbs, node_copy_gbs,
 * reduce_gbs, barrier_us, cores, cache_mb, cache_copy_gbs, cache_reduce_gbs. An unknown key or a bad value is an error
 * naming its line (HIER_ERR_INVALID_ARG). */
hier_status_t hier_model_machine_parse(const char *text, hier_model_machine_t *m);

typedef struct {
    hier_coll_t coll;  /* ALLREDUCE, ALLGATHER, REDUCE_SCATTER (block sizes) */
    int nodes, ppn;
    size_t bytes;      /* as hier_bench: allreduce the vector, allgather the result, reduce_scatter the send buffer */
    size_t esize;      /* bytes per element */
    int max_chunks;    /* chunks simulated before the rest are extrapolated (0: 2 + 4 x the pipeline's depth) */
} hier_model_call_t;

typedef struct {
    double time_us;
    hier_select_t choice;
    int pieces;
    size_t chunk_bytes, nchunks, simulated;
    unsigned depth;    /* chunks whose network rounds were in flight at once */
} hier_model_result_t;

/* N >= 1 nodes (one node: its own rules, the low-latency path by a
 * formula, the rest simulated without a network; a call whose buffers and
 * segment fit the machine's cache_mb copies at the cache's rates:
 * docs/model.md).
 * HIER_ERR_INVALID_ARG for a shape hier would not run (no node, an empty
 * call), HIER_ERR_NO_MEMORY. */
hier_status_t hier_model_predict(const hier_model_machine_t *m, const hier_model_call_t *call,
                                 hier_model_result_t *out);

#endif
