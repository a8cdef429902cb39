/* test_reduce.c: every (type, op) kernel against a plain scalar reference.
 *
 * The reference below shares nothing with src/exec/hier_reduce.c: integers are
 * widened to 64 bits and truncated back, MIN/MAX and MINLOC/MAXLOC are written
 * as branches, complex PROD is the textbook formula.  Floating results are
 * compared bit for bit; two NaNs compare equal whatever their payloads. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_dtype.h"
#include "exec/hier_reduce.h"

/* Names for failure messages. */
static const char *const dtype_names[HIER_DT_COUNT] = {
    [HIER_DT_INT8] = "int8",
    [HIER_DT_UINT8] = "uint8",
    [HIER_DT_INT16] = "int16",
    [HIER_DT_UINT16] = "uint16",
    [HIER_DT_INT32] = "int32",
    [HIER_DT_UINT32] = "uint32",
    [HIER_DT_INT64] = "int64",
    [HIER_DT_UINT64] = "uint64",
    [HIER_DT_FLOAT] = "float",
    [HIER_DT_DOUBLE] = "double",
    [HIER_DT_LONG_DOUBLE] = "long_double",
    [HIER_DT_FLOAT_COMPLEX] = "float_complex",
    [HIER_DT_DOUBLE_COMPLEX] = "double_complex",
    [HIER_DT_LONG_DOUBLE_COMPLEX] = "long_double_complex",
    [HIER_DT_BOOL] = "bool",
    [HIER_DT_FLOAT_INT] = "float_int",
    [HIER_DT_DOUBLE_INT] = "double_int",
    [HIER_DT_LONG_INT] = "long_int",
    [HIER_DT_2INT] = "2int",
    [HIER_DT_SHORT_INT] = "short_int",
    [HIER_DT_LONG_DOUBLE_INT] = "long_double_int",
    [HIER_DT_2FLOAT] = "2float",
    [HIER_DT_2DOUBLE] = "2double",
};

static const char *const op_names[HIER_OP_COUNT] = {
    [HIER_OP_SUM] = "sum",
    [HIER_OP_PROD] = "prod",
    [HIER_OP_MIN] = "min",
    [HIER_OP_MAX] = "max",
    [HIER_OP_LAND] = "land",
    [HIER_OP_LOR] = "lor",
    [HIER_OP_LXOR] = "lxor",
    [HIER_OP_BAND] = "band",
    [HIER_OP_BOR] = "bor",
    [HIER_OP_BXOR] = "bxor",
    [HIER_OP_MINLOC] = "minloc",
    [HIER_OP_MAXLOC] = "maxloc",
};

static const char *dtype_name(hier_dtype_t dt)
{
    return (unsigned)dt < HIER_DT_COUNT ? dtype_names[dt] : "unknown";
}

static const char *op_name(hier_op_t op)
{
    return (unsigned)op < HIER_OP_COUNT ? op_names[op] : "unknown";
}


_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "integer loads assume little endian");

/* ------------------------------------------------------------ type descriptions */

typedef struct { float v; int k; } t_float_int;
typedef struct { double v; int k; } t_double_int;
typedef struct { long v; int k; } t_long_int;
typedef struct { int v; int k; } t_2int;
typedef struct { short v; int k; } t_short_int;
typedef struct { long double v; int k; } t_long_double_int;
typedef struct { float v; float k; } t_2float;
typedef struct { double v; double k; } t_2double;

typedef enum { K_SINT, K_UINT, K_BOOL, K_REAL, K_CPLX, K_PAIR } kind_t;
typedef enum { S_INT, S_UINT, S_FLT, S_DBL, S_LDBL } skind_t;

typedef struct {
    skind_t kind;
    size_t size;
} scal_t;

typedef struct {
    kind_t kind;
    size_t size; /* element stride */
    scal_t v;    /* the value, or each part of a complex */
    scal_t k;    /* pairs: the index */
    size_t koff; /* pairs: offset of the index */
} tdesc_t;

#define SC(kind, T) {kind, sizeof(T)}
#define PAIR(ST, VK, VT, KK, KT) {K_PAIR, sizeof(ST), SC(VK, VT), SC(KK, KT), offsetof(ST, k)}

static const tdesc_t tdesc[HIER_DT_COUNT] = {
    [HIER_DT_INT8] = {K_SINT, 1, SC(S_INT, int8_t)},
    [HIER_DT_UINT8] = {K_UINT, 1, SC(S_UINT, uint8_t)},
    [HIER_DT_INT16] = {K_SINT, 2, SC(S_INT, int16_t)},
    [HIER_DT_UINT16] = {K_UINT, 2, SC(S_UINT, uint16_t)},
    [HIER_DT_INT32] = {K_SINT, 4, SC(S_INT, int32_t)},
    [HIER_DT_UINT32] = {K_UINT, 4, SC(S_UINT, uint32_t)},
    [HIER_DT_INT64] = {K_SINT, 8, SC(S_INT, int64_t)},
    [HIER_DT_UINT64] = {K_UINT, 8, SC(S_UINT, uint64_t)},
    [HIER_DT_FLOAT] = {K_REAL, sizeof(float), SC(S_FLT, float)},
    [HIER_DT_DOUBLE] = {K_REAL, sizeof(double), SC(S_DBL, double)},
    [HIER_DT_LONG_DOUBLE] = {K_REAL, sizeof(long double), SC(S_LDBL, long double)},
    [HIER_DT_FLOAT_COMPLEX] = {K_CPLX, sizeof(float _Complex), SC(S_FLT, float)},
    [HIER_DT_DOUBLE_COMPLEX] = {K_CPLX, sizeof(double _Complex), SC(S_DBL, double)},
    [HIER_DT_LONG_DOUBLE_COMPLEX] = {K_CPLX, sizeof(long double _Complex), SC(S_LDBL, long double)},
    [HIER_DT_BOOL] = {K_BOOL, sizeof(_Bool), SC(S_UINT, uint8_t)},
    [HIER_DT_FLOAT_INT] = PAIR(t_float_int, S_FLT, float, S_INT, int),
    [HIER_DT_DOUBLE_INT] = PAIR(t_double_int, S_DBL, double, S_INT, int),
    [HIER_DT_LONG_INT] = PAIR(t_long_int, S_INT, long, S_INT, int),
    [HIER_DT_2INT] = PAIR(t_2int, S_INT, int, S_INT, int),
    [HIER_DT_SHORT_INT] = PAIR(t_short_int, S_INT, short, S_INT, int),
    [HIER_DT_LONG_DOUBLE_INT] = PAIR(t_long_double_int, S_LDBL, long double, S_INT, int),
    [HIER_DT_2FLOAT] = PAIR(t_2float, S_FLT, float, S_FLT, float),
    [HIER_DT_2DOUBLE] = PAIR(t_2double, S_DBL, double, S_DBL, double),
};

