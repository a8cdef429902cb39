dnl HIER_CHECK_OMPI: the Open MPI hier builds against, and its line.
dnl --with-ompi=PREFIX names an installation (PREFIX/bin/mpicc, devel headers
dnl under PREFIX/include/openmpi); without it, the first mpicc in PATH. The
dnl include directories come from that mpicc (--showme:incdirs) plus
dnl PREFIX/include/openmpi, where the devel headers are, after
dnl --with-ompi-headers=DIR when the installation has none. The line (4.1, 5.0 or 6.0)
dnl comes from the headers' OMPI_MAJOR_VERSION/OMPI_MINOR_VERSION; the glue's
dnl compatibility header (mca/coll/hier/coll_hier_compat.h) maps what differs.
dnl Sets MPICC, OMPI_PREFIX, OMPI_CPPFLAGS, OMPI_LIBS, OMPI_PKGLIBDIR and
dnl OMPI_VERSION_STRING.
AC_DEFUN([HIER_CHECK_OMPI], [
    AC_ARG_WITH([ompi],
        [AS_HELP_STRING([--with-ompi=PREFIX],
            [Open MPI installation to build against (PREFIX/bin/mpicc; default: the mpicc in PATH), e.g. /opt/amazon/openmpi5])],
        [], [with_ompi=""])
    AC_ARG_WITH([ompi-headers],
        [AS_HELP_STRING([--with-ompi-headers=DIR],
            [Open MPI devel headers (DIR/ompi/mca/coll/coll.h), for an installation built without them: install the same version configured alike --with-devel-headers elsewhere and name its include/openmpi])],
        [], [with_ompi_headers=""])
    AS_IF([test -n "$with_ompi" && test "x$with_ompi" != xyes],
        [AS_IF([test -x "$with_ompi/bin/mpicc"], [MPICC="$with_ompi/bin/mpicc"],
            [AC_MSG_ERROR([--with-ompi=$with_ompi: no $with_ompi/bin/mpicc; give an Open MPI installation prefix])])],
        [AC_PATH_PROG([MPICC], [mpicc], [no])
         AS_IF([test "x$MPICC" = xno],
             [AC_MSG_ERROR([mpicc not found: apt-get install libopenmpi-dev openmpi-bin, or pass --with-ompi=PREFIX])])])
    hier_ompi_bindir=`dirname "$MPICC"`
    OMPI_PREFIX=`cd "$hier_ompi_bindir/.." && pwd`
    hier_ompi_dirs="$with_ompi_headers `$MPICC --showme:incdirs` $OMPI_PREFIX/include/openmpi"
    OMPI_CPPFLAGS=""
    for d in $hier_ompi_dirs; do
        test -d "$d" && OMPI_CPPFLAGS="$OMPI_CPPFLAGS -I$d"
    done
    hier_save_CPPFLAGS="$CPPFLAGS"
    dnl (mca/include: a stand-in for fint_2_int.h, which no devel install ships)
    CPPFLAGS="$CPPFLAGS -I$srcdir/mca/include $OMPI_CPPFLAGS"
    AC_CHECK_HEADER([ompi/mca/coll/coll.h], [],
        [AC_MSG_ERROR([Open MPI devel headers (ompi/mca/coll/coll.h) not found in $hier_ompi_dirs: apt-get install libopenmpi-dev, or build Open MPI --with-devel-headers (see contrib/hier-ompi5-build and the README)])],
        [#include "ompi_config.h"])
    AC_COMPUTE_INT([hier_ompi_major], [OMPI_MAJOR_VERSION], [#include "ompi_config.h"], [hier_ompi_major=0])
    AC_COMPUTE_INT([hier_ompi_minor], [OMPI_MINOR_VERSION], [#include "ompi_config.h"], [hier_ompi_minor=0])
    AC_COMPUTE_INT([hier_ompi_release], [OMPI_RELEASE_VERSION], [#include "ompi_config.h"], [hier_ompi_release=0])
    OMPI_VERSION_STRING="$hier_ompi_major.$hier_ompi_minor.$hier_ompi_release"
    AC_MSG_CHECKING([the Open MPI line to build the glue for])
    AS_CASE([$hier_ompi_major.$hier_ompi_minor],
        [4.1], [AC_MSG_RESULT([$OMPI_VERSION_STRING: 4.1, coll API 2.0.0])],
        [5.*], [AC_MSG_RESULT([$OMPI_VERSION_STRING: 5.0, coll API 2.4.0])],
        [6.*], [AC_MSG_RESULT([$OMPI_VERSION_STRING: 6.0, coll API 3.0.0])],
        [AC_MSG_RESULT([$OMPI_VERSION_STRING])
         AC_MSG_ERROR([Open MPI $OMPI_VERSION_STRING: coll/hier builds against 4.1, 5.0 and 6.0])])
    dnl Headers that ompi_config.h includes but 5.0's --with-devel-headers
    dnl installations leave out.
    AC_MSG_CHECKING([whether the glue's Open MPI headers compile])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/op/op.h"
#include "ompi/mca/coll/coll.h"]], [[return 0;]])],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([Open MPI $OMPI_VERSION_STRING's devel headers are incomplete (see config.log for the missing one); Open MPI 5.0 installs lack opal/mca/threads/pthreads/*.h: copy them from the same version's source tree into $OMPI_PREFIX/include/openmpi (contrib/hier-ompi5-build does)])])
    CPPFLAGS="$hier_save_CPPFLAGS"
    OMPI_LIBS=`$MPICC --showme:link`
    OMPI_PKGLIBDIR=`"$hier_ompi_bindir/ompi_info" --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p'`
    AS_IF([test -z "$OMPI_PKGLIBDIR"], [OMPI_PKGLIBDIR="$OMPI_PREFIX/lib/openmpi"])
    AC_SUBST([MPICC])
    AC_SUBST([OMPI_PREFIX])
    AC_SUBST([OMPI_CPPFLAGS])
    AC_SUBST([OMPI_LIBS])
    AC_SUBST([OMPI_PKGLIBDIR])
    AC_SUBST([OMPI_VERSION_STRING])
])
