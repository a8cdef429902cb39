#include "mpi_check.h"

#include <stdio.h>
#include <string.h>

long check_failures;

const char *const check_colls[NCOLL] = {"allreduce", "allgather", "reduce_scatter", "reduce_scatter_block"};
const char *const check_nb_colls[NCOLL] = {"iallreduce", "iallgather", "ireduce_scatter", "ireduce_scatter_block"};
const char *const check_pc_colls[NCOLL] = {"pallreduce", "pallgather", "preduce_scatter", "preduce_scatter_block"};
const char *const check_nb_fallback_paths[] = {"fallback_op", "fallback_datatype", "fallback_intercomm",
                                               "fallback_shm", "fallback_forced", "fallback_device",
                                               "fallback_mismatch", "fallback_nonblocking", NULL};
const char *const check_served_paths[] = {"self", "shm_ll", "shm_flat", "shm_numa", "shm_rsag", "shm_copy", "shm_rs",
                                          "cma_copy", "net_ring", "net_rd", "net_rh",
                                          "net_copy", "net_rs", "pml_ring", "pml_rd", "pml_rh", "pml_copy",
                                          "pml_rs", "net_direct", "setup", NULL};
const char *const check_fallback_paths[] = {"fallback_op", "fallback_datatype",
                                            "fallback_intercomm", "fallback_shm", "fallback_ranks",
                                            "fallback_forced", "fallback_device",
                                            "fallback_params", "fallback_mismatch", NULL};

static MPI_T_pvar_session check_session;
static int check_open;

static int check_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

int check_coll_index(const char *coll)
{
    for (int i = 0; i < NCOLL; i++)
        if (!strcmp(check_colls[i], coll)) return i;
    return -1;
}

int check_path_index(const char *path) { return check_index(check_served_paths, path); }
int check_reason_index(const char *reason) { return check_index(check_fallback_paths, reason); }

int check_pvars_open(void)
{
    int provided, num;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_session_create(&check_session);
    MPI_T_pvar_get_num(&num);
    check_open = 1;
    for (int i = 0; i < num; i++) {
        char name[256], desc[256];
        int nl = sizeof(name), dl = sizeof(desc), verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_pvar_get_info(i, name, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont, &atomic);
        if (!strncmp(name, "coll_hier_", 10)) {
            check_counters_t c;
            check_pvars_read(&c); /* allocates every handle: counting starts now */
            return 0;
        }
    }
    return -1;
}

/* MPI_T counters count from the moment their handle exists, so every
 * handle is allocated once, at open, and kept: reads are totals since then. */
#define CHECK_MAX_HANDLES 512
static struct {
    char name[128];
    MPI_T_pvar_handle h;
} check_handles[CHECK_MAX_HANDLES];
static int check_nhandles;

/* Read one counter by its pvar name; 0 when it does not exist. */
static unsigned long check_read(const char *name)
{
    int idx, count;
    unsigned long long v = 0;
    for (int i = 0; i < check_nhandles; i++)
        if (!strcmp(check_handles[i].name, name)) {
            MPI_T_pvar_read(check_session, check_handles[i].h, &v);
            return v;
        }
    if (check_nhandles == CHECK_MAX_HANDLES) return 0;
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx) != MPI_SUCCESS) return 0;
    snprintf(check_handles[check_nhandles].name, sizeof(check_handles[0].name), "%s", name);
    MPI_T_pvar_handle_alloc(check_session, idx, NULL, &check_handles[check_nhandles].h, &count);
    check_nhandles++;
    return 0;
}

