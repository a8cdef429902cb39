/* hier_model: predicted time of hier's collectives on N nodes x P ranks x R
 * rails, from the schedules the component runs (src/model/hier_model.h),
 * printed in hier_bench's columns so a prediction and a measurement line up
 * row by row, plus the algorithm chosen and the chunks.
 *
 *   hier-model [--coll LIST] [--nodes LIST] [--ppn P] [--rails R] [--rate GBIT]
 *              [--machine FILE] [-b MIN] [-e MAX] [-f F] [-d float|double|int32]
 *              [--label NAME] [--max-chunks C] [--param NAME=VALUE]...
 *
 * --nodes takes a comma list (one table per count); --rails and --rate
 * override the machine file's rails and rail_gbps. Sizes as hier_bench:
 * allreduce the vector, allgather the result, reduce_scatter the send
 * buffer; busbw with nccl-tests' factors over the N x P ranks. --param sets
 * one of hier's parameters as coll_hier_NAME would (net_algorithm=ring
 * forces the ring), so forced algorithms can be compared. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"
#include "base/hier_stats.h"
#include "model/hier_model.h"

#include "hier_cli.h"

static void usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: hier-model [--coll allreduce,allgather,reduce_scatter] [--nodes 2,16,128] [--ppn P]\n"
            "                  [--rails R] [--rate GBIT_PER_RAIL] [--machine FILE] [-b MIN] [-e MAX] [-f F]\n"
            "                  [-d float|double|int32] [--label NAME] [--max-chunks C] [--param NAME=VALUE]...\n");
    exit(rc);
}

static size_t parse_size(const char *s)
{
    size_t v;
    if (hier_cli_parse_size(s, &v) || !v) usage(2);
    return v;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

typedef struct {
    const char *name;
    hier_coll_t coll;
} coll_name_t;

static const coll_name_t colls[] = {
    {"allreduce", HIER_COLL_ALLREDUCE},
    {"allgather", HIER_COLL_ALLGATHER},
    {"reduce_scatter", HIER_COLL_REDUCE_SCATTER},
};

/* Between nodes the inter-node algorithm; on one node the path (shm_ll, shm_rsag, ...). */
static const char *algo_name(const hier_model_result_t *r, int nodes)
{
    if (nodes == 1) return hier_path_name(r->choice.path);
    switch (r->choice.net_kind) {
    case HIER_NET_RING_ALLREDUCE:
    case HIER_NET_RING_REDUCE_SCATTER:
    case HIER_NET_RING_ALLGATHER: return "ring";
    case HIER_NET_RD_ALLREDUCE:
    case HIER_NET_RD_ALLGATHER: return "rd";
    case HIER_NET_RH_ALLREDUCE:
    case HIER_NET_RH_REDUCE_SCATTER:
    case HIER_NET_RH_ALLGATHER: return "rabenseifner";
    }
    return "?";
}

static void table(const hier_model_machine_t *m, const coll_name_t *c, int nodes, int ppn, size_t esize,
                  size_t lo, size_t hi, double f, const char *label, int max_chunks)
{
    int np = nodes * ppn;
    double factor = c->coll == HIER_COLL_ALLREDUCE ? 2.0 * (np - 1) / np : (double)(np - 1) / np;
    printf("#\n# %s: nodes=%d ppn=%d rails=%d rate=%g Gbit/s machine=%s (predicted)\n", c->name, nodes, ppn,
           m->rails, m->rail_gbps, m->name);
    printf("# %-10s %-20s %12s %11s %12s %10s %10s %-14s %s\n", "label", "coll", "size_bytes", "count", "time_us",
           "algbw_GB/s", "busbw_GB/s", "algorithm", "pieces/chunk/chunks/depth");
    for (double s = (double)lo; s <= (double)hi; s *= f) {
        size_t bytes = (size_t)s, n = bytes / esize;
        if (c->coll != HIER_COLL_ALLREDUCE) n = n / (size_t)np * (size_t)np;
        if (!n) continue;
        hier_model_call_t call = {.coll = c->coll, .nodes = nodes, .ppn = ppn, .bytes = n * esize, .esize = esize,
                                  .max_chunks = max_chunks};
        hier_model_result_t r;
        if (hier_model_predict(m, &call, &r) != HIER_OK) {
            printf("%-12s %-20s %12zu %11zu %12s\n", label, c->name, n * esize, n, "error");
            continue;
        }
        double algbw = (double)(n * esize) / (r.time_us * 1e-6) / 1e9;
        printf("%-12s %-20s %12zu %11zu %12.2f %10.3f %10.3f %-14s %d/%zu/%zu/%u\n", label, c->name, n * esize, n,
               r.time_us, algbw, algbw * factor, algo_name(&r, nodes), r.pieces, r.chunk_bytes, r.nchunks,
               r.depth ? r.depth : 1);
        if (f <= 1.0) break;
    }
}

