/* hier_reduce.h: reduction kernels, one pair per (type, op).
 *
 * Semantics, the same for every kernel:
 *  - integers wrap on overflow (two's complement), never saturate;
 *  - MIN/MAX on floating types propagate NaN (if either operand is NaN the
 *    result is NaN) and order -0.0 below +0.0, so the result does not depend
 *    on operand order;
 *  - LAND/LOR/LXOR treat non-zero as true and store 1 or 0;
 *  - MINLOC/MAXLOC follow MPI: the better value wins, on a tie the smaller index.
 * "a op b" always keeps a as the earlier (lower-rank) operand. */
#ifndef HIER_REDUCE_H
#define HIER_REDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/hier_dtype.h"
#include "base/hier_status.h"

/* inout[i] = inout[i] op in[i] */
typedef void (*hier_reduce_acc_fn_t)(void *restrict inout, const void *restrict in, size_t count);
/* out[i] = a[i] op b[i]; out aliases neither a nor b */
typedef void (*hier_reduce_comb_fn_t)(void *restrict out, const void *restrict a,
                                      const void *restrict b, size_t count);

typedef struct {
    hier_reduce_acc_fn_t acc;
    hier_reduce_comb_fn_t comb;
} hier_reduce_kernel_t;

/* Whether the core can reduce this (type, op) pair (HIER_OP_USER: with any
 * type, once the calling thread has installed a user operation). */
bool hier_reduce_supported(hier_dtype_t dt, hier_op_t op);

/* Kernels for (dt, op); HIER_ERR_NOT_SUPPORTED when the pair has none. With
 * HIER_OP_USER they call the calling thread's user operation on elements of
 * dt's size (kernels run in the thread that makes the call, or, for a
 * request, the thread that advances it: hier_reduce_user_swap). */
hier_status_t hier_reduce_kernel_get_slow(hier_dtype_t dt, hier_op_t op, hier_reduce_kernel_t *kernel_p);
/* (a predefined pair, looked up inline: every reduction call asks) */
extern const hier_reduce_kernel_t hier_reduce_table[HIER_DT_COUNT][HIER_OP_COUNT];
static inline hier_status_t hier_reduce_kernel_get(hier_dtype_t dt, hier_op_t op, hier_reduce_kernel_t *kernel_p)
{
    if ((unsigned)dt < HIER_DT_COUNT && (unsigned)op < HIER_OP_COUNT && hier_reduce_table[dt][op].acc && kernel_p) {
        *kernel_p = hier_reduce_table[dt][op];
        return HIER_OK;
    }
    return hier_reduce_kernel_get_slow(dt, op, kernel_p);
}

/* Install the calling thread's user operation (hier_dtype.h) for its next
 * HIER_OP_USER calls; NULL removes it. */
void hier_reduce_user_set(const hier_user_op_t *user);
/* A request's reductions run in whichever thread advances it: its user
 * operation (on elements of dt) installed there for the time, then the
 * thread's own put back. */
typedef struct {
    hier_user_op_t user;
    size_t esize;
} hier_reduce_user_saved_t;
void hier_reduce_user_swap(const hier_user_op_t *user, hier_dtype_t dt, hier_reduce_user_saved_t *saved);
void hier_reduce_user_restore(const hier_reduce_user_saved_t *saved);

#endif