/* The contract, written out independently of the library. */
static bool expect_supported(hier_dtype_t dt, hier_op_t op)
{
    switch (tdesc[dt].kind) {
    case K_SINT:
    case K_UINT: return op <= HIER_OP_BXOR;
    case K_REAL: return op == HIER_OP_SUM || op == HIER_OP_PROD || op == HIER_OP_MIN || op == HIER_OP_MAX;
    case K_CPLX: return op == HIER_OP_SUM || op == HIER_OP_PROD;
    case K_BOOL: return op == HIER_OP_LAND || op == HIER_OP_LOR || op == HIER_OP_LXOR;
    case K_PAIR: return op == HIER_OP_MINLOC || op == HIER_OP_MAXLOC;
    }
    return false;
}

/* Bytes of a scalar that carry its value: x87 long double has 6 of padding. */
static size_t value_bytes(const scal_t *s)
{
    if (s->kind == S_LDBL && LDBL_MANT_DIG == 64) return 10;
    return s->size;
}

/* ------------------------------------------------------------ scalar helpers */

static uint64_t ld_uint(const void *p, size_t size)
{
    uint64_t u = 0;
    memcpy(&u, p, size);
    return u;
}

static int64_t ld_sint(const void *p, size_t size)
{
    uint64_t u = ld_uint(p, size);
    if (size < 8 && (u >> (8 * size - 1)) & 1) u |= ~UINT64_C(0) << (8 * size);
    return (int64_t)u;
}

static void st_uint(void *p, size_t size, uint64_t u)
{
    memcpy(p, &u, size);
}

static bool scal_isnan(const scal_t *s, const void *p)
{
    float f;
    double d;
    long double l;
    switch (s->kind) {
    case S_FLT: memcpy(&f, p, sizeof f); return isnan(f);
    case S_DBL: memcpy(&d, p, sizeof d); return isnan(d);
    case S_LDBL: memcpy(&l, p, sizeof l); return isnan(l);
    default: return false;
    }
}

static bool scal_eq(const scal_t *s, const void *x, const void *y)
{
    if (scal_isnan(s, x) && scal_isnan(s, y)) return true;
    return memcmp(x, y, value_bytes(s)) == 0;
}

/* -1, 0, 1, or 2 when unordered (a NaN) */
static int scal_cmp(const scal_t *s, const void *x, const void *y)
{
    if (scal_isnan(s, x) || scal_isnan(s, y)) return 2;
    switch (s->kind) {
    case S_INT: {
        int64_t a = ld_sint(x, s->size), b = ld_sint(y, s->size);
        return (a > b) - (a < b);
    }
    case S_UINT: {
        uint64_t a = ld_uint(x, s->size), b = ld_uint(y, s->size);
        return (a > b) - (a < b);
    }
    case S_FLT: {
        float a, b;
        memcpy(&a, x, sizeof a), memcpy(&b, y, sizeof b);
        return (a > b) - (a < b);
    }
    case S_DBL: {
        double a, b;
        memcpy(&a, x, sizeof a), memcpy(&b, y, sizeof b);
        return (a > b) - (a < b);
    }
    case S_LDBL: {
        long double a, b;
        memcpy(&a, x, sizeof a), memcpy(&b, y, sizeof b);
        return (a > b) - (a < b);
    }
    }
    return 2;
}

static int fmt_scal(const scal_t *s, const void *p, char *buf, size_t len)
{
    float f;
    double d;
    long double l;
    switch (s->kind) {
    case S_INT: return snprintf(buf, len, "%lld", (long long)ld_sint(p, s->size));
    case S_UINT: return snprintf(buf, len, "%llu", (unsigned long long)ld_uint(p, s->size));
    case S_FLT:
        memcpy(&f, p, sizeof f);
        return snprintf(buf, len, "%.9g[%08llx]", f, (unsigned long long)ld_uint(p, 4));
    case S_DBL:
        memcpy(&d, p, sizeof d);
        return snprintf(buf, len, "%.17g[%016llx]", d, (unsigned long long)ld_uint(p, 8));
    case S_LDBL:
        memcpy(&l, p, sizeof l);
        return snprintf(buf, len, "%.21Lg", l);
    }
    return 0;
}

