/* test_topo.c: hier_topo against hwloc synthetic topologies and this machine.
 * Every error path also checks that exactly one error line was logged and that
 * the output argument was left alone. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hier_log.h"
#include "base/hier_topo.h"

#define SYN_4NUMA "pack:2 numa:2 core:4 pu:1" /* NUMA L#k = PUs 4k..4k+3 */

/* Descriptions without NUMA name one ("[numa] ..."): when hwloc 2.9 inserts it
 * itself, its memmove trips valgrind 3.19's "overlap in memcpy_chk" (false positive). */

static int n_errors;

static void count_sink(const char *line)
{
    if (strstr(line, ":error ") != NULL) n_errors++;
}

static void setup(void)
{
    n_errors = 0;
    hier_log_set_sink(count_sink);
}

TestSuite(topo, .init = setup);

static hier_topo_t *open_syn(const char *desc)
{
    hier_topo_t *topo = NULL;
    hier_status_t st = hier_topo_open(desc, &topo);
    cr_assert_eq(st, HIER_OK, "open(\"%s\"): %s", desc, hier_status_str(st));
    cr_assert_not_null(topo);
    return topo;
}

/* --------------------------------------------------- what the logs say */

/* The line the logs carry: counts of each level and the last-level cache. */
static void expect_description(const char *syn, const char *want, int prefix_only)
{
    char buf[160];
    hier_topo_t *topo = open_syn(syn);
    cr_assert_eq(hier_topo_describe(topo, buf, sizeof(buf)), HIER_OK);
    if (prefix_only)
        cr_expect(!strncmp(buf, want, strlen(want)), "%s: \"%s\", expected \"%s...\"", syn, buf, want);
    else
        cr_expect_str_eq(buf, want, "%s", syn);
    hier_topo_close(topo);
    cr_expect_eq(n_errors, 0);
}

Test(topo, counts)
{
    expect_description(SYN_4NUMA, "packages=2 numa=4 cores=16 pus=16", 0);
    expect_description("pack:1 numa:1 core:2 pu:2", "packages=1 numa=1 cores=2 pus=4", 0);
    expect_description("numa:4 core:2 pu:1", "packages=0 numa=4 cores=8 pus=8", 0); /* no package level */
    expect_description("[numa] pack:2 l3:1 core:4 pu:1", "packages=2 numa=1 cores=8 pus=8 l3=", 1);
    expect_description("pack:2 [numa] [numa] core:2 pu:1", "packages=2 numa=4 cores=4 pus=4", 0); /* DDR + HBM */
}

Test(topo, last_level_cache)
{
    expect_description("[numa] pack:2 l3:1(size=32MiB) l2:2(size=1MiB) core:2 pu:1",
                       "packages=2 numa=1 cores=8 pus=8 l3=32MiB", 0);
    /* "MB" is decimal, "MiB" binary: 16 MB is 15625 KiB */
    expect_description("[numa] pack:2 l3:1(size=16MB) core:4 pu:1", "packages=2 numa=1 cores=8 pus=8 l3=15625KiB",
                       0);
    expect_description("[numa] pack:1 l2:2(size=1280KiB) core:1 pu:1", "packages=1 numa=1 cores=2 pus=2 l2=1280KiB",
                       0);
}

/* Synthetic levels are uniform; a hybrid machine (P + E cores) is not. Make one
 * L2 bigger, export to XML and load that as "this machine" via HWLOC_XMLFILE. */
