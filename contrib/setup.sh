#!/usr/bin/env bash
# One-command set-up of coll/hier on Debian bookworm: install the packages it
# needs, build, install the component, and (unless --no-demo) run the demo:
# hier against Open MPI's default (tuned) and han on two nodes made on this
# machine (contrib/hier-fake-node: a second host name in its own UTS
# namespace; needs root), or on this node alone where that is not allowed.
#
#   contrib/setup.sh [--prefix DIR] [--no-deps] [--no-demo]
#
# Afterwards: mpirun -x OMPI_MCA_mca_base_component_path=$(DIR/bin/hier-config component-path) \
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
        libopenmpi-dev openmpi-bin libhwloc-dev libfabric-dev libcriterion-dev \
        iproute2 util-linux python3 libevent-dev xz-utils
    # (ip, tc, unshare: the namespace cluster tests; python3: the model's
    # compare; libevent-dev, xz-utils: contrib/hier-ompi5-build's Open MPI 5)
fi

./autogen.sh
./configure --prefix="$prefix"
make -j"$(nproc)"
make install
echo "coll/hier installed in $prefix/lib/openmpi"
echo "use: mpirun -x OMPI_MCA_mca_base_component_path=$("$prefix/bin/hier-config" component-path --component-dir "$prefix/lib/openmpi") --mca coll_hier_priority 100 ..."

if [ $demo = 1 ]; then
    export HIER_COMPONENT_DIR="$prefix/lib/openmpi" HIER_BENCH="$prefix/bin/hier_bench"
    if unshare --uts true 2>/dev/null; then
        hosts=$(mktemp /tmp/coll-hier-hosts.XXXXXX)
        printf '%s slots=2\nnode1 slots=2\n' "$(hostname)" >"$hosts"
        # unbound: both "nodes" share these cores; yield: 4 ranks may outnumber them
        "$prefix/bin/hier-bench-compare" --np 4 --runs 1 --configs hier,tuned,han \
            --mpirun-args "--hostfile $hosts --mca plm_rsh_agent $prefix/bin/hier-fake-node --bind-to none --mca mpi_yield_when_idle 1" \
            -- -e 16M -f 4 -c allreduce,allgather,reduce_scatter
        rm -f "$hosts"
    else
        "$prefix/bin/hier-bench-compare" --np 2 --runs 1 --configs hier,tuned -- -e 16M -c allreduce,allgather,reduce_scatter
    fi
fi