static const char *fmt_elem(const tdesc_t *td, const void *p, char *buf, size_t len)
{
    const char *c = p;
    int w;
    switch (td->kind) {
    case K_CPLX:
        w = fmt_scal(&td->v, c, buf, len);
        if (w > 0 && (size_t)w < len) buf[w++] = ',';
        if (w > 0 && (size_t)w < len) fmt_scal(&td->v, c + td->v.size, buf + w, len - (size_t)w);
        break;
    case K_PAIR:
        w = fmt_scal(&td->v, c, buf, len);
        if (w > 0 && (size_t)w < len) buf[w++] = '/';
        if (w > 0 && (size_t)w < len) fmt_scal(&td->k, c + td->koff, buf + w, len - (size_t)w);
        break;
    default: fmt_scal(&td->v, c, buf, len); break;
    }
    return buf;
}

static bool elem_eq(const tdesc_t *td, const void *x, const void *y)
{
    const char *a = x, *b = y;
    switch (td->kind) {
    case K_CPLX: return scal_eq(&td->v, a, b) && scal_eq(&td->v, a + td->v.size, b + td->v.size);
    case K_PAIR: return scal_eq(&td->v, a, b) && scal_eq(&td->k, a + td->koff, b + td->koff);
    default: return scal_eq(&td->v, a, b);
    }
}

/* ------------------------------------------------------------ reference */

static void ref_int(const tdesc_t *td, hier_op_t op, const void *pa, const void *pb, void *pr)
{
    size_t sz = td->size;
    uint64_t a = ld_uint(pa, sz), b = ld_uint(pb, sz), r = 0;
    bool signed_ = td->kind == K_SINT;
    int c = signed_ ? (ld_sint(pa, sz) > ld_sint(pb, sz)) - (ld_sint(pa, sz) < ld_sint(pb, sz))
                    : (a > b) - (a < b);
    switch (op) {
    case HIER_OP_SUM: r = a + b; break; /* mod 2^64, truncated below */
    case HIER_OP_PROD: r = a * b; break;
    case HIER_OP_MIN: r = c <= 0 ? a : b; break;
    case HIER_OP_MAX: r = c >= 0 ? a : b; break;
    case HIER_OP_LAND: r = a != 0 && b != 0; break;
    case HIER_OP_LOR: r = a != 0 || b != 0; break;
    case HIER_OP_LXOR: r = (a != 0) != (b != 0); break;
    case HIER_OP_BAND: r = a & b; break;
    case HIER_OP_BOR: r = a | b; break;
    case HIER_OP_BXOR: r = a ^ b; break;
    default: cr_assert_fail("no integer reference for op %d", (int)op);
    }
    st_uint(pr, sz, r);
}

/* MIN/MAX: NaN in, NaN out; -0.0 below +0.0. */
#define REF_REAL(T, sfx)                                                                 \
    static T ref_minmax_##sfx(hier_op_t op, T a, T b)                                    \
    {                                                                                    \
        if (isnan(a) || isnan(b)) return (T)NAN;                                         \
        if (a == 0 && b == 0) {                                                          \
            bool neg = op == HIER_OP_MIN ? (signbit(a) || signbit(b)) : (signbit(a) && signbit(b)); \
            return neg ? -(T)0 : (T)0;                                                   \
        }                                                                                \
        if (op == HIER_OP_MIN) return b < a ? b : a;                                     \
        return b > a ? b : a;                                                            \
    }                                                                                    \
    static void ref_real_##sfx(hier_op_t op, const void *pa, const void *pb, void *pr)   \
    {                                                                                    \
        T a, b, r;                                                                       \
        memcpy(&a, pa, sizeof a), memcpy(&b, pb, sizeof b);                              \
        if (op == HIER_OP_SUM) r = a + b;                                                \
        else if (op == HIER_OP_PROD) r = a * b;                                          \
        else r = ref_minmax_##sfx(op, a, b);                                             \
        memcpy(pr, &r, sizeof r);                                                        \
    }                                                                                    \
    /* complex: parts added; PROD by the textbook formula (finite inputs only) */        \
    static void ref_cplx_##sfx(hier_op_t op, const void *pa, const void *pb, void *pr)   \
    {                                                                                    \
        T a[2], b[2], r[2];                                                              \
        memcpy(a, pa, sizeof a), memcpy(b, pb, sizeof b);                                \
        if (op == HIER_OP_SUM) {                                                         \
            r[0] = a[0] + b[0];                                                          \
            r[1] = a[1] + b[1];                                                          \
        } else { /* volatile: no fused multiply-add */                                   \
            volatile T rr = a[0] * b[0], ii = a[1] * b[1], ri = a[0] * b[1], ir = a[1] * b[0]; \
            r[0] = rr - ii;                                                              \
            r[1] = ri + ir;                                                              \
        }                                                                                \
        memcpy(pr, r, sizeof r);                                                         \
    }

REF_REAL(float, f)
REF_REAL(double, d)
REF_REAL(long double, ld)

static void ref_pair(const tdesc_t *td, hier_op_t op, const void *pa, const void *pb, void *pr)
{
    const char *a = pa, *b = pb;
    int c = scal_cmp(&td->v, b, a);
    bool take_b;
    if (c == 0) take_b = scal_cmp(&td->k, b + td->koff, a + td->koff) == -1;
    else if (op == HIER_OP_MINLOC) take_b = c == -1;
    else take_b = c == 1; /* c == 2 (a NaN): keep a */
    memcpy(pr, take_b ? b : a, td->size);
}

