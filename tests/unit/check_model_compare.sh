#!/bin/sh
# check_model_compare.sh: contrib/hier-model-compare takes the median of a
# shape's runs, lines it up with contrib/hier_model's prediction for the
# same shape, collective and size, and refuses a directory without results.
set -u
src=${HIER_SRCDIR:-.}
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
row() { # FILE TIME_US: one hier_bench allreduce row of 1 MiB (double)
    printf '# allreduce: np=2\nhier    allreduce                 1048576      131072  %12.2f      0.1      0.1    ok\n' "$2" >"$1"
}
row "$dir/n2p1r1-1.txt" 8000
row "$dir/n2p1r1-2.txt" 10000
row "$dir/n2p1r1-3.txt" 9000
want=$(./contrib/hier_model --coll allreduce --nodes 2 --ppn 1 --rails 1 --machine "$src/contrib/machines/netns-1g.machine" \
    -b 1M -e 1M -d double | awk '!/^#/ { printf "%.3f", $5 / 1000 }')
out=$(python3 "$src/contrib/hier-model-compare" "$dir" "$src/contrib/machines/netns-1g.machine" \
    --model ./contrib/hier_model --csv "$dir/c.csv") || { echo "FAIL: hier-model-compare failed"; exit 1; }
echo "$out"
line=$(echo "$out" | grep '^| 2 × 1 × 1 | allreduce | 1048576 |') || { echo "FAIL: no row for the shape"; exit 1; }
echo "$line" | grep -q "| $want | 9.000 |" || { echo "FAIL: want predicted $want and the median 9.000: $line"; exit 1; }
echo "$out" | grep -q '^from 1 MiB: [01]/1 rows within 25%' || { echo "FAIL: summary"; exit 1; }
[ "$(wc -l <"$dir/c.csv")" -eq 2 ] || { echo "FAIL: csv rows"; exit 1; }
mkdir "$dir/empty"
if python3 "$src/contrib/hier-model-compare" "$dir/empty" "$src/contrib/machines/netns-1g.machine" \
    --model ./contrib/hier_model 2>/dev/null; then
    echo "FAIL: an empty directory was accepted"
    exit 1
fi
echo "PASS"
