#!/usr/bin/env bash
# python_env.sh: make (or reuse) the Python test venv and print its python.
#
#   py=$(./scripts/python_env.sh | tail -n 1)
#
# The venv lives outside the clone, so CI machines and several clones share it:
#   ${MEMTIER_VENV:-$HOME/.cache/memtier/venv-<hash>}
# where <hash> is the first 12 hex digits of the sha256 of python/requirements-test.txt
# followed by the Python version and machine. It is created and filled only when it is
# missing or incomplete: a stamp file is written after a successful install, and a venv
# without it (an interrupted install) is filled again. The first install downloads torch
# and its CUDA libraries from PyPI (a few GB); pip's progress goes to stderr.
#
# Then, every time, `pip install -e <this clone>` (cheap when nothing changed), so the
# venv imports memtier from this clone. setup.py builds libmemtier.so with Go. Skipped
# with a warning while the clone has no setup.py.
#
# stdout carries exactly one line, the venv's python; everything else goes to stderr.
# Environment:
#   MEMTIER_VENV     the venv directory (default above)
#   MEMTIER_PYTHON   the interpreter that creates the venv (default python3)
# Exit status: 0 on success (and for --help); 1 with a message naming the step that failed;
# 2 for any argument but --help (none is taken).
set -euo pipefail

# No arguments: anything given (say --help) gets the usage above and changes nothing,
# since a run re-points the shared venv at this clone.
if (( $# > 0 )); then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  [[ $1 == -h || $1 == --help ]] && exit 0
  printf 'python_env.sh: error: no arguments are taken (got %s)\n' "$1" >&2
  exit 2
fi

exec 3>&1 1>&2   # only the final line goes to the real stdout

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
req="$root/python/requirements-test.txt"
base_python=${MEMTIER_PYTHON:-python3}

say() { printf 'python_env.sh: %s\n' "$*"; }
die() { printf 'python_env.sh: error: %s\n' "$*"; exit 1; }

[[ -f $req ]] || die "missing $req"
command -v "$base_python" >/dev/null || die "'$base_python' not found (set MEMTIER_PYTHON to a Python 3 interpreter)"
pyver=$("$base_python" -c 'import platform, sys; print("%d.%d.%d-%s" % (sys.version_info[:3] + (platform.machine(),)))') \
  || die "'$base_python' does not run"
hash=$({ cat "$req"; printf '%s' "$pyver"; } | sha256sum | cut -c1-12)
venv=${MEMTIER_VENV:-$HOME/.cache/memtier/venv-$hash}
venv=$(realpath -m -- "$venv")   # a relative MEMTIER_VENV is relative to the caller's directory
stamp="$venv/.memtier-complete"
py="$venv/bin/python"
stamp_text="requirements-sha256-12=$hash python=$pyver"

mkdir -p "$(dirname "$venv")"
# One installer at a time per venv (CI jobs, several clones).
exec 9>"$venv.lock"
if ! flock -n 9; then
  say "waiting for another python_env.sh working on $venv"
  flock 9
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
pip_() { "$py" -m pip "$@"; }

if [[ -f $stamp && $(cat "$stamp") == "$stamp_text" ]] && "$py" -c '' 2>/dev/null; then
  say "reusing $venv"
else
  start=$SECONDS
  if ! "$py" -c '' 2>/dev/null; then
    if [[ -e $venv ]]; then
      # Only ever remove something that is (the start of) a venv.
      if [[ -f $venv/pyvenv.cfg || -z $(ls -A "$venv") ]]; then
        say "removing the broken venv $venv"
        rm -rf "$venv"
      else
        die "$venv exists and is not a venv; remove it or set MEMTIER_VENV"
      fi
    fi
    say "creating $venv with $base_python ($pyver)"
    "$base_python" -m venv "$venv" || die "python -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
  else
    say "completing $venv (no stamp: first install, or an earlier one was interrupted)"
  fi
  rm -f "$stamp"

  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # Split the file: pip first, then everything else in one resolution, then the
  # lines marked memtier:no-deps on their own with --no-deps.
  grep -E '^[[:space:]]*pip==' "$req" >"$tmp/pip.txt" || true
  grep -E 'memtier:no-deps' "$req" | grep -vE '^[[:space:]]*#' | sed 's/#.*//' >"$tmp/nodeps.txt" || true
  grep -E 'memtier:sdist' "$req" | grep -vE '^[[:space:]]*#' | sed 's/#.*//' >"$tmp/sdist.txt" || true
  grep -vE 'memtier:no-deps|memtier:sdist|^[[:space:]]*pip==' "$req" >"$tmp/main.txt"

  if [[ -s $tmp/pip.txt ]]; then
    say "pip: $(tr -d '\n' <"$tmp/pip.txt")"
    pip_ install --progress-bar on -r "$tmp/pip.txt" || die "installing pip failed"
  fi
  say "installing $req (torch and its CUDA wheels are a few GB the first time)"
  pip_ install --progress-bar on --only-binary=:all: -r "$tmp/main.txt" \
    || die "pip install -r $req failed (see pip's output above; PyPI must be reachable the first time)"
  if [[ -s $tmp/nodeps.txt ]]; then
    say "installing without dependencies: $(tr '\n' ' ' <"$tmp/nodeps.txt")"
    pip_ install --progress-bar on --only-binary=:all: --no-deps -r "$tmp/nodeps.txt" \
      || die "pip install --no-deps of $(tr '\n' ' ' <"$tmp/nodeps.txt") failed"
  fi

  # A pure-Python package published only as an sdist: built here (no build
  # isolation: setuptools and wheel are pinned above), its dependencies pinned above.
  while read -r line; do
    [[ -n ${line// /} ]] || continue
    name=${line%%==*}
    say "building from its sdist (no dependencies): $line"
    pip_ install --progress-bar on --no-deps --no-build-isolation --no-binary="$name" "$line" \
      || die "pip install of the sdist $line failed"
  done <"$tmp/sdist.txt"

  # Every pin must be installed at exactly its version.
  "$py" - "$req" <<'EOF' || die "the venv does not match $req (see above)"
import importlib.metadata as md, re, sys
bad = 0
pins = {}
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
    if not m:
        print(f"python_env.sh: error: not an exact pin: {line!r}"); bad += 1; continue
    pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
for name, want in sorted(pins.items()):
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    if have != want:
        print(f"python_env.sh: error: {name}: want {want}, have {have}"); bad += 1
extra = sorted({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower() for d in md.distributions()}
               - set(pins) - {"memtier"})
if extra:
    print("python_env.sh: warning: installed but not pinned in the requirements file: " + ", ".join(extra))
sys.exit(1 if bad else 0)
EOF
  printf '%s\n' "$stamp_text" >"$stamp"
  say "venv complete in $((SECONDS - start)) s: $venv ($(du -sh "$venv" 2>/dev/null | cut -f1))"
fi

# Point the venv at this clone. No build isolation: setuptools and wheel come from
# the pins above, so this works offline once the venv exists.
if [[ -f $root/setup.py ]]; then
  say "pip install -e $root"
  pip_ install --no-deps --no-build-isolation -e "$root" \
    || die "pip install -e $root failed (setup.py builds libmemtier.so: it needs Go and a C compiler)"
else
  say "warning: $root/setup.py does not exist yet; skipping pip install -e (memtier is not importable from this venv)"
fi

printf '%s\n' "$py" >&3
