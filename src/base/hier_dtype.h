/* hier_dtype.h: element types and reduction operations the core understands.
 * The glue maps MPI datatypes onto these storage types; several MPI types share
 * one storage type (MPI_INT and MPI_INT32_T, MPI_BYTE and MPI_UINT8_T). */
#ifndef HIER_DTYPE_H
#define HIER_DTYPE_H

#include <stddef.h>

typedef enum {
    HIER_DT_INT8,
    HIER_DT_UINT8,
    HIER_DT_INT16,
    HIER_DT_UINT16,
    HIER_DT_INT32,
    HIER_DT_UINT32,
    HIER_DT_INT64,
    HIER_DT_UINT64,
    HIER_DT_FLOAT,
    HIER_DT_DOUBLE,
    HIER_DT_LONG_DOUBLE,
    HIER_DT_FLOAT_COMPLEX,       /* float _Complex */
    HIER_DT_DOUBLE_COMPLEX,      /* double _Complex */
    HIER_DT_LONG_DOUBLE_COMPLEX, /* long double _Complex */
    HIER_DT_BOOL,                /* C _Bool, one byte, 0 or 1 */
    /* value/index pairs for MINLOC and MAXLOC, laid out as the C structs
     * struct { V v; I k; } with the compiler's padding (MPI's layout) */
    HIER_DT_FLOAT_INT,
    HIER_DT_DOUBLE_INT,
    HIER_DT_LONG_INT,
    HIER_DT_2INT,
    HIER_DT_SHORT_INT,
    HIER_DT_LONG_DOUBLE_INT,
    HIER_DT_2FLOAT,              /* Fortran MPI_2REAL */
    HIER_DT_2DOUBLE,             /* Fortran MPI_2DOUBLE_PRECISION */
    HIER_DT_COUNT
} hier_dtype_t;

typedef enum {
    HIER_OP_SUM,
    HIER_OP_PROD,
    HIER_OP_MIN,
    HIER_OP_MAX,
    HIER_OP_LAND,
    HIER_OP_LOR,
    HIER_OP_LXOR,
    HIER_OP_BAND,
    HIER_OP_BOR,
    HIER_OP_BXOR,
    HIER_OP_MINLOC,
    HIER_OP_MAXLOC,
    HIER_OP_COUNT,
    /* not a predefined op: a user's commutative operation (MPI_Op_create),
     * the function the calling thread installed (hier_reduce_user_set);
     * the element type then only gives the size of one element */
    HIER_OP_USER = 31
} hier_op_t;

/* A user's commutative operation: fn makes inout[i] = in[i] op inout[i] for
 * `count` elements of the call's own datatype (MPI's user function
 * contract; the glue calls the application's function through its MPI
 * library), ctx as given. */
typedef void (*hier_user_op_fn_t)(const void *in, void *inout, size_t count, void *ctx);
typedef struct {
    hier_user_op_fn_t fn;
    void *ctx;
} hier_user_op_t;

/* The pair types' layouts, MPI's struct { V v; I k; } with the compiler's
 * natural padding: sizeof is the stride in a user buffer (the sizes below,
 * and exec/'s MINLOC/MAXLOC kernels). */
typedef struct { float v; int k; } hier_dtype_float_int_t;
typedef struct { double v; int k; } hier_dtype_double_int_t;
typedef struct { long v; int k; } hier_dtype_long_int_t;
typedef struct { int v; int k; } hier_dtype_2int_t;
typedef struct { short v; int k; } hier_dtype_short_int_t;
typedef struct { long double v; int k; } hier_dtype_long_double_int_t;
typedef struct { float v; float k; } hier_dtype_2float_t;
typedef struct { double v; double k; } hier_dtype_2double_t;

/* Bytes one element occupies in a buffer (sizeof the C type or struct); 0
 * for a value outside the enum (it may arrive as any int from the glue). */
extern const size_t hier_dtype_sizes[HIER_DT_COUNT];
static inline size_t hier_dtype_size(hier_dtype_t dt)
{
    return (unsigned)dt < HIER_DT_COUNT ? hier_dtype_sizes[dt] : 0;
}

/* Names for messages: "float", "double-int", "sum", "user-defined op". */
const char *hier_dtype_name(hier_dtype_t dt);
const char *hier_op_name(hier_op_t op);

#endif
