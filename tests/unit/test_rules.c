/* The rules as data: the built-in ones and their file agree, a file's
 * lists replace theirs, every malformed kind is refused with its line (the
 * built-in rules kept), a file from another CPU warns, and what select/
 * chooses follows the file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "select/hier_select.h"
#include "select/hier_select_chunk.h"

static char logged[4096];

static void keep_line(const char *line)
{
    snprintf(logged + strlen(logged), sizeof(logged) - strlen(logged), "%s\n", line);
}

static void setup(void)
{
    hier_params_defaults(&hier_params);
    logged[0] = '\0';
    hier_log_set_sink(keep_line);
    cr_assert_eq(hier_rules_load(NULL), 0);
}

/* Load `text` as a rules file (a temporary file, gone once read). */
static void load_rules_text(const char *text)
{
    char path[] = "/tmp/hier-rules-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    cr_assert_eq(hier_rules_load(path), 0, "%s", logged);
    unlink(path);
}

static char *print_rules(const hier_rules_t *r)
{
    char *text;
    size_t len;
    FILE *m = open_memstream(&text, &len);
    hier_rules_print(r, m);
    fclose(m);
    return text;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    rewind(f);
    char *text = calloc(1, len + 1);
    cr_assert_eq(fread(text, 1, len, f), len);
    fclose(f);
    return text;
}

static hier_select_shape_t one_node(uint32_t ranks)
{
    return (hier_select_shape_t){.size = ranks, .nnodes = 1, .local_ranks = ranks, .numa_groups = 1, .cma = -1,
                                 .ll_capacity = 8192};
}

static hier_path_t path_of(const hier_select_shape_t *s, hier_coll_t coll, size_t bytes)
{
    hier_select_t c;
    hier_select(s, coll, bytes, &c);
    return c.path;
}

/* The shipped file is the built-in rules printed, and reads back to them. */
Test(rules, the_shipped_file_is_the_built_in_rules, .init = setup)
{
    const char *src = getenv("HIER_SRCDIR");
    char path[4096];
    if (!src) cr_skip_test("HIER_SRCDIR not set (run through make check)");
    snprintf(path, sizeof(path), "%s/contrib/rules/builtin.rules", src);
    char *file = slurp(path), *printed = print_rules(hier_rules_builtin());
    cr_assert_str_eq(file, printed, "contrib/rules/builtin.rules is stale: contrib/hier-info --print-rules > it");
    hier_rules_t back;
    cr_assert_eq(hier_rules_parse(file, path, &back), 0, "%s", logged);
    char *again = print_rules(&back);
    cr_assert_str_eq(again, printed);
    free(file), free(printed), free(again);
}

/* Printing and parsing round-trip, the bounds as parameters or sizes. */
Test(rules, round_trip_through_the_text, .init = setup)
{
    char *text = print_rules(hier_rules_builtin());
    hier_rules_t r;
    cr_assert_eq(hier_rules_parse(text, "printed", &r), 0, "%s", logged);
    for (int l = 0; l < HIER_RULE_LEVELS; l++)
        for (int c = 0; c < HIER_RULE_COLLS; c++) {
            cr_assert_eq(r.n[l][c], hier_rules_builtin()->n[l][c]);
            cr_assert(r.n[l][c] > 0);
            for (int i = 0; i < r.n[l][c]; i++) {
                const hier_rule_t *a = &r.rule[l][c][i], *b = &hier_rules_builtin()->rule[l][c][i];
                cr_assert(a->algo == b->algo && a->need == b->need && a->from.param == b->from.param &&
                          a->from.value == b->from.value && a->to.param == b->to.param && a->to.value == b->to.value &&
                          a->chunk == b->chunk && a->depth == b->depth,
                          "level %d coll %d rule %d", l, c, i);
            }
        }
    free(text);
}

/* A file's list replaces that list only; its rules name their lines, and
 * select/ follows them (sizes, conditions, a parameter's value now). */