Test(topo, cache_size_is_the_largest)
{
    char path[] = "/tmp/test_topo_XXXXXX", buf[160];
    hwloc_topology_t hw;
    hier_topo_t *topo = NULL;
    hier_status_t st;
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(hwloc_topology_init(&hw), 0);
    cr_assert_eq(hwloc_topology_set_synthetic(hw, "[numa] pack:1 l2:4(size=1MiB) core:1 pu:1"), 0);
    cr_assert_eq(hwloc_topology_load(hw), 0);
    hwloc_get_obj_by_type(hw, HWLOC_OBJ_L2CACHE, 2)->attr->cache.size = 2 << 20;
    cr_assert_eq(hwloc_topology_export_xml(hw, path, 0), 0);
    hwloc_topology_destroy(hw);

    setenv("HWLOC_XMLFILE", path, 1);
    st = hier_topo_open(NULL, &topo);
    unsetenv("HWLOC_XMLFILE");
    unlink(path);
    cr_assert_eq(st, HIER_OK);
    cr_assert_eq(hier_topo_describe(topo, buf, sizeof(buf)), HIER_OK);
    cr_expect_str_eq(buf, "packages=1 numa=1 cores=4 pus=4 l2=2MiB", "HWLOC_XMLFILE ignored?");
    hier_topo_close(topo);
}

Test(topo, describe_needs_room)
{
    static const char want[] = "packages=2 numa=4 cores=16 pus=16 l3=32MiB";
    char buf[sizeof(want)];
    hier_topo_t *topo = open_syn("pack:2 l3:1(size=32MiB) numa:2 core:4 pu:1");

    memset(buf, 'x', sizeof(buf));
    cr_expect_eq(hier_topo_describe(topo, buf, sizeof(buf) - 1), HIER_ERR_INVALID_ARG);
    cr_expect_eq(buf[0], 'x', "buffer touched on failure");
    cr_expect_eq(n_errors, 1);
    cr_assert_eq(hier_topo_describe(topo, buf, sizeof(buf)), HIER_OK);
    cr_expect_str_eq(buf, want);
    hier_topo_close(topo);
}

/* ---------------------------------------------------------- cpulist locality */

struct loc_case {
    char desc[80];
    char cpulist[24];
    int numa;
};

ParameterizedTestParameters(topo, cpulist_locality)
{
    static struct loc_case cases[] = {
        {SYN_4NUMA, "0-3", 0},
        {SYN_4NUMA, "4", 1},
        {SYN_4NUMA, "5,5,6", 1},
        {SYN_4NUMA, "8,10", 2},
        {SYN_4NUMA, "12-15", 3},
        {SYN_4NUMA, "3-4", -1},   /* two NUMA */
        {SYN_4NUMA, "7-8", -1},  /* two packages */
        {SYN_4NUMA, "0,15", -1},
        {SYN_4NUMA, "0-15", -1}, /* unbound */
        {"pack:1 numa:1 core:2 pu:2", "0-3", 0},
        {"pack:1 numa:1 core:2 pu:2", "3", 0},
        {"numa:4 core:2 pu:1", "2-3", 1}, /* no packages */
        {"numa:4 core:2 pu:1", "1-2", -1},
        /* logical, not OS, indexes: PU L#1 is P#2; as OS indexes "0-1" spans NUMA 0 and 2 */
        {"pack:2 numa:2 core:2 pu:1(indexes=0,2,4,6,1,3,5,7)", "0-1", 0},
        {"pack:2 numa:2 core:2 pu:1(indexes=0,2,4,6,1,3,5,7)", "4-5", 2},
        /* DDR + HBM nodes with the same CPUs count as one: the lower index */
        {"pack:2 [numa] [numa] core:2 pu:1", "0-1", 0},
        {"pack:2 [numa] [numa] core:2 pu:1", "3", 2},
        {"pack:2 [numa] [numa] core:2 pu:1", "1-2", -1},
    };
    return cr_make_param_array(struct loc_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct loc_case *c, topo, cpulist_locality)
{
    hier_topo_t *topo = open_syn(c->desc);
    hier_locality_t loc = {-7};
    hier_status_t st = hier_topo_cpulist_locality(topo, c->cpulist, &loc);

    cr_assert_eq(st, HIER_OK, "%s / \"%s\": %s", c->desc, c->cpulist, hier_status_str(st));
    cr_expect_eq(loc.numa, c->numa, "%s / \"%s\": numa", c->desc, c->cpulist);
    hier_topo_close(topo);
}

Test(topo, cpulist_malformed)
{
    static const char *const bad[] = {"", "a", "0-", "-1", "3-1", "0,,1", "0-3,", ",0", "16",
                                      "0-16", "0x3", " 1", "1 ", "1;2", "99999999999999999999"};
    hier_topo_t *topo = open_syn(SYN_4NUMA);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hier_locality_t loc = {-7};
        n_errors = 0;
        cr_expect_eq(hier_topo_cpulist_locality(topo, bad[i], &loc), HIER_ERR_INVALID_ARG,
                     "\"%s\" accepted", bad[i]);
        cr_expect(loc.numa == -7, "\"%s\": output touched", bad[i]);
        cr_expect_eq(n_errors, 1, "\"%s\": %d error lines", bad[i], n_errors);
    }
    cr_expect_eq(hier_topo_cpulist_locality(topo, NULL, &(hier_locality_t){0}),
                 HIER_ERR_INVALID_ARG);
    cr_expect_eq(hier_topo_cpulist_locality(topo, "0", NULL), HIER_ERR_INVALID_ARG);
    hier_topo_close(topo);
}

