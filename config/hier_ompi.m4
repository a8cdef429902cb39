dnl HIER_CHECK_OMPI: locate Open MPI's devel headers (ompi/mca/coll/coll.h).
dnl Sets OMPI_CPPFLAGS, OMPI_LIBS and MPICC.
AC_DEFUN([HIER_CHECK_OMPI], [
    AC_ARG_WITH([ompi],
        [AS_HELP_STRING([--with-ompi=DIR], [Open MPI include directory (default: from mpicc --showme:incdirs)])],
        [hier_ompi_dirs="$withval $withval/openmpi"], [hier_ompi_dirs=""])
    AC_PATH_PROG([MPICC], [mpicc], [no])
    AS_IF([test "x$MPICC" = xno],
        [AC_MSG_ERROR([mpicc not found: apt-get install libopenmpi-dev openmpi-bin])])
    AS_IF([test -z "$hier_ompi_dirs"], [hier_ompi_dirs=`$MPICC --showme:incdirs`])
    OMPI_CPPFLAGS=""
    for d in $hier_ompi_dirs; do OMPI_CPPFLAGS="$OMPI_CPPFLAGS -I$d"; done
    hier_save_CPPFLAGS="$CPPFLAGS"
    CPPFLAGS="$CPPFLAGS $OMPI_CPPFLAGS"
    AC_CHECK_HEADER([ompi/mca/coll/coll.h], [],
        [AC_MSG_ERROR([Open MPI devel headers (ompi/mca/coll/coll.h) not found in $hier_ompi_dirs: apt-get install libopenmpi-dev, or pass --with-ompi=DIR])],
        [#include "ompi_config.h"])
    CPPFLAGS="$hier_save_CPPFLAGS"
    OMPI_LIBS=`$MPICC --showme:link`
    AC_SUBST([OMPI_CPPFLAGS])
    AC_SUBST([OMPI_LIBS])
])
