#!/bin/sh
# run_unprivileged.sh SETPRIV LIBMEMTIER TEST [ARGS...]: runs TEST as nobody
# (uid/gid 65534, no supplementary groups, hence no capabilities) when the
# current user is root, else runs it as is. Used by test_permission, whose
# mode-000 checks mean nothing to root. If nobody cannot reach the test binary
# or libmemtier.so (a private build tree), it says so and runs TEST as root,
# where the test skips (77).
setpriv=$1
lib=$2
shift 2
if [ "$(id -u)" != 0 ]; then
    exec "$@"
fi
set -- "$setpriv" --reuid=65534 --regid=65534 --clear-groups "$@"
if ! "$1" --reuid=65534 --regid=65534 --clear-groups sh -c 'test -x "$0" && test -r "$1"' "$5" "$lib"; then
    echo "note: uid 65534 cannot execute $5 or read $lib; running as root (the test will skip)"
    shift 4
    exec "$@"
fi
echo "note: running as uid 65534 via $1"
exec "$@"