Test(topo, self_locality_synthetic_unsupported)
{
    hier_topo_t *topo = open_syn(SYN_4NUMA);
    hier_locality_t loc = {-7};

    cr_expect_eq(hier_topo_self_locality(topo, &loc), HIER_ERR_NOT_SUPPORTED);
    cr_expect_eq(loc.numa, -7);
    cr_expect_eq(n_errors, 1);
    hier_topo_close(topo);
}

/* ------------------------------------------------------------ this machine */

Test(topo, real_machine)
{
    hier_topo_t *topo = NULL;
    hier_locality_t loc = {-7};
    char buf[128];
    int numa = -1;

    cr_assert_eq(hier_topo_open(NULL, &topo), HIER_OK);
    cr_expect_eq(hier_topo_describe(topo, buf, sizeof(buf)), HIER_OK);
    cr_log_info("this machine: %s", buf);
    cr_assert_eq(sscanf(buf, "packages=%*d numa=%d", &numa), 1, "%s", buf);
    cr_expect_geq(numa, 1);

    cr_assert_eq(hier_topo_self_locality(topo, &loc), HIER_OK);
    cr_expect(loc.numa >= -1 && loc.numa < numa, "numa %d", loc.numa);
    if (numa == 1) cr_expect_eq(loc.numa, 0, "one NUMA node: must be it");
    hier_topo_close(topo);
    cr_expect_eq(n_errors, 0);
}

/* Bind the whole process to its first PU, check, then restore the binding. */
Test(topo, real_machine_bound)
{
    hwloc_topology_t hw;
    hwloc_bitmap_t saved = hwloc_bitmap_alloc();
    hier_topo_t *topo = NULL;
    hier_locality_t loc = {-7};
    int rc;

    cr_assert_eq(hwloc_topology_init(&hw), 0);
    cr_assert_eq(hwloc_topology_load(hw), 0);
    cr_assert_eq(hwloc_get_cpubind(hw, saved, HWLOC_CPUBIND_PROCESS), 0);
    rc = hwloc_set_cpubind(hw, hwloc_get_obj_by_type(hw, HWLOC_OBJ_PU, 0)->cpuset,
                           HWLOC_CPUBIND_PROCESS);
    if (rc == 0) {
        cr_assert_eq(hier_topo_open(NULL, &topo), HIER_OK);
        cr_expect_eq(hier_topo_self_locality(topo, &loc), HIER_OK);
        cr_expect_eq(loc.numa, 0, "bound to PU L#0, which lies in NUMA L#0");
        hier_topo_close(topo);
        hwloc_set_cpubind(hw, saved, HWLOC_CPUBIND_PROCESS);
    } else {
        cr_log_warn("cannot bind here (%s): bound case not checked", strerror(errno));
    }
    hwloc_bitmap_free(saved);
    hwloc_topology_destroy(hw);
}

