/* mpi_check.h: helpers shared by the MPI integration tests: reading coll/hier's
 * MPI_T counters and reporting failures. */
#ifndef MPI_CHECK_H
#define MPI_CHECK_H

#include <mpi.h>

#define NCOLL 4
extern const char *const check_colls[NCOLL]; /* allreduce allgather reduce_scatter reduce_scatter_block */

/* Served paths (calls hier ran itself) and the fallback reasons, as pvar idents. */
extern const char *const check_served_paths[];
extern const char *const check_fallback_paths[];

typedef struct {
    unsigned long served[NCOLL];
    unsigned long net_bytes[NCOLL]; /* put on the fabric, all served paths */
    unsigned long staged[NCOLL];    /* served calls on device buffers, staged through host memory */
    unsigned long fallback[NCOLL];
    unsigned long path_calls[NCOLL][24]; /* by index into check_served_paths */
    unsigned long reason_calls[NCOLL][20]; /* by index into check_fallback_paths */
    unsigned long exchanges; /* hier's own collective exchanges (set-up, agreements) */
} check_counters_t;

/* Open the MPI_T session; 0 if hier's pvars exist (hier loaded). */
int check_pvars_open(void);
void check_pvars_read(check_counters_t *c);
void check_pvars_close(void);

/* The nonblocking twins' counters (iallreduce, iallgather, ireduce_scatter,
 * ireduce_scatter_block), for test_nonblocking: served, and the fallback
 * reasons a nonblocking call can have, by index into check_nb_fallback_paths. */
extern const char *const check_nb_colls[NCOLL];
extern const char *const check_nb_fallback_paths[];
typedef struct {
    unsigned long served[NCOLL];
    unsigned long fallback[NCOLL];
    unsigned long reason_calls[NCOLL][12];
} check_nb_counters_t;
void check_nb_read(check_nb_counters_t *c);
/* The same for the persistent ones (pallreduce, ...: every start). */
extern const char *const check_pc_colls[NCOLL];
void check_pc_read(check_nb_counters_t *c);
int check_nb_reason_index(const char *reason);

/* 128 KiB allreduces on comm until one goes over libfabric (net_*:
 * coll_hier_fabric_warmup: calls between nodes go over Open MPI's
 * point-to-point while libfabric opens in the background); every one
 * before must be served over the point-to-point (pml_*) and right. The
 * calls over the point-to-point, or -1 (a failure is counted) after
 * max_calls or another path. */
long check_moved(MPI_Comm comm, long max_calls);

int check_coll_index(const char *coll);
int check_path_index(const char *path);   /* served path ident -> index, -1 if unknown */
int check_reason_index(const char *reason);

/* Sum the failures of every rank, print the verdict on rank 0, finalize MPI;
 * returns the exit status. */
int check_finish(const char *label);

extern long check_failures;
#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            if (check_failures++ < 20) {                          \
                int r_;                                           \
                MPI_Comm_rank(MPI_COMM_WORLD, &r_);               \
                fprintf(stderr, "[rank %d] FAIL %s:%d: ", r_, __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                     \
                fprintf(stderr, "\n");                            \
            }                                                     \
        }                                                         \
    } while (0)

#endif
