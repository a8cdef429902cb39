#!/bin/bash
# AWS ParallelCluster OnNodeConfigured action: coll/hier on every node.
#
# In the cluster configuration (both HeadNode and each SlurmQueue):
#   CustomActions:
#     OnNodeConfigured:
#       Script: s3://BUCKET/coll-hier/on-node-configured.sh
#       Args:
#         - s3://BUCKET/coll-hier/coll-hier.tar.gz     # `git archive` of this tree
#         - /opt/amazon/openmpi                         # or /opt/amazon/openmpi5
#         - /opt/amazon/ompi-headers/include/openmpi    # devel headers of that Open MPI ("" if it has them)
#
# The head node builds hier once, into /opt/parallelcluster/shared/coll-hier
# (exported to every compute node); every node, head included, then writes
# the coll/hier lines of its own Open MPI's openmpi-mca-params.conf, so that
# every job of that Open MPI -- mpirun inside sbatch, srun --mpi=pmix --
# uses hier with no flag. Both steps are contrib/deploy/hier-install.
#
# Steps:
#  1. read the node's role (/etc/parallelcluster/cfnconfig: cfn_node_type);
#  2. head node: build tools, the source, hier-install into the shared
#     directory (libfabric from /opt/amazon/efa), a stamp when done;
#  3. compute node: wait for the stamp (the head node's action may still run);
#  4. every node: hier-install --params-only against the local Open MPI.
set -euo pipefail
src_url=${1:?usage: on-node-configured.sh SOURCE_TARBALL [OMPI_PREFIX] [OMPI_HEADERS]}
ompi=${2:-/opt/amazon/openmpi}
headers=${3:-}
shared=/opt/parallelcluster/shared/coll-hier
log() { echo "coll-hier post-install: $*"; }

# 1.
. /etc/parallelcluster/cfnconfig
role=${cfn_node_type:-ComputeFleet}

# 2.
if [ "$role" = HeadNode ]; then
    if command -v yum >/dev/null; then
        yum install -y -q autoconf automake libtool make gcc hwloc-devel
    else
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q autoconf automake libtool make gcc libhwloc-dev
    fi
    work=$(mktemp -d)
    case $src_url in
    s3://*) aws s3 cp --quiet "$src_url" "$work/src.tar.gz" ;;
    *) cp "$src_url" "$work/src.tar.gz" ;;
    esac
    mkdir -p "$shared/src"
    tar -xzf "$work/src.tar.gz" -C "$shared/src" --strip-components=1
    export PKG_CONFIG_PATH=/opt/amazon/efa/lib64/pkgconfig:/opt/amazon/efa/lib/pkgconfig:${PKG_CONFIG_PATH:-}
    "$shared/src/contrib/deploy/hier-install" --ompi "$ompi" ${headers:+--ompi-headers "$headers"} \
        --prefix "$shared" --no-params
    date >"$shared/.installed"
    log "built into $shared"
else
    # 3.
    for _ in $(seq 1 180); do [ -f "$shared/.installed" ] && break; sleep 10; done
    [ -f "$shared/.installed" ] || { log "no build in $shared after 30 minutes"; exit 1; }
fi

# 4. (EFA between nodes; the NICs are found by the provider)
"$shared/src/contrib/deploy/hier-install" --ompi "$ompi" --prefix "$shared" --params-only --provider efa
log "$(hostname): $ompi uses coll/hier"
