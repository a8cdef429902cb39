/* coll_hier_types.c: MPI datatypes and ops to the core's element types.
 * Several MPI types share one storage type; the class decides which ops MPI
 * allows on them (MPI-4.0 section 6.9.2). Integer storage is picked by size so
 * MPI_LONG, MPI_INTEGER or MPI_AINT land on the right width. */
#include "coll_hier.h"

typedef enum {
    HIER_CLASS_INT,     /* signed C/Fortran integers */
    HIER_CLASS_UINT,    /* unsigned integers */
    HIER_CLASS_FLOAT,
    HIER_CLASS_COMPLEX,
    HIER_CLASS_LOGICAL, /* C _Bool, Fortran LOGICAL */
    HIER_CLASS_BYTE,
    HIER_CLASS_PAIR,    /* MINLOC/MAXLOC value-index pairs */
} hier_class_t;

typedef struct {
    MPI_Datatype mpi;
    hier_class_t cls;
    int pair; /* HIER_CLASS_PAIR: the storage type */
} hier_type_entry_t;

static const hier_type_entry_t mca_coll_hier_types[] = {
    {MPI_SIGNED_CHAR, HIER_CLASS_INT, 0}, {MPI_SHORT, HIER_CLASS_INT, 0}, {MPI_INT, HIER_CLASS_INT, 0},
    {MPI_LONG, HIER_CLASS_INT, 0}, {MPI_LONG_LONG_INT, HIER_CLASS_INT, 0}, {MPI_INT8_T, HIER_CLASS_INT, 0},
    {MPI_INT16_T, HIER_CLASS_INT, 0}, {MPI_INT32_T, HIER_CLASS_INT, 0}, {MPI_INT64_T, HIER_CLASS_INT, 0},
    {MPI_AINT, HIER_CLASS_INT, 0}, {MPI_OFFSET, HIER_CLASS_INT, 0}, {MPI_COUNT, HIER_CLASS_INT, 0},
    {MPI_INTEGER, HIER_CLASS_INT, 0},
    /* Fortran's sized types exist where Open MPI was built with a Fortran
     * compiler that has them (mpi.h defines them then; 5.0 built without
     * Fortran has none) */
#ifdef MPI_INTEGER1
    {MPI_INTEGER1, HIER_CLASS_INT, 0},
#endif
#ifdef MPI_INTEGER2
    {MPI_INTEGER2, HIER_CLASS_INT, 0},
#endif
#ifdef MPI_INTEGER4
    {MPI_INTEGER4, HIER_CLASS_INT, 0},
#endif
#ifdef MPI_INTEGER8
    {MPI_INTEGER8, HIER_CLASS_INT, 0},
#endif
#ifdef MPI_REAL4
    {MPI_REAL4, HIER_CLASS_FLOAT, 0},
#endif
#ifdef MPI_REAL8
    {MPI_REAL8, HIER_CLASS_FLOAT, 0},
#endif
    {MPI_UNSIGNED_CHAR, HIER_CLASS_UINT, 0}, {MPI_UNSIGNED_SHORT, HIER_CLASS_UINT, 0},
    {MPI_UNSIGNED, HIER_CLASS_UINT, 0}, {MPI_UNSIGNED_LONG, HIER_CLASS_UINT, 0},
    {MPI_UNSIGNED_LONG_LONG, HIER_CLASS_UINT, 0}, {MPI_UINT8_T, HIER_CLASS_UINT, 0},
    {MPI_UINT16_T, HIER_CLASS_UINT, 0}, {MPI_UINT32_T, HIER_CLASS_UINT, 0}, {MPI_UINT64_T, HIER_CLASS_UINT, 0},
    {MPI_FLOAT, HIER_CLASS_FLOAT, 0}, {MPI_DOUBLE, HIER_CLASS_FLOAT, 0}, {MPI_LONG_DOUBLE, HIER_CLASS_FLOAT, 0},
    {MPI_REAL, HIER_CLASS_FLOAT, 0}, {MPI_DOUBLE_PRECISION, HIER_CLASS_FLOAT, 0},
    {MPI_C_FLOAT_COMPLEX, HIER_CLASS_COMPLEX, 0}, {MPI_C_DOUBLE_COMPLEX, HIER_CLASS_COMPLEX, 0},
    {MPI_C_LONG_DOUBLE_COMPLEX, HIER_CLASS_COMPLEX, 0}, {MPI_COMPLEX, HIER_CLASS_COMPLEX, 0},
    {MPI_DOUBLE_COMPLEX, HIER_CLASS_COMPLEX, 0},
    {MPI_C_BOOL, HIER_CLASS_LOGICAL, 0}, {MPI_LOGICAL, HIER_CLASS_LOGICAL, 0},
    {MPI_BYTE, HIER_CLASS_BYTE, 0},
    {MPI_FLOAT_INT, HIER_CLASS_PAIR, HIER_DT_FLOAT_INT}, {MPI_DOUBLE_INT, HIER_CLASS_PAIR, HIER_DT_DOUBLE_INT},
    {MPI_LONG_INT, HIER_CLASS_PAIR, HIER_DT_LONG_INT}, {MPI_2INT, HIER_CLASS_PAIR, HIER_DT_2INT},
    {MPI_SHORT_INT, HIER_CLASS_PAIR, HIER_DT_SHORT_INT},
    {MPI_LONG_DOUBLE_INT, HIER_CLASS_PAIR, HIER_DT_LONG_DOUBLE_INT},
    {MPI_2REAL, HIER_CLASS_PAIR, HIER_DT_2FLOAT}, {MPI_2DOUBLE_PRECISION, HIER_CLASS_PAIR, HIER_DT_2DOUBLE},
    {MPI_2INTEGER, HIER_CLASS_PAIR, HIER_DT_2INT},
};

