/* hier_dtype.c: sizes and names of the element types and operations.
 * Pair types are laid out as MPI lays them out: struct { V v; I k; } with the
 * compiler's natural padding, so sizeof is the stride in a user buffer. */
#include "base/hier_dtype.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct { float v; int k; } hier_dtype_float_int_t;
typedef struct { double v; int k; } hier_dtype_double_int_t;
typedef struct { long v; int k; } hier_dtype_long_int_t;
typedef struct { int v; int k; } hier_dtype_2int_t;
typedef struct { short v; int k; } hier_dtype_short_int_t;
typedef struct { long double v; int k; } hier_dtype_long_double_int_t;
typedef struct { float v; float k; } hier_dtype_2float_t;
typedef struct { double v; double k; } hier_dtype_2double_t;

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


