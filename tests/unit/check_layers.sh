#!/bin/sh
# check_layers.sh: dependencies in src/ point one way. Each folder is a
# layer, and a file includes headers of its own layer or of layers below:
#
#   base < accel < sched < shm, net < exec < select < comm < model
#
# (shm and net are siblings: neither includes the other). Inside a layer,
# no two modules (foo.c, foo.h and its private foo_impl.h) include each
# other, directly or through others. The glue in mca/ includes only the core's public headers: the
# communicator (comm/hier_comm.h), base/, the accelerator registry and its
# host mirrors (a device buffer whose layout only the MPI library can walk).
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

for f in mca/coll/hier/*.c mca/coll/hier/*.h; do
    for inc in $(sed -n 's/^#include "\([a-z]*\/hier_[a-z0-9_]*\)\.h".*/\1/p' "$f"); do
        case $inc in
        comm/hier_comm | base/* | accel/hier_accel | accel/hier_accel_mirror) ;;
        *) echo "FAIL: $f includes $inc.h, an internal header of the core"; fail=1 ;;
        esac
    done
done
[ $fail = 0 ] && echo "ok: every include in src/ points down its layers, no circles, mca/ uses public headers only"
exit $fail
