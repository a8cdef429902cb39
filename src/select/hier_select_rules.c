/* hier_select_rules.c: the rules as data (hier_select_rules.h), their text
 * format, the built-in ones and the file that may replace them. The
 * reasons behind each built-in rule are in hier_select.c's comment and
 * docs/rules.md; docs/performance.md holds the measurements. */
#include "select/hier_select_rules.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_log.h"
#include "exec/hier_run.h"

_Static_assert(HIER_RUN_DEPTH_MAX == 4, "depth=N's message says 1 to 4");

#define HIER_RULES_VERSION "1"

static const char *const hier_rule_levels[HIER_RULE_LEVELS] = {"node", "net"};
static const char *const hier_rule_colls[HIER_RULE_COLLS] = {"allreduce", "allgather", "reduce_scatter"};
static const char *const hier_rule_conditions[HIER_SEL_CONDITIONS] = {
    "two_nodes", "many_nodes", "no_fold", "ring_nodes", "numa", "ll_fits", "cma", "own_cores", "pow2_nodes",
    "cma_pays", "ll_pays"};

#define A(p, k, nk, hard) {1, HIER_PATH_##p, k, nk, hard}
static const hier_rule_algo_t hier_rule_algos[HIER_RULE_LEVELS][HIER_RULE_COLLS][HIER_ALGO_COUNT] = {
    [HIER_RULE_NODE] = {
        [HIER_COLL_ALLREDUCE] = {[HIER_ALGO_LL] = A(SHM_LL, 0, 0, HIER_SEL_LL_FITS),
                                 [HIER_ALGO_NUMA] = A(SHM_NUMA, HIER_SCHED_ALLREDUCE_NUMA, 0, 0),
                                 [HIER_ALGO_FLAT] = A(SHM_FLAT, HIER_SCHED_ALLREDUCE_FLAT, 0, 0),
                                 [HIER_ALGO_RSAG] = A(SHM_RSAG, HIER_SCHED_ALLREDUCE_RSAG, 0, 0)},
        [HIER_COLL_ALLGATHER] = {[HIER_ALGO_LL] = A(SHM_LL, 0, 0, HIER_SEL_LL_FITS),
                                 [HIER_ALGO_CMA] = A(CMA_COPY, HIER_SCHED_CMA_ALLGATHER, 0, HIER_SEL_CMA),
                                 [HIER_ALGO_SHM] = A(SHM_COPY, HIER_SCHED_ALLGATHER, 0, 0)},
        [HIER_COLL_REDUCE_SCATTER] = {[HIER_ALGO_LL] = A(SHM_LL, 0, 0, HIER_SEL_LL_FITS),
                                      [HIER_ALGO_SHM] = A(SHM_RS, HIER_SCHED_REDUCE_SCATTER, 0, 0)},
    },
    [HIER_RULE_NET] = {
        [HIER_COLL_ALLREDUCE] = {[HIER_ALGO_RD] = A(NET_RD, HIER_SCHED_HIER_ALLREDUCE, HIER_NET_RD_ALLREDUCE, 0),
                                 [HIER_ALGO_RH] = A(NET_RH, HIER_SCHED_HIER_ALLREDUCE, HIER_NET_RH_ALLREDUCE, 0),
                                 [HIER_ALGO_RING] = A(NET_RING, HIER_SCHED_HIER_ALLREDUCE, HIER_NET_RING_ALLREDUCE, 0)},
        [HIER_COLL_ALLGATHER] = {[HIER_ALGO_RD] = A(NET_COPY, HIER_SCHED_HIER_ALLGATHER, HIER_NET_RD_ALLGATHER, 0),
                                 [HIER_ALGO_RH] = A(NET_COPY, HIER_SCHED_HIER_ALLGATHER, HIER_NET_RH_ALLGATHER, 0),
                                 [HIER_ALGO_RING] = A(NET_COPY, HIER_SCHED_HIER_ALLGATHER, HIER_NET_RING_ALLGATHER, 0)},
        [HIER_COLL_REDUCE_SCATTER] = {
            [HIER_ALGO_RING] = A(NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER, HIER_NET_RING_REDUCE_SCATTER, 0),
            [HIER_ALGO_RH] = A(NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER, HIER_NET_RH_REDUCE_SCATTER, 0),
            /* (forced only: it allreduces the whole piece, log2(nodes) times the data) */
            [HIER_ALGO_RD] = A(NET_RS, HIER_SCHED_HIER_REDUCE_SCATTER, HIER_NET_RD_ALLREDUCE, 0)},
    },
};
#undef A

