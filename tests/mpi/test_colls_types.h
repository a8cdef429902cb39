/* test_colls_types.h: the predefined datatypes and ops test_colls sweeps. */
#ifndef TEST_COLLS_TYPES_H
#define TEST_COLLS_TYPES_H

#include <stddef.h>

#include <mpi.h>

enum { O_SUM, O_PROD, O_MIN, O_MAX, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, O_MINLOC, O_MAXLOC, NOPS };
typedef enum { K_INT, K_UINT, K_FLOAT, K_COMPLEX, K_BOOL, K_LOGICAL, K_BYTE, K_PAIR } kind_t;
typedef enum { V_F, V_D, V_LD, V_L, V_I, V_S, V_FF, V_DD } pairv_t; /* value type of a pair */

typedef struct {
    const char *name;
    MPI_Datatype dt;
    kind_t kind;
    size_t size;   /* bytes of one element (C sizeof) */
    int sub;       /* K_FLOAT/K_COMPLEX: 0 float 1 double 2 long double; K_PAIR: pairv_t */
    int big;       /* also run the large counts */
    int no_kernel; /* hier has none and this program no reference: Open MPI's calls must fall back */
    unsigned char reduces[NOPS]; /* per op: Open MPI's own reductions take it */
} ttype_t;

typedef struct { float v; int k; } p_fi;
typedef struct { double v; int k; } p_di;
typedef struct { long v; int k; } p_li;
typedef struct { int v; int k; } p_ii;
typedef struct { short v; int k; } p_si;
typedef struct { long double v; int k; } p_ldi;
typedef struct { float v; float k; } p_ff;
typedef struct { double v; double k; } p_dd;

typedef struct {
    const char *name;
    MPI_Op op;
} top_t;

extern ttype_t types[80];
extern int ntypes;
extern top_t ops[NOPS];

void init_types(void);
void init_ops(void);
/* ops test_colls has references for on a kind */
int op_valid(kind_t k, int o);
/* the sweep checks (t, o) against its references */
int sweep_checks(const ttype_t *t, int o);
/* Open MPI checks arguments (mpi_param_check) */
int param_check_on(void);
/* Open MPI's own reductions take (dt, op) */
int ompi_reduces(MPI_Datatype dt, MPI_Op op);
/* every (type, op) Open MPI reduces is in the table or falls back: the number of fallback calls made */
long every_reducible_type(MPI_Comm comm);

#endif
