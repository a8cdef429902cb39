/* Stand-in for Open MPI's ompi/mpi/fortran/base/fint_2_int.h, which Debian's
 * libopenmpi-dev does not ship although ompi/op/op.h includes it. op.h only
 * needs the two scalar conversions below; coll/hier calls no Fortran glue. */
#ifndef COLL_HIER_FINT_2_INT_STANDIN_H
#define COLL_HIER_FINT_2_INT_STANDIN_H

#define OMPI_INT_2_FINT(a) ((MPI_Fint)(a))
#define OMPI_FINT_2_INT(a) ((int)(a))

#endif
