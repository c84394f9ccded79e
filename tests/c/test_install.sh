#!/bin/sh
# Description: the installed package is usable by a downstream build.
# `cmake --install` the build tree into a temp prefix, then build
# examples/downstream against it twice, with find_package(memtier) and with
# `pkg-config --cflags --libs memtier`, and run both programs.
# Usage: test_install.sh <cmake> <build dir> <source dir> <C compiler>
set -eu
CMAKE=$1 BUILD=$2 SRC=$3 CC=$4

tmp=$(mktemp -d "${TMPDIR:-/tmp}/memtier_install_XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

echo "== cmake --install $BUILD --prefix $prefix"
"$CMAKE" --install "$BUILD" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
for f in include/memtier.h; do
  [ -f "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
lib=$(find "$prefix" -name libmemtier.so -type f | head -n 1)
[ -n "$lib" ] || { echo "FAIL: libmemtier.so not installed"; exit 1; }
if find "$prefix" -name libmemtier.h | grep -q .; then
  echo "FAIL: the cgo-generated libmemtier.h was installed"; exit 1
fi
libdir=$(dirname "$lib")
pcdir=$libdir/pkgconfig
[ -f "$pcdir/memtier.pc" ] || { echo "FAIL: memtier.pc not installed"; exit 1; }

echo "== find_package(memtier) build of examples/downstream"
"$CMAKE" -S "$SRC/examples/downstream" -B "$tmp/ds" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$CC" >"$tmp/ds.log" 2>&1 || {
  cat "$tmp/ds.log"; echo "FAIL: configure downstream"; exit 1; }
"$CMAKE" --build "$tmp/ds" >>"$tmp/ds.log" 2>&1 || {
  cat "$tmp/ds.log"; echo "FAIL: build downstream"; exit 1; }
"$tmp/ds/downstream" || { echo "FAIL: downstream (cmake) run"; exit 1; }

echo "== pkg-config build of examples/downstream"
PKG_CONFIG=$(command -v pkg-config || command -v pkgconf || true)
if [ -z "$PKG_CONFIG" ]; then
  echo "note: no pkg-config on this machine, pkg-config build skipped"
else
  flags=$(PKG_CONFIG_PATH=$pcdir "$PKG_CONFIG" --cflags --libs memtier) || {
    echo "FAIL: pkg-config --cflags --libs memtier"; exit 1; }
  version=$(PKG_CONFIG_PATH=$pcdir "$PKG_CONFIG" --modversion memtier)
  echo "pkg-config memtier $version: $flags"
  # shellcheck disable=SC2086
  "$CC" -o "$tmp/downstream_pc" "$SRC/examples/downstream/downstream.c" $flags \
    "-Wl,-rpath,$libdir" || { echo "FAIL: compile with pkg-config flags"; exit 1; }
  "$tmp/downstream_pc" || { echo "FAIL: downstream (pkg-config) run"; exit 1; }
fi
echo "install_consumer: OK"