static const struct {
    MPI_Op mpi;
    hier_op_t op;
} mca_coll_hier_ops[] = {
    {MPI_SUM, HIER_OP_SUM}, {MPI_PROD, HIER_OP_PROD}, {MPI_MIN, HIER_OP_MIN}, {MPI_MAX, HIER_OP_MAX},
    {MPI_LAND, HIER_OP_LAND}, {MPI_LOR, HIER_OP_LOR}, {MPI_LXOR, HIER_OP_LXOR}, {MPI_BAND, HIER_OP_BAND},
    {MPI_BOR, HIER_OP_BOR}, {MPI_BXOR, HIER_OP_BXOR}, {MPI_MINLOC, HIER_OP_MINLOC}, {MPI_MAXLOC, HIER_OP_MAXLOC},
};

#define HIER_OPS_BIT(op) (1u << (op))
static const unsigned mca_coll_hier_class_ops[] = {
    [HIER_CLASS_INT] = 0x3ffu, /* SUM .. BXOR */
    [HIER_CLASS_UINT] = 0x3ffu,
    [HIER_CLASS_FLOAT] = HIER_OPS_BIT(HIER_OP_SUM) | HIER_OPS_BIT(HIER_OP_PROD) | HIER_OPS_BIT(HIER_OP_MIN) |
                         HIER_OPS_BIT(HIER_OP_MAX),
    [HIER_CLASS_COMPLEX] = HIER_OPS_BIT(HIER_OP_SUM) | HIER_OPS_BIT(HIER_OP_PROD),
    [HIER_CLASS_LOGICAL] = HIER_OPS_BIT(HIER_OP_LAND) | HIER_OPS_BIT(HIER_OP_LOR) | HIER_OPS_BIT(HIER_OP_LXOR),
    [HIER_CLASS_BYTE] = HIER_OPS_BIT(HIER_OP_BAND) | HIER_OPS_BIT(HIER_OP_BOR) | HIER_OPS_BIT(HIER_OP_BXOR),
    [HIER_CLASS_PAIR] = HIER_OPS_BIT(HIER_OP_MINLOC) | HIER_OPS_BIT(HIER_OP_MAXLOC),
};

/* Storage type of a non-pair class member of `size` bytes, or -1. */
static int mca_coll_hier_storage(hier_class_t cls, size_t size, MPI_Datatype mpi)
{
    static const hier_dtype_t sint[] = {HIER_DT_INT8, HIER_DT_INT16, HIER_DT_INT32, HIER_DT_INT64};
    static const hier_dtype_t uint[] = {HIER_DT_UINT8, HIER_DT_UINT16, HIER_DT_UINT32, HIER_DT_UINT64};
    int lg = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : size == 8 ? 3 : -1;

    switch (cls) {
    case HIER_CLASS_INT: return lg < 0 ? -1 : (int)sint[lg];
    case HIER_CLASS_UINT: case HIER_CLASS_BYTE: return lg < 0 ? -1 : (int)uint[lg];
    case HIER_CLASS_LOGICAL: return size == 1 ? HIER_DT_BOOL : lg < 0 ? -1 : (int)sint[lg];
    case HIER_CLASS_FLOAT:
        if (mpi == MPI_LONG_DOUBLE) return HIER_DT_LONG_DOUBLE;
        return size == 4 ? HIER_DT_FLOAT : size == 8 ? HIER_DT_DOUBLE : -1;
    case HIER_CLASS_COMPLEX:
        if (mpi == MPI_C_LONG_DOUBLE_COMPLEX) return HIER_DT_LONG_DOUBLE_COMPLEX;
        return size == 8 ? HIER_DT_FLOAT_COMPLEX : size == 16 ? HIER_DT_DOUBLE_COMPLEX : -1;
    case HIER_CLASS_PAIR: return -1;
    }
    return -1;
}

