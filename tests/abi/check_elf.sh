#!/bin/sh
# check_elf.sh READELF OBJDUMP LIBRARY EXECUTABLE...
#
# ELF facts libmemtier.so must have, for a library that hosts a Go runtime:
#   - SONAME is libmemtier.so (Go sets none unless -Wl,-soname is passed);
#   - FLAGS_1 has NODELETE (the Go runtime cannot be unloaded);
#   - the PT_TLS segment is at most 0x40 bytes (the library is STATIC_TLS, and a
#     big TLS block makes a late dlopen fail with "cannot allocate memory in
#     static TLS block");
#   - the newest GLIBC_ symbol version it needs is at most 2.34 (printed);
#   - executables linked against it record DT_NEEDED libmemtier.so, not a path.
set -u
READELF=$1 OBJDUMP=$2 LIB=$3
shift 3
fail=0
bad() { echo "FAIL: $*"; fail=1; }

[ -f "$LIB" ] || { echo "FAIL: $LIB does not exist"; exit 1; }
dyn=$("$READELF" -dW "$LIB") || { echo "FAIL: $READELF -d $LIB"; exit 1; }

soname=$(printf '%s\n' "$dyn" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
echo "SONAME: ${soname:-<none>}"
[ "$soname" = "libmemtier.so" ] || bad "SONAME is '${soname:-<none>}', want libmemtier.so"

flags1=$(printf '%s\n' "$dyn" | sed -n 's/.*(FLAGS_1)[[:space:]]*Flags:[[:space:]]*//p')
flags=$(printf '%s\n' "$dyn" | sed -n 's/.*(FLAGS)[[:space:]]*//p')
echo "FLAGS: ${flags:-<none>}; FLAGS_1: ${flags1:-<none>}"
case " $flags1 " in
  *" NODELETE "*) ;;
  *) bad "FLAGS_1 lacks NODELETE (got '${flags1:-<none>}')" ;;
esac

tls=$("$READELF" -lW "$LIB" | awk '$1 == "TLS" { print $6 }')
echo "PT_TLS MemSiz: ${tls:-<no PT_TLS>}"
if [ -n "$tls" ]; then
  if [ $((tls)) -gt $((0x40)) ]; then
    bad "PT_TLS MemSiz $tls > 0x40: keep C thread-locals to a pointer or two"
  fi
fi

glibc=$("$OBJDUMP" -T "$LIB" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1)
echo "newest GLIBC symbol version required: GLIBC_${glibc:-?}"
if [ -z "$glibc" ]; then
  bad "no GLIBC_ versions found by $OBJDUMP -T"
else
  major=${glibc%%.*}
  rest=${glibc#*.}
  minor=${rest%%.*}
  if [ "$major" -gt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -gt 34 ]; }; then
    bad "needs GLIBC_$glibc > 2.34 (the manylinux_2_34 tag)"
  fi
fi

for exe in "$@"; do
  needed=$("$READELF" -dW "$exe" | sed -n 's/.*(NEEDED).*\[\(.*memtier.*\)\].*/\1/p')
  echo "$(basename "$exe"): NEEDED ${needed:-<none>}"
  [ "$needed" = "libmemtier.so" ] || bad "$exe records DT_NEEDED '${needed:-<none>}', want libmemtier.so"
done

[ $fail -eq 0 ] && echo "elf: all checks passed"
exit $fail