static void ref_elem(hier_dtype_t dt, hier_op_t op, const void *a, const void *b, void *r)
{
    const tdesc_t *td = &tdesc[dt];
    static void (*const real[])(hier_op_t, const void *, const void *, void *) = {
        [S_FLT] = ref_real_f, [S_DBL] = ref_real_d, [S_LDBL] = ref_real_ld};
    static void (*const cplx[])(hier_op_t, const void *, const void *, void *) = {
        [S_FLT] = ref_cplx_f, [S_DBL] = ref_cplx_d, [S_LDBL] = ref_cplx_ld};
    switch (td->kind) {
    case K_SINT:
    case K_UINT:
    case K_BOOL: ref_int(td, op, a, b, r); break;
    case K_REAL: real[td->v.kind](op, a, b, r); break;
    case K_CPLX: cplx[td->v.kind](op, a, b, r); break;
    case K_PAIR: ref_pair(td, op, a, b, r); break;
    }
}

/* ------------------------------------------------------------ inputs */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static const uint32_t flt_edges[] = {
    0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, /* qNaN, -qNaN, sNaN, sNaN */
    0x7f800000, 0xff800000, 0x00000000, 0x80000000, /* +-Inf, +-0 */
    0x00000001, 0x80000001, 0x007fffff, 0x00800000, /* denormals, FLT_MIN */
    0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000, /* +-FLT_MAX, +-1 */
    0x7149f2ca, 0x0da24260,                         /* 1e30, 1e-30 */
};
static const uint64_t dbl_edges[] = {
    0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001, 0x7ff4000000000000,
    0x7ff0000000000000, 0xfff0000000000000, 0x0000000000000000, 0x8000000000000000,
    0x0000000000000001, 0x8000000000000001, 0x000fffffffffffff, 0x0010000000000000,
    0x7fefffffffffffff, 0xffefffffffffffff, 0x3ff0000000000000, 0xbff0000000000000,
    0x7e37e43c8800759c, 0x01a56e1fc2f8f359, /* 1e300, 1e-300 */
};
static const double small_vals[] = {-2, -1.5, -1, -0.0, 0.0, 0.5, 1, 2, 3};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* moderate: finite values whose products neither overflow nor underflow */
static void gen_float(const scal_t *s, void *p, uint64_t *rng, bool moderate)
{
    uint64_t r = rng_next(rng);
    unsigned pick = (unsigned)(r % 20);
    size_t edge = (size_t)(r >> 8) % NELEM(flt_edges);
    long double v;
    if (moderate) {
        v = pick == 0 ? -0.0 : (double)(int64_t)((r >> 8) % (1u << 21) - (1u << 20)) / 1024.0;
    } else if (pick < 8) {
        v = small_vals[(r >> 8) % NELEM(small_vals)];
    } else if (pick < 14 && s->kind == S_FLT) {
        st_uint(p, 4, flt_edges[edge]);
        return;
    } else if (pick < 14 && s->kind == S_DBL) {
        st_uint(p, 8, dbl_edges[edge % NELEM(dbl_edges)]);
        return;
    } else if (pick < 14) { /* long double: the float edges, widened */
        float f;
        memcpy(&f, &flt_edges[edge], sizeof f);
        v = edge == 12 ? LDBL_MAX : edge == 8 ? LDBL_TRUE_MIN : f;
    } else if (s->kind == S_LDBL) { /* random magnitude across its range */
        uint64_t e = rng_next(rng);
        v = ldexpl(1.0L + (long double)(e >> 11) / 0x1p53L, (int)(e % 32830) - 16445);
        v = (r >> 63) ? -v : v;
    } else { /* any bit pattern: every class of value, NaN payloads included */
        st_uint(p, s->size, rng_next(rng));
        return;
    }
    if (s->kind == S_FLT) *(float *)p = (float)v;
    else if (s->kind == S_DBL) *(double *)p = (double)v;
    else *(long double *)p = v;
}

static void gen_int(const scal_t *s, void *p, uint64_t *rng)
{
    unsigned bits = 8 * (unsigned)s->size;
    uint64_t mask = bits == 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits) - 1;
    uint64_t smin = UINT64_C(1) << (bits - 1);
    const uint64_t edges[] = {0,    1,        mask, smin,          smin - 1, smin + 1,
                              mask - 1, 200, 0x5555555555555555, 0xAAAAAAAAAAAAAAAA, 2};
    uint64_t r = rng_next(rng), v;
    unsigned pick = (unsigned)(r % 10);
    if (pick < 4) v = (uint64_t)((int64_t)((r >> 8) % 7) - 3);
    else if (pick < 7) v = edges[(r >> 8) % NELEM(edges)];
    else v = rng_next(rng);
    st_uint(p, s->size, v & mask);
}

static void gen_elem(hier_dtype_t dt, hier_op_t op, void *p, uint64_t *rng)
{
    static const uint8_t bools[] = {0, 1, 0, 1, 2, 0x80, 0xff};
    const tdesc_t *td = &tdesc[dt];
    char *c = p;
    memset(p, 0, td->size); /* padding is defined */
    switch (td->kind) {
    case K_SINT:
    case K_UINT: gen_int(&td->v, p, rng); break;
    case K_BOOL: *c = (char)bools[rng_next(rng) % NELEM(bools)]; break;
    case K_REAL: gen_float(&td->v, p, rng, false); break;
    case K_CPLX: /* NaN and Inf parts only where the result is defined */
        gen_float(&td->v, c, rng, op == HIER_OP_PROD);
        gen_float(&td->v, c + td->v.size, rng, op == HIER_OP_PROD);
        break;
    case K_PAIR:
        if (td->v.kind == S_INT) gen_int(&td->v, c, rng);
        else gen_float(&td->v, c, rng, false);
        if (td->k.kind == S_INT) *(int *)(c + td->koff) = (int)(rng_next(rng) % 8) - 1;
        else if (td->k.kind == S_FLT) *(float *)(c + td->koff) = (float)(rng_next(rng) % 8);
        else *(double *)(c + td->koff) = (double)(rng_next(rng) % 8);
        break;
    }
}