Test(rules, a_file_replaces_the_lists_it_gives, .init = setup)
{
    const char *text = "coll-hier-rules 1\n"
                       "# one node, allreduce: the low-latency path to 256 B, flat to 64K, then rsag\n"
                       "node allreduce ll   -   0 256\n"
                       "node allreduce flat -   0 64K\n"
                       "node allreduce rsag -   0 any\n"
                       "node allgather shm  -   0 any   # never single copy\n";
    load_rules_text(text);
    hier_select_shape_t s = one_node(2);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 256), HIER_PATH_SHM_LL);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 257), HIER_PATH_SHM_FLAT);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 4096), HIER_PATH_SHM_FLAT);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 64 << 10), HIER_PATH_SHM_FLAT);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, (64 << 10) + 1), HIER_PATH_SHM_RSAG);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLGATHER, 1 << 20), HIER_PATH_SHM_COPY);
    cr_expect_eq(path_of(&s, HIER_COLL_REDUCE_SCATTER, 1 << 20), HIER_PATH_SHM_RS, "the built-in list kept");
    hier_select_t c;
    const hier_rule_t *rule;
    hier_select_explain(&s, HIER_COLL_ALLREDUCE, 1000, &c, &rule);
    cr_expect(rule && rule->line == 4, "flat is the file's line 4");
    hier_select_explain(&s, HIER_COLL_REDUCE_SCATTER, 1 << 20, &c, &rule);
    cr_expect(rule && rule->line == 0, "built in");
    hier_params.allreduce_algorithm = HIER_ALGO_NUMA; /* forced: the algorithm, whatever the rules */
    hier_select_explain(&s, HIER_COLL_ALLREDUCE, 1000, &c, &rule);
    cr_expect(c.path == HIER_PATH_SHM_NUMA && rule == NULL);
    hier_params.allreduce_algorithm = HIER_ALGO_AUTO;
    uint32_t digest = hier_rules_digest();
    cr_assert_eq(hier_rules_load(NULL), 0);
    cr_expect_neq(digest, hier_rules_digest(), "the ranks compare the rules' digest");
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 4096), HIER_PATH_SHM_RSAG, "built in again");
}

/* A file's low-latency rule with a size bound is its own cut-off: nothing
 * measured; one bounded by the collective's ll_max parameter (as the
 * built-in rules were before the node measured the cut-off) reads as
 * ll_pays: the parameter where set, else the node's measurement. */
Test(rules, low_latency_bounds_in_a_file, .init = setup)
{
    hier_rules_t r;
    const char *text = "coll-hier-rules 1\n"
                       "node allreduce ll   -   0 256\n"
                       "node allreduce rsag -   0 any\n"
                       "node allgather ll   -   0 allgather_ll_max\n"
                       "node allgather shm  -   0 any\n";
    cr_assert_eq(hier_rules_parse(text, "f", &r), 0, "%s", logged);
    cr_expect(r.rule[HIER_RULE_NODE][HIER_COLL_ALLGATHER][0].need == HIER_SEL_LL_PAYS, "read as ll_pays");
    cr_expect(!r.rule[HIER_RULE_NODE][HIER_COLL_ALLGATHER][0].to.param, "to any");
    cr_expect_eq(r.rule[HIER_RULE_NODE][HIER_COLL_ALLGATHER][0].to.value, SIZE_MAX);
    char *printed = print_rules(&r);
    cr_expect(strstr(printed, "ll_pays"), "%s", printed);
    free(printed);
    load_rules_text(text);
    hier_select_shape_t s = one_node(2);
    cr_expect(!hier_select_ll_due(&s, HIER_COLL_ALLREDUCE, 2048), "the file's own cut-off: nothing measured");
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 256), HIER_PATH_SHM_LL);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 257), HIER_PATH_SHM_RSAG);
    cr_expect(hier_select_ll_due(&s, HIER_COLL_ALLGATHER, 2048), "the node measures it");
    s.ll_top[HIER_COLL_ALLGATHER] = 4096;
    cr_expect_eq(path_of(&s, HIER_COLL_ALLGATHER, 4096), HIER_PATH_SHM_LL);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLGATHER, 4097), HIER_PATH_SHM_COPY);
    hier_params.allgather_ll_max = 512; /* the parameter, where set */
    cr_expect_eq(path_of(&s, HIER_COLL_ALLGATHER, 513), HIER_PATH_SHM_COPY);
    cr_assert_eq(hier_rules_load(NULL), 0);
}

