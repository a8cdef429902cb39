/* mpi_calls.c: the calls of mpi_calls.h. */
#include "mpi_calls.h"

#include <stdio.h>
#include <stdlib.h>

#include "mpi_check.h"
#include "test_dev_backend.h"

static int call_device;

int call_on_device(void)
{
    if (tdev_register_with_component() != 0) return -1;
    call_device = 1;
    return 0;
}

int call_coll(int kind)
{
    return kind <= K_MAX_IN_PLACE ? 0 : kind <= K_GATHER_IN_PLACE ? 1 : kind == K_RS ? 2 : 3;
}

double call_val(int rank, int i, int salt)
{
    return (double)((rank * 7 + i * 3 + salt) % 1000) - 300.0;
}

void call_alloc(call_t *c, int kind, int n, MPI_Comm comm)
{
    *c = (call_t){.kind = kind, .n = n, .comm = comm};
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->np);
    size_t big = (size_t)(n + c->np) * (size_t)c->np + 1;
    tdev_buf_t in = tdev_buf_alloc(call_device, big * sizeof(double)), out = tdev_buf_alloc(call_device, big * sizeof(double));
    c->in = (double *)in.p, c->hin = (double *)in.h;
    c->out = (double *)out.p, c->hout = (double *)out.h;
    c->counts = malloc((size_t)c->np * sizeof(int));
    for (int r = 0; r < c->np; r++) c->counts[r] = (r % 3 == 1) ? 0 : n + r;
}

void call_fill(call_t *c, int salt)
{
    int total = 0, np = c->np;
    switch (c->kind) {
    case K_SUM:
        for (int i = 0; i < c->n; i++) c->hin[i] = call_val(c->rank, i, salt), c->hout[i] = -1;
        break;
    case K_MAX_IN_PLACE:
        for (int i = 0; i < c->n; i++) c->hout[i] = call_val(c->rank, i, salt);
        break;
    case K_GATHER:
        for (int i = 0; i < c->n; i++) c->hin[i] = call_val(c->rank, i, salt);
        for (int i = 0; i < c->n * np; i++) c->hout[i] = -1;
        break;
    case K_GATHER_IN_PLACE:
        for (int i = 0; i < c->n * np; i++) c->hout[i] = i / c->n == c->rank ? call_val(c->rank, i % c->n, salt) : -1;
        break;
    case K_RS:
        for (int r = 0; r < np; r++) total += c->counts[r];
        for (int i = 0; i < total; i++) c->hin[i] = call_val(c->rank, i, salt);
        for (int i = 0; i < c->counts[c->rank]; i++) c->hout[i] = -1;
        break;
    case K_RS_BLOCK:
        for (int i = 0; i < c->n * np; i++) c->hin[i] = call_val(c->rank, i, salt);
        for (int i = 0; i < c->n; i++) c->hout[i] = -1;
        break;
    }
}

void call_check(const call_t *c, int salt, const char *how)
{
    int bad = -1, off = 0, np = c->np;
    double want = 0;
    switch (c->kind) {
    case K_SUM:
        for (int i = 0; i < c->n && bad < 0; i++) {
            want = 0;
            for (int r = 0; r < np; r++) want += call_val(r, i, salt);
            if (c->hout[i] != want) bad = i;
        }
        break;
    case K_MAX_IN_PLACE:
        for (int i = 0; i < c->n && bad < 0; i++) {
            want = call_val(0, i, salt);
            for (int r = 1; r < np; r++) want = call_val(r, i, salt) > want ? call_val(r, i, salt) : want;
            if (c->hout[i] != want) bad = i;
        }
        break;
    case K_GATHER:
    case K_GATHER_IN_PLACE:
        for (int i = 0; i < c->n * np && bad < 0; i++)
            if (c->hout[i] != (want = call_val(i / c->n, i % c->n, salt))) bad = i;
        break;
    case K_RS:
    case K_RS_BLOCK:
        for (int r = 0; r < c->rank; r++) off += c->kind == K_RS ? c->counts[r] : c->n;
        for (int i = 0; i < (c->kind == K_RS ? c->counts[c->rank] : c->n) && bad < 0; i++) {
            want = 0;
            for (int r = 0; r < np; r++) want += call_val(r, off + i, salt);
            if (c->hout[i] != want) bad = i;
        }
        break;
    }
    CHECK(bad < 0, "kind %d, %d elements (%s, salt %d): element %d is %g, want %g", c->kind, c->n, how, salt, bad,
          bad < 0 ? 0 : c->hout[bad], want);
}

void call_free(call_t *c)
{
    tdev_buf_free(call_device, (tdev_buf_t){(char *)c->in, (char *)c->hin});
    tdev_buf_free(call_device, (tdev_buf_t){(char *)c->out, (char *)c->hout});
    free(c->counts);
}

static void call_pair_add(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < 2 * *len; i++) b[i] += a[i];
}

void call_pair_make(MPI_Datatype *pair, MPI_Op *op)
{
    MPI_Type_contiguous(2, MPI_INT, pair);
    MPI_Type_commit(pair);
    MPI_Op_create(call_pair_add, 1, op);
}

int call_pair_want(int np, int i, int s)
{
    return np * (np - 1) + np * (i + s);
}

const char *const call_hows[3] = {"Waitall", "Wait in reverse", "Testany loop"};

void call_complete(MPI_Request *reqs, int n, int how)
{
    if (how == 0) {
        MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    } else if (how == 1) {
        for (int i = n - 1; i >= 0; i--) MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
    } else {
        for (int left = n; left > 0;) {
            int idx, flag;
            MPI_Testany(n, reqs, &idx, &flag, MPI_STATUS_IGNORE);
            if (flag && idx != MPI_UNDEFINED) left--;
            if (flag && idx == MPI_UNDEFINED) break;
        }
    }
}

void call_every_other_make(int n, MPI_Datatype *vec, MPI_Datatype *resized)
{
    MPI_Type_vector(n, 1, 2, MPI_DOUBLE, vec);
    MPI_Type_create_resized(*vec, 0, (MPI_Aint)(2 * (size_t)n * sizeof(double)), resized);
    MPI_Type_commit(resized);
}

void call_every_other_check(const double *out, int n, int np, int salt, const char *how)
{
    int bad = -1;
    for (int q = 0; q < np && bad < 0; q++)
        for (int i = 0; i < n && bad < 0; i++)
            if (out[(size_t)q * 2 * n + 2 * (size_t)i] != call_val(q, i, salt) || out[(size_t)q * 2 * n + 2 * (size_t)i + 1])
                bad = q * n + i;
    CHECK(bad < 0, "strided allgather (%s): item %d wrong", how, bad);
}