/* ------------------------------------------------------------ the sweep */

static const size_t lengths[] = {0, 1, 3, 15, 16, 17, 63, 64, 1000, 4099};
#define GUARD 64 /* canary bytes on each side of a destination */
#define CANARY 0xA5
#define MAX_REPORTS 4

static bool guards_intact(const unsigned char *buf, size_t lead, size_t bytes)
{
    for (size_t i = 0; i < lead; i++)
        if (buf[i] != CANARY) return false;
    for (size_t i = 0; i < GUARD; i++)
        if (buf[lead + bytes + i] != CANARY) return false;
    return true;
}

/* Compare n results; report the first few mismatches. Returns the count. */
static size_t compare(hier_dtype_t dt, hier_op_t op, const char *which, size_t n, size_t off,
                      const char *got, const char *want, const char *a, const char *b)
{
    const tdesc_t *td = &tdesc[dt];
    size_t bad = 0;
    char sa[96], sb[96], sg[96], sw[96];
    for (size_t i = 0; i < n; i++) {
        size_t o = i * td->size;
        if (elem_eq(td, got + o, want + o)) continue;
        if (bad++ < MAX_REPORTS)
            cr_expect(false, "%s %s %s n=%zu dst_off=%zu i=%zu: a=%s b=%s got=%s want=%s",
                      dtype_name(dt), op_name(op), which, n, off, i,
                      fmt_elem(td, a + o, sa, sizeof sa), fmt_elem(td, b + o, sb, sizeof sb),
                      fmt_elem(td, got + o, sg, sizeof sg), fmt_elem(td, want + o, sw, sizeof sw));
    }
    return bad;
}

static size_t sweep_one(hier_dtype_t dt, hier_op_t op, const hier_reduce_kernel_t *k, size_t n,
                        size_t off, uint64_t *rng)
{
    size_t es = tdesc[dt].size, bytes = n * es, lead = GUARD + off * es, bad = 0;
    char *a = malloc(bytes + 1), *b = malloc(bytes + 1), *want = malloc(bytes + 1);
    char *a0 = malloc(bytes + 1), *b0 = malloc(bytes + 1);
    unsigned char *dst = malloc(lead + bytes + GUARD);
    cr_assert(a && b && want && a0 && b0 && dst);

    for (size_t i = 0; i < n; i++) {
        gen_elem(dt, op, a + i * es, rng);
        gen_elem(dt, op, b + i * es, rng);
        ref_elem(dt, op, a + i * es, b + i * es, want + i * es);
    }
    memcpy(a0, a, bytes);
    memcpy(b0, b, bytes);

    /* acc: dst = a, then dst op= b */
    memset(dst, CANARY, lead + bytes + GUARD);
    memcpy(dst + lead, a, bytes);
    k->acc(dst + lead, b, n);
    bad += compare(dt, op, "acc", n, off, (char *)dst + lead, want, a, b);
    cr_expect(guards_intact(dst, lead, bytes), "%s %s acc n=%zu wrote outside its buffer",
              dtype_name(dt), op_name(op), n);
    cr_expect(memcmp(b, b0, bytes) == 0, "%s %s acc modified its input",
              dtype_name(dt), op_name(op));

    /* comb: dst = a op b */
    memset(dst, CANARY, lead + bytes + GUARD);
    k->comb(dst + lead, a, b, n);
    bad += compare(dt, op, "comb", n, off, (char *)dst + lead, want, a, b);
    cr_expect(guards_intact(dst, lead, bytes), "%s %s comb n=%zu wrote outside its buffer",
              dtype_name(dt), op_name(op), n);
    cr_expect(memcmp(a, a0, bytes) == 0 && memcmp(b, b0, bytes) == 0,
              "%s %s comb modified its inputs", dtype_name(dt), op_name(op));

    free(a), free(b), free(want), free(a0), free(b0), free(dst);
    return bad;
}

ParameterizedTestParameters(reduce, matches_reference)
{
    static hier_dtype_t dts[HIER_DT_COUNT];
    for (int i = 0; i < HIER_DT_COUNT; i++) dts[i] = (hier_dtype_t)i;
    return cr_make_param_array(hier_dtype_t, dts, HIER_DT_COUNT);
}

/* Every supported op of one type, acc and comb, every length, destination
 * aligned and one element off. */
ParameterizedTest(hier_dtype_t *dtp, reduce, matches_reference, .timeout = 300)
{
    hier_dtype_t dt = *dtp;
    for (int o = 0; o < HIER_OP_COUNT; o++) {
        hier_op_t op = (hier_op_t)o;
        hier_reduce_kernel_t k = {NULL, NULL};
        size_t bad = 0;
        if (!expect_supported(dt, op)) continue;
        cr_assert_eq(hier_reduce_kernel_get(dt, op, &k), HIER_OK, "%s %s: no kernel",
                     dtype_name(dt), op_name(op));
        cr_assert(k.acc != NULL && k.comb != NULL);
        for (size_t l = 0; l < NELEM(lengths); l++) {
            for (size_t off = 0; off < 2; off++) {
                uint64_t rng = ((uint64_t)dt << 40) ^ ((uint64_t)o << 32) ^ (lengths[l] << 1) ^ off;
                bad += sweep_one(dt, op, &k, lengths[l], off, &rng);
            }
        }
        cr_expect_eq(bad, 0, "%s %s: %zu wrong elements", dtype_name(dt), op_name(op), bad);
    }
}

