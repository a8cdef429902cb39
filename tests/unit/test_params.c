/* The parameter table: one entry per parameter, defaults that parse, and the
 * docs/parameters.md's table generated from it (so the documentation cannot drift). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_params.h"
#include "base/hier_stats.h"

Test(params, names_unique_and_defaults_parse)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    cr_assert_gt(n, 8);
    for (size_t i = 0; i < n; i++) {
        cr_assert(t[i].help && strlen(t[i].help) > 20, "%s has no help text", t[i].name);
        for (size_t j = i + 1; j < n; j++) cr_assert_str_neq(t[i].name, t[j].name);
        if (t[i].type == HIER_PARAM_SIZE) {
            size_t v;
            cr_assert_eq(hier_params_parse_size(t[i].defval, &v), 0, "%s default %s", t[i].name, t[i].defval);
        }
        if (t[i].type == HIER_PARAM_ALGO) cr_assert(t[i].algo_mask & 1u, "%s: auto must be valid", t[i].name);
    }
}

/* Open MPI 5 refuses variable names past MCA_BASE_MAX_VARIABLE_NAME_LEN
 * (63): every MCA parameter, coll_hier_<name>, and every MPI_T
 * performance variable, coll_hier_<coll>_<path>_<counter> (net_bytes is
 * the longest counter), must fit. */
Test(params, names_fit_open_mpi_5)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    for (size_t i = 0; i < n; i++)
        cr_assert_leq(strlen("coll_hier_") + strlen(t[i].name), 63, "coll_hier_%s is too long", t[i].name);
    for (int c = 0; c < HIER_COLL_COUNT; c++)
        for (int p = 0; p < HIER_PATH_COUNT; p++) {
            char name[160];
            snprintf(name, sizeof(name), "coll_hier_%s_%s_net_bytes", hier_coll_name(c), hier_path_ident(p));
            cr_assert_leq(strlen(name), 63, "%s is too long", name);
        }
}

Test(params, defaults_fill_the_struct)
{
    hier_params_t p;
    hier_params_defaults(&p);
    cr_assert_eq(p.priority, 0);
    cr_assert_eq(p.shm_chunk_size, 256 * 1024);
    cr_assert_eq(p.allreduce_flat_max, 2 * 1024);
    cr_assert_eq(p.allgather_ll_max, 0); /* measured on the node */
    cr_assert_eq(p.allreduce_algorithm, HIER_ALGO_AUTO);
    cr_assert_str_eq(p.shm_dir, "");
}

Test(params, size_parser)
{
    size_t v;
    cr_assert(hier_params_parse_size("64K", &v) == 0 && v == 65536);
    cr_assert(hier_params_parse_size("3m", &v) == 0 && v == 3u << 20);
    cr_assert(hier_params_parse_size("1G", &v) == 0 && v == 1u << 30);
    cr_assert(hier_params_parse_size("123", &v) == 0 && v == 123);
    cr_assert_eq(hier_params_parse_size("12Q", &v), -1);
    cr_assert_eq(hier_params_parse_size("", &v), -1);
    cr_assert_eq(hier_params_parse_size("K", &v), -1);
}

Test(params, docs_table_is_generated_from_the_table)
{
    const char *src = getenv("HIER_SRCDIR");
    char path[4096], *readme, *table;
    size_t len;
    if (!src) cr_skip_test("HIER_SRCDIR not set (run through make check)");
    snprintf(path, sizeof(path), "%s/docs/parameters.md", src);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    len = (size_t)ftell(f);
    rewind(f);
    readme = calloc(1, len + 1);
    cr_assert_eq(fread(readme, 1, len, f), len);
    fclose(f);
    FILE *m = open_memstream(&table, &len);
    hier_params_print_markdown(m);
    fclose(m);
    cr_assert(strstr(readme, table), "docs/parameters.md's table is stale: regenerate it with "
                                     "tests/unit/params_md and paste it");
    free(table);
    free(readme);
}

/* The digest the ranks compare: it follows what shapes schedules and
 * protocols, and ignores what may differ between ranks (logging, waiting,
 * node-local paths). */
Test(params, digest_covers_what_ranks_must_share)
{
    hier_params_t a, b;
    hier_params_defaults(&a);
    hier_params_defaults(&b);
    cr_assert_eq(hier_params_digest(&a), hier_params_digest(&b));
    b.verbose = 10, b.stats = 1, b.spin_count = 7;
    cr_assert_eq(hier_params_digest(&a), hier_params_digest(&b), "local settings do not count");
    b.net_chunk_size *= 2;
    cr_assert_neq(hier_params_digest(&a), hier_params_digest(&b), "a chunk size does");
    hier_params_defaults(&b);
    b.allreduce_algorithm = HIER_ALGO_FLAT;
    cr_assert_neq(hier_params_digest(&a), hier_params_digest(&b), "an algorithm does");
}
