/* hier_info: the choices hier would make for a collective on N nodes x P
 * ranks, by size range: the algorithm, its path, the chunk and pipeline
 * depth, and where each came from (a built-in rule, a rules file's line, a
 * forced parameter; the chunk's parameter, the depth's). The same select/
 * code the component runs, and the same rules (docs/rules.md).
 *
 *   hier-info --coll allreduce|allgather|reduce_scatter [--nodes N] [--ppn P]
 *             [--rules FILE] [--numa G] [--crowded] [--cma-window LO:HI|none]
 *             [--ll-top SIZE|any] [-b MIN] [-e MAX] [--param NAME=VALUE]...
 *             [--print-rules]
 *
 * Sizes as hier_bench's (allreduce the vector, allgather the result,
 * reduce_scatter the send buffer), powers of two from -b to -e. One node's
 * single copy is assumed available; its window, and the low-latency
 * cut-off, are the node's measurements at run time (--cma-window and
 * --ll-top give them; without, any window and the area's whole size).
 * --print-rules prints the rules in force as a rules file and exits. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"
#include "base/hier_stats.h"
#include "exec/hier_exec_ll.h"
#include "model/hier_model.h"
#include "select/hier_select.h"

#include "hier_cli.h"

static void usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: hier-info --coll allreduce|allgather|reduce_scatter [--nodes N] [--ppn P] [--rules FILE]\n"
            "                 [--numa G] [--crowded] [--cma-window LO:HI|none] [--ll-top SIZE|any]\n"
            "                 [-b MIN] [-e MAX] [--param NAME=VALUE]...\n"
            "                 [--print-rules]\n");
    exit(rc);
}

typedef struct {
    hier_select_t choice;
    const hier_rule_t *rule;
    size_t chunk;
    unsigned depth;
    int pair; /* one message each way, no chunks (hier_select_pair) */
} decision_t;

static const char *const level_names[] = {"node", "net"};
static const char *const coll_names[] = {"allreduce", "allgather", "reduce_scatter"};

static void size_text(size_t v, char *buf, size_t len)
{
    if (v >= (1u << 30) && v % (1u << 30) == 0) snprintf(buf, len, "%zu GiB", v >> 30);
    else if (v >= (1u << 20) && v % (1u << 20) == 0) snprintf(buf, len, "%zu MiB", v >> 20);
    else if (v >= 1024 && v % 1024 == 0) snprintf(buf, len, "%zu KiB", v >> 10);
    else snprintf(buf, len, "%zu B", v);
}

/* Where the rule came from, and the bound that closes its range. */
static void origin_text(const decision_t *d, int level, int coll, const char *rules, char *buf, size_t len)
{
    if (!d->rule) {
        snprintf(buf, len, "forced (coll_hier_%s_algorithm)", level ? "net" : coll_names[coll]);
        return;
    }
    const hier_rules_t *r = hier_rules_active();
    int idx = (int)(d->rule - r->rule[level][coll]) + 1;
    if (d->rule->line) snprintf(buf, len, "%s:%d", rules, d->rule->line);
    else snprintf(buf, len, "built-in %s %s rule %d", level_names[level], coll_names[coll], idx);
}

static void decide(const hier_select_shape_t *shape, const hier_model_machine_t *m, hier_coll_t coll, int nodes,
                   int ppn, size_t bytes, decision_t *d)
{
    size_t esize = coll == HIER_COLL_ALLGATHER ? 1 : 4, block = bytes / (size_t)(nodes * ppn);
    size_t sel = coll == HIER_COLL_ALLGATHER ? block : bytes;
    *d = (decision_t){0};
    hier_select_explain(shape, coll, sel, &d->choice, &d->rule);
    hier_model_call_t call = {.coll = coll, .nodes = nodes, .ppn = ppn, .bytes = bytes, .esize = esize,
                              .max_chunks = 1};
    hier_model_result_t res;
    d->pair = hier_select_pair(shape, coll, bytes, &d->choice);
    if (d->choice.path != HIER_PATH_SHM_LL && d->choice.path != HIER_PATH_CMA_COPY && !d->pair &&
        hier_model_predict(m, &call, &res) == HIER_OK) {
        d->chunk = res.chunk_bytes;
        d->depth = res.depth;
    }
}

static int same(const decision_t *a, const decision_t *b)
{
    return a->choice.path == b->choice.path && a->choice.net_kind == b->choice.net_kind &&
           a->choice.split == b->choice.split && a->rule == b->rule && a->chunk == b->chunk && a->depth == b->depth &&
           a->pair == b->pair;
}

