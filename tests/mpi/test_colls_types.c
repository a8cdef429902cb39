/* test_colls_types.c: the predefined datatypes and ops test_colls sweeps,
 * and what Open MPI's own reductions accept (asked at run time). */
#include <complex.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include "mpi_check.h"
#include "test_colls_types.h"

ttype_t types[80];
int ntypes;

static const MPI_Op *all_ops(void)
{
    static MPI_Op o[NOPS];
    o[O_SUM] = MPI_SUM, o[O_PROD] = MPI_PROD, o[O_MIN] = MPI_MIN, o[O_MAX] = MPI_MAX;
    o[O_LAND] = MPI_LAND, o[O_LOR] = MPI_LOR, o[O_LXOR] = MPI_LXOR, o[O_BAND] = MPI_BAND;
    o[O_BOR] = MPI_BOR, o[O_BXOR] = MPI_BXOR, o[O_MINLOC] = MPI_MINLOC, o[O_MAXLOC] = MPI_MAXLOC;
    return o;
}

/* Whether Open MPI checks arguments (mpi_param_check, an MPI_T control
 * variable): without, MPI_Reduce_local of a pair it cannot reduce calls a
 * missing function instead of refusing. */
int param_check_on(void)
{
    int idx, count, provided;
    long long v = 1;
    MPI_T_cvar_handle h;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_T_cvar_get_index("mpi_param_check", &idx) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        v = 0;
        MPI_T_cvar_read(h, &v);
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return v != 0;
}

/* What the standard allows (MPI-4.0 section 6.9.2) where this program
 * cannot ask Open MPI: no character types, no logical ops on Fortran
 * INTEGER, only logical ones on LOGICALs, only bitwise ones on MPI_BYTE. */
static int standard_allows(const char *name, int o)
{
    int logical = o >= O_LAND && o <= O_LXOR;
    if (!strcmp(name, "MPI_CHAR") || !strcmp(name, "MPI_WCHAR") || !strcmp(name, "MPI_CHARACTER")) return 0;
    if (!strncmp(name, "MPI_INTEGER", 11)) return !logical;
    if (!strncmp(name, "MPI_LOGICAL", 11)) return logical;
    if (!strcmp(name, "MPI_BYTE")) return o >= O_BAND && o <= O_BXOR;
    return 1;
}

/* Whether Open MPI's own reductions take (dt, op): MPI_Reduce_local of one
 * element with errors returned. It asks Open MPI's op framework, not hier. */
int ompi_reduces(MPI_Datatype dt, MPI_Op op)
{
    long double a[8] = {0}, b[8] = {0};
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Reduce_local(a, b, 1, dt, op);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    return rc == MPI_SUCCESS;
}

static void add(const char *name, MPI_Datatype dt, kind_t kind, size_t size, int sub, int big)
{
    int tsize;
    if (dt == MPI_DATATYPE_NULL) return;
    MPI_Type_size(dt, &tsize);
    if (tsize == 0) return; /* a Fortran type of an Open MPI built without Fortran */
    types[ntypes] = (ttype_t){name, dt, kind, size, sub, big, {0}};
    static int checked = -1;
    if (checked < 0) checked = param_check_on();
    for (int o = 0; o < NOPS; o++)
        types[ntypes].reduces[o] =
            (unsigned char)(checked ? ompi_reduces(dt, all_ops()[o]) : standard_allows(name, o));
    ntypes++;
}