/* Bytes of data (no padding) of a value/index pair, as MPI counts them. */
static size_t mca_coll_hier_pair_size(int storage)
{
    switch (storage) {
    case HIER_DT_FLOAT_INT: return sizeof(float) + sizeof(int);
    case HIER_DT_DOUBLE_INT: return sizeof(double) + sizeof(int);
    case HIER_DT_LONG_INT: return sizeof(long) + sizeof(int);
    case HIER_DT_2INT: return 2 * sizeof(int);
    case HIER_DT_SHORT_INT: return sizeof(short) + sizeof(int);
    case HIER_DT_LONG_DOUBLE_INT: return sizeof(long double) + sizeof(int);
    case HIER_DT_2FLOAT: return 2 * sizeof(float);
    case HIER_DT_2DOUBLE: return 2 * sizeof(double);
    default: return 0;
    }
}

static const hier_type_entry_t *mca_coll_hier_type_entry(MPI_Datatype dt)
{
    for (size_t i = 0; i < sizeof(mca_coll_hier_types) / sizeof(mca_coll_hier_types[0]); i++)
        if (mca_coll_hier_types[i].mpi == dt) return &mca_coll_hier_types[i];
    return NULL;
}

hier_path_t mca_coll_hier_map_bytes(ompi_datatype_t *dtype, size_t count, ptrdiff_t *lb_p)
{
    ptrdiff_t lb, extent, tlb, textent;
    size_t size;

    ompi_datatype_type_size(dtype, &size);
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &tlb, &textent);
    lb = tlb;
    /* gap-free (size == extent) and contiguous for two items: then for any count */
    if ((size_t)extent != size || !ompi_datatype_is_contiguous_memory_layout(dtype, count > 1 ? 2 : 1))
        return HIER_PATH_FALLBACK_DATATYPE;
    *lb_p = lb;
    return MCA_COLL_HIER_SERVED;
}

hier_path_t mca_coll_hier_map_reduction(ompi_datatype_t *dtype, ompi_op_t *op, hier_dtype_t *dt_p,
                                        size_t *per_type_p, hier_op_t *op_p)
{
    ompi_datatype_t *base = dtype;
    size_t size, base_size;
    ptrdiff_t lb, extent;
    int hop = -1, storage;

    for (size_t i = 0; i < sizeof(mca_coll_hier_ops) / sizeof(mca_coll_hier_ops[0]); i++)
        if (mca_coll_hier_ops[i].mpi == op) hop = (int)mca_coll_hier_ops[i].op;
    if (hop < 0) return HIER_PATH_FALLBACK_OP; /* user-defined op */

    /* A derived type qualifies when it is a contiguous run of one predefined type. */
    if (!ompi_datatype_is_predefined(dtype)) {
        base = ompi_datatype_get_single_predefined_type_from_args(dtype);
        if (!base) return HIER_PATH_FALLBACK_DATATYPE;
    }
    const hier_type_entry_t *e = mca_coll_hier_type_entry(base);
    if (!e) return HIER_PATH_FALLBACK_DATATYPE;
    ompi_datatype_type_size(base, &base_size);
    storage = e->cls == HIER_CLASS_PAIR ? e->pair : mca_coll_hier_storage(e->cls, base_size, base);
    if (storage < 0) return HIER_PATH_FALLBACK_DATATYPE;

    /* The buffer must be a gap-free array of the storage type (pairs keep their C padding). */
    ptrdiff_t tlb, textent;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &tlb, &textent);
    if (tlb != 0) return HIER_PATH_FALLBACK_DATATYPE;
    ompi_datatype_type_size(dtype, &size);
    size_t esize = hier_dtype_size((hier_dtype_t)storage);
    if (lb != 0 || (size_t)extent % esize) return HIER_PATH_FALLBACK_DATATYPE;
    if (e->cls != HIER_CLASS_PAIR && (size != (size_t)extent || !ompi_datatype_is_contiguous_memory_layout(dtype, 2)))
        return HIER_PATH_FALLBACK_DATATYPE;
    if (e->cls == HIER_CLASS_PAIR && (dtype != base || (size_t)extent != esize || size != mca_coll_hier_pair_size(storage)))
        return HIER_PATH_FALLBACK_DATATYPE; /* e.g. MPI_2INTEGER with 8-byte Fortran INTEGER */
    if (!size) return HIER_PATH_FALLBACK_DATATYPE; /* a type this build does not have */
    if (!(mca_coll_hier_class_ops[e->cls] & HIER_OPS_BIT(hop))) return HIER_PATH_FALLBACK_OP;

    *dt_p = (hier_dtype_t)storage;
    *per_type_p = (size_t)extent / esize;
    *op_p = (hier_op_t)hop;
    return MCA_COLL_HIER_SERVED;
}
