#!/bin/sh
# check_old_libfabric.sh: coll/hier on a libfabric older than the headers it
# was built with (a head node's newer libfabric-dev, compute nodes' older
# runtime). tests/common/old_libfabric.c makes the installed library answer
# as libfabric 1.12 does: its version, and FI_ENOSYS for any newer API
# version asked. test_fabric's endpoint and transfer tests must pass on it;
# answering as 1.9 (older than hier needs), hier must refuse it and say why
# (the MPI runner's nodes2x2_libfabric_older_than_headers checks what hier
# says of the library it found).
set -u
B=${HIER_BUILDDIR:-.}
real=$(ldconfig -p 2>/dev/null | awk '/libfabric\.so\.1 / {print $NF; exit}')
if [ -z "$real" ]; then
    echo "SKIP: check_old_libfabric: no libfabric.so.1 in the loader's cache"
    exit 77
fi
dir=$(mktemp -d /tmp/hier-old-fabric.XXXXXX)
trap 'rm -rf "$dir"' EXIT
ln -s "$(cd "$B/tests/common/.libs" && pwd)/liboldfabric.so" "$dir/libfabric.so.1"
out=$dir/out
LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} HIER_OLD_FI_REAL=$real HIER_OLD_FI_VERSION=1.12 \
    "$B/tests/unit/test_fabric" --filter 'fabric/[ow]*' >"$out" 2>&1
rc=$?
tail -n 3 "$out"
if [ $rc -ne 0 ]; then
    echo "FAIL: check_old_libfabric: test_fabric on a libfabric answering as 1.12 (exit $rc)"
    exit 1
fi
grep -q "Passing: [1-9]" "$out" || { echo "FAIL: check_old_libfabric: no test ran"; exit 1; }
# Older than hier needs (1.10): refused with the reason, never a crash
LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} HIER_OLD_FI_REAL=$real HIER_OLD_FI_VERSION=1.9 \
    "$B/tests/unit/test_fabric" --filter 'fabric/offsets*' >"$out" 2>&1
if ! grep -q "libfabric 1.9 is older than coll/hier needs (1.10)" "$out" || grep -q "Crashing: [1-9]" "$out"; then
    tail -n 5 "$out"
    echo "FAIL: check_old_libfabric: a libfabric answering as 1.9 was not refused with its reason"
    exit 1
fi
echo "PASS: check_old_libfabric: test_fabric's transfers on $real answering as libfabric 1.12; as 1.9, refused"
