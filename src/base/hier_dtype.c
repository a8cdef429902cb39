/* hier_dtype.c: sizes and names of the element types and operations.
 * Pair types are laid out as MPI lays them out: struct { V v; I k; } with the
 * compiler's natural padding, so sizeof is the stride in a user buffer. */
#include "base/hier_dtype.h"

#include <stdbool.h>
#include <stdint.h>

_Static_assert(sizeof(_Bool) == 1, "HIER_DT_BOOL is one byte");

const size_t hier_dtype_sizes[HIER_DT_COUNT] = {
    [HIER_DT_INT8] = sizeof(int8_t),
    [HIER_DT_UINT8] = sizeof(uint8_t),
    [HIER_DT_INT16] = sizeof(int16_t),
    [HIER_DT_UINT16] = sizeof(uint16_t),
    [HIER_DT_INT32] = sizeof(int32_t),
    [HIER_DT_UINT32] = sizeof(uint32_t),
    [HIER_DT_INT64] = sizeof(int64_t),
    [HIER_DT_UINT64] = sizeof(uint64_t),
    [HIER_DT_FLOAT] = sizeof(float),
    [HIER_DT_DOUBLE] = sizeof(double),
    [HIER_DT_LONG_DOUBLE] = sizeof(long double),
    [HIER_DT_FLOAT_COMPLEX] = sizeof(float _Complex),
    [HIER_DT_DOUBLE_COMPLEX] = sizeof(double _Complex),
    [HIER_DT_LONG_DOUBLE_COMPLEX] = sizeof(long double _Complex),
    [HIER_DT_BOOL] = sizeof(_Bool),
    [HIER_DT_FLOAT_INT] = sizeof(hier_dtype_float_int_t),
    [HIER_DT_DOUBLE_INT] = sizeof(hier_dtype_double_int_t),
    [HIER_DT_LONG_INT] = sizeof(hier_dtype_long_int_t),
    [HIER_DT_2INT] = sizeof(hier_dtype_2int_t),
    [HIER_DT_SHORT_INT] = sizeof(hier_dtype_short_int_t),
    [HIER_DT_LONG_DOUBLE_INT] = sizeof(hier_dtype_long_double_int_t),
    [HIER_DT_2FLOAT] = sizeof(hier_dtype_2float_t),
    [HIER_DT_2DOUBLE] = sizeof(hier_dtype_2double_t),
};

static const char *const hier_dtype_names[HIER_DT_COUNT] = {
    [HIER_DT_INT8] = "int8", [HIER_DT_UINT8] = "uint8", [HIER_DT_INT16] = "int16", [HIER_DT_UINT16] = "uint16",
    [HIER_DT_INT32] = "int32", [HIER_DT_UINT32] = "uint32", [HIER_DT_INT64] = "int64", [HIER_DT_UINT64] = "uint64",
    [HIER_DT_FLOAT] = "float", [HIER_DT_DOUBLE] = "double", [HIER_DT_LONG_DOUBLE] = "long double",
    [HIER_DT_FLOAT_COMPLEX] = "float complex", [HIER_DT_DOUBLE_COMPLEX] = "double complex",
    [HIER_DT_LONG_DOUBLE_COMPLEX] = "long double complex", [HIER_DT_BOOL] = "bool",
    [HIER_DT_FLOAT_INT] = "float-int", [HIER_DT_DOUBLE_INT] = "double-int", [HIER_DT_LONG_INT] = "long-int",
    [HIER_DT_2INT] = "int-int", [HIER_DT_SHORT_INT] = "short-int", [HIER_DT_LONG_DOUBLE_INT] = "long double-int",
    [HIER_DT_2FLOAT] = "float-float", [HIER_DT_2DOUBLE] = "double-double",
};

static const char *const hier_op_names[HIER_OP_COUNT] = {
    [HIER_OP_SUM] = "sum", [HIER_OP_PROD] = "prod", [HIER_OP_MIN] = "min", [HIER_OP_MAX] = "max",
    [HIER_OP_LAND] = "land", [HIER_OP_LOR] = "lor", [HIER_OP_LXOR] = "lxor", [HIER_OP_BAND] = "band",
    [HIER_OP_BOR] = "bor", [HIER_OP_BXOR] = "bxor", [HIER_OP_MINLOC] = "minloc", [HIER_OP_MAXLOC] = "maxloc",
};

const char *hier_dtype_name(hier_dtype_t dt)
{
    return (unsigned)dt < HIER_DT_COUNT ? hier_dtype_names[dt] : "unknown type";
}

const char *hier_op_name(hier_op_t op)
{
    if (op == HIER_OP_USER) return "user-defined op";
    return (unsigned)op < HIER_OP_COUNT ? hier_op_names[op] : "unknown op";
}