/* ------------------------------------------------------------- open errors */

Test(topo, open_bad_synthetic)
{
    static const char *const bad[] = {"garbage", "", "pack:2 core:4", "pack:0 pu:1",
                                      "pack:2 core:4 pu:1 numa:1", SYN_4NUMA " junk"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hier_topo_t *topo = (hier_topo_t *)&n_errors; /* sentinel */
        n_errors = 0;
        cr_expect_eq(hier_topo_open(bad[i], &topo), HIER_ERR_INVALID_ARG, "\"%s\" accepted", bad[i]);
        cr_expect_eq(topo, (hier_topo_t *)&n_errors, "\"%s\": output touched", bad[i]);
        cr_expect_eq(n_errors, 1, "\"%s\": %d error lines", bad[i], n_errors);
    }
    cr_expect_eq(hier_topo_open(SYN_4NUMA, NULL), HIER_ERR_INVALID_ARG);
    hier_topo_close(NULL);
}

/* ----------------------------------------------------------- groups_by_numa */

/* groups have no size limit: the tests go well past the 256 ranks of a large node */
#define TEST_RANKS 4096
static hier_locality_t locs_buf[TEST_RANKS + 1];

static const hier_locality_t *locs_of(const int *numa, int n)
{
    for (int r = 0; r < n; r++) locs_buf[r] = (hier_locality_t){numa[r]};
    return locs_buf;
}

/* Every promise of hier_topo_groups_t, for any input. */
static void check_groups(const hier_locality_t *locs, int n, const hier_topo_groups_t *g)
{
    int flat = 0;
    static int seen[TEST_RANKS];

    memset(seen, 0, sizeof(seen));

    for (int r = 0; r < n; r++) flat |= locs[r].numa == -1;
    cr_assert(g->ngroups >= 1 && g->ngroups <= n);
    cr_assert(!flat || g->ngroups == 1, "an unknown rank must give one flat group");
    cr_assert_eq(g->first[0], 0);
    cr_assert_eq(g->first[g->ngroups], n);
    for (int k = 0; k < g->ngroups; k++) {
        cr_assert_lt(g->first[k], g->first[k + 1], "group %d empty", k);
        cr_assert_eq(g->leader[k], g->members[g->first[k]], "leader of %d is not its lowest", k);
        cr_assert(k == 0 || g->leader[k - 1] < g->leader[k], "groups not ordered by leader");
        for (int i = (int)g->first[k]; i < (int)g->first[k + 1]; i++) {
            int r = (int)g->members[i];
            cr_assert(r >= 0 && r < n && !seen[r], "rank %d missing or twice", r);
            seen[r] = 1;
            cr_assert_eq((int)g->group_of[r], k);
            cr_assert(i == (int)g->first[k] || (int)g->members[i - 1] < r, "group %d not sorted", k);
            cr_assert(flat || locs[r].numa == locs[g->leader[k]].numa, "mixed NUMA in %d", k);
        }
        for (int j = 0; !flat && j < k; j++)
            cr_assert_neq(locs[g->leader[j]].numa, locs[g->leader[k]].numa, "NUMA split");
    }
}

static void expect_groups(const int *numa, int n, int ngroups, const int *members, const int *first)
{
    hier_topo_groups_t g;
    const hier_locality_t *locs = locs_of(numa, n);

    cr_assert_eq(hier_topo_groups_by_numa(locs, n, &g), HIER_OK);
    check_groups(locs, n, &g);
    cr_assert_eq(g.ngroups, ngroups);
    cr_expect_arr_eq(g.members, members, (size_t)n * sizeof(int));
    cr_expect_arr_eq(g.first, first, (size_t)(ngroups + 1) * sizeof(int));
    hier_topo_groups_free(&g);
    cr_expect_null(g.members);
}