/* ------------------------------------------------------------ support */

Test(reduce, support_matches_contract)
{
    int supported = 0;
    for (int d = 0; d < HIER_DT_COUNT; d++) {
        for (int o = 0; o < HIER_OP_COUNT; o++) {
            hier_dtype_t dt = (hier_dtype_t)d;
            hier_op_t op = (hier_op_t)o;
            hier_reduce_kernel_t k = {(hier_reduce_acc_fn_t)(uintptr_t)1, (hier_reduce_comb_fn_t)(uintptr_t)1};
            bool want = expect_supported(dt, op);
            hier_status_t st = hier_reduce_kernel_get(dt, op, &k);
            supported += want;
            cr_expect_eq(hier_reduce_supported(dt, op), want, "%s %s: supported() says %d",
                         dtype_name(dt), op_name(op), !want);
            cr_expect_eq(st, want ? HIER_OK : HIER_ERR_NOT_SUPPORTED, "%s %s: kernel_get -> %d",
                         dtype_name(dt), op_name(op), (int)st);
            if (!want) /* output untouched on failure */
                cr_expect(k.acc == (hier_reduce_acc_fn_t)(uintptr_t)1 && k.comb == (hier_reduce_comb_fn_t)(uintptr_t)1,
                          "%s %s: kernel_p written on failure", dtype_name(dt), op_name(op));
        }
    }
    /* 8 ints x 10 + 3 reals x 4 + 3 complex x 2 + bool x 3 + 8 pairs x 2 */
    cr_expect_eq(supported, 117);
}

Test(reduce, unsupported_pairs)
{
    static const struct { hier_dtype_t dt; hier_op_t op; } no[] = {
        {HIER_DT_FLOAT, HIER_OP_BAND},        {HIER_DT_DOUBLE, HIER_OP_LAND},
        {HIER_DT_BOOL, HIER_OP_SUM},          {HIER_DT_BOOL, HIER_OP_BAND},
        {HIER_DT_FLOAT_COMPLEX, HIER_OP_MIN}, {HIER_DT_DOUBLE_COMPLEX, HIER_OP_MAX},
        {HIER_DT_DOUBLE_INT, HIER_OP_SUM},    {HIER_DT_2INT, HIER_OP_MIN},
        {HIER_DT_INT32, HIER_OP_MINLOC},      {HIER_DT_LONG_DOUBLE, HIER_OP_MAXLOC},
        {HIER_DT_COUNT, HIER_OP_SUM},         {HIER_DT_INT32, HIER_OP_COUNT},
        {(hier_dtype_t)-1, HIER_OP_SUM},      {HIER_DT_INT32, (hier_op_t)-1},
    };
    for (size_t i = 0; i < NELEM(no); i++) {
        hier_reduce_kernel_t k = {NULL, NULL};
        cr_expect(!hier_reduce_supported(no[i].dt, no[i].op), "case %zu supported", i);
        cr_expect_eq(hier_reduce_kernel_get(no[i].dt, no[i].op, &k), HIER_ERR_NOT_SUPPORTED,
                     "case %zu (%s %s)", i, dtype_name(no[i].dt), op_name(no[i].op));
        cr_expect(k.acc == NULL && k.comb == NULL, "case %zu wrote kernel_p", i);
    }
    cr_expect_lt(hier_reduce_kernel_get(HIER_DT_INT32, HIER_OP_SUM, NULL), 0);
}

/* ------------------------------------------------------------ known bugs */

static hier_reduce_kernel_t kernel(hier_dtype_t dt, hier_op_t op)
{
    hier_reduce_kernel_t k;
    cr_assert_eq(hier_reduce_kernel_get(dt, op, &k), HIER_OK);
    return k;
}

/* Old Open MPI saturated 8- and 16-bit sums. */
Test(reduce, small_int_sum_wraps)
{
    uint8_t a[16], b[16], out[16];
    int8_t c[3] = {100, 127, -128}, d[3] = {100, 1, -1}, e[3];
    uint16_t f[2] = {40000, 65535}, g[2] = {40000, 1}, h[2];
    int16_t i16[2] = {30000, -32768}, j16[2] = {30000, -1}, k16[2];

    memset(a, 200, sizeof a), memset(b, 200, sizeof b);
    kernel(HIER_DT_UINT8, HIER_OP_SUM).comb(out, a, b, 16);
    kernel(HIER_DT_UINT8, HIER_OP_SUM).acc(a, b, 16);
    for (int i = 0; i < 16; i++) {
        cr_expect_eq(out[i], 144, "uint8 comb [%d] = %u", i, out[i]);
        cr_expect_eq(a[i], 144, "uint8 acc [%d] = %u", i, a[i]);
    }
    kernel(HIER_DT_INT8, HIER_OP_SUM).comb(e, c, d, 3);
    cr_expect(e[0] == -56 && e[1] == -128 && e[2] == 127, "int8 sum %d %d %d", e[0], e[1], e[2]);
    kernel(HIER_DT_UINT16, HIER_OP_SUM).comb(h, f, g, 2);
    cr_expect(h[0] == 14464 && h[1] == 0, "uint16 sum %u %u", h[0], h[1]);
    kernel(HIER_DT_INT16, HIER_OP_SUM).comb(k16, i16, j16, 2);
    cr_expect(k16[0] == -5536 && k16[1] == 32767, "int16 sum %d %d", k16[0], k16[1]);
    kernel(HIER_DT_UINT16, HIER_OP_PROD).comb(h, f, f, 2); /* 65535^2 overflows int */
    cr_expect(h[0] == (uint16_t)(40000u * 40000u) && h[1] == 1, "uint16 prod %u %u", h[0], h[1]);
}