/* Rules for some node sizes or node counts (what hier-tune writes for the
 * rank counts it measured). */
Test(rules, rules_by_ranks_per_node_and_nodes, .init = setup)
{
    const char *text = "coll-hier-rules 1\n"
                       "node allreduce flat ppn<=2        0 any\n"
                       "node allreduce numa ppn>=3,ppn<=4 0 any\n"
                       "node allreduce rsag -             0 any\n"
                       "net  allreduce ring nodes<=4      0 any\n"
                       "net  allreduce rabenseifner -     0 any\n";
    hier_rules_t r;
    cr_assert_eq(hier_rules_parse(text, "t", &r), 0, "%s", logged);
    char *printed = print_rules(&r);
    cr_expect(strstr(printed, "numa-") == NULL && strstr(printed, " ppn>=3,ppn<=4 "), "%s", printed);
    hier_rules_t back;
    cr_assert_eq(hier_rules_parse(printed, "printed", &back), 0, "%s", logged);
    cr_expect(back.rule[HIER_RULE_NODE][HIER_COLL_ALLREDUCE][1].count_lo == 3 &&
              back.rule[HIER_RULE_NODE][HIER_COLL_ALLREDUCE][1].count_hi == 4);
    free(printed);
    load_rules_text(text);
    hier_select_shape_t s = one_node(2);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 1 << 20), HIER_PATH_SHM_FLAT);
    s = one_node(4);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 1 << 20), HIER_PATH_SHM_NUMA);
    s = one_node(5);
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 1 << 20), HIER_PATH_SHM_RSAG);
    s = (hier_select_shape_t){.size = 8, .nnodes = 4};
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 1 << 20), HIER_PATH_NET_RING);
    s = (hier_select_shape_t){.size = 10, .nnodes = 5};
    cr_expect_eq(path_of(&s, HIER_COLL_ALLREDUCE, 1 << 20), HIER_PATH_NET_RH);
    hier_rules_load(NULL);
}

