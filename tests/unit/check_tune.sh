#!/usr/bin/env bash
# check_tune.sh: hier-tune's one-node rules from given times (no run):
#  1. a smaller chunk that is 10% faster than the segment's own at a size
#     it cuts gets its rule's chunk=; one 5% faster, or one the call fits
#     in (the same steps: noise), does not;
#  2. the rules written load, and hier-info shows each range's chunk.
# Exit 0 when all pass, 1 otherwise.
set -u
S=${HIER_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${HIER_BUILDDIR:-$S}
[ -x "$B/contrib/hier-info" ] || { echo "FAIL: no $B/contrib/hier-info (make first)"; exit 1; }
tmp=$(mktemp -d /tmp/hier-tune-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
python3 - "$S/contrib/hier-tune" "$B/contrib" "$tmp/t.rules" <<'EOF' || exit 1
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("hier_tune", sys.argv[1])
tune = importlib.util.module_from_spec(importlib.util.spec_from_loader("hier_tune", loader))
loader.exec_module(tune)
tune.HERE = sys.argv[2]  # (hier-info is a build product)
K, M = 1 << 10, 1 << 20
# allreduce, np 2: rsag at 128 KiB, 512 KiB, 2 MiB, 8 MiB; a 64 KiB chunk 1% / 25% / 6% / 20% faster
rsag = {8: 5.0, 128 * K: 100.0, 512 * K: 400.0, 2 * M: 1600.0, 8 * M: 6400.0}
small = {128 * K: 99.0, 512 * K: 300.0, 2 * M: 1510.0, 8 * M: 5330.0}
res = {"allreduce": {"rsag": rsag, "flat": {s: 3 * t for s, t in rsag.items()}},
       "allgather": {"shm": {8: 5.0, 2 * M: 900.0}}, "reduce_scatter": {"shm": {8: 5.0, 2 * M: 900.0}}}
chunked = {"allreduce": {("rsag", 64 * K): small, ("flat", 64 * K): small},
           "allgather": {("shm", 128 * K): {2 * M: 860.0}}, "reduce_scatter": {}}
fail = []
if tune.chunk_for("rsag", 512 * K, 512 * K, 400.0, chunked["allreduce"]) != 64 * K:
    fail.append("a chunk 25% faster not taken")
if tune.chunk_for("rsag", 512 * K, 64 * K, 400.0, chunked["allreduce"]):
    fail.append("a chunk taken for a call it does not cut")
if tune.chunk_for("rsag", 2 * M, 2 * M, 1600.0, chunked["allreduce"]):
    fail.append("a chunk 6% faster taken")
if tune.chunk_for("rsag", 8, 8, 5.0, chunked["allreduce"]):
    fail.append("a chunk taken where none was timed")
lines = tune.node_rules({2: (res, {}, chunked)}, [2], 8 * M)
rs = [l for l in lines if l.split()[1:3] == ["allreduce", "rsag"]]
want = [("0", "256K", None), ("256K+1", "1M", "64K"), ("1M+1", "4M", None), ("4M+1", "any", "64K")]
got = [(l.split()[4], l.split()[5], l.split()[6][6:] if len(l.split()) > 6 else None) for l in rs[:4]]
print("\n".join(lines))
if [g[2] for g in got] != [w[2] for w in want]:
    fail.append("allreduce rsag chunks %s, want %s" % (got, want))
if any("chunk=" in l for l in lines if " allgather " in l or " reduce_scatter " in l):
    fail.append("a chunk 4% faster (allgather) or none timed (reduce_scatter) in a rule")
open(sys.argv[3], "w").write("coll-hier-rules 1\n" + "\n".join(lines) + "\n")
for f in fail:
    print("FAIL: " + f)
sys.exit(1 if fail else 0)
EOF
"$B/contrib/hier-info" --rules "$tmp/t.rules" --coll allreduce --ppn 2 -b 128K -e 8M >"$tmp/info" 2>&1 ||
    { echo "FAIL: the rules written do not load"; cat "$tmp/info"; exit 1; }
cat "$tmp/info"
# 512 KiB and 8 MiB at 64 KiB, 2 MiB at the segment's 256 KiB
for want in '512 KiB.*rsag +shm_rsag +64 KiB' '2 MiB.*rsag +shm_rsag +256 KiB' '8 MiB +rsag +shm_rsag +64 KiB'; do
    grep -Eq -- "$want" "$tmp/info" || { echo "FAIL: hier-info has no line /$want/"; exit 1; }
done
echo "PASS: hier-tune gives a rule chunk= where a smaller chunk measured 10% faster, and its rules load"