/* Old Open MPI compared 64-bit unsigned MIN/MAX as signed. */
Test(reduce, uint64_minmax_unsigned)
{
    const uint64_t M = UINT64_MAX, H = UINT64_C(1) << 63;
    uint64_t a[] = {M, 1, M, H, 0, H - 1};
    uint64_t b[] = {1, M, M - 1, H - 1, M, H};
    uint64_t lo[] = {1, 1, M - 1, H - 1, 0, H - 1};
    uint64_t hi[] = {M, M, M, H, M, H};
    uint64_t out[6], io[6];
    kernel(HIER_DT_UINT64, HIER_OP_MIN).comb(out, a, b, 6);
    memcpy(io, a, sizeof io);
    kernel(HIER_DT_UINT64, HIER_OP_MIN).acc(io, b, 6);
    for (int i = 0; i < 6; i++) cr_expect(out[i] == lo[i] && io[i] == lo[i], "min [%d]", i);
    kernel(HIER_DT_UINT64, HIER_OP_MAX).comb(out, a, b, 6);
    memcpy(io, a, sizeof io);
    kernel(HIER_DT_UINT64, HIER_OP_MAX).acc(io, b, 6);
    for (int i = 0; i < 6; i++) cr_expect(out[i] == hi[i] && io[i] == hi[i], "max [%d]", i);
}

/* ------------------------------------------------------------ semantics */

Test(reduce, float_minmax_nan_and_signed_zero)
{
    double a[] = {-0.0, 0.0, NAN, 1.0, NAN, -INFINITY, INFINITY, 0x1p-1074, -0.0, 0.0};
    double b[] = {0.0, -0.0, 1.0, NAN, -NAN, NAN, -INFINITY, 0.0, -0.0, 0.0};
    double out[10];
    kernel(HIER_DT_DOUBLE, HIER_OP_MIN).comb(out, a, b, 10);
    cr_expect(signbit(out[0]) && out[0] == 0 && signbit(out[1]) && out[1] == 0, "min(-0,+0)");
    for (int i = 2; i < 6; i++) cr_expect(isnan(out[i]), "min NaN [%d] = %g", i, out[i]);
    cr_expect(out[6] == -INFINITY && out[7] == 0 && !signbit(out[7]), "min inf/denormal");
    cr_expect(signbit(out[8]) && !signbit(out[9]), "min(-0,-0), min(+0,+0)");
    kernel(HIER_DT_DOUBLE, HIER_OP_MAX).comb(out, a, b, 10);
    cr_expect(!signbit(out[0]) && !signbit(out[1]), "max(-0,+0)");
    for (int i = 2; i < 6; i++) cr_expect(isnan(out[i]), "max NaN [%d] = %g", i, out[i]);
    cr_expect(out[6] == INFINITY && out[7] == 0x1p-1074, "max inf/denormal");

    float fa[] = {-0.0f, 0.0f, NAN, 2.0f}, fb[] = {0.0f, -0.0f, 2.0f, NAN}, fo[4];
    kernel(HIER_DT_FLOAT, HIER_OP_MIN).comb(fo, fa, fb, 4);
    cr_expect(signbit(fo[0]) && signbit(fo[1]) && isnan(fo[2]) && isnan(fo[3]), "float min");
    kernel(HIER_DT_FLOAT, HIER_OP_MAX).acc(fa, fb, 4);
    cr_expect(!signbit(fa[0]) && !signbit(fa[1]) && isnan(fa[2]) && isnan(fa[3]), "float max");

    long double la[] = {-0.0L, 0.0L, NAN, 2.0L}, lb[] = {0.0L, -0.0L, 2.0L, NAN}, lo[4];
    kernel(HIER_DT_LONG_DOUBLE, HIER_OP_MIN).comb(lo, la, lb, 4);
    cr_expect(signbit(lo[0]) && signbit(lo[1]) && isnan(lo[2]) && isnan(lo[3]), "long double min");
    kernel(HIER_DT_LONG_DOUBLE, HIER_OP_MAX).acc(la, lb, 4);
    cr_expect(!signbit(la[0]) && !signbit(la[1]) && isnan(la[2]) && isnan(la[3]), "long double max");
}

Test(reduce, loc_ties_and_nan)
{
    /* ties: the smaller index wins whichever side it is on */
    t_double_int a[] = {{1.0, 5}, {1.0, 2}, {-0.0, 7}, {NAN, 1}, {1.0, 1}, {2.0, 9}};
    t_double_int b[] = {{1.0, 2}, {1.0, 5}, {0.0, 3}, {1.0, 0}, {NAN, 0}, {1.0, 0}};
    t_double_int out[6];
    kernel(HIER_DT_DOUBLE_INT, HIER_OP_MINLOC).comb(out, a, b, 6);
    cr_expect(out[0].v == 1.0 && out[0].k == 2 && out[1].k == 2, "minloc tie");
    cr_expect(out[2].k == 3 && !signbit(out[2].v), "-0 == +0: index 3 wins with its value");
    /* documented: a NaN value never wins nor loses; the earlier pair is kept */
    cr_expect(isnan(out[3].v) && out[3].k == 1, "NaN first is kept");
    cr_expect(out[4].v == 1.0 && out[4].k == 1, "NaN second is dropped");
    cr_expect(out[5].v == 1.0 && out[5].k == 0, "minloc smaller value");
    kernel(HIER_DT_DOUBLE_INT, HIER_OP_MAXLOC).comb(out, a, b, 6);
    cr_expect(out[0].k == 2 && out[1].k == 2 && out[5].v == 2.0 && out[5].k == 9, "maxloc");

    t_2int ia[] = {{INT32_MIN, 4}, {INT32_MAX, 4}}, ib[] = {{INT32_MIN, 3}, {-1, 0}};
    kernel(HIER_DT_2INT, HIER_OP_MAXLOC).acc(ia, ib, 2);
    cr_expect(ia[0].k == 3 && ia[1].v == INT32_MAX && ia[1].k == 4, "2int maxloc");
}