void check_pvars_read(check_counters_t *c)
{
    char name[256];
    memset(c, 0, sizeof(*c));
    for (int k = 0; k < NCOLL; k++) {
        for (int p = 0; check_served_paths[p]; p++) {
            snprintf(name, sizeof(name), "coll_hier_%s_%s_calls", check_colls[k], check_served_paths[p]);
            c->path_calls[k][p] = check_read(name);
            c->served[k] += c->path_calls[k][p];
            snprintf(name, sizeof(name), "coll_hier_%s_%s_net_bytes", check_colls[k], check_served_paths[p]);
            c->net_bytes[k] += check_read(name);
            snprintf(name, sizeof(name), "coll_hier_%s_%s_staged", check_colls[k], check_served_paths[p]);
            c->staged[k] += check_read(name);
        }
        for (int p = 0; check_fallback_paths[p]; p++) {
            snprintf(name, sizeof(name), "coll_hier_%s_%s_calls", check_colls[k], check_fallback_paths[p]);
            c->reason_calls[k][p] = check_read(name);
            c->fallback[k] += c->reason_calls[k][p];
        }
    }
    c->exchanges = check_read("coll_hier_exchanges");
}

static void check_nb_read_colls(const char *const colls[NCOLL], check_nb_counters_t *c)
{
    char name[256];
    memset(c, 0, sizeof(*c));
    for (int k = 0; k < NCOLL; k++) {
        for (int p = 0; check_served_paths[p]; p++) {
            snprintf(name, sizeof(name), "coll_hier_%s_%s_calls", colls[k], check_served_paths[p]);
            c->served[k] += check_read(name);
        }
        for (int p = 0; check_nb_fallback_paths[p]; p++) {
            snprintf(name, sizeof(name), "coll_hier_%s_%s_calls", colls[k], check_nb_fallback_paths[p]);
            c->reason_calls[k][p] = check_read(name);
            c->fallback[k] += c->reason_calls[k][p];
        }
    }
}

void check_nb_read(check_nb_counters_t *c) { check_nb_read_colls(check_nb_colls, c); }
void check_pc_read(check_nb_counters_t *c) { check_nb_read_colls(check_pc_colls, c); }

int check_nb_reason_index(const char *reason) { return check_index(check_nb_fallback_paths, reason); }

/* Whether the counters grew by one call of `coll` via a path whose name starts with `prefix`. */
static int check_one_via(const check_counters_t *a, const check_counters_t *b, int coll, const char *prefix)
{
    unsigned long via = 0, all = 0;
    for (int p = 0; check_served_paths[p]; p++) {
        unsigned long d = b->path_calls[coll][p] - a->path_calls[coll][p];
        all += d;
        if (!strncmp(check_served_paths[p], prefix, strlen(prefix))) via += d;
    }
    return via == 1 && all == 1 && b->fallback[coll] == a->fallback[coll];
}

long check_moved(MPI_Comm comm, long max_calls)
{
    enum { INTS = 1 << 15 }; /* 128 KiB: large enough to start the opening (coll_hier_fabric_open_min 64K) */
    int n;
    check_counters_t a, b;
    static int in[INTS], out[INTS];
    MPI_Comm_size(comm, &n);
    for (int k = 0; k < INTS; k++) in[k] = 1;
    for (long i = 0; i < max_calls; i++) {
        check_pvars_read(&a);
        MPI_Allreduce(in, out, INTS, MPI_INT, MPI_SUM, comm);
        check_pvars_read(&b);
        CHECK(out[0] == n && out[INTS - 1] == n, "allreduce %ld before libfabric gave %d, want %d", i, out[0], n);
        if (check_one_via(&a, &b, 0, "net_")) return i;
        /* (the same verdict on every rank: agreed) */
        if (!check_one_via(&a, &b, 0, "pml_")) {
            CHECK(0, "allreduce %ld: served neither over libfabric nor over Open MPI's point-to-point", i);
            return -1;
        }
    }
    CHECK(0, "still over Open MPI's point-to-point after %ld calls", max_calls);
    return -1;
}

void check_pvars_close(void)
{
    if (!check_open) return;
    for (int i = 0; i < check_nhandles; i++) MPI_T_pvar_handle_free(check_session, &check_handles[i].h);
    check_nhandles = 0;
    MPI_T_pvar_session_free(&check_session);
    MPI_T_finalize();
    check_open = 0;
}

int check_finish(const char *label)
{
    long total = 0;
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Reduce(&check_failures, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%s np=%d: %s (%ld failures)\n", label, n, total ? "FAIL" : "ok", total);
    MPI_Bcast(&total, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return total ? 1 : 0;
}