Test(topo, groups_blocked)
{
    expect_groups((int[]){0, 0, 0, 0, 1, 1, 1, 1}, 8, 2, (int[]){0, 1, 2, 3, 4, 5, 6, 7},
                  (int[]){0, 4, 8});
}

Test(topo, groups_round_robin)
{
    expect_groups((int[]){0, 1, 0, 1, 0, 1, 0, 1}, 8, 2, (int[]){0, 2, 4, 6, 1, 3, 5, 7},
                  (int[]){0, 4, 8});
}

Test(topo, groups_ordered_by_leader_not_numa)
{
    expect_groups((int[]){3, 1, 3, 0, 1}, 5, 3, (int[]){0, 2, 1, 4, 3}, (int[]){0, 2, 4, 5});
}

Test(topo, groups_unknown_is_flat)
{
    expect_groups((int[]){0, 1, -1, 1}, 4, 1, (int[]){0, 1, 2, 3}, (int[]){0, 4});
    expect_groups((int[]){-1, -1}, 2, 1, (int[]){0, 1}, (int[]){0, 2});
}

Test(topo, groups_one_rank)
{
    expect_groups((int[]){5}, 1, 1, (int[]){0}, (int[]){0, 1});
}

Test(topo, groups_of_thousands_of_ranks)
{
    static int numa[TEST_RANKS], members[TEST_RANKS];
    int q = TEST_RANKS / 4;

    for (int r = 0; r < TEST_RANKS; r++) numa[r] = r % 4;
    for (int i = 0; i < TEST_RANKS; i++) members[i] = (i / q) + 4 * (i % q);
    expect_groups(numa, TEST_RANKS, 4, members, (int[]){0, q, 2 * q, 3 * q, TEST_RANKS});
}

/* Pseudo-random sweep, fixed seed: sizes 1..300, 1..9 NUMA indexes, some unknowns. */
Test(topo, groups_sweep)
{
    unsigned seed = 12345;
    hier_topo_groups_t g;

    for (int iter = 0; iter < 300; iter++) {
        int n = 1 + iter, spread = 1 + iter % 9;
        for (int r = 0; r < n; r++) {
            seed = seed * 1103515245u + 12345u;
            locs_buf[r] = (hier_locality_t){(int)((seed >> 16) % (unsigned)spread)};
            if (iter % 50 == 49 && r == n / 2) locs_buf[r].numa = -1;
        }
        cr_assert_eq(hier_topo_groups_by_numa(locs_buf, n, &g), HIER_OK);
        check_groups(locs_buf, n, &g);
        hier_topo_groups_free(&g);
    }
}

Test(topo, groups_bad_arguments)
{
    hier_topo_groups_t g, before;

    memset(locs_buf, 0, sizeof(locs_buf));
    memset(&g, 0xab, sizeof(g));
    before = g;
    cr_expect_eq(hier_topo_groups_by_numa(locs_buf, 0, &g), HIER_ERR_INVALID_ARG);
    cr_expect_eq(hier_topo_groups_by_numa(locs_buf, -1, &g), HIER_ERR_INVALID_ARG);
    cr_expect_eq(hier_topo_groups_by_numa(NULL, 1, &g), HIER_ERR_INVALID_ARG);
    cr_expect_eq(hier_topo_groups_by_numa(locs_buf, 1, NULL), HIER_ERR_INVALID_ARG);
    locs_buf[1].numa = -2;
    cr_expect_eq(hier_topo_groups_by_numa(locs_buf, 2, &g), HIER_ERR_INVALID_ARG);
    cr_expect_arr_eq(&g, &before, sizeof(g), "output touched on failure");
    cr_expect_eq(n_errors, 5);
}

/* ------------------------------------------------------------ NIC locality */

/* A 2-socket node with 4 NICs, 2 on each socket (the p4d / dl1 shape), as an
 * exported XML topology: synthetic descriptions carry no PCI devices, so
 * they are written into the XML, under each package. */
