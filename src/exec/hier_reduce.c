/* hier_reduce.c: the reduction kernels, one acc/comb pair per (type, op):
 * plain loops over restrict pointers, stamped out by one macro per op
 * family and instantiated per type; gcc vectorises them (Makefile.am names
 * the vectoriser flags: -O2 alone leaves them scalar). Kernels on integer,
 * float, double and their pair types are built three times (AVX-512, AVX2,
 * baseline x86-64) and picked once at load time (target_clones). Their
 * semantics, to the bit (wrapping integers, NaN and -0.0 in MIN/MAX and
 * MINLOC/MAXLOC, complex PROD): hier_reduce.h and docs/design.md,
 * "Reduction kernels". */
#include "exec/hier_reduce.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ multiversioning */

/* The ifunc behind target_clones needs glibc; "arch=x86-64-v4" (AVX-512 F, BW,
 * DQ, VL) needs gcc >= 11.  Define HIER_REDUCE_NO_CLONES to build one version. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 11 && !defined(HIER_REDUCE_NO_CLONES)
#define HIER_REDUCE_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
#ifndef HIER_REDUCE_CLONES
#define HIER_REDUCE_CLONES
#endif
#define HIER_REDUCE_PLAIN

/* ------------------------------------------------------------ element types */

/* (pair layouts: base/hier_dtype.h) */

typedef float _Complex hier_reduce_cfloat_t;
typedef double _Complex hier_reduce_cdouble_t;
typedef long double _Complex hier_reduce_cldouble_t;

/* ------------------------------------------------------------ element ops */

/* Integers: W is an unsigned type at least as wide as int and as T. */
#define HIER_REDUCE_OP_ISUM(T, W, a, b) ((T)((W)(a) + (W)(b)))
#define HIER_REDUCE_OP_IPROD(T, W, a, b) ((T)((W)(a) * (W)(b)))
#define HIER_REDUCE_OP_MIN(T, W, a, b) ((a) < (b) ? (a) : (b))
#define HIER_REDUCE_OP_MAX(T, W, a, b) ((a) > (b) ? (a) : (b))
#define HIER_REDUCE_OP_LAND(T, W, a, b) ((T)(((a) != 0) & ((b) != 0)))
#define HIER_REDUCE_OP_LOR(T, W, a, b) ((T)(((a) != 0) | ((b) != 0)))
#define HIER_REDUCE_OP_LXOR(T, W, a, b) ((T)(((a) != 0) ^ ((b) != 0)))
#define HIER_REDUCE_OP_BAND(T, W, a, b) ((T)((a) & (b)))
#define HIER_REDUCE_OP_BOR(T, W, a, b) ((T)((a) | (b)))
#define HIER_REDUCE_OP_BXOR(T, W, a, b) ((T)((a) ^ (b)))

/* Floating and complex types: plain IEEE arithmetic. */
#define HIER_REDUCE_OP_SUM(T, W, a, b) ((a) + (b))
#define HIER_REDUCE_OP_PROD(T, W, a, b) ((a) * (b))

/* Float/double MIN/MAX; W is the unsigned integer of the same width.  Every
 * step is a select, so the loop vectorises into compare + blend. */
#define HIER_REDUCE_FMINMAX_DEFINE(T, W, sfx)                       \
    static inline T hier_reduce_fmin_##sfx(T a, T b)                \
    {                                                               \
        union { T f; W u; } x = {a}, y = {b}, z;                    \
        z.u = x.u | y.u; /* equal: only the sign may differ */      \
        T r = a < b ? a : b;                                        \
        r = a == b ? z.f : r;                                       \
        return a != a ? a : r; /* b NaN: a < b and a == b failed */ \
    }                                                               \
    static inline T hier_reduce_fmax_##sfx(T a, T b)                \
    {                                                               \
        union { T f; W u; } x = {a}, y = {b}, z;                    \
        z.u = x.u & y.u;                                            \
        T r = a > b ? a : b;                                        \
        r = a == b ? z.f : r;                                       \
        return a != a ? a : r;                                      \
    }

HIER_REDUCE_FMINMAX_DEFINE(float, uint32_t, f)
HIER_REDUCE_FMINMAX_DEFINE(double, uint64_t, d)

/* long double is x87 and scalar anyway: branch and use signbit, which only
 * looks at the bits that carry the value (not the 6 bytes of padding). */
