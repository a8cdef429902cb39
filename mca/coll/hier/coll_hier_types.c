/* coll_hier_types.c: MPI datatypes and ops to the core's element types (docs/design.md, "Inside a node":
 * Reduction kernels). hier reduces what Open MPI's own reductions reduce: Open MPI maps every predefined datatype
 * it reduces to one element type of its op framework (ompi_op_ddt_map[], OMPI_OP_BASE_TYPE_*) and holds a
 * function for each op defined on it. hier serves an (op, type) pair when Open MPI has that function and hier's
 * kernels have the same element type -- not only the list the standard names: MPI_CHAR, which OSU's
 * osu_allreduce sends, Open MPI reduces as a signed 8-bit integer, and so does hier. The class of an element
 * type decides which ops hier's kernels have (MPI-4.0 section 6.9.2); integer storage is picked by the
 * datatype's size, so MPI_LONG, MPI_INTEGER, MPI_WCHAR or MPI_AINT land on the right width. */
#include <wchar.h>

#include "coll_hier.h"

#include "base/hier_log.h"

typedef enum {
    HIER_CLASS_NONE,    /* no kernel in hier (REAL2, INTEGER16, 5.0's short float) */
    HIER_CLASS_INT,     /* signed C/Fortran integers */
    HIER_CLASS_UINT,    /* unsigned integers */
    HIER_CLASS_FLOAT,
    HIER_CLASS_COMPLEX,
    HIER_CLASS_LOGICAL, /* C _Bool, C++ bool, Fortran LOGICAL */
    HIER_CLASS_BYTE,
    HIER_CLASS_PAIR,    /* MINLOC/MAXLOC value-index pairs */
} hier_class_t;

typedef struct {
    hier_class_t cls;
    int storage; /* a fixed storage type, or -1: by the datatype's size */
} hier_type_entry_t;

#define BY_SIZE(c) {HIER_CLASS_##c, -1}
#define FIXED(c, dt) {HIER_CLASS_##c, HIER_DT_##dt}
/* wchar_t is signed on x86-64 and aarch64 Linux, unsigned elsewhere */
#define WCHAR_CLASS ((wchar_t)-1 < (wchar_t)0 ? HIER_CLASS_INT : HIER_CLASS_UINT)