int main(int argc, char **argv)
{
    hier_model_machine_t m;
    hier_model_machine_default(&m);
    const char *coll_list = "allreduce,allgather,reduce_scatter", *nodes_list = "2", *label = "hier_model";
    size_t lo = 8, hi = 64 << 20, esize = 4;
    double f = 2, rate = 0;
    int ppn = 1, rails = 0, max_chunks = 0;
    static const struct option opts[] = {
        {"coll", 1, 0, 'c'},  {"nodes", 1, 0, 'N'}, {"ppn", 1, 0, 'P'},     {"rails", 1, 0, 'R'},
        {"rate", 1, 0, 'r'},  {"machine", 1, 0, 'm'}, {"label", 1, 0, 'l'}, {"max-chunks", 1, 0, 'C'},
        {"datatype", 1, 0, 'd'}, {"param", 1, 0, 'p'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    hier_params_defaults(&hier_params);
    for (int o; (o = getopt_long(argc, argv, "c:b:e:f:d:h", opts, NULL)) != -1;) {
        switch (o) {
        case 'c': coll_list = optarg; break;
        case 'N': nodes_list = optarg; break;
        case 'P': ppn = atoi(optarg); break;
        case 'R': rails = atoi(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 'l': label = optarg; break;
        case 'C': max_chunks = atoi(optarg); break;
        case 'b': lo = parse_size(optarg); break;
        case 'e': hi = parse_size(optarg); break;
        case 'f': f = atof(optarg); break;
        case 'd': esize = !strcmp(optarg, "double") ? 8 : !strcmp(optarg, "float") || !strcmp(optarg, "int32") ? 4 : 0;
                  if (!esize) usage(2);
                  break;
        case 'm': {
            char *text = slurp(optarg);
            if (!text) {
                fprintf(stderr, "hier-model: cannot read %s\n", optarg);
                return 2;
            }
            hier_status_t st = hier_model_machine_parse(text, &m);
            free(text);
            if (st != HIER_OK) return 2;
            break;
        }
        case 'p': if (hier_cli_set_param(optarg, "hier-model") != 0) return 2; break;
        case 'h': usage(0); break;
        default: usage(2);
        }
    }
    if (rails > 0) m.rails = rails;
    if (rate > 0) m.rail_gbps = rate;
    if (ppn < 1 || f < 1 || lo > hi) usage(2);
    printf("# hier_model: machine=%s rails=%d x %g Gbit/s latency=%g us copy=%g GB/s/core reduce=%g GB/s/core\n",
           m.name, m.rails, m.rail_gbps, m.latency_us, m.copy_gbs, m.reduce_gbs);
    char *nl = strdup(nodes_list);
    if (!nl) return 1;
    for (char *save = NULL, *tok = strtok_r(nl, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int nodes = atoi(tok);
        if (nodes < 1) {
            fprintf(stderr, "hier-model: --nodes wants counts of 1 or more (%s)\n", tok);
            return 2;
        }
        for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++)
            if (strstr(coll_list, colls[i].name))
                table(&m, &colls[i], nodes, ppn, esize, lo, hi, f, label, max_chunks);
    }
    free(nl);
    return 0;
}
