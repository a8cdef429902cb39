#!/usr/bin/env bash
# One-command set-up of coll/hier on Debian bookworm: install the packages it
# needs, build, install the component, and (unless --no-demo) run the demo:
# hier against Open MPI's default (tuned) on this node.
#
#   contrib/setup.sh [--prefix DIR] [--no-deps] [--no-demo]
#
# Afterwards: mpirun --mca mca_base_component_path DIR/lib/openmpi:<Open MPI's dir> \
#                    --mca coll_hier_priority 100 -np N ./app
set -euo pipefail
prefix=${HOME}/.local/coll-hier
deps=1 demo=1
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift ;;
    --no-deps) deps=0 ;;
    --no-demo) demo=0 ;;
    *) echo "usage: $0 [--prefix DIR] [--no-deps] [--no-demo]" >&2; exit 2 ;;
    esac
    shift
done
cd "$(dirname "$0")/.."

if [ $deps = 1 ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
        build-essential autoconf automake libtool pkg-config \
        libopenmpi-dev openmpi-bin libhwloc-dev libfabric-dev libibverbs-dev libcriterion-dev
fi

./autogen.sh
./configure --prefix="$prefix"
make -j"$(nproc)"
make install
pkglib=$(ompi_info --parsable --path pkglibdir | sed -n 's/^path:pkglibdir://p')
echo "coll/hier installed in $prefix/lib/openmpi"
echo "use: mpirun --mca mca_base_component_path $prefix/lib/openmpi:$pkglib --mca coll_hier_priority 100 ..."

if [ $demo = 1 ]; then
    HIER_COMPONENT_DIR="$prefix/lib/openmpi" HIER_BENCH="$prefix/bin/hier_bench" \
        "$prefix/bin/hier-bench-compare" --np 2 --runs 1 --configs hier,tuned -- -e 16M -c allreduce,allgather,reduce_scatter
fi