Test(reduce, bool_nonzero_is_true)
{
    uint8_t a[] = {0, 1, 2, 0xff, 0x80, 0}, b[] = {0x40, 0x40, 0xff, 0, 1, 0}, o[6];
    uint8_t land[] = {0, 1, 1, 0, 1, 0}, lor[] = {1, 1, 1, 1, 1, 0}, lxor[] = {1, 0, 0, 1, 0, 0};
    kernel(HIER_DT_BOOL, HIER_OP_LAND).comb(o, a, b, 6);
    cr_expect_arr_eq(o, land, 6);
    kernel(HIER_DT_BOOL, HIER_OP_LOR).comb(o, a, b, 6);
    cr_expect_arr_eq(o, lor, 6);
    kernel(HIER_DT_BOOL, HIER_OP_LXOR).comb(o, a, b, 6);
    cr_expect_arr_eq(o, lxor, 6);
}

/* ------------------------------------------------------------ dtypes */

Test(dtype, sizes_match_c_types)
{
    size_t want[HIER_DT_COUNT] = {
        [HIER_DT_INT8] = 1, [HIER_DT_UINT8] = 1, [HIER_DT_INT16] = 2, [HIER_DT_UINT16] = 2,
        [HIER_DT_INT32] = 4, [HIER_DT_UINT32] = 4, [HIER_DT_INT64] = 8, [HIER_DT_UINT64] = 8,
        [HIER_DT_FLOAT] = sizeof(float), [HIER_DT_DOUBLE] = sizeof(double),
        [HIER_DT_LONG_DOUBLE] = sizeof(long double),
        [HIER_DT_FLOAT_COMPLEX] = sizeof(float _Complex),
        [HIER_DT_DOUBLE_COMPLEX] = sizeof(double _Complex),
        [HIER_DT_LONG_DOUBLE_COMPLEX] = sizeof(long double _Complex),
        [HIER_DT_BOOL] = sizeof(_Bool),
        [HIER_DT_FLOAT_INT] = sizeof(t_float_int), [HIER_DT_DOUBLE_INT] = sizeof(t_double_int),
        [HIER_DT_LONG_INT] = sizeof(t_long_int), [HIER_DT_2INT] = sizeof(t_2int),
        [HIER_DT_SHORT_INT] = sizeof(t_short_int),
        [HIER_DT_LONG_DOUBLE_INT] = sizeof(t_long_double_int),
        [HIER_DT_2FLOAT] = sizeof(t_2float), [HIER_DT_2DOUBLE] = sizeof(t_2double),
    };
    for (int d = 0; d < HIER_DT_COUNT; d++)
        cr_expect_eq(hier_dtype_size((hier_dtype_t)d), want[d], "%s: %zu, want %zu",
                     dtype_name((hier_dtype_t)d), hier_dtype_size((hier_dtype_t)d), want[d]);
    cr_expect_eq(hier_dtype_size(HIER_DT_DOUBLE_INT), 16); /* padded after the int */
    cr_expect_eq(hier_dtype_size(HIER_DT_SHORT_INT), 8);
    cr_expect_eq(hier_dtype_size(HIER_DT_COUNT), 0);
}


/* ------------------------------------------------------------ user operations */

/* inout = in op inout: a sum of int64s that also counts its calls and
 * checks the context it was given. */
static int user_calls;
static void user_sum(const void *in, void *inout, size_t count, void *ctx)
{
    cr_expect_eq(*(int *)ctx, 42, "context lost");
    for (size_t i = 0; i < count; i++) ((int64_t *)inout)[i] += ((const int64_t *)in)[i];
    user_calls++;
}

Test(reduce, user_op_kernels_call_the_installed_function)
{
    hier_reduce_kernel_t k;
    int ctx = 42;
    int64_t a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50}, out[5];
    cr_expect(!hier_reduce_supported(HIER_DT_UINT64, HIER_OP_USER), "a user op with none installed");
    cr_expect_eq(hier_reduce_kernel_get(HIER_DT_UINT64, HIER_OP_USER, &k), HIER_ERR_NOT_SUPPORTED);
    hier_reduce_user_set(&(hier_user_op_t){user_sum, &ctx});
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_UINT64, HIER_OP_USER, &k), HIER_OK);
    k.comb(out, a, b, 5); /* out = a op b, neither touched */
    for (int i = 0; i < 5; i++) cr_expect_eq(out[i], a[i] + b[i], "comb [%d]", i);
    cr_expect_eq(a[4], 5);
    cr_expect_eq(b[4], 50);
    k.acc(a, b, 3); /* a = a op b on the first 3 */
    cr_expect(a[0] == 11 && a[2] == 33 && a[3] == 4, "acc: %lld %lld %lld", (long long)a[0], (long long)a[2],
              (long long)a[3]);
    cr_expect_eq(user_calls, 2);
    hier_reduce_user_set(NULL);
    cr_expect(!hier_reduce_supported(HIER_DT_UINT64, HIER_OP_USER), "removed, still supported");
}