/* The built-in rules; contrib/rules/builtin.rules is this text, and
 * tests/unit/test_rules.c checks that they agree. */
static const char hier_rules_builtin_text[] =
    "coll-hier-rules 1\n"
    "# level collective     algorithm     when                 from               to\n"
    "node    allreduce      ll            ll_pays              0                  any\n"
    "node    allreduce      numa          numa                 0                  allreduce_flat_max\n"
    "node    allreduce      flat          -                    0                  allreduce_flat_max\n"
    "node    allreduce      rsag          -                    0                  any\n"
    "node    allgather      ll            ll_pays              0                  any\n"
    "node    allgather      cma           own_cores,cma_pays   allgather_cma_min  any\n"
    "node    allgather      shm           -                    0                  any\n"
    "node    reduce_scatter ll            ll_pays              0                  any\n"
    "node    reduce_scatter shm           -                    0                  any\n"
    "net     allreduce      rd            two_nodes            0                  net_rd_max_two_nodes\n"
    "net     allreduce      rd            many_nodes           0                  net_rd_max\n"
    "net     allreduce      rabenseifner  no_fold              0                  any\n"
    "net     allreduce      ring          ring_nodes           0                  any\n"
    "net     allreduce      rabenseifner  -                    0                  any\n"
    "net     allgather      rd            two_nodes            0                  any\n"
    "net     allgather      rd            pow2_nodes           0                  net_rd_max\n"
    "net     allgather      rabenseifner  no_fold              0                  any\n"
    "net     allgather      rabenseifner  -                    0                  net_rd_max\n"
    "net     allgather      ring          ring_nodes           0                  any\n"
    "net     allgather      rabenseifner  -                    0                  any\n"
    "net     reduce_scatter ring          two_nodes            0                  any\n"
    "net     reduce_scatter rabenseifner  no_fold              0                  any\n"
    "net     reduce_scatter rabenseifner  -                    0                  net_rd_max\n"
    "net     reduce_scatter ring          ring_nodes           0                  any\n"
    "net     reduce_scatter rabenseifner  -                    0                  any\n";

static hier_rules_t hier_rules_built, hier_rules_file;
static const hier_rules_t *hier_rules_now;
static pthread_once_t hier_rules_once = PTHREAD_ONCE_INIT;

const hier_rule_algo_t *hier_rules_algo(int level, int coll, hier_algo_t algo)
{
    static const hier_rule_algo_t none = {0};
    if (level < 0 || level >= HIER_RULE_LEVELS || coll < 0 || coll >= HIER_RULE_COLLS ||
        (unsigned)algo >= HIER_ALGO_COUNT)
        return &none;
    return &hier_rule_algos[level][coll][algo];
}

const size_t *hier_rules_ll_max(int coll)
{
    static const size_t *const ll_max[HIER_RULE_COLLS] = {&hier_params.allreduce_ll_max, &hier_params.allgather_ll_max,
                                                          &hier_params.reduce_scatter_ll_max};
    return coll >= 0 && coll < HIER_RULE_COLLS ? ll_max[coll] : NULL;
}

size_t hier_rule_bound(hier_rule_bound_t b)
{
    return b.param ? *b.param : b.value;
}

/* ---- parsing ---- */

static int hier_rules_index(const char *const *names, int n, const char *word)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], word)) return i;
    return -1;
}

static const hier_param_desc_t *hier_rules_param_by_name(const char *name)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    for (size_t i = 0; i < n; i++)
        if (t[i].type == HIER_PARAM_SIZE && !strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

static const char *hier_rules_param_name(const size_t *field)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    for (size_t i = 0; i < n; i++)
        if ((const char *)&hier_params + t[i].offset == (const char *)field) return t[i].name;
    return "?";
}

