/* hier_select_rules.h: select/'s rules as data. A rule says when an algorithm serves a call under auto (its
 * conditions, its byte bounds and, optionally, its chunk and pipeline depth); the algorithms themselves (path,
 * schedule, what they cannot do without) are built in. The rules are the built-in ones, or a rules file's
 * (coll_hier_rules) for the collectives it names, in one text format (docs/rules.md; docs/design.md,
 * "Choosing"). */
#ifndef HIER_SELECT_RULES_H
#define HIER_SELECT_RULES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/hier_params.h"
#include "base/hier_stats.h"
#include "sched/hier_sched.h"

/* What a rule may ask of the call and the communicator. */
enum {
    HIER_SEL_TWO_NODES = 1u << 0,
    HIER_SEL_MANY_NODES = 1u << 1,  /* three or more */
    HIER_SEL_NO_FOLD = 1u << 2,     /* rabenseifner's radices make the node count: no node folded */
    HIER_SEL_RING_NODES = 1u << 3,  /* at most net_ring_max_nodes nodes */
    HIER_SEL_NUMA = 1u << 4,        /* several NUMA domains and allreduce_numa_min_ranks local ranks */
    HIER_SEL_LL_FITS = 1u << 5,     /* the low-latency area holds the call */
    HIER_SEL_CMA = 1u << 6,         /* single copy available, or not probed yet */
    HIER_SEL_OWN_CORES = 1u << 7,   /* every local rank has a core of its own */
    HIER_SEL_POW2_NODES = 1u << 8,
    HIER_SEL_CMA_PAYS = 1u << 9,    /* the block is within the window where single copy wins */
    HIER_SEL_LL_PAYS = 1u << 10,    /* within the low-latency cut-off: the parameter's, or measured */
    HIER_SEL_CONDITIONS = 11
};

enum { HIER_RULE_NODE, HIER_RULE_NET, HIER_RULE_LEVELS };
#define HIER_RULE_COLLS 3 /* allreduce, allgather, reduce_scatter (hier_coll_t's first three) */
#define HIER_RULES_MAX 16 /* per level and collective */

typedef struct {
    size_t value;        /* a size; SIZE_MAX: any */
    const size_t *param; /* or a parameter's value (NULL: the size) */
} hier_rule_bound_t;

typedef struct {
    hier_algo_t algo;
    unsigned need;       /* HIER_SEL_* under auto */
    uint32_t count_lo, count_hi; /* one node: its ranks; between nodes: the nodes (0, UINT32_MAX: any) */
    hier_rule_bound_t from, to;
    size_t chunk;        /* chunk=SIZE: its calls' pipeline chunk, at most the segment's (0: the parameters') */
    unsigned depth;      /* depth=N, between nodes: their chunks in flight, at most the segment's (0: likewise) */
    int line;            /* its line in the rules file; 0: built in */
} hier_rule_t;

/* An algorithm of a level and collective: what serves the call, and the
 * conditions it cannot do without, forced or not. */
typedef struct {
    int known;
    hier_path_t path;
    hier_sched_kind_t kind;
    hier_net_kind_t net_kind;
    unsigned hard;
} hier_rule_algo_t;

typedef struct {
    hier_rule_t rule[HIER_RULE_LEVELS][HIER_RULE_COLLS][HIER_RULES_MAX];
    int n[HIER_RULE_LEVELS][HIER_RULE_COLLS];
    int from_file[HIER_RULE_LEVELS][HIER_RULE_COLLS]; /* the file gave this list */
    char machine[128];   /* the file's `machine cpu` ("": none) */
} hier_rules_t;

/* The algorithm `algo` of a level and collective (known 0: none). */
const hier_rule_algo_t *hier_rules_algo(int level, int coll, hier_algo_t algo);
/* The rules select/ reads: the built-in ones, or those of the file loaded. */
const hier_rules_t *hier_rules_active(void);
const hier_rules_t *hier_rules_builtin(void);
/* A bound's value now. */
size_t hier_rule_bound(hier_rule_bound_t b);
/* The collective's low-latency cut-off parameter (coll_hier_<coll>_ll_max:
 * 0, measured on the node). A file's ll rule bounded by it reads as
 * ll_pays (the form before the cut-off was measured). */
const size_t *hier_rules_ll_max(int coll);

/* Parse a rules text (name: for messages): the built-in rules, with the
 * lists it gives replacing theirs. -1 on the first malformed line, logged
 * with its number and why (*out untouched). */
int hier_rules_parse(const char *text, const char *name, hier_rules_t *out);
/* Load the file named (NULL or "": the built-in rules) and make it active;
 * -1 if unreadable or malformed (logged; the built-in rules stay). A file
 * made on another CPU is loaded with a warning. */
int hier_rules_load(const char *path);
/* The rules as a rules file (every list; `machine` when known). */
void hier_rules_print(const hier_rules_t *r, FILE *out);
/* A digest of the active rules, which every rank of a communicator must share. */
uint32_t hier_rules_digest(void);
/* This machine's CPU model (/proc/cpuinfo), "" if unknown. */
const char *hier_rules_cpu(void);

#endif
