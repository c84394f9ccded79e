#!/usr/bin/env bash
# versitygw.sh: make sure the versitygw S3 gateway (Apache-2.0; a real SigV4
# server used by the remote-source integration tests, see runtime/remote) is
# installed, then print the path of its binary on stdout.
#
#   scripts/versitygw.sh              install if missing, print the binary path
#   scripts/versitygw.sh -- CMD ARGS  install if missing, then run CMD with
#                                     MEMTIER_VERSITYGW set to the binary
#                                     (the go_remote_versitygw ctest entry)
#   scripts/versitygw.sh --help       print this usage, change nothing
#
# It is built from the Go module proxy into a cache outside the clone
# ($MEMTIER_CACHE_DIR, else ~/.cache/memtier), so a fresh clone reuses it:
# about 2 minutes and 740 MB RSS on 2 cores the first time (it runs under
# nice), nothing afterwards. Progress goes to stderr; exit status 1 with the
# failing step named when the install fails.
set -euo pipefail

VERSION=v1.8.0
case "${1:-}" in
  -h|--help)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0 ;;
  ""|--) ;;
  *) echo "versitygw.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
esac

cache="${MEMTIER_CACHE_DIR:-$HOME/.cache/memtier}"
bindir="$cache/versitygw-$VERSION"
bin="$bindir/versitygw"

if [[ ! -x "$bin" ]]; then
  command -v go >/dev/null || { echo "versitygw.sh: go is not on PATH (Go 1.25+ is needed)" >&2; exit 1; }
  mkdir -p "$bindir"
  echo "versitygw.sh: installing versitygw $VERSION (about 2 minutes the first time)" >&2
  # GOFLAGS from the caller (e.g. -mod=vendor) must not leak into this
  # module-mode install of an unrelated module.
  if ! GOFLAGS=-buildvcs=false GOBIN="$bindir" nice go install \
      "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2; then
    echo "versitygw.sh: go install github.com/versity/versitygw/cmd/versitygw@$VERSION failed" >&2
    exit 1
  fi
  [[ -x "$bin" ]] || { echo "versitygw.sh: go install succeeded but $bin is missing" >&2; exit 1; }
fi
if [[ "${1:-}" == "--" ]]; then
  shift
  [[ $# -gt 0 ]] || { echo "versitygw.sh: -- needs a command" >&2; exit 2; }
  MEMTIER_VERSITYGW="$bin" exec "$@"
fi
echo "$bin"