static void write_four_nic_node(const char *path)
{
    hwloc_topology_t t;
    char *xml;
    int len;
    cr_assert_eq(hwloc_topology_init(&t), 0);
    cr_assert_eq(hwloc_topology_set_synthetic(t, "pack:2 numa:1 core:2 pu:1"), 0);
    cr_assert_eq(hwloc_topology_load(t), 0);
    cr_assert_eq(hwloc_topology_export_xmlbuffer(t, &xml, &len, 0), 0);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    const char *at = xml;
    for (int pack = 0; pack < 2; pack++) {
        const char *open = strstr(at, "<object type=\"Package\"");
        cr_assert(open, "no package %d in hwloc's XML", pack);
        const char *end = strchr(open, '>') + 1;
        fwrite(at, 1, (size_t)(end - at), f);
        for (int k = 0; k < 2; k++)
            fprintf(f, "<object type=\"PCIDev\" gp_index=\"%d\" pci_busid=\"0000:%02x:00.0\" "
                       "pci_type=\"0200 [1d0f:efa1] [1d0f:0000] 00\" pci_link_speed=\"0.000000\"/>\n",
                    1000 + 2 * pack + k, 0x10 * (1 + 2 * pack + k));
        at = end;
    }
    fputs(at, f);
    fclose(f);
    hwloc_free_xmlbuffer(t, xml);
    hwloc_topology_destroy(t);
}

Test(topo, nics_are_placed_by_their_pci_bus_ids, .init = setup)
{
    char path[] = "/tmp/hier-topo-XXXXXX.xml";
    int fd = mkstemps(path, 4);
    cr_assert(fd >= 0);
    close(fd);
    write_four_nic_node(path);
    hier_topo_t *topo;
    hier_locality_t loc = {.numa = 7};
    cr_assert_eq(hier_topo_open(path, &topo), HIER_OK);
    static const char *const busid[] = {"0000:10:00.0", "0000:20:00.0", "0000:30:00.0", "0000:40:00.0"};
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(hier_topo_pci_locality(topo, busid[k], &loc), HIER_OK, "%s", busid[k]);
        cr_expect_eq(loc.numa, k / 2, "NIC %s: NUMA %d, expected %d", busid[k], loc.numa, k / 2);
    }
    loc.numa = 7;
    cr_expect_eq(hier_topo_pci_locality(topo, "0000:99:00.0", &loc), HIER_ERR_NOT_SUPPORTED);
    cr_expect_eq(loc.numa, 7, "output touched");
    hier_topo_close(topo);
    unlink(path);
    cr_expect_eq(n_errors, 0);
}

Test(topo, virtual_interfaces_have_no_bus_id)
{
    char busid[16];
    cr_expect_eq(hier_topo_netdev_busid("lo", busid, sizeof(busid)), HIER_ERR_NOT_SUPPORTED);
    cr_expect_eq(hier_topo_netdev_busid("no-such-interface", busid, sizeof(busid)), HIER_ERR_NOT_SUPPORTED);
    cr_expect_eq(hier_topo_netdev_busid("../etc", busid, sizeof(busid)), HIER_ERR_INVALID_ARG);
}

/* ------------------------------------------------ cheaper loads, lent topologies */

/* The first PCI device hwloc lists on this machine, if any. */
static int first_pci_busid(char *busid, size_t len)
{
    hwloc_topology_t t;
    int found = 0;
    cr_assert_eq(hwloc_topology_init(&t), 0);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    cr_assert_eq(hwloc_topology_load(t), 0);
    hwloc_obj_t dev = hwloc_get_next_pcidev(t, NULL);
    if (dev) {
        snprintf(busid, len, "%04x:%02x:%02x.%01x", dev->attr->pcidev.domain, dev->attr->pcidev.bus,
                 dev->attr->pcidev.dev, dev->attr->pcidev.func);
        found = 1;
    }
    hwloc_topology_destroy(t);
    return found;
}

/* Without PCI devices at open, the first PCI query loads them: the same
 * answer as a topology opened with them. */