static const hier_type_entry_t mca_coll_hier_types[OMPI_OP_BASE_TYPE_MAX] = {
    [OMPI_OP_BASE_TYPE_INT8_T] = BY_SIZE(INT), [OMPI_OP_BASE_TYPE_UINT8_T] = BY_SIZE(UINT),
    [OMPI_OP_BASE_TYPE_INT16_T] = BY_SIZE(INT), [OMPI_OP_BASE_TYPE_UINT16_T] = BY_SIZE(UINT),
    [OMPI_OP_BASE_TYPE_INT32_T] = BY_SIZE(INT), [OMPI_OP_BASE_TYPE_UINT32_T] = BY_SIZE(UINT),
    [OMPI_OP_BASE_TYPE_INT64_T] = BY_SIZE(INT), [OMPI_OP_BASE_TYPE_UINT64_T] = BY_SIZE(UINT),
    [OMPI_OP_BASE_TYPE_LONG] = BY_SIZE(INT), [OMPI_OP_BASE_TYPE_UNSIGNED_LONG] = BY_SIZE(UINT),
    [OMPI_OP_BASE_TYPE_INTEGER] = BY_SIZE(INT), [OMPI_OP_BASE_TYPE_INTEGER1] = BY_SIZE(INT),
    [OMPI_OP_BASE_TYPE_INTEGER2] = BY_SIZE(INT), [OMPI_OP_BASE_TYPE_INTEGER4] = BY_SIZE(INT),
    [OMPI_OP_BASE_TYPE_INTEGER8] = BY_SIZE(INT),
    [OMPI_OP_BASE_TYPE_WCHAR] = {WCHAR_CLASS, -1},
    [OMPI_OP_BASE_TYPE_FLOAT] = BY_SIZE(FLOAT), [OMPI_OP_BASE_TYPE_DOUBLE] = BY_SIZE(FLOAT),
    [OMPI_OP_BASE_TYPE_REAL] = BY_SIZE(FLOAT), [OMPI_OP_BASE_TYPE_REAL4] = BY_SIZE(FLOAT),
    [OMPI_OP_BASE_TYPE_REAL8] = BY_SIZE(FLOAT), [OMPI_OP_BASE_TYPE_DOUBLE_PRECISION] = BY_SIZE(FLOAT),
    [OMPI_OP_BASE_TYPE_LONG_DOUBLE] = FIXED(FLOAT, LONG_DOUBLE),
    /* Open MPI has REAL*16 ops only where configure found it to be C's long double */
    [OMPI_OP_BASE_TYPE_REAL16] = FIXED(FLOAT, LONG_DOUBLE),
    [OMPI_OP_BASE_TYPE_C_FLOAT_COMPLEX] = BY_SIZE(COMPLEX), [OMPI_OP_BASE_TYPE_C_DOUBLE_COMPLEX] = BY_SIZE(COMPLEX),
    [OMPI_OP_BASE_TYPE_C_LONG_DOUBLE_COMPLEX] = FIXED(COMPLEX, LONG_DOUBLE_COMPLEX),
    [OMPI_OP_BASE_TYPE_LOGICAL] = BY_SIZE(LOGICAL), [OMPI_OP_BASE_TYPE_BOOL] = BY_SIZE(LOGICAL),
    [OMPI_OP_BASE_TYPE_BYTE] = BY_SIZE(BYTE),
    [OMPI_OP_BASE_TYPE_FLOAT_INT] = FIXED(PAIR, FLOAT_INT), [OMPI_OP_BASE_TYPE_DOUBLE_INT] = FIXED(PAIR, DOUBLE_INT),
    [OMPI_OP_BASE_TYPE_LONG_INT] = FIXED(PAIR, LONG_INT), [OMPI_OP_BASE_TYPE_2INT] = FIXED(PAIR, 2INT),
    [OMPI_OP_BASE_TYPE_SHORT_INT] = FIXED(PAIR, SHORT_INT),
    [OMPI_OP_BASE_TYPE_LONG_DOUBLE_INT] = FIXED(PAIR, LONG_DOUBLE_INT),
    [OMPI_OP_BASE_TYPE_2REAL] = FIXED(PAIR, 2FLOAT), [OMPI_OP_BASE_TYPE_2DOUBLE_PRECISION] = FIXED(PAIR, 2DOUBLE),
    [OMPI_OP_BASE_TYPE_2INTEGER] = FIXED(PAIR, 2INT),
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

/* Storage type of a class member of `size` bytes, or -1. */
static int mca_coll_hier_storage(const hier_type_entry_t *e, size_t size)
{
    static const hier_dtype_t sint[] = {HIER_DT_INT8, HIER_DT_INT16, HIER_DT_INT32, HIER_DT_INT64};
    static const hier_dtype_t uint[] = {HIER_DT_UINT8, HIER_DT_UINT16, HIER_DT_UINT32, HIER_DT_UINT64};
    int lg = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : size == 8 ? 3 : -1;

    if (e->storage >= 0) return e->storage;
    switch (e->cls) {
    case HIER_CLASS_INT: return lg < 0 ? -1 : (int)sint[lg];
    case HIER_CLASS_UINT: case HIER_CLASS_BYTE: return lg < 0 ? -1 : (int)uint[lg];
    case HIER_CLASS_LOGICAL: return size == 1 ? HIER_DT_BOOL : lg < 0 ? -1 : (int)sint[lg];
    case HIER_CLASS_FLOAT: return size == 4 ? HIER_DT_FLOAT : size == 8 ? HIER_DT_DOUBLE : -1;
    case HIER_CLASS_COMPLEX: return size == 8 ? HIER_DT_FLOAT_COMPLEX : size == 16 ? HIER_DT_DOUBLE_COMPLEX : -1;
    case HIER_CLASS_NONE: case HIER_CLASS_PAIR: return -1;
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

/* Open MPI's element type of a predefined datatype, when Open MPI reduces it
 * with op. MPI_OFFSET is the exception: Open MPI maps it to uint64_t, but
 * MPI_Offset is a signed type, so hier keeps it signed (MIN and MAX of
 * negative offsets as the standard has them). */
static hier_path_t mca_coll_hier_type_entry(ompi_datatype_t *base, ompi_op_t *op, const hier_type_entry_t **e_p)
{
    static const hier_type_entry_t offset = BY_SIZE(INT);
    int ot;

    if (base->id < 0 || base->id >= OMPI_DATATYPE_MAX_PREDEFINED) return HIER_PATH_FALLBACK_DATATYPE;
    ot = ompi_op_ddt_map[base->id];
    if (ot < 0 || ot >= OMPI_OP_BASE_TYPE_MAX) return HIER_PATH_FALLBACK_DATATYPE; /* not reducible */
    if (!op->o_func.intrinsic.fns[ot]) return HIER_PATH_FALLBACK_OP; /* not with this op */
    *e_p = base == MPI_OFFSET ? &offset : &mca_coll_hier_types[ot];
    return MCA_COLL_HIER_SERVED;
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

/* A user's commutative operation (MPI_Op_create) on a gap-free array of
 * one predefined type (the type itself, or a contiguous derived type of it)
 * whose extent is one of the core's element sizes: the core cuts buffers
 * only between elements of that size, so the user's function always gets
 * whole elements of the call's own datatype, which it is called with
 * (mca_coll_hier_user_reduce). Non-commutative operations keep MPI's
 * canonical order only in the previous component. */
static hier_path_t mca_coll_hier_map_user(ompi_datatype_t *dtype, ompi_op_t *op, hier_dtype_t *dt_p)
{
    static const hier_dtype_t carriers[] = {HIER_DT_UINT8, HIER_DT_UINT16, HIER_DT_UINT32, HIER_DT_UINT64,
                                            HIER_DT_DOUBLE_COMPLEX, HIER_DT_LONG_DOUBLE_COMPLEX};
    ptrdiff_t lb, extent, tlb, textent;
    size_t size;

    if (!ompi_op_is_commute(op)) return HIER_PATH_FALLBACK_OP;
    if (!ompi_datatype_is_predefined(dtype) && !ompi_datatype_get_single_predefined_type_from_args(dtype))
        return HIER_PATH_FALLBACK_DATATYPE;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &tlb, &textent);
    ompi_datatype_type_size(dtype, &size);
    if (lb != 0 || tlb != 0 || size != (size_t)extent || !ompi_datatype_is_contiguous_memory_layout(dtype, 2))
        return HIER_PATH_FALLBACK_DATATYPE;
    for (size_t i = 0; i < sizeof(carriers) / sizeof(carriers[0]); i++)
        if (hier_dtype_size(carriers[i]) == size) {
            *dt_p = carriers[i];
            return MCA_COLL_HIER_SERVED;
        }
    return HIER_PATH_FALLBACK_DATATYPE;
}

static void mca_coll_hier_user_reduce(const void *in, void *inout, size_t count, void *ctx)
{
    mca_coll_hier_user_op_t *u = ctx;
    ompi_op_reduce(u->op, (void *)in, inout, count, u->dtype); /* inout = in op inout, the user's function */
}

void mca_coll_hier_user_op_install(mca_coll_hier_user_op_t *u, ompi_op_t *op, ompi_datatype_t *dtype)
{
    u->op = op;
    u->dtype = dtype;
    hier_comm_user_op_set(&(hier_user_op_t){mca_coll_hier_user_reduce, u});
}

hier_user_op_t mca_coll_hier_user_op_core(mca_coll_hier_user_op_t *u)
{
    return (hier_user_op_t){mca_coll_hier_user_reduce, u};
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
    if (hop < 0 && ompi_op_is_intrinsic(op)) return HIER_PATH_FALLBACK_OP; /* (MPI_REPLACE, MPI_NO_OP) */
    if (hop < 0) {
        hier_path_t path = mca_coll_hier_map_user(dtype, op, dt_p);
        if (path != MCA_COLL_HIER_SERVED) return path;
        *per_type_p = 1;
        *op_p = HIER_OP_USER;
        return path;
    }

    /* A derived type qualifies when it is a contiguous run of one predefined type. */
    if (!ompi_datatype_is_predefined(dtype)) {
        base = ompi_datatype_get_single_predefined_type_from_args(dtype);
        if (!base) return HIER_PATH_FALLBACK_DATATYPE;
    }
    const hier_type_entry_t *e = NULL;
    hier_path_t path = mca_coll_hier_type_entry(base, op, &e);
    if (path != MCA_COLL_HIER_SERVED) return path;
    ompi_datatype_type_size(base, &base_size);
    storage = mca_coll_hier_storage(e, base_size);
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

/* Open MPI's datatype copy (pack, unpack) of counts in size_t: an error
 * where the line's counts cannot hold them. */
int mca_coll_hier_sndrcv(const void *sbuf, size_t scount, ompi_datatype_t *sdtype, void *rbuf, size_t rcount,
                                ompi_datatype_t *rdtype)
{
    if (scount > MCA_COLL_HIER_COUNT_MAX || rcount > MCA_COLL_HIER_COUNT_MAX) { /* (4.1, 5.0: int32 counts) */
        HIER_ERROR("a datatype copy of %zu items is past this Open MPI's counts", scount > rcount ? scount : rcount);
        return MPI_ERR_COUNT;
    }
    return ompi_datatype_sndrcv(sbuf, (mca_coll_hier_count_t)scount, sdtype, rbuf, (mca_coll_hier_count_t)rcount,
                                rdtype) == MPI_SUCCESS ? MPI_SUCCESS : OMPI_ERROR;
}

/* A buffer described by a non-contiguous type: its span (gaps included) to
 * mirror when it is device memory (the core copies it), so the datatype
 * engine works on the host. Contiguous ones need no mirror: the core stages
 * them itself. */
int mca_coll_hier_mirror_in_any(const void *buf, size_t count, ompi_datatype_t *dt, hier_accel_mirror_t *m)
{
    ptrdiff_t lb, ext, tlb, text, ignored;
    *m = (hier_accel_mirror_t){0};
    if (!count || !buf || buf == MPI_IN_PLACE || mca_coll_hier_map_bytes(dt, count, &ignored) == MCA_COLL_HIER_SERVED)
        return OMPI_SUCCESS;
    ompi_datatype_get_extent(dt, &lb, &ext);
    ompi_datatype_get_true_extent(dt, &tlb, &text);
    hier_status_t st = hier_accel_mirror_in((char *)buf + tlb, (count - 1) * (size_t)ext + (size_t)text, m);
    return st == HIER_OK ? OMPI_SUCCESS : st == HIER_ERR_NO_MEMORY ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_ERROR;
}