/* A bound: `any`, a size, or a size parameter's name. */
static int hier_rules_parse_bound(const char *word, hier_rule_bound_t *b)
{
    *b = (hier_rule_bound_t){0};
    if (!strcmp(word, "any")) {
        b->value = SIZE_MAX;
        return 0;
    }
    if (word[0] >= '0' && word[0] <= '9') return hier_params_parse_size(word, &b->value);
    const hier_param_desc_t *d = hier_rules_param_by_name(word);
    if (!d) return -1;
    b->param = (const size_t *)(const void *)((const char *)&hier_params + d->offset);
    return 0;
}

/* A count condition, "ppn>=4" or "nodes<=16" (the level's word only). */
static int hier_rules_parse_count(const char *c, int level, hier_rule_t *rule)
{
    const char *word = level == HIER_RULE_NODE ? "ppn" : "nodes";
    size_t n = strlen(word);
    char *end;
    if (strncmp(c, word, n) || (strncmp(c + n, ">=", 2) && strncmp(c + n, "<=", 2))) return -1;
    unsigned long v = strtoul(c + n + 2, &end, 10);
    if (end == c + n + 2 || *end || v < 1 || v > UINT32_MAX - 1) return -1;
    if (c[n] == '>') rule->count_lo = (uint32_t)v;
    else rule->count_hi = (uint32_t)v;
    return 0;
}