static inline long double hier_reduce_fmin_ld(long double a, long double b)
{
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    if (a == b) return signbit(a) ? a : b;
    return a < b ? a : b;
}

static inline long double hier_reduce_fmax_ld(long double a, long double b)
{
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
}

#define HIER_REDUCE_OP_FMIN_f(T, W, a, b) hier_reduce_fmin_f(a, b)
#define HIER_REDUCE_OP_FMAX_f(T, W, a, b) hier_reduce_fmax_f(a, b)
#define HIER_REDUCE_OP_FMIN_d(T, W, a, b) hier_reduce_fmin_d(a, b)
#define HIER_REDUCE_OP_FMAX_d(T, W, a, b) hier_reduce_fmax_d(a, b)
#define HIER_REDUCE_OP_FMIN_ld(T, W, a, b) hier_reduce_fmin_ld(a, b)
#define HIER_REDUCE_OP_FMAX_ld(T, W, a, b) hier_reduce_fmax_ld(a, b)

/* MINLOC/MAXLOC: does b replace a?  Bitwise & and | keep it branch-free. */
#define HIER_REDUCE_TAKE_MINLOC(a, b) (((b).v < (a).v) | (((b).v == (a).v) & ((b).k < (a).k)))
#define HIER_REDUCE_TAKE_MAXLOC(a, b) (((b).v > (a).v) | (((b).v == (a).v) & ((b).k < (a).k)))

/* ------------------------------------------------------------ kernel makers */

/* One acc/comb pair computing EXPR(T, W, a, b) element by element. */
#define HIER_REDUCE_KERNELS(name, T, W, EXPR, ATTR)                                       \
    ATTR static void hier_reduce_acc_##name(void *restrict inout_v,                       \
                                            const void *restrict in_v, size_t count)      \
    {                                                                                     \
        T *restrict inout = inout_v;                                                      \
        const T *restrict in = in_v;                                                      \
        for (size_t i = 0; i < count; i++) inout[i] = EXPR(T, W, inout[i], in[i]);        \
    }                                                                                     \
    ATTR static void hier_reduce_comb_##name(void *restrict out_v, const void *restrict a_v, \
                                             const void *restrict b_v, size_t count)      \
    {                                                                                     \
        T *restrict out = out_v;                                                          \
        const T *restrict a = a_v;                                                        \
        const T *restrict b = b_v;                                                        \
        for (size_t i = 0; i < count; i++) out[i] = EXPR(T, W, a[i], b[i]);               \
    }

/* MINLOC or MAXLOC on a pair type; fields are selected one by one (a struct
 * select does not vectorise), so the padding of out is left untouched. */
#define HIER_REDUCE_LOC_KERNELS(name, T, TAKE, ATTR)                                      \
    ATTR static void hier_reduce_acc_##name(void *restrict inout_v,                       \
                                            const void *restrict in_v, size_t count)      \
    {                                                                                     \
        T *restrict inout = inout_v;                                                      \
        const T *restrict in = in_v;                                                      \
        for (size_t i = 0; i < count; i++) {                                              \
            T a = inout[i], b = in[i];                                                    \
            int take = TAKE(a, b);                                                        \
            inout[i].v = take ? b.v : a.v;                                                \
            inout[i].k = take ? b.k : a.k;                                                \
        }                                                                                 \
    }                                                                                     \
    ATTR static void hier_reduce_comb_##name(void *restrict out_v, const void *restrict a_v, \
                                             const void *restrict b_v, size_t count)      \
    {                                                                                     \
        T *restrict out = out_v;                                                          \
        const T *restrict pa = a_v;                                                       \
        const T *restrict pb = b_v;                                                       \
        for (size_t i = 0; i < count; i++) {                                              \
            T a = pa[i], b = pb[i];                                                       \
            int take = TAKE(a, b);                                                        \
            out[i].v = take ? b.v : a.v;                                                  \
            out[i].k = take ? b.k : a.k;                                                  \
        }                                                                                 \
    }

/* ------------------------------------------------------------ op families */