static void row(const decision_t *d, size_t from, size_t to, int level, int coll, const char *rules)
{
    char a[32], b[32], ch[32] = "-", dp[16] = "-", org[200];
    size_text(from, a, sizeof(a));
    size_text(to, b, sizeof(b));
    if (d->chunk) size_text(d->chunk, ch, sizeof(ch));
    if (d->pair) snprintf(ch, sizeof(ch), "pair");
    if (d->depth) snprintf(dp, sizeof(dp), "%u", d->depth);
    origin_text(d, level, coll, rules, org, sizeof(org));
    const char *algo = d->rule ? hier_algo_name(d->rule->algo) : "(forced)";
    printf("%10s - %-10s  %-13s %-10s %-9s %-5s %-5s %s\n", a, b, algo, hier_path_name(d->choice.path), ch, dp,
           d->choice.split ? "yes" : "no", org);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"coll", 1, 0, 'c'},    {"nodes", 1, 0, 'N'},   {"ppn", 1, 0, 'P'},         {"rules", 1, 0, 'r'},
        {"numa", 1, 0, 'u'},    {"crowded", 0, 0, 'w'}, {"cma-window", 1, 0, 'x'},     {"param", 1, 0, 'p'},
        {"ll-top", 1, 0, 'l'},  {"print-rules", 0, 0, 'R'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    const char *coll_name = NULL, *rules = NULL;
    int nodes = 1, ppn = 2, numa = 1, crowded = 0, print = 0;
    size_t lo = 8, hi = (size_t)1 << 30;
    hier_select_window_t cma = HIER_SELECT_WINDOW_ANY;
    int cma_given = 0;
    size_t ll_top = SIZE_MAX; /* (as measured to pay wherever the area holds the call) */
    int ll_given = 0;
    hier_params_defaults(&hier_params);
    for (int o; (o = getopt_long(argc, argv, "c:b:e:h", opts, NULL)) != -1;) {
        switch (o) {
        case 'c': coll_name = optarg; break;
        case 'N': nodes = atoi(optarg); break;
        case 'P': ppn = atoi(optarg); break;
        case 'r': rules = optarg; break;
        case 'u': numa = atoi(optarg); break;
        case 'w': crowded = 1; break;
        case 'x': {
            char *colon = strchr(optarg, ':');
            cma_given = 1;
            if (!strcmp(optarg, "none")) cma = HIER_SELECT_WINDOW_NONE;
            else if (!colon || (*colon = '\0', hier_cli_parse_size(optarg, &cma.lo)) ||
                     (strcmp(colon + 1, "any") && hier_cli_parse_size(colon + 1, &cma.hi)))
                usage(2);
            break;
        }
        case 'l':
            ll_given = 1;
            if (!strcmp(optarg, "any")) ll_top = SIZE_MAX;
            else if (hier_cli_parse_size(optarg, &ll_top) || !ll_top) usage(2);
            break;
        case 'b': if (hier_cli_parse_size(optarg, &lo) || !lo) usage(2); break;
        case 'e': if (hier_cli_parse_size(optarg, &hi)) usage(2); break;
        case 'R': print = 1; break;
        case 'p': if (hier_cli_set_param(optarg, "hier-info") != 0) return 2; break;
        case 'h': usage(0); break;
        default: usage(2);
        }
    }
    if (rules && hier_rules_load(rules) != 0) return 2;
    if (print) {
        hier_rules_print(hier_rules_active(), stdout);
        return 0;
    }
    int coll = -1;
    for (int i = 0; i < 3; i++)
        if (coll_name && !strcmp(coll_name, coll_names[i])) coll = i;
    if (coll < 0 || nodes < 1 || ppn < 1 || numa < 1 || lo > hi) usage(2);
    hier_model_machine_t m;
    hier_model_machine_default(&m);
    hier_select_shape_t shape = {.size = (uint32_t)(nodes * ppn), .nnodes = (uint32_t)nodes};
    if (nodes == 1)
        shape = (hier_select_shape_t){.size = (uint32_t)ppn, .nnodes = 1, .local_ranks = (uint32_t)ppn,
                                      .numa_groups = (uint32_t)numa, .crowded = crowded, .cma = 1,
                                      .cma_window = cma, .ll_capacity = hier_exec_ll_capacity(),
                                      .ll_top = {ll_top, ll_top, ll_top}};
    int level = nodes > 1;
    const hier_rules_t *r = hier_rules_active();
    printf("# %s on %d node(s) x %d rank(s); rules: %s%s%s\n", coll_names[coll], nodes, ppn,
           rules ? rules : "built in", r->machine[0] ? ", made on " : "", r->machine);
    if (nodes == 1) printf("# low-latency area: %zu bytes\n", hier_exec_ll_capacity());
    if (nodes == 1 && !ll_given && !*hier_rules_ll_max(coll))
        printf("# low latency (shm_ll): from %d B, up to the cut-off the node measures at run time, shown here as "
               "far as the area holds the call (--ll-top to give one)\n", HIER_SELECT_LL_PROBE_MIN);
    if (nodes == 1 && coll == HIER_COLL_ALLGATHER && !cma_given)
        printf("# single copy (cma_copy) within the window the node measures at run time (--cma-window to give "
               "one)\n");
    printf("# chunk: the small slots' while a call fits them, else coll_hier_%s (%zu); depth: coll_hier_pipeline_depth "
           "(%d; 0: 4 on efa, 2 on other providers, 1 on one node); a rule's chunk= and depth= lower them\n",
           nodes > 1 ? "net_chunk_size" : "shm_chunk_size",
           nodes > 1 ? hier_params.net_chunk_size : hier_params.shm_chunk_size, hier_params.pipeline_depth);
    if (nodes == 2 && ppn == 1)
        printf("# chunk \"pair\": one message each way from the caller's buffers, no segment "
               "(coll_hier_net_pair_max: %zu)\n", hier_params.net_pair_max);
    printf("# %21s  %-13s %-10s %-9s %-5s %-5s %s\n", "bytes", "algorithm", "path", "chunk", "depth", "split",
           "from");
    decision_t cur, next;
    size_t from = lo, at = lo;
    decide(&shape, &m, (hier_coll_t)coll, nodes, ppn, lo, &cur);
    for (size_t b = lo * 2; b <= hi && b > at; at = b, b *= 2) {
        decide(&shape, &m, (hier_coll_t)coll, nodes, ppn, b, &next);
        if (same(&cur, &next)) continue;
        row(&cur, from, at, level, coll, rules);
        cur = next, from = b;
    }
    row(&cur, from, at, level, coll, rules);
    return 0;
}