Test(topo, cpus_only_loads_pci_devices_when_asked)
{
    char busid[16];
    hier_topo_t *full, *cpus;
    hier_locality_t a = {.numa = 7}, b = {.numa = 9};
    if (!first_pci_busid(busid, sizeof(busid))) cr_skip_test("SKIP: hwloc lists no PCI device on this machine");
    cr_assert_eq(hier_topo_open(NULL, &full), HIER_OK);
    cr_assert_eq(hier_topo_open_cpus(&cpus), HIER_OK);
    hier_status_t sa = hier_topo_pci_locality(full, busid, &a), sb = hier_topo_pci_locality(cpus, busid, &b);
    cr_expect_eq(sa, sb, "%s: %d with PCI devices loaded at open, %d loaded when asked", busid, sa, sb);
    if (sa == HIER_OK) cr_expect_eq(a.numa, b.numa, "%s: NUMA %d against %d", busid, a.numa, b.numa);
    cr_expect_eq(hier_topo_pci_locality(cpus, "0000:ff:1f.7", &b), HIER_ERR_NOT_SUPPORTED);
    hier_topo_close(full);
    hier_topo_close(cpus);
    cr_expect_eq(n_errors, 0);
}

/* A topology another library loaded: used as it is, left to its owner. */
Test(topo, adopted_topology_is_used_and_left_alone)
{
    hwloc_topology_t t;
    hier_topo_t *topo = NULL;
    hier_locality_t loc = {.numa = -7};
    cr_expect(hier_topo_library() == (hier_topo_load_fn_t)hwloc_topology_load, "not the hwloc linked here");
    cr_assert_eq(hwloc_topology_init(&t), 0);
    cr_assert_eq(hwloc_topology_load(t), 0);
    cr_assert_eq(hier_topo_adopt(t, &topo), HIER_OK);
    cr_expect_eq(hier_topo_self_locality(topo, &loc), HIER_OK);
    cr_expect_geq(loc.numa, -1);
    hier_topo_close(topo);
    /* still the owner's: usable after close (valgrind and ASan see a use after free otherwise) */
    cr_expect_gt(hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU), 0);
    hwloc_topology_destroy(t);
    cr_expect_eq(n_errors, 0);
}

Test(topo, adopt_refuses_what_is_not_this_machine)
{
    hwloc_topology_t t;
    hier_topo_t *topo = (hier_topo_t *)&topo;
    cr_expect_eq(hier_topo_adopt(NULL, &topo), HIER_ERR_NOT_SUPPORTED);
    cr_assert_eq(hwloc_topology_init(&t), 0);
    cr_assert_eq(hwloc_topology_set_synthetic(t, SYN_4NUMA), 0);
    cr_assert_eq(hwloc_topology_load(t), 0);
    cr_expect_eq(hier_topo_adopt(t, &topo), HIER_ERR_NOT_SUPPORTED);
    cr_expect(topo == (hier_topo_t *)&topo, "output touched");
    hwloc_topology_destroy(t);
}

/* The kernel's count of NUMA domains is hwloc's (the one-domain shortcut
 * of the first call rests on it). */
Test(topo, machine_numa_count_is_hwlocs)
{
    hier_topo_t *topo;
    char buf[128];
    int numa = -1;
    cr_assert_eq(hier_topo_open(NULL, &topo), HIER_OK);
    cr_assert_eq(hier_topo_describe(topo, buf, sizeof(buf)), HIER_OK);
    cr_assert_eq(sscanf(buf, "packages=%*d numa=%d", &numa), 1, "%s", buf);
    int sysfs = hier_topo_machine_numa_count();
    if (sysfs == 0) cr_skip_test("SKIP: the kernel lists no NUMA node (no NUMA support)");
    cr_expect_eq(sysfs, numa, "sysfs lists %d NUMA nodes, hwloc %d", sysfs, numa);
    hier_topo_close(topo);
}