#define HIER_REDUCE_INT_FAMILY(tag, T, W)                                         \
    HIER_REDUCE_KERNELS(tag##_sum, T, W, HIER_REDUCE_OP_ISUM, HIER_REDUCE_CLONES)   \
    HIER_REDUCE_KERNELS(tag##_prod, T, W, HIER_REDUCE_OP_IPROD, HIER_REDUCE_CLONES) \
    HIER_REDUCE_KERNELS(tag##_min, T, W, HIER_REDUCE_OP_MIN, HIER_REDUCE_CLONES)    \
    HIER_REDUCE_KERNELS(tag##_max, T, W, HIER_REDUCE_OP_MAX, HIER_REDUCE_CLONES)    \
    HIER_REDUCE_KERNELS(tag##_land, T, W, HIER_REDUCE_OP_LAND, HIER_REDUCE_CLONES)  \
    HIER_REDUCE_KERNELS(tag##_lor, T, W, HIER_REDUCE_OP_LOR, HIER_REDUCE_CLONES)    \
    HIER_REDUCE_KERNELS(tag##_lxor, T, W, HIER_REDUCE_OP_LXOR, HIER_REDUCE_CLONES)  \
    HIER_REDUCE_KERNELS(tag##_band, T, W, HIER_REDUCE_OP_BAND, HIER_REDUCE_CLONES)  \
    HIER_REDUCE_KERNELS(tag##_bor, T, W, HIER_REDUCE_OP_BOR, HIER_REDUCE_CLONES)    \
    HIER_REDUCE_KERNELS(tag##_bxor, T, W, HIER_REDUCE_OP_BXOR, HIER_REDUCE_CLONES)

/* sfx names the MIN/MAX helpers; W is their punning integer. */
#define HIER_REDUCE_FLOAT_FAMILY(tag, T, W, sfx, ATTR)                         \
    HIER_REDUCE_KERNELS(tag##_sum, T, W, HIER_REDUCE_OP_SUM, ATTR)             \
    HIER_REDUCE_KERNELS(tag##_prod, T, W, HIER_REDUCE_OP_PROD, ATTR)           \
    HIER_REDUCE_KERNELS(tag##_min, T, W, HIER_REDUCE_OP_FMIN_##sfx, ATTR)      \
    HIER_REDUCE_KERNELS(tag##_max, T, W, HIER_REDUCE_OP_FMAX_##sfx, ATTR)

/* Not cloned: x86-64-v4 brings FMA, and contracting the a*c - b*d inside '*'
 * would round differently from the baseline build. */
#define HIER_REDUCE_COMPLEX_FAMILY(tag, T)                                        \
    HIER_REDUCE_KERNELS(tag##_sum, T, T, HIER_REDUCE_OP_SUM, HIER_REDUCE_PLAIN)   \
    HIER_REDUCE_KERNELS(tag##_prod, T, T, HIER_REDUCE_OP_PROD, HIER_REDUCE_PLAIN)

#define HIER_REDUCE_LOC_FAMILY(tag, T, ATTR)                                 \
    HIER_REDUCE_LOC_KERNELS(tag##_minloc, T, HIER_REDUCE_TAKE_MINLOC, ATTR)  \
    HIER_REDUCE_LOC_KERNELS(tag##_maxloc, T, HIER_REDUCE_TAKE_MAXLOC, ATTR)

HIER_REDUCE_INT_FAMILY(int8, int8_t, unsigned int)
HIER_REDUCE_INT_FAMILY(uint8, uint8_t, unsigned int)
HIER_REDUCE_INT_FAMILY(int16, int16_t, unsigned int)
HIER_REDUCE_INT_FAMILY(uint16, uint16_t, unsigned int)
HIER_REDUCE_INT_FAMILY(int32, int32_t, uint32_t)
HIER_REDUCE_INT_FAMILY(uint32, uint32_t, uint32_t)
HIER_REDUCE_INT_FAMILY(int64, int64_t, uint64_t)
HIER_REDUCE_INT_FAMILY(uint64, uint64_t, uint64_t)

HIER_REDUCE_FLOAT_FAMILY(float, float, uint32_t, f, HIER_REDUCE_CLONES)
HIER_REDUCE_FLOAT_FAMILY(double, double, uint64_t, d, HIER_REDUCE_CLONES)
HIER_REDUCE_FLOAT_FAMILY(long_double, long double, long double, ld, HIER_REDUCE_PLAIN)

HIER_REDUCE_COMPLEX_FAMILY(float_complex, hier_reduce_cfloat_t)
HIER_REDUCE_COMPLEX_FAMILY(double_complex, hier_reduce_cdouble_t)
HIER_REDUCE_COMPLEX_FAMILY(long_double_complex, hier_reduce_cldouble_t)

HIER_REDUCE_LOC_FAMILY(float_int, hier_dtype_float_int_t, HIER_REDUCE_CLONES)
HIER_REDUCE_LOC_FAMILY(double_int, hier_dtype_double_int_t, HIER_REDUCE_CLONES)
HIER_REDUCE_LOC_FAMILY(long_int, hier_dtype_long_int_t, HIER_REDUCE_CLONES)
HIER_REDUCE_LOC_FAMILY(2int, hier_dtype_2int_t, HIER_REDUCE_CLONES)
HIER_REDUCE_LOC_FAMILY(short_int, hier_dtype_short_int_t, HIER_REDUCE_CLONES)
HIER_REDUCE_LOC_FAMILY(long_double_int, hier_dtype_long_double_int_t, HIER_REDUCE_PLAIN)
HIER_REDUCE_LOC_FAMILY(2float, hier_dtype_2float_t, HIER_REDUCE_CLONES)
HIER_REDUCE_LOC_FAMILY(2double, hier_dtype_2double_t, HIER_REDUCE_CLONES)

/* ------------------------------------------------------------ dispatch table */

#define HIER_REDUCE_K(tag, op) {hier_reduce_acc_##tag##_##op, hier_reduce_comb_##tag##_##op}

#define HIER_REDUCE_INT_ROW(tag)                                                    \
    {                                                                               \
        [HIER_OP_SUM] = HIER_REDUCE_K(tag, sum), [HIER_OP_PROD] = HIER_REDUCE_K(tag, prod), \
        [HIER_OP_MIN] = HIER_REDUCE_K(tag, min), [HIER_OP_MAX] = HIER_REDUCE_K(tag, max),   \
        [HIER_OP_LAND] = HIER_REDUCE_K(tag, land), [HIER_OP_LOR] = HIER_REDUCE_K(tag, lor), \
        [HIER_OP_LXOR] = HIER_REDUCE_K(tag, lxor), [HIER_OP_BAND] = HIER_REDUCE_K(tag, band), \
        [HIER_OP_BOR] = HIER_REDUCE_K(tag, bor), [HIER_OP_BXOR] = HIER_REDUCE_K(tag, bxor), \
    }
#define HIER_REDUCE_FLOAT_ROW(tag)                                                  \
    {                                                                               \
        [HIER_OP_SUM] = HIER_REDUCE_K(tag, sum), [HIER_OP_PROD] = HIER_REDUCE_K(tag, prod), \
        [HIER_OP_MIN] = HIER_REDUCE_K(tag, min), [HIER_OP_MAX] = HIER_REDUCE_K(tag, max),   \
    }
#define HIER_REDUCE_COMPLEX_ROW(tag) \
    {[HIER_OP_SUM] = HIER_REDUCE_K(tag, sum), [HIER_OP_PROD] = HIER_REDUCE_K(tag, prod)}
#define HIER_REDUCE_LOGICAL_ROW(tag)                                                \
    {                                                                               \
        [HIER_OP_LAND] = HIER_REDUCE_K(tag, land), [HIER_OP_LOR] = HIER_REDUCE_K(tag, lor), \
        [HIER_OP_LXOR] = HIER_REDUCE_K(tag, lxor),                                  \
    }
#define HIER_REDUCE_LOC_ROW(tag) \
    {[HIER_OP_MINLOC] = HIER_REDUCE_K(tag, minloc), [HIER_OP_MAXLOC] = HIER_REDUCE_K(tag, maxloc)}

/* [dt][op]; a pair without kernels is {NULL, NULL} and is not supported. */
const hier_reduce_kernel_t hier_reduce_table[HIER_DT_COUNT][HIER_OP_COUNT] = {
    [HIER_DT_INT8] = HIER_REDUCE_INT_ROW(int8),
    [HIER_DT_UINT8] = HIER_REDUCE_INT_ROW(uint8),
    [HIER_DT_INT16] = HIER_REDUCE_INT_ROW(int16),
    [HIER_DT_UINT16] = HIER_REDUCE_INT_ROW(uint16),
    [HIER_DT_INT32] = HIER_REDUCE_INT_ROW(int32),
    [HIER_DT_UINT32] = HIER_REDUCE_INT_ROW(uint32),
    [HIER_DT_INT64] = HIER_REDUCE_INT_ROW(int64),
    [HIER_DT_UINT64] = HIER_REDUCE_INT_ROW(uint64),
    [HIER_DT_FLOAT] = HIER_REDUCE_FLOAT_ROW(float),
    [HIER_DT_DOUBLE] = HIER_REDUCE_FLOAT_ROW(double),
    [HIER_DT_LONG_DOUBLE] = HIER_REDUCE_FLOAT_ROW(long_double),
    [HIER_DT_FLOAT_COMPLEX] = HIER_REDUCE_COMPLEX_ROW(float_complex),
    [HIER_DT_DOUBLE_COMPLEX] = HIER_REDUCE_COMPLEX_ROW(double_complex),
    [HIER_DT_LONG_DOUBLE_COMPLEX] = HIER_REDUCE_COMPLEX_ROW(long_double_complex),
    /* _Bool read as bytes: non-zero is true even if a byte is neither 0 nor 1 */
    [HIER_DT_BOOL] = HIER_REDUCE_LOGICAL_ROW(uint8),
    [HIER_DT_FLOAT_INT] = HIER_REDUCE_LOC_ROW(float_int),
    [HIER_DT_DOUBLE_INT] = HIER_REDUCE_LOC_ROW(double_int),
    [HIER_DT_LONG_INT] = HIER_REDUCE_LOC_ROW(long_int),
    [HIER_DT_2INT] = HIER_REDUCE_LOC_ROW(2int),
    [HIER_DT_SHORT_INT] = HIER_REDUCE_LOC_ROW(short_int),
    [HIER_DT_LONG_DOUBLE_INT] = HIER_REDUCE_LOC_ROW(long_double_int),
    [HIER_DT_2FLOAT] = HIER_REDUCE_LOC_ROW(2float),
    [HIER_DT_2DOUBLE] = HIER_REDUCE_LOC_ROW(2double),
};

/* ------------------------------------------------------------ user operations */

/* The calling thread's user operation and its element size: per thread, so
 * threads of an MPI_THREAD_MULTIPLE program each call their own. */
static _Thread_local hier_user_op_t hier_reduce_user;
static _Thread_local size_t hier_reduce_user_esize;

void hier_reduce_user_set(const hier_user_op_t *user)
{
    hier_reduce_user = user ? *user : (hier_user_op_t){0};
}

static void hier_reduce_acc_user(void *restrict inout, const void *restrict in, size_t count)
{
    hier_reduce_user.fn(in, inout, count, hier_reduce_user.ctx);
}

/* out = b, then out = a op out: a op b (the op commutes) */
static void hier_reduce_comb_user(void *restrict out, const void *restrict a, const void *restrict b, size_t count)
{
    memcpy(out, b, count * hier_reduce_user_esize);
    hier_reduce_user.fn(a, out, count, hier_reduce_user.ctx);
}

void hier_reduce_user_swap(const hier_user_op_t *user, hier_dtype_t dt, hier_reduce_user_saved_t *saved)
{
    *saved = (hier_reduce_user_saved_t){.user = hier_reduce_user, .esize = hier_reduce_user_esize};
    hier_reduce_user = *user;
    hier_reduce_user_esize = hier_dtype_size(dt);
}

void hier_reduce_user_restore(const hier_reduce_user_saved_t *saved)
{
    hier_reduce_user = saved->user;
    hier_reduce_user_esize = saved->esize;
}

bool hier_reduce_supported(hier_dtype_t dt, hier_op_t op)
{
    /* as unsigned: an out-of-range enum from a cast may be negative */
    if ((unsigned)dt >= HIER_DT_COUNT) return false;
    if (op == HIER_OP_USER) return hier_reduce_user.fn != NULL;
    if ((unsigned)op >= HIER_OP_COUNT) return false;
    return hier_reduce_table[dt][op].acc != NULL;
}

hier_status_t hier_reduce_kernel_get_slow(hier_dtype_t dt, hier_op_t op, hier_reduce_kernel_t *kernel_p)
{
    if (!hier_reduce_supported(dt, op)) return HIER_ERR_NOT_SUPPORTED;
    if (kernel_p == NULL) return HIER_ERR_INVALID_ARG;
    if (op == HIER_OP_USER) {
        hier_reduce_user_esize = hier_dtype_size(dt);
        *kernel_p = (hier_reduce_kernel_t){hier_reduce_acc_user, hier_reduce_comb_user};
        return HIER_OK;
    }
    *kernel_p = hier_reduce_table[dt][op];
    return HIER_OK;
}
