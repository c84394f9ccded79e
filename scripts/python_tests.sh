#!/usr/bin/env bash
# python_tests.sh: the Python test suite, with torch and without it.
#
#   ./scripts/python_tests.sh [extra pytest args...]
#
# Gets the venv python from scripts/python_env.sh (which creates the shared venv the
# first time and installs this clone into it with `pip install -e`), then runs:
#   1. python tests/test_python_tensor.py          (direct, as the README's test section runs it)
#   2. python tests/test_python_dataset.py         (direct)
#   3. pytest tests/python tests/test_python_tensor.py tests/test_python_dataset.py   (torch)
#   4. the same pytest run without torch: MEMTIER_PY_FORCE_NO_TORCH=1 (memtier behaves as
#      if torch were not importable: numpy results), and `import torch` made to fail in
#      every process of the run (a sitecustomize on PYTHONPATH), as on a torch-less machine
# Every step runs even when an earlier one failed; a summary follows. Skipped tests are
# listed with their reasons (pytest -ra). Exit status: 0 only when every step passed.
# ctest runs this as `python_tests` (label python) in a build configured with
# -DMEMTIER_PYTHON_TESTS=ON, as scripts/rebuild.sh configures; the default ctest does not.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root" || exit 1

say() { printf '== python_tests.sh: %s\n' "$*"; }

say "preparing the venv (scripts/python_env.sh)"
env_out=$("$root/scripts/python_env.sh") ; rc=$?
if [[ $rc -ne 0 ]]; then
  say "FAILED: scripts/python_env.sh exited $rc, so no Python test ran."
  say "Its messages are above. The venv is ${MEMTIER_VENV:-under ~/.cache/memtier/}; the first run needs PyPI, Go and gcc."
  exit 1
fi
py=$(printf '%s\n' "$env_out" | tail -n 1)
if [[ ! -x $py ]]; then
  say "FAILED: scripts/python_env.sh printed '$py', which is not an executable python"
  exit 1
fi
say "python: $py"

# The shared venv must import memtier from this clone (another clone's
# python_env.sh may have repointed it).
where=$("$py" -c 'import os, memtier; print(os.path.realpath(memtier.__file__))' 2>&1) ; rc=$?
if [[ $rc -ne 0 ]]; then
  say "FAILED: 'import memtier' does not work in the venv:"
  printf '%s\n' "$where"
  exit 1
fi
case "$where" in
  "$root"/*) say "memtier: $where" ;;
  *) say "FAILED: the venv imports memtier from $where, not from this clone ($root)."
     say "Another clone shares the venv; rerun, or give this clone its own with MEMTIER_VENV=..."
     exit 1 ;;
esac

declare -a names=() codes=()
step() {  # step <name> <command...>
  local name=$1; shift
  say "RUN $name: $*"
  local t0=$SECONDS
  "$@"
  local rc=$?
  say "$( ((rc == 0)) && echo PASS || echo "FAIL (exit $rc)") $name ($((SECONDS - t0)) s)"
  names+=("$name"); codes+=("$rc")
}

for f in tests/test_python_tensor.py tests/test_python_dataset.py tests/python; do
  if [[ ! -e $f ]]; then
    say "missing $f"
    names+=("exists $f"); codes+=(1)
  fi
done

pytest_args=(-m pytest -q -ra -p no:cacheprovider --timeout=1200
             tests/python tests/test_python_tensor.py tests/test_python_dataset.py "$@")

[[ -f tests/test_python_tensor.py ]] && step "direct tests/test_python_tensor.py" "$py" tests/test_python_tensor.py
[[ -f tests/test_python_dataset.py ]] && step "direct tests/test_python_dataset.py" "$py" tests/test_python_dataset.py
step "pytest (torch)" env -u MEMTIER_PY_FORCE_NO_TORCH "$py" "${pytest_args[@]}"

# The no-torch run hides torch for real: besides MEMTIER_PY_FORCE_NO_TORCH=1 (memtier
# acts as if torch were absent), a sitecustomize on PYTHONPATH makes torch unfindable
# in every process of that run (child interpreters too), as on a machine without it:
# `import torch` raises ModuleNotFoundError, find_spec("torch") is None, and
# pytest.importorskip("torch") skips with the reason listed.
hide=$(mktemp -d)
trap 'rm -rf "$hide"' EXIT
cat >"$hide/sitecustomize.py" <<'EOF'
# Written by scripts/python_tests.sh for its no-torch run: torch is not importable in
# this process, as if it were not installed (import torch raises ModuleNotFoundError,
# importlib.util.find_spec("torch") is None). Every finder on sys.meta_path is wrapped
# so that it does not find torch or its submodules.
import sys


class _WithoutTorch:
    def __init__(self, inner):
        self._inner = inner

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return None
        find = getattr(self._inner, "find_spec", None)
        return find(name, path, target) if find is not None else None

    def __getattr__(self, attr):  # invalidate_caches, find_distributions, ...
        return getattr(self._inner, attr)


sys.meta_path[:] = [_WithoutTorch(f) for f in sys.meta_path]
EOF
no_torch_env=(env MEMTIER_PY_FORCE_NO_TORCH=1 "PYTHONPATH=$hide${PYTHONPATH:+:$PYTHONPATH}")

# Check that the no-torch mode is real before trusting a green run in it.
step "no-torch mode hides torch" "${no_torch_env[@]}" "$py" - <<'EOF'
import importlib, os, tempfile, numpy as np, memtier
try:
    importlib.import_module("torch")
except ModuleNotFoundError:
    pass
else:
    raise SystemExit("torch is still importable in the no-torch run")
with tempfile.NamedTemporaryFile() as f:
    f.write(bytes(range(16))); f.flush()
    t = memtier.load_tensor(f.name, 0, (4,), "float32")
if type(t) is not np.ndarray:
    raise SystemExit(f"MEMTIER_PY_FORCE_NO_TORCH=1 but load_tensor returned {type(t)!r}, not numpy.ndarray")
print("no-torch run: torch is not importable and load_tensor returns numpy.ndarray")
EOF
step "pytest (no torch: MEMTIER_PY_FORCE_NO_TORCH=1, torch unimportable)" "${no_torch_env[@]}" "$py" "${pytest_args[@]}"

failed=0
say "summary"
for i in "${!names[@]}"; do
  if [[ ${codes[$i]} -eq 0 ]]; then
    printf '   PASS  %s\n' "${names[$i]}"
  else
    printf '   FAIL  %s (exit %s)\n' "${names[$i]}" "${codes[$i]}"
    failed=1
  fi
done
if ((failed)); then
  say "FAILED"
  exit 1
fi
say "all Python tests passed (with and without torch)"
