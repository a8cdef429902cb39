/* mpi_calls.h: the calls test_nonblocking and test_persistent make and
 * check alike: every kind of served collective, its inputs from a formula
 * of (rank, element, salt), its result checked against the formula's. */
#ifndef MPI_CALLS_H
#define MPI_CALLS_H

#include <mpi.h>

enum { K_SUM, K_MAX_IN_PLACE, K_GATHER, K_GATHER_IN_PLACE, K_RS, K_RS_BLOCK, K_KINDS };

typedef struct {
    int kind, n;  /* n: elements per rank (allreduce: of the vector) */
    MPI_Comm comm;
    int rank, np; /* mine in comm, its size */
    double *in, *out;   /* what MPI is given (device memory under call_on_device) */
    double *hin, *hout; /* the same bytes as this program reads and writes them */
    int *counts;  /* reduce_scatter's: uneven, some zero */
    MPI_Request req;
} call_t;

/* From now on call_alloc's buffers are "device memory" of the test backend
 * (tests/common/test_dev_backend.h: the CPU cannot touch them), registered
 * with coll/hier here: 0, or -1 with a message. */
int call_on_device(void);
/* The kind's collective, as an index into check_colls (mpi_check.h). */
int call_coll(int kind);
/* What rank r contributes at element i. */
double call_val(int rank, int i, int salt);
/* Buffers for the kind's largest call of n on comm, and its counts. */
void call_alloc(call_t *c, int kind, int n, MPI_Comm comm);
/* The inputs for a call (salt), the outputs poisoned. */
void call_fill(call_t *c, int salt);
/* The result against the formula's (a CHECK failure where it differs). */
void call_check(const call_t *c, int salt, const char *how);
void call_free(call_t *c);
/* A user-defined commutative operation (inout[i] += in[i]) on pairs of
 * ints: the type and the operation made; the expected sum at element i
 * when rank r put r * 2 + i + s there. */
void call_pair_make(MPI_Datatype *pair, MPI_Op *op);
int call_pair_want(int np, int i, int s);
/* Completion `how` (0 MPI_Waitall, 1 MPI_Wait in reverse, 2 MPI_Testany
 * loops) of n requests; its name. */
void call_complete(MPI_Request *reqs, int n, int how);
extern const char *const call_hows[3];
/* A receive type taking every other double of n (resized to 2n doubles),
 * committed; the check of a gathered result (salt: call_val's). */
void call_every_other_make(int n, MPI_Datatype *vec, MPI_Datatype *resized);
void call_every_other_check(const double *out, int n, int np, int salt, const char *how);

#endif