static int hier_rules_parse_when(char *word, int level, hier_rule_t *rule)
{
    rule->need = 0, rule->count_lo = 0, rule->count_hi = UINT32_MAX;
    if (!strcmp(word, "-")) return 0;
    char *save = NULL;
    for (char *c = strtok_r(word, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        int i = hier_rules_index(hier_rule_conditions, HIER_SEL_CONDITIONS, c);
        if (i < 0 && hier_rules_parse_count(c, level, rule) != 0) return -1;
        if (i >= 0) rule->need |= 1u << i;
    }
    return rule->count_lo <= rule->count_hi ? 0 : -1;
}

/* A rule's pipelining words after its six, chunk=SIZE and depth=N (each
 * once; depth between nodes only, neither where the algorithm has no
 * pipeline). */
static int hier_rules_parse_pipe(char **w, int n, int level, hier_rule_t *rule, const char **why)
{
    int pipelined = rule->algo != HIER_ALGO_LL && rule->algo != HIER_ALGO_CMA;
    for (int i = 6; i < n; i++) {
        char *end;
        if (!strncmp(w[i], "chunk=", 6) && !rule->chunk) {
            if (hier_params_parse_size(w[i] + 6, &rule->chunk) != 0 || rule->chunk < 64)
                return *why = "chunk=SIZE is a size of 64 bytes or more", -1;
        } else if (!strncmp(w[i], "depth=", 6) && !rule->depth) {
            unsigned long v = strtoul(w[i] + 6, &end, 10);
            if (end == w[i] + 6 || *end || v < 1 || v > HIER_RUN_DEPTH_MAX)
                return *why = "depth=N is 1 to 4 (chunks in flight)", -1;
            if (level != HIER_RULE_NET) return *why = "depth applies between nodes (net rules)", -1;
            rule->depth = (unsigned)v;
        } else {
            return *why = "after the six words, only chunk=SIZE and depth=N, each once", -1;
        }
    }
    if ((rule->chunk || rule->depth) && !pipelined) return *why = "ll and cma have no pipeline (chunk, depth)", -1;
    return 0;
}

/* One rule line's words into r (why: what is wrong). */
static int hier_rules_parse_rule(char **w, int n, int line, hier_rules_t *r, const char **why)
{
    int level = hier_rules_index(hier_rule_levels, HIER_RULE_LEVELS, w[0]);
    int coll = hier_rules_index(hier_rule_colls, HIER_RULE_COLLS, w[1]);
    hier_rule_t rule = {.line = line};
    int algo = -1;
    for (int a = 0; a < HIER_ALGO_COUNT; a++)
        if (!strcmp(hier_algo_name((hier_algo_t)a), w[2])) algo = a;
    if (level < 0) return *why = "the level is node or net", -1;
    if (coll < 0) return *why = "the collective is allreduce, allgather or reduce_scatter", -1;
    if (algo < 0 || !hier_rules_algo(level, coll, (hier_algo_t)algo)->known)
        return *why = "no such algorithm for this level and collective", -1;
    rule.algo = (hier_algo_t)algo;
    if (hier_rules_parse_when(w[3], level, &rule) != 0)
        return *why = "an unknown condition (one node: ppn>=N, ppn<=N; between nodes: nodes>=N, nodes<=N)", -1;
    if (hier_rules_parse_bound(w[4], &rule.from) != 0 || hier_rules_parse_bound(w[5], &rule.to) != 0)
        return *why = "a bound is a size (64K), any, or a size parameter's name", -1;
    if (!rule.from.param && !rule.to.param && rule.from.value > rule.to.value)
        return *why = "from is above to", -1;
    if (rule.algo == HIER_ALGO_LL && rule.to.param == hier_rules_ll_max(coll)) /* (files from before ll_pays) */
        rule.need |= HIER_SEL_LL_PAYS, rule.to = (hier_rule_bound_t){.value = SIZE_MAX};
    if (hier_rules_parse_pipe(w, n, level, &rule, why) != 0) return -1;
    if (!r->from_file[level][coll]) r->from_file[level][coll] = 1, r->n[level][coll] = 0;
    if (r->n[level][coll] == HIER_RULES_MAX) return *why = "too many rules for one level and collective", -1;
    r->rule[level][coll][r->n[level][coll]++] = rule;
    return 0;
}

/* The last rule of a list the file gave serves every call the others leave. */
static int hier_rules_check_last(const hier_rules_t *r, const char **why)
{
    for (int l = 0; l < HIER_RULE_LEVELS; l++)
        for (int c = 0; c < HIER_RULE_COLLS; c++) {
            if (!r->from_file[l][c]) continue;
            const hier_rule_t *last = &r->rule[l][c][r->n[l][c] - 1];
            int any_call = !last->need && !last->count_lo && last->count_hi == UINT32_MAX && !last->from.param &&
                           !last->from.value && !last->to.param && last->to.value == SIZE_MAX;
            if (!any_call || hier_rules_algo(l, c, last->algo)->hard) {
                *why = "the last rule of a level and collective must serve every call (when -, from 0, to any, "
                       "an algorithm that needs nothing)";
                return last->line;
            }
        }
    return 0;
}

/* hier_rules_parse onto `base` (the built-in rules; none: they themselves). */
static int hier_rules_parse_onto(const char *text, const char *name, const hier_rules_t *base, hier_rules_t *out)
{
    char *copy = strdup(text ? text : ""), *save = NULL;
    hier_rules_t r = base ? *base : (hier_rules_t){0};
    memset(r.from_file, 0, sizeof(r.from_file));
    r.machine[0] = '\0';
    const char *why = NULL;
    int line = 0, header = 0, bad = 0;
    if (!copy) return -1;
    for (char *l = copy, *next; l && !bad; l = next) {
        next = strchr(l, '\n');
        if (next) *next++ = '\0';
        line++;
        char *hash = strchr(l, '#'), *w[9];
        if (hash) *hash = '\0';
        l += strspn(l, " \t\r");
        if (header && !strncmp(l, "machine", 7) && (!l[7] || strchr(" \t\r", l[7]))) {
            char *v = l + 7 + strspn(l + 7, " \t");
            if (strncmp(v, "cpu", 3) || !strchr(" \t", v[3]) || !v[3 + strspn(v + 3, " \t\r")])
                why = "machine cpu MODEL", bad = line;
            else snprintf(r.machine, sizeof(r.machine), "%s", v + 3 + strspn(v + 3, " \t"));
            continue;
        }
        int n = 0;
        for (char *t = strtok_r(l, " \t\r", &save); t && n < 9; t = strtok_r(NULL, " \t\r", &save)) w[n++] = t;
        if (!n) continue;
        if (!header) {
            header = 1;
            if (n != 2 || strcmp(w[0], "coll-hier-rules") || strcmp(w[1], HIER_RULES_VERSION))
                why = "the first line is \"coll-hier-rules 1\"", bad = line;
        } else if (n < 6 || n > 8) {
            why = "a rule has six words (level collective algorithm when from to), then chunk=SIZE and depth=N if "
                  "any", bad = line;
        } else if (hier_rules_parse_rule(w, n, line, &r, &why) != 0) {
            bad = line;
        }
    }
    free(copy);
    if (!bad && !header) why = "empty", bad = 1;
    if (!bad) bad = hier_rules_check_last(&r, &why);
    if (bad) {
        HIER_ERROR("rules %s, line %d: %s", name, bad, why);
        return -1;
    }
    /* (strip trailing blanks of the machine name) */
    for (size_t k = strlen(r.machine); k && strchr(" \t\r", r.machine[k - 1]); k--)
        r.machine[k - 1] = '\0';
    *out = r;
    return 0;
}

int hier_rules_parse(const char *text, const char *name, hier_rules_t *out)
{
    return hier_rules_parse_onto(text, name, hier_rules_builtin(), out);
}

/* ---- the active rules ---- */

static void hier_rules_init(void)
{
    if (hier_rules_parse_onto(hier_rules_builtin_text, "(built in)", NULL, &hier_rules_built) != 0)
        abort(); /* (tests/unit/test_rules.c parses them) */
    memset(hier_rules_built.from_file, 0, sizeof(hier_rules_built.from_file));
    for (int l = 0; l < HIER_RULE_LEVELS; l++)
        for (int c = 0; c < HIER_RULE_COLLS; c++)
            for (int i = 0; i < hier_rules_built.n[l][c]; i++) hier_rules_built.rule[l][c][i].line = 0;
    hier_rules_now = &hier_rules_built;
}

const hier_rules_t *hier_rules_builtin(void)
{
    pthread_once(&hier_rules_once, hier_rules_init);
    return &hier_rules_built;
}

const hier_rules_t *hier_rules_active(void)
{
    if (!hier_rules_now) pthread_once(&hier_rules_once, hier_rules_init);
    return hier_rules_now;
}

const char *hier_rules_cpu(void)
{
    static char model[128];
    static int looked;
    if (looked) return model;
    looked = 1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char buf[256];
    while (f && fgets(buf, sizeof(buf), f)) {
        if (strncmp(buf, "model name", 10)) continue;
        const char *v = strchr(buf, ':');
        if (!v) break;
        snprintf(model, sizeof(model), "%s", v + 1 + strspn(v + 1, " \t"));
        model[strcspn(model, "\n")] = '\0';
        break;
    }
    if (f) fclose(f);
    return model;
}

int hier_rules_load(const char *path)
{
    hier_rules_builtin();
    if (!path || !path[0]) {
        hier_rules_now = &hier_rules_built;
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        HIER_ERROR("rules file %s: %s; the built-in rules serve", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap + 1);
    if (text) len = fread(text, 1, cap, f);
    int big = text && len == cap && fgetc(f) != EOF;
    fclose(f);
    if (!text || big) {
        HIER_ERROR("rules file %s: %s; the built-in rules serve", path, text ? "larger than 64 KiB" : "no memory");
        free(text);
        return -1;
    }
    text[len] = '\0';
    int rc = hier_rules_parse(text, path, &hier_rules_file);
    free(text);
    if (rc != 0) {
        HIER_ERROR("rules file %s refused; the built-in rules serve", path);
        return -1;
    }
    const char *cpu = hier_rules_cpu();
    if (hier_rules_file.machine[0] && cpu[0] && strcmp(hier_rules_file.machine, cpu))
        HIER_ERROR("rules file %s was made on another CPU (%s; this one is %s): its choices may not fit here",
                   path, hier_rules_file.machine, cpu);
    hier_rules_now = &hier_rules_file;
    HIER_LOG(HIER_LOG_COMM, "rules file %s loaded", path);
    return 0;
}

/* ---- printing and the digest ---- */

static void hier_rules_print_size(size_t v, char *buf, size_t len)
{
    static const char suffix[] = {'G', 'M', 'K'};
    for (int i = 0; i < 3; i++) {
        size_t unit = (size_t)1 << (30 - 10 * i);
        if (v && v % unit == 0) {
            snprintf(buf, len, "%zu%c", v / unit, suffix[i]);
            return;
        }
    }
    snprintf(buf, len, "%zu", v);
}

static void hier_rules_print_bound(hier_rule_bound_t b, char *buf, size_t len)
{
    if (b.param) snprintf(buf, len, "%s", hier_rules_param_name(b.param));
    else if (b.value == SIZE_MAX) snprintf(buf, len, "any");
    else hier_rules_print_size(b.value, buf, len);
}

void hier_rules_print(const hier_rules_t *r, FILE *out)
{
    fprintf(out, "coll-hier-rules %s\n", HIER_RULES_VERSION);
    if (r->machine[0]) fprintf(out, "machine cpu %s\n", r->machine);
    fprintf(out, "# level collective     algorithm     when                 from               to\n");
    for (int l = 0; l < HIER_RULE_LEVELS; l++)
        for (int c = 0; c < HIER_RULE_COLLS; c++)
            for (int i = 0; i < r->n[l][c]; i++) {
                const hier_rule_t *x = &r->rule[l][c][i];
                char when[160] = "", from[64], to[64];
                for (int k = 0; k < HIER_SEL_CONDITIONS; k++)
                    if (x->need & (1u << k))
                        snprintf(when + strlen(when), sizeof(when) - strlen(when), "%s%s", when[0] ? "," : "",
                                 hier_rule_conditions[k]);
                const char *count = l == HIER_RULE_NODE ? "ppn" : "nodes";
                if (x->count_lo)
                    snprintf(when + strlen(when), sizeof(when) - strlen(when), "%s%s>=%u", when[0] ? "," : "", count,
                             x->count_lo);
                if (x->count_hi != UINT32_MAX)
                    snprintf(when + strlen(when), sizeof(when) - strlen(when), "%s%s<=%u", when[0] ? "," : "", count,
                             x->count_hi);
                hier_rules_print_bound(x->from, from, sizeof(from));
                hier_rules_print_bound(x->to, to, sizeof(to));
                char pipe[64] = "", chunk[32];
                hier_rules_print_size(x->chunk, chunk, sizeof(chunk));
                if (x->chunk) snprintf(pipe, sizeof(pipe), " chunk=%s", chunk);
                if (x->depth) snprintf(pipe + strlen(pipe), sizeof(pipe) - strlen(pipe), " depth=%u", x->depth);
                fprintf(out, "%-7s %-14s %-13s %-20s %-18s %s%s\n", hier_rule_levels[l], hier_rule_colls[c],
                        hier_algo_name(x->algo), when[0] ? when : "-", from, to, pipe);
            }
}

/* A bound as every process sees it (a parameter by its place in the
 * parameters, not its address). */
static uint64_t hier_rules_bound_word(hier_rule_bound_t b)
{
    if (!b.param) return b.value;
    return (uint64_t)1 << 63 | (uint64_t)((const char *)b.param - (const char *)&hier_params);
}

uint32_t hier_rules_digest(void)
{
    const hier_rules_t *r = hier_rules_active();
    uint64_t h = 0xcbf29ce484222325ull;
    for (int l = 0; l < HIER_RULE_LEVELS; l++)
        for (int c = 0; c < HIER_RULE_COLLS; c++)
            for (int i = 0; i < r->n[l][c]; i++) {
                const hier_rule_t *x = &r->rule[l][c][i];
                uint64_t f[6] = {(uint64_t)l << 40 | (uint64_t)c << 32 | (uint64_t)i, (uint64_t)x->algo << 32 | x->need,
                                 (uint64_t)x->count_lo << 32 | x->count_hi, hier_rules_bound_word(x->from),
                                 hier_rules_bound_word(x->to), (uint64_t)x->chunk << 8 | x->depth};
                for (int k = 0; k < 6; k++) h = (h ^ f[k]) * 0x100000001b3ull;
            }
    return (uint32_t)(h ^ h >> 32);
}