/* Every malformed kind is refused, the line named, nothing taken. */
Test(rules, malformed_files_are_refused_with_their_line, .init = setup)
{
    static const struct {
        const char *text;
        int line;
        const char *why;
    } bad[] = {
        {"", 1, "empty"},
        {"coll-hier-rules 2\n", 1, "the first line"},
        {"node allreduce ll - 0 any\n", 1, "the first line"},
        {"coll-hier-rules 1\nnode allreduce ll - 0\n", 2, "six words"},
        {"coll-hier-rules 1\n\nnodes allreduce rsag - 0 any\n", 3, "node or net"},
        {"coll-hier-rules 1\nnode allreduc rsag - 0 any\n", 2, "allreduce, allgather or reduce_scatter"},
        {"coll-hier-rules 1\nnode allreduce ring - 0 any\n", 2, "no such algorithm"},
        {"coll-hier-rules 1\nnet allgather rsag - 0 any\n", 2, "no such algorithm"},
        {"coll-hier-rules 1\nnode allreduce flat fast 0 1K\nnode allreduce rsag - 0 any\n", 2, "unknown condition"},
        {"coll-hier-rules 1\nnode allreduce flat - 0 1Q\nnode allreduce rsag - 0 any\n", 2, "a bound"},
        {"coll-hier-rules 1\nnode allreduce flat - 0 no_such_param\nnode allreduce rsag - 0 any\n", 2, "a bound"},
        {"coll-hier-rules 1\nnode allreduce flat - 0 timeout\nnode allreduce rsag - 0 any\n", 2, "a bound"},
        {"coll-hier-rules 1\nnode allreduce flat - 4K 1K\nnode allreduce rsag - 0 any\n", 2, "from is above to"},
        {"coll-hier-rules 1\nnode allreduce rsag - 0 any\nnode allreduce flat - 0 1K\n", 3, "last rule"},
        {"coll-hier-rules 1\nnode allreduce ll - 0 any\n", 2, "last rule"},
        {"coll-hier-rules 1\nnode allreduce rsag numa 0 any\n", 2, "last rule"},
        {"coll-hier-rules 1\nmachine\n", 2, "machine cpu"},
        {"coll-hier-rules 1\nnode allreduce flat nodes<=2 0 1K\nnode allreduce rsag - 0 any\n", 2, "unknown condition"},
        {"coll-hier-rules 1\nnode allreduce flat ppn>=5,ppn<=2 0 1K\nnode allreduce rsag - 0 any\n", 2,
         "unknown condition"},
        {"coll-hier-rules 1\nnet allreduce ring ppn<=2 0 any\nnet allreduce ring - 0 any\n", 2, "unknown condition"},
        {"coll-hier-rules 1\nnode allreduce rsag ppn>=2 0 any\n", 2, "last rule"},
        {"coll-hier-rules 1\nnet allreduce ring - 0 any chunk=abc\n", 2, "chunk=SIZE"},
        {"coll-hier-rules 1\nnet allreduce ring - 0 any chunk=32\n", 2, "chunk=SIZE"},
        {"coll-hier-rules 1\nnet allreduce ring - 0 any depth=5\n", 2, "depth=N is 1 to 4"},
        {"coll-hier-rules 1\nnet allreduce ring - 0 any depth=0\n", 2, "depth=N is 1 to 4"},
        {"coll-hier-rules 1\nnode allreduce rsag - 0 any depth=2\n", 2, "between nodes"},
        {"coll-hier-rules 1\nnode allreduce ll - 0 1K chunk=4K\nnode allreduce rsag - 0 any\n", 2, "no pipeline"},
        {"coll-hier-rules 1\nnet allreduce ring - 0 any chunk=4K chunk=8K\n", 2, "each once"},
        {"coll-hier-rules 1\nnet allreduce ring - 0 any fast=1\n", 2, "each once"},
        {"coll-hier-rules 1\nnet allreduce ring - 0 any chunk=4K depth=1 x\n", 2, "six words"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hier_rules_t r;
        char want[64];
        logged[0] = '\0';
        cr_expect_eq(hier_rules_parse(bad[i].text, "f", &r), -1, "case %zu taken", i);
        snprintf(want, sizeof(want), "rules f, line %d: ", bad[i].line);
        cr_expect(strstr(logged, want) && strstr(logged, bad[i].why), "case %zu: %s", i, logged);
    }
    /* too many rules in one list */
    char many[4096] = "coll-hier-rules 1\n";
    for (int i = 0; i <= HIER_RULES_MAX; i++) strcat(many, "node allgather shm - 0 any\n");
    hier_rules_t r;
    logged[0] = '\0';
    cr_expect_eq(hier_rules_parse(many, "f", &r), -1);
    cr_expect(strstr(logged, "too many"), "%s", logged);
    /* a file that cannot be read or is refused leaves the built-in rules in force */
    cr_expect_eq(hier_rules_load("/nonexistent/rules"), -1);
    cr_expect_eq(hier_rules_active(), hier_rules_builtin());
}

/* A file made on another CPU is taken, with a warning naming both. */
Test(rules, a_file_from_another_cpu_warns, .init = setup)
{
    const char *text = "coll-hier-rules 1\nmachine cpu Imaginary CPU 9000 @ 1 THz\nnode allgather shm - 0 any\n";
    load_rules_text(text);
    cr_expect_str_eq(hier_rules_active()->machine, "Imaginary CPU 9000 @ 1 THz");
    if (!hier_rules_cpu()[0]) cr_skip_test("no CPU model in /proc/cpuinfo: nothing to compare with");
    cr_expect(strstr(logged, "made on another CPU (Imaginary CPU 9000 @ 1 THz; this one is "), "%s", logged);
    /* the same machine: no warning */
    char same[512];
    snprintf(same, sizeof(same), "coll-hier-rules 1\nmachine cpu %s\nnode allgather shm - 0 any\n", hier_rules_cpu());
    logged[0] = '\0';
    load_rules_text(same);
    cr_expect(!strstr(logged, "another CPU"), "%s", logged);
    hier_rules_load(NULL);
}

/* A rule's chunk= and depth=: read, printed back, in the digest, carried
 * by select/'s choice, and applied as caps by the chunk and depth policy
 * (below the pipeline segment's, never above it). */
Test(rules, chunk_and_depth_cap_the_pipeline, .init = setup)
{
    const char *text = "coll-hier-rules 1\n"
                       "net allreduce rd - 0 64K\n"
                       "net allreduce ring - 0 any chunk=128K depth=1\n"
                       "node allreduce rsag - 0 any chunk=256K\n";
    hier_rules_t r;
    cr_assert_eq(hier_rules_parse(text, "f", &r), 0, "%s", logged);
    const hier_rule_t *ring = &r.rule[HIER_RULE_NET][HIER_COLL_ALLREDUCE][1];
    cr_expect_eq(ring->chunk, (size_t)128 << 10);
    cr_expect_eq(ring->depth, 1u);
    cr_expect_eq(r.rule[HIER_RULE_NODE][HIER_COLL_ALLREDUCE][0].chunk, (size_t)256 << 10);
    cr_expect_eq(r.rule[HIER_RULE_NET][HIER_COLL_ALLREDUCE][0].chunk, 0);
    char *printed = print_rules(&r);
    cr_expect(strstr(printed, " any chunk=128K depth=1\n") && strstr(printed, " any chunk=256K\n"), "%s", printed);
    hier_rules_t again;
    cr_assert_eq(hier_rules_parse(printed, "printed", &again), 0, "%s", logged);
    cr_expect_eq(again.rule[HIER_RULE_NET][HIER_COLL_ALLREDUCE][1].chunk, (size_t)128 << 10);
    free(printed);

    uint32_t before = hier_rules_digest();
    load_rules_text(text);
    cr_expect_neq(hier_rules_digest(), before, "the digest does not see chunk= and depth=");

    hier_select_shape_t four = {.size = 8, .nnodes = 4, .local_ranks = 2, .numa_groups = 1, .cma = -1,
                                .ll_capacity = 8192};
    hier_select_t big, small;
    hier_select(&four, HIER_COLL_ALLREDUCE, (size_t)4 << 20, &big);
    hier_select(&four, HIER_COLL_ALLREDUCE, 1024, &small);
    cr_expect_eq(big.path, HIER_PATH_NET_RING);
    cr_expect_eq(big.chunk, (size_t)128 << 10);
    cr_expect_eq(big.depth, 1u);
    cr_expect_eq(small.chunk, 0);
    cr_expect_eq(small.depth, 0);

    uint32_t first[5] = {0, 2, 4, 6, 8}, ranks[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    hier_sched_args_t a = {.kind = HIER_SCHED_HIER_ALLREDUCE, .nranks = 2, .esize = 4, .count = 1 << 20,
                           .nnodes = 4, .pieces = 2, .net_kind = big.net_kind, .node_first = first,
                           .node_ranks = ranks, .chunk_cap = big.chunk, .depth_cap = big.depth};
    size_t smallc = hier_select_small_chunk(2), pipe = hier_select_pipe_chunk(4);
    cr_expect_eq(hier_select_chunk(&a, smallc, pipe), (size_t)128 << 10, "a rule's chunk below the segment's");
    cr_expect_eq(hier_select_call_depth(2, &a), 1u, "a rule's depth below the segment's");
    a.chunk_cap = (size_t)64 << 20, a.depth_cap = 4;
    cr_expect_eq(hier_select_chunk(&a, smallc, pipe), pipe, "never above the segment's chunk");
    cr_expect_eq(hier_select_call_depth(2, &a), 2u, "never above the segment's depth");
    a.chunk_cap = 0, a.depth_cap = 0;
    cr_expect_eq(hier_select_chunk(&a, smallc, pipe), pipe);
    cr_expect_eq(hier_select_call_depth(2, &a), 2u);
    hier_rules_load(NULL);
}
