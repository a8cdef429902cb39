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

/* Fortran's types (MPI_C_* are C's). */
static int fortran_type(const char *name)
{
    static const char *const prefixes[] = {"MPI_INTEGER", "MPI_REAL", "MPI_DOUBLE_PRECISION", "MPI_COMPLEX",
                                           "MPI_DOUBLE_COMPLEX", "MPI_LOGICAL", "MPI_CHARACTER", "MPI_2INTEGER",
                                           "MPI_2REAL", "MPI_2DOUBLE_PRECISION"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

static void add(const char *name, MPI_Datatype dt, kind_t kind, size_t size, int sub, int big, int no_kernel)
{
    int tsize;
    if (dt == MPI_DATATYPE_NULL) return;
    MPI_Type_size(dt, &tsize);
    if (tsize == 0) return; /* a Fortran type of an Open MPI built without Fortran */
    static int checked = -1;
    if (checked < 0) checked = param_check_on();
    /* Without argument checks nothing here can ask whether Open MPI reduces
     * a Fortran type: 6.0 built without Fortran sizes them but has no
     * kernels, and its own reductions call the missing function (SIGSEGV in
     * tuned's reduce_scatter on MPI_INTEGER). The sweep has them where the
     * checks are on. */
    if (!checked && fortran_type(name)) return;
    types[ntypes] = (ttype_t){name, dt, kind, size ? size : (size_t)tsize, sub, big, no_kernel, {0}};
    for (int o = 0; o < NOPS; o++)
        types[ntypes].reduces[o] =
            (unsigned char)(checked ? ompi_reduces(dt, all_ops()[o]) : standard_allows(name, o));
    ntypes++;
}

/* Every predefined datatype of mpi.h, in one table: those with a kind the
 * sweep checks against references; those hier has no kernel for (NO_KERNEL:
 * Fortran's half precision and 128-bit integers) must fall back wherever
 * Open MPI reduces them. */
#define ADD(x, kind, size, sub, big) add(#x, x, kind, size, sub, big, 0)
#define NO_KERNEL(x) add(#x, x, K_INT, 0, 0, 0, 1) /* (size: MPI_Type_size) */

void init_types(void)
{
    /* MPI_CHAR: the standard has no reductions on it; Open MPI reduces it as
     * a signed 8-bit integer (osu_allreduce's default type) */
    ADD(MPI_CHAR, K_INT, 1, 0, 1);
    ADD(MPI_SIGNED_CHAR, K_INT, 1, 0, 0);
    ADD(MPI_WCHAR, (wchar_t)-1 < (wchar_t)0 ? K_INT : K_UINT, sizeof(wchar_t), 0, 0);
    ADD(MPI_UNSIGNED_CHAR, K_UINT, 1, 0, 0);
    ADD(MPI_SHORT, K_INT, sizeof(short), 0, 0);
    ADD(MPI_UNSIGNED_SHORT, K_UINT, sizeof(short), 0, 0);
    ADD(MPI_INT, K_INT, sizeof(int), 0, 1);
    ADD(MPI_UNSIGNED, K_UINT, sizeof(int), 0, 0);
    ADD(MPI_LONG, K_INT, sizeof(long), 0, 0);
    ADD(MPI_UNSIGNED_LONG, K_UINT, sizeof(long), 0, 0);
    ADD(MPI_LONG_LONG, K_INT, sizeof(long long), 0, 0);
    ADD(MPI_UNSIGNED_LONG_LONG, K_UINT, sizeof(long long), 0, 0);
    ADD(MPI_INT8_T, K_INT, 1, 0, 0);
    ADD(MPI_UINT8_T, K_UINT, 1, 0, 1);
    ADD(MPI_INT16_T, K_INT, 2, 0, 0);
    ADD(MPI_UINT16_T, K_UINT, 2, 0, 0);
    ADD(MPI_INT32_T, K_INT, 4, 0, 0);
    ADD(MPI_UINT32_T, K_UINT, 4, 0, 0);
    ADD(MPI_INT64_T, K_INT, 8, 0, 0);
    ADD(MPI_UINT64_T, K_UINT, 8, 0, 1);
    ADD(MPI_AINT, K_INT, sizeof(MPI_Aint), 0, 0);
    ADD(MPI_OFFSET, K_INT, sizeof(MPI_Offset), 0, 0);
    ADD(MPI_COUNT, K_INT, sizeof(MPI_Count), 0, 0);
    ADD(MPI_INTEGER, K_INT, 4, 0, 0);
    /* (sized Fortran types: only where Open MPI was built with them) */
#ifdef MPI_INTEGER1
    ADD(MPI_INTEGER1, K_INT, 1, 0, 0);
#endif
#ifdef MPI_INTEGER2
    ADD(MPI_INTEGER2, K_INT, 2, 0, 0);
#endif
#ifdef MPI_INTEGER4
    ADD(MPI_INTEGER4, K_INT, 4, 0, 0);
#endif
#ifdef MPI_INTEGER8
    ADD(MPI_INTEGER8, K_INT, 8, 0, 0);
#endif
#ifdef MPI_REAL4
    ADD(MPI_REAL4, K_FLOAT, 4, 0, 0);
#endif
#ifdef MPI_REAL8
    ADD(MPI_REAL8, K_FLOAT, 8, 1, 0);
#endif
    /* Open MPI reduces REAL*16 (and COMPLEX*32) only where its configure
     * found them to be C's long double (OMPI_REAL16_MATCHES_C): as long double */
#ifdef MPI_REAL16
    ADD(MPI_REAL16, K_FLOAT, sizeof(long double), 2, 0);
#endif
#ifdef MPI_COMPLEX32
    ADD(MPI_COMPLEX32, K_COMPLEX, sizeof(long double _Complex), 2, 0);
#endif
    ADD(MPI_FLOAT, K_FLOAT, sizeof(float), 0, 1);
    ADD(MPI_DOUBLE, K_FLOAT, sizeof(double), 1, 1);
    ADD(MPI_LONG_DOUBLE, K_FLOAT, sizeof(long double), 2, 0);
    ADD(MPI_REAL, K_FLOAT, 4, 0, 0);
    ADD(MPI_DOUBLE_PRECISION, K_FLOAT, 8, 1, 0);
    ADD(MPI_C_FLOAT_COMPLEX, K_COMPLEX, sizeof(float _Complex), 0, 0);
    ADD(MPI_C_DOUBLE_COMPLEX, K_COMPLEX, sizeof(double _Complex), 1, 0);
    ADD(MPI_C_LONG_DOUBLE_COMPLEX, K_COMPLEX, sizeof(long double _Complex), 2, 1);
    ADD(MPI_COMPLEX, K_COMPLEX, 8, 0, 0);
    ADD(MPI_DOUBLE_COMPLEX, K_COMPLEX, 16, 1, 0);
    ADD(MPI_CXX_FLOAT_COMPLEX, K_COMPLEX, sizeof(float _Complex), 0, 0);
    ADD(MPI_CXX_DOUBLE_COMPLEX, K_COMPLEX, sizeof(double _Complex), 1, 0);
    ADD(MPI_CXX_LONG_DOUBLE_COMPLEX, K_COMPLEX, sizeof(long double _Complex), 2, 0);
#ifdef MPI_COMPLEX8
    ADD(MPI_COMPLEX8, K_COMPLEX, 8, 0, 0);
#endif
#ifdef MPI_COMPLEX16
    ADD(MPI_COMPLEX16, K_COMPLEX, 16, 1, 0);
#endif
    ADD(MPI_C_BOOL, K_BOOL, sizeof(_Bool), 0, 0);
    ADD(MPI_CXX_BOOL, K_BOOL, 1, 0, 0);
    ADD(MPI_LOGICAL, K_LOGICAL, 4, 0, 0);
    /* Open MPI reduces the sized LOGICALs as signed integers of their size
     * (every integer op; LAND and friends on any non-zero value) */
#ifdef MPI_LOGICAL1
    ADD(MPI_LOGICAL1, K_INT, 1, 0, 0);
#endif
#ifdef MPI_LOGICAL2
    ADD(MPI_LOGICAL2, K_INT, 2, 0, 0);
#endif
#ifdef MPI_LOGICAL4
    ADD(MPI_LOGICAL4, K_INT, 4, 0, 0);
#endif
#ifdef MPI_LOGICAL8
    ADD(MPI_LOGICAL8, K_INT, 8, 0, 0);
#endif
    /* Fortran CHARACTER: Open MPI reduces it as uint8_t */
    ADD(MPI_CHARACTER, K_UINT, 1, 0, 0);
    ADD(MPI_BYTE, K_BYTE, 1, 0, 0);
    ADD(MPI_FLOAT_INT, K_PAIR, sizeof(p_fi), V_F, 0);
    ADD(MPI_DOUBLE_INT, K_PAIR, sizeof(p_di), V_D, 1);
    ADD(MPI_LONG_INT, K_PAIR, sizeof(p_li), V_L, 0);
    ADD(MPI_2INT, K_PAIR, sizeof(p_ii), V_I, 0);
    ADD(MPI_SHORT_INT, K_PAIR, sizeof(p_si), V_S, 0);
    ADD(MPI_LONG_DOUBLE_INT, K_PAIR, sizeof(p_ldi), V_LD, 0);
    /* (an Open MPI without Fortran has these two, but no op on them) */
    int real_size;
    MPI_Type_size(MPI_REAL, &real_size);
    if (real_size) {
        ADD(MPI_2REAL, K_PAIR, sizeof(p_ff), V_FF, 0);
        ADD(MPI_2DOUBLE_PRECISION, K_PAIR, sizeof(p_dd), V_DD, 0);
    }
    ADD(MPI_2INTEGER, K_PAIR, sizeof(p_ii), V_I, 0);
    /* types Open MPI reduces with no op, and those hier has no kernel for */
    NO_KERNEL(MPI_PACKED);
    NO_KERNEL(MPI_2COMPLEX);
    NO_KERNEL(MPI_2DOUBLE_COMPLEX);
#ifdef MPI_INTEGER16
    NO_KERNEL(MPI_INTEGER16);
#endif
#ifdef MPI_REAL2
    NO_KERNEL(MPI_REAL2);
#endif
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

int sweep_checks(const ttype_t *t, int o)
{
    return !t->no_kernel && op_valid(t->kind, o) && t->reduces[o];
}

/* Whatever Open MPI's own reductions take, test_colls must check against its
 * references (the sweep: a type of its table with the op in its class), or
 * it is a type hier has no kernel for, whose calls must fall back (returns
 * how many it made; zeros in, zeros out). Anything else fails here: the table would
 * be missing a type users can reduce. */
long every_reducible_type(MPI_Comm comm)
{
    int covered = 0;
    long declined = 0;
    for (int ti = 0; ti < ntypes; ti++)
        for (int o = 0; o < NOPS; o++) {
            const ttype_t *t = &types[ti];
            if (!t->reduces[o]) continue;
            if (sweep_checks(t, o)) {
                covered++;
                continue;
            }
            CHECK(t->no_kernel, "Open MPI reduces %s with MPI_%s: test_colls has no reference for it", t->name,
                  ops[o].name);
            if (!t->no_kernel) continue;
            char s[256] = {0}, r[256];
            memset(r, 0x5a, sizeof(r));
            MPI_Allreduce(s, r, 4, t->dt, ops[o].op, comm);
            int size;
            MPI_Type_size(t->dt, &size);
            for (int b = 0; b < 4 * size; b++)
                if (r[b]) {
                    CHECK(0, "%s MPI_%s of zeros: byte %d is %d", t->name, ops[o].name, b, r[b]);
                    break;
                }
            declined++;
        }
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0)
        printf("test_colls: of %d predefined types, Open MPI reduces %d (type, op) pairs the sweep checks, "
               "%ld that must fall back\n", ntypes, covered, declined);
    return declined;
}