void init_types(void)
{
    /* MPI_CHAR: the standard has no reductions on it; Open MPI reduces it as
     * a signed 8-bit integer (osu_allreduce's default type) */
    add("MPI_CHAR", MPI_CHAR, K_INT, 1, 0, 1);
    add("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, K_INT, 1, 0, 0);
    add("MPI_WCHAR", MPI_WCHAR, (wchar_t)-1 < (wchar_t)0 ? K_INT : K_UINT, sizeof(wchar_t), 0, 0);
    add("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, K_UINT, 1, 0, 0);
    add("MPI_SHORT", MPI_SHORT, K_INT, sizeof(short), 0, 0);
    add("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, K_UINT, sizeof(short), 0, 0);
    add("MPI_INT", MPI_INT, K_INT, sizeof(int), 0, 1);
    add("MPI_UNSIGNED", MPI_UNSIGNED, K_UINT, sizeof(int), 0, 0);
    add("MPI_LONG", MPI_LONG, K_INT, sizeof(long), 0, 0);
    add("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, K_UINT, sizeof(long), 0, 0);
    add("MPI_LONG_LONG", MPI_LONG_LONG, K_INT, sizeof(long long), 0, 0);
    add("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, K_UINT, sizeof(long long), 0, 0);
    add("MPI_INT8_T", MPI_INT8_T, K_INT, 1, 0, 0);
    add("MPI_UINT8_T", MPI_UINT8_T, K_UINT, 1, 0, 1);
    add("MPI_INT16_T", MPI_INT16_T, K_INT, 2, 0, 0);
    add("MPI_UINT16_T", MPI_UINT16_T, K_UINT, 2, 0, 0);
    add("MPI_INT32_T", MPI_INT32_T, K_INT, 4, 0, 0);
    add("MPI_UINT32_T", MPI_UINT32_T, K_UINT, 4, 0, 0);
    add("MPI_INT64_T", MPI_INT64_T, K_INT, 8, 0, 0);
    add("MPI_UINT64_T", MPI_UINT64_T, K_UINT, 8, 0, 1);
    add("MPI_AINT", MPI_AINT, K_INT, sizeof(MPI_Aint), 0, 0);
    add("MPI_OFFSET", MPI_OFFSET, K_INT, sizeof(MPI_Offset), 0, 0);
    add("MPI_COUNT", MPI_COUNT, K_INT, sizeof(MPI_Count), 0, 0);
    add("MPI_INTEGER", MPI_INTEGER, K_INT, 4, 0, 0);
    /* (sized Fortran types: only where Open MPI was built with them) */
#ifdef MPI_INTEGER1
    add("MPI_INTEGER1", MPI_INTEGER1, K_INT, 1, 0, 0);
#endif
#ifdef MPI_INTEGER2
    add("MPI_INTEGER2", MPI_INTEGER2, K_INT, 2, 0, 0);
#endif
#ifdef MPI_INTEGER4
    add("MPI_INTEGER4", MPI_INTEGER4, K_INT, 4, 0, 0);
#endif
#ifdef MPI_INTEGER8
    add("MPI_INTEGER8", MPI_INTEGER8, K_INT, 8, 0, 0);
#endif
#ifdef MPI_REAL4
    add("MPI_REAL4", MPI_REAL4, K_FLOAT, 4, 0, 0);
#endif
#ifdef MPI_REAL8
    add("MPI_REAL8", MPI_REAL8, K_FLOAT, 8, 1, 0);
#endif
    /* Open MPI reduces REAL*16 (and COMPLEX*32) only where its configure
     * found them to be C's long double (OMPI_REAL16_MATCHES_C): as long double */
#ifdef MPI_REAL16
    add("MPI_REAL16", MPI_REAL16, K_FLOAT, sizeof(long double), 2, 0);
#endif
#ifdef MPI_COMPLEX32
    add("MPI_COMPLEX32", MPI_COMPLEX32, K_COMPLEX, sizeof(long double _Complex), 2, 0);
#endif
    add("MPI_FLOAT", MPI_FLOAT, K_FLOAT, sizeof(float), 0, 1);
    add("MPI_DOUBLE", MPI_DOUBLE, K_FLOAT, sizeof(double), 1, 1);
    add("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, K_FLOAT, sizeof(long double), 2, 0);
    add("MPI_REAL", MPI_REAL, K_FLOAT, 4, 0, 0);
    add("MPI_DOUBLE_PRECISION", MPI_DOUBLE_PRECISION, K_FLOAT, 8, 1, 0);
    add("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, K_COMPLEX, sizeof(float _Complex), 0, 0);
    add("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_COMPLEX, sizeof(double _Complex), 1, 0);
    add("MPI_C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, K_COMPLEX, sizeof(long double _Complex), 2, 1);
    add("MPI_COMPLEX", MPI_COMPLEX, K_COMPLEX, 8, 0, 0);
    add("MPI_DOUBLE_COMPLEX", MPI_DOUBLE_COMPLEX, K_COMPLEX, 16, 1, 0);
    add("MPI_CXX_FLOAT_COMPLEX", MPI_CXX_FLOAT_COMPLEX, K_COMPLEX, sizeof(float _Complex), 0, 0);
    add("MPI_CXX_DOUBLE_COMPLEX", MPI_CXX_DOUBLE_COMPLEX, K_COMPLEX, sizeof(double _Complex), 1, 0);
    add("MPI_CXX_LONG_DOUBLE_COMPLEX", MPI_CXX_LONG_DOUBLE_COMPLEX, K_COMPLEX, sizeof(long double _Complex), 2, 0);
#ifdef MPI_COMPLEX8
    add("MPI_COMPLEX8", MPI_COMPLEX8, K_COMPLEX, 8, 0, 0);
#endif
#ifdef MPI_COMPLEX16
    add("MPI_COMPLEX16", MPI_COMPLEX16, K_COMPLEX, 16, 1, 0);
#endif
    add("MPI_C_BOOL", MPI_C_BOOL, K_BOOL, sizeof(_Bool), 0, 0);
    add("MPI_CXX_BOOL", MPI_CXX_BOOL, K_BOOL, 1, 0, 0);
    add("MPI_LOGICAL", MPI_LOGICAL, K_LOGICAL, 4, 0, 0);
    /* Open MPI reduces the sized LOGICALs as signed integers of their size
     * (every integer op; LAND and friends on any non-zero value) */
#ifdef MPI_LOGICAL1
    add("MPI_LOGICAL1", MPI_LOGICAL1, K_INT, 1, 0, 0);
#endif
#ifdef MPI_LOGICAL2
    add("MPI_LOGICAL2", MPI_LOGICAL2, K_INT, 2, 0, 0);
#endif
#ifdef MPI_LOGICAL4
    add("MPI_LOGICAL4", MPI_LOGICAL4, K_INT, 4, 0, 0);
#endif
#ifdef MPI_LOGICAL8
    add("MPI_LOGICAL8", MPI_LOGICAL8, K_INT, 8, 0, 0);
#endif
    /* Fortran CHARACTER: Open MPI reduces it as uint8_t */
    add("MPI_CHARACTER", MPI_CHARACTER, K_UINT, 1, 0, 0);
    add("MPI_BYTE", MPI_BYTE, K_BYTE, 1, 0, 0);
    add("MPI_FLOAT_INT", MPI_FLOAT_INT, K_PAIR, sizeof(p_fi), V_F, 0);
    add("MPI_DOUBLE_INT", MPI_DOUBLE_INT, K_PAIR, sizeof(p_di), V_D, 1);
    add("MPI_LONG_INT", MPI_LONG_INT, K_PAIR, sizeof(p_li), V_L, 0);
    add("MPI_2INT", MPI_2INT, K_PAIR, sizeof(p_ii), V_I, 0);
    add("MPI_SHORT_INT", MPI_SHORT_INT, K_PAIR, sizeof(p_si), V_S, 0);
    add("MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, K_PAIR, sizeof(p_ldi), V_LD, 0);
    /* (an Open MPI without Fortran has these two, but no op on them) */
    int real_size;
    MPI_Type_size(MPI_REAL, &real_size);
    if (real_size) {
        add("MPI_2REAL", MPI_2REAL, K_PAIR, sizeof(p_ff), V_FF, 0);
        add("MPI_2DOUBLE_PRECISION", MPI_2DOUBLE_PRECISION, K_PAIR, sizeof(p_dd), V_DD, 0);
    }
    add("MPI_2INTEGER", MPI_2INTEGER, K_PAIR, sizeof(p_ii), V_I, 0);
}

/* ---------------------------------------------------------------- ops */


top_t ops[NOPS];

void init_ops(void)
{
    static const char *names[NOPS] = {"SUM", "PROD", "MIN", "MAX", "LAND", "LOR",
                                      "LXOR", "BAND", "BOR", "BXOR", "MINLOC", "MAXLOC"};
    for (int o = 0; o < NOPS; o++) ops[o] = (top_t){names[o], all_ops()[o]};
}

int op_valid(kind_t k, int o)
{
    switch (k) {
    case K_INT: case K_UINT: return o <= O_BXOR;
    case K_FLOAT: return o <= O_MAX;
    case K_COMPLEX: return o <= O_PROD;
    case K_BOOL: case K_LOGICAL: return o >= O_LAND && o <= O_LXOR;
    case K_BYTE: return o <= O_BXOR; /* MPI: BAND, BOR, BXOR; Open MPI: as uint8_t */
    case K_PAIR: return o >= O_MINLOC;
    }
    return 0;
}

/* Every predefined datatype of mpi.h, and whether hier has a kernel for its
 * element type (those without: Fortran's half precision and 128-bit integers). */
typedef struct { const char *name; MPI_Datatype dt; int kernel; } handle_t;
#define H(x) {#x, x, 1}
#define H_NO_KERNEL(x) {#x, x, 0}

static size_t all_handles(handle_t *h)
{
    size_t n = 0;
    handle_t c[] = {
        H(MPI_CHAR), H(MPI_SIGNED_CHAR), H(MPI_UNSIGNED_CHAR), H(MPI_BYTE), H(MPI_WCHAR), H(MPI_SHORT),
        H(MPI_UNSIGNED_SHORT), H(MPI_INT), H(MPI_UNSIGNED), H(MPI_LONG), H(MPI_UNSIGNED_LONG),
        H(MPI_LONG_LONG_INT), H(MPI_UNSIGNED_LONG_LONG), H(MPI_FLOAT), H(MPI_DOUBLE), H(MPI_LONG_DOUBLE),
        H(MPI_PACKED), H(MPI_INT8_T), H(MPI_UINT8_T), H(MPI_INT16_T), H(MPI_UINT16_T), H(MPI_INT32_T),
        H(MPI_UINT32_T), H(MPI_INT64_T), H(MPI_UINT64_T), H(MPI_AINT), H(MPI_OFFSET), H(MPI_COUNT),
        H(MPI_C_BOOL), H(MPI_C_FLOAT_COMPLEX), H(MPI_C_DOUBLE_COMPLEX), H(MPI_C_LONG_DOUBLE_COMPLEX),
        H(MPI_CXX_BOOL), H(MPI_CXX_FLOAT_COMPLEX), H(MPI_CXX_DOUBLE_COMPLEX), H(MPI_CXX_LONG_DOUBLE_COMPLEX),
        H(MPI_CHARACTER), H(MPI_LOGICAL), H(MPI_INTEGER), H(MPI_REAL), H(MPI_DOUBLE_PRECISION), H(MPI_COMPLEX),
        H(MPI_DOUBLE_COMPLEX), H(MPI_FLOAT_INT), H(MPI_DOUBLE_INT), H(MPI_LONG_INT), H(MPI_2INT),
        H(MPI_SHORT_INT), H(MPI_LONG_DOUBLE_INT), H(MPI_2REAL), H(MPI_2DOUBLE_PRECISION), H(MPI_2INTEGER),
        H(MPI_2COMPLEX), H(MPI_2DOUBLE_COMPLEX),
#ifdef MPI_LOGICAL1
        H(MPI_LOGICAL1),
#endif
#ifdef MPI_LOGICAL2
        H(MPI_LOGICAL2),
#endif
#ifdef MPI_LOGICAL4
        H(MPI_LOGICAL4),
#endif
#ifdef MPI_LOGICAL8
        H(MPI_LOGICAL8),
#endif
#ifdef MPI_INTEGER1
        H(MPI_INTEGER1),
#endif
#ifdef MPI_INTEGER2
        H(MPI_INTEGER2),
#endif
#ifdef MPI_INTEGER4
        H(MPI_INTEGER4),
#endif
#ifdef MPI_INTEGER8
        H(MPI_INTEGER8),
#endif
#ifdef MPI_INTEGER16
        H_NO_KERNEL(MPI_INTEGER16),
#endif
#ifdef MPI_REAL2
        H_NO_KERNEL(MPI_REAL2),
#endif
#ifdef MPI_REAL4
        H(MPI_REAL4),
#endif
#ifdef MPI_REAL8
        H(MPI_REAL8),
#endif
#ifdef MPI_REAL16
        H(MPI_REAL16),
#endif
#ifdef MPI_COMPLEX8
        H(MPI_COMPLEX8),
#endif
#ifdef MPI_COMPLEX16
        H(MPI_COMPLEX16),
#endif
#ifdef MPI_COMPLEX32
        H(MPI_COMPLEX32),
#endif
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        int size = 0;
        if (c[i].dt != MPI_DATATYPE_NULL) MPI_Type_size(c[i].dt, &size);
        if (size) h[n++] = c[i];
    }
    return n;
}

/* Whatever Open MPI's own reductions take, test_colls must check against its
 * references (the sweep: a type of its table with the op in its class), or
 * it is a type hier has no kernel for, whose calls must fall back (returns
 * how many it made; zeros in, zeros out). Anything else fails here: the table would
 * be missing a type users can reduce. */
long every_reducible_type(MPI_Comm comm)
{
    handle_t h[96];
    size_t nh = all_handles(h);
    int covered = 0;
    long declined = 0;
    for (size_t i = 0; i < nh; i++)
        for (int o = 0; o < NOPS; o++) {
            if (!ompi_reduces(h[i].dt, ops[o].op)) continue;
            const ttype_t *t = NULL;
            for (int ti = 0; ti < ntypes; ti++)
                if (types[ti].dt == h[i].dt) t = &types[ti];
            if (t && op_valid(t->kind, o)) {
                covered++;
                continue;
            }
            CHECK(!h[i].kernel, "Open MPI reduces %s with MPI_%s: test_colls has no reference for it", h[i].name,
                  ops[o].name);
            if (h[i].kernel) continue;
            char s[256] = {0}, r[256];
            memset(r, 0x5a, sizeof(r));
            MPI_Allreduce(s, r, 4, h[i].dt, ops[o].op, comm);
            int size;
            MPI_Type_size(h[i].dt, &size);
            for (int b = 0; b < 4 * size; b++)
                if (r[b]) {
                    CHECK(0, "%s MPI_%s of zeros: byte %d is %d", h[i].name, ops[o].name, b, r[b]);
                    break;
                }
            declined++;
        }
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0)
        printf("test_colls: of %zu predefined types, Open MPI reduces %d (type, op) pairs the sweep checks, "
               "%ld that must fall back\n", nh, covered, declined);
    return declined;
}
