#!/bin/sh
# check_layers.sh: dependencies in src/ point one way. Each folder is a
# layer, and a file includes headers of its own layer or of layers below:
#
#   base < accel < sched < shm, net < exec < select < comm < model
#
# (shm and net are siblings: neither includes the other). Inside a layer,
# no two modules (foo.c, foo.h and its private foo_impl.h) include each
# other, directly or through others; no two files call each other, directly
# or through others (their objects' symbols). The glue in mca/ includes only the core's public headers: the
# communicator (comm/hier_comm.h), base/, the accelerator registry and its
# host mirrors (a device buffer whose layout only the MPI library can walk).
# And sizes: no file of src/ over 600 lines, no function over 100.
set -u
src=${HIER_SRCDIR:-.}
cd "$src" || exit 1
fail=0

rank() {
    case $1 in
    base) echo 0 ;; accel) echo 1 ;; sched) echo 2 ;; shm | net) echo 3 ;; exec) echo 4 ;; select) echo 5 ;;
    comm) echo 6 ;; model) echo 7 ;; *) echo 99 ;;
    esac
}

edges=$(mktemp) || exit 1
trap 'rm -f "$edges"' EXIT
for f in src/*/*.c src/*/*.h; do
    [ -f "$f" ] || continue
    layer=$(basename "$(dirname "$f")")
    lr=$(rank "$layer")
    [ "$lr" = 99 ] && { echo "FAIL: $f is in a folder that is no layer"; fail=1; continue; }
    # a module is foo.c, foo.h and its private foo_impl.h
    mod=$layer/$(basename "$f" | sed 's/\.[ch]$//; s/_impl$//')
    for inc in $(sed -n 's/^#include "\([a-z]*\/hier_[a-z0-9_]*\)\.h".*/\1/p' "$f" | sed 's/_impl$//'); do
        il=${inc%%/*}
        ir=$(rank "$il")
        if [ "$ir" -gt "$lr" ] || { [ "$ir" = "$lr" ] && [ "$il" != "$layer" ]; }; then
            echo "FAIL: $f ($layer) includes $inc.h ($il): layers point down only"
            fail=1
        fi
        [ "$inc" != "$mod" ] && echo "$mod $inc" >>"$edges"
    done
done
# tsort reports a loop in the include graph of the modules
if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
    echo "FAIL: modules include each other in a circle:"
    sed 's/^/    /' "$edges.err"
    fail=1
fi
rm -f "$edges.err"

# Calls: no two files of src/ call each other, directly or through others
# (the built objects' symbols: a file's undefined ones, defined by another).
build=${HIER_BUILDDIR:-$PWD}
syms=$(mktemp) && calls=$(mktemp) || exit 1
trap 'rm -f "$edges" "$syms" "$calls"' EXIT
for c in src/*/*.c; do
    layer=$(basename "$(dirname "$c")") base=$(basename "$c" .c)
    o=$(ls "$build/src/$layer/.libs/"*"-$base.o" "$build/src/$layer/"*"-$base.o" 2>/dev/null | head -n 1)
    if [ -z "$o" ]; then
        echo "FAIL: no object file for $c under $build (build first)"
        fail=1
        continue
    fi
    nm -g --defined-only "$o" | awk -v f="$layer/$base" 'NF == 3 { print "D", $3, f }'
    nm -u "$o" | awk -v f="$layer/$base" '{ print "U", $NF, f }'
done >"$syms"
awk '$1 == "D" { def[$2] = $3 } $1 == "U" { n++; sym[n] = $2; user[n] = $3 }
     END { for (i = 1; i <= n; i++) if ((sym[i] in def) && def[sym[i]] != user[i]) print user[i], def[sym[i]] }' \
    "$syms" | sort -u >"$calls"
if ! tsort "$calls" >/dev/null 2>"$calls.err"; then
    echo "FAIL: files of src/ call each other in a circle:"
    sed 's/^/    /' "$calls.err"
    fail=1
fi
rm -f "$calls.err"

for f in mca/coll/hier/*.c mca/coll/hier/*.h; do
    for inc in $(sed -n 's/^#include "\([a-z]*\/hier_[a-z0-9_]*\)\.h".*/\1/p' "$f"); do
        case $inc in
        comm/hier_comm | base/* | accel/hier_accel | accel/hier_accel_mirror) ;;
        *) echo "FAIL: $f includes $inc.h, an internal header of the core"; fail=1 ;;
        esac
    done
done
# sizes a reader takes in one sitting (issue 45): a file of src/ up to 600
# lines, a function (its body from a "{" to a "}" in column 0) up to 100
for f in "$src"/src/*/*.[ch]; do
    n=$(wc -l <"$f")
    [ "$n" -le 600 ] || { echo "FAIL: ${f#"$src"/} has $n lines (at most 600)"; fail=1; }
done
for f in "$src"/src/*/*.c "$src"/mca/coll/hier/*.c; do
    awk -v f="${f#"$src"/}" '/^\{/ { s = NR } /^\}/ && s { if (NR - s + 1 > 100) print "FAIL: " f ":" s ": a function of " NR - s + 1 " lines (at most 100)"; s = 0 }' "$f"
done >"$calls.long"
if [ -s "$calls.long" ]; then
    cat "$calls.long"
    fail=1
fi
rm -f "$calls.long"
[ $fail = 0 ] && echo "ok: every include in src/ points down its layers, no include or call circles, mca/ uses public headers only, no file over 600 lines or function over 100"
exit $fail
