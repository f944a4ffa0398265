#!/usr/bin/env bash
# Build the mgmatch wheel and smoke-test it as each role installs it (run by `make test`, so by CI):
#   service — `pip install 'mgmatch[grpc]'` from the wheel, as the service image installs it: no torch;
#   train   — `pip install 'mgmatch[train]'` from the wheel (torch pinned first, as `make install` does).
# In each, tests/install/smoke.py (run by that environment's Python) checks the wheel's contents,
# imports every module, solves a preset pool with every method (each answer checked by
# `mgmatch check`) and drives `mgmatch serve` (/v1/solve, a ticket's lifecycle); the service names
# the extras of what it lacks, training fits, labels, trains a tiny predictor and exports it to ONNX.
#
# The two roles install and smoke side by side (each its own venv, work folder and ports): the service's
# smoke runs while the train environment still unpacks torch.
#
# The environments live in .venv-smoke/ and are reused while pyproject.toml and the Python version
# are unchanged (the wheel is reinstalled when its contents change); with CI=true (or
# SMOKE_FRESH=1) they are always made from scratch.
# Usage: scripts/install-smoke.sh [service|train ...]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}                   # the interpreter the environments are made from
BUILD_PY=${BUILD_PYTHON:-.venv/bin/python}  # builds the wheel: needs setuptools>=69 and wheel (the dev venv)
SMOKE=.venv-smoke
ENVS=("$@")
[ ${#ENVS[@]} -gt 0 ] || ENVS=(service train)
t_start=$(date +%s)

if [ "${CI:-}" = "true" ] || [ "${SMOKE_FRESH:-0}" = "1" ]; then
    rm -rf "$SMOKE"
fi
mkdir -p "$SMOKE"
echo '*' > "$SMOKE/.gitignore"   # nothing in here is ever committed

# ---------------------------------------------------------------- the wheel, built from a copy of the tree
# (the same folders the Dockerfile's build stage copies; building in place would rewrite the
# dev install's egg-info)
rm -rf "$SMOKE/src" "$SMOKE/dist"
mkdir -p "$SMOKE/src" "$SMOKE/dist"
tar -cf - --exclude=__pycache__ --exclude='*.pyc' pyproject.toml README.md mgmatch core solvers models pipeline app lab \
    | tar -C "$SMOKE/src" -xf -
if ! "$BUILD_PY" -m pip wheel -q --no-deps --no-build-isolation -w "$SMOKE/dist" "$SMOKE/src" \
        > "$SMOKE/build.log" 2>&1; then
    cat "$SMOKE/build.log"
    echo "install smoke: FAILED (the wheel does not build)"
    exit 1
fi
WHEEL=$(ls "$SMOKE"/dist/mgmatch-*.whl)
# the wheel's contents, not its file (zip timestamps change with every build)
wheel_sum=$("$BUILD_PY" -c '
import hashlib, sys, zipfile
z, h = zipfile.ZipFile(sys.argv[1]), hashlib.sha256()
for n in sorted(z.namelist()):
    h.update(n.encode() + b"\0" + z.read(n))
print(h.hexdigest())' "$WHEEL")
echo "install smoke: built $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"

#: the extra each role installs with the wheel
declare -A EXTRA=([service]=grpc [train]=train)

deps_sum() {  # what an environment's dependencies are made from
    { echo "$1"; "$PYTHON" -VV; cat pyproject.toml; cat /etc/xdg/pip/constraints.txt 2>/dev/null; } \
        | sha256sum | cut -d' ' -f1
}

pip_q() {  # pip_q <log> <pip command…>: quiet pip, keeping its errors
    local log=$1 rc=0
    shift
    "$@" -q > "$log" 2>&1 || rc=$?
    grep -v '^WARNING: Location .* is ignored' "$log" || true
    return $rc
}

prepare() {  # prepare <env>: a venv with the dependencies of <env> and the current wheel
    # (called in a condition, where `set -e` does not apply: every step returns on failure)
    local env=$1 venv="$SMOKE/$1" log="$SMOKE/$1.pip.log" sum
    sum=$(deps_sum "$env")
    if [ "$(cat "$venv/.deps" 2>/dev/null)" != "$sum" ]; then
        echo "install smoke [$env]: new environment"
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv" || return 1
        pip_q "$log" "$venv/bin/python" -m pip install --upgrade pip || return 1
        local pins=()
        # torch pinned in the same resolve, as `make install` does: a looser torch requirement pulls a
        # multi-GB CUDA build
        [ "$env" = train ] && pins=(torch==2.13.0)
        # --no-compile: byte-compiling every installed file took two thirds of an install here (torch's
        # thousands of modules); the modules the smoke imports are compiled when first imported
        pip_q "$log" "$venv/bin/python" -m pip install --no-compile "${pins[@]}" "$WHEEL[${EXTRA[$env]}]" || return 1
        "$venv/bin/python" -m pip check || return 1
        echo "$wheel_sum" > "$venv/.wheel"
        echo "$sum" > "$venv/.deps"
    elif [ "$(cat "$venv/.wheel" 2>/dev/null)" != "$wheel_sum" ]; then
        echo "install smoke [$env]: same dependencies, new wheel"
        pip_q "$log" "$venv/bin/python" -m pip install --no-compile --no-deps --force-reinstall "$WHEEL" || return 1
        echo "$wheel_sum" > "$venv/.wheel"
    else
        echo "install smoke [$env]: environment and wheel unchanged, reused"
    fi
}

for env in "${ENVS[@]}"; do
    case $env in service|train) ;; *) echo "install smoke: unknown environment $env (service|train)"; exit 2;; esac
done

# each role installs (mostly unpacking and disk) and then runs its smoke, the roles side by side; each
# role's output is kept in its log and printed whole, one role after the other
declare -A role_pid
for env in "${ENVS[@]}"; do
    ( t0=$(date +%s)
      if prepare "$env"; then
          echo "install smoke [$env]: ready in $(( $(date +%s) - t0 )) s"
      else
          rm -f "$SMOKE/$env/.deps"
          echo "install smoke [$env]: FAILED to install"
          exit 3
      fi
      "$SMOKE/$env/bin/python" tests/install/smoke.py --env "$env" --wheel "$WHEEL" --source "$SMOKE/src" \
          --work "$SMOKE/work-$env" ) > "$SMOKE/$env.log" 2>&1 &
    role_pid[$env]=$!
done
failed=()
for env in "${ENVS[@]}"; do
    rc=0
    wait "${role_pid[$env]}" || rc=$?
    cat "$SMOKE/$env.log"
    case $rc in
        0) ;;
        3) failed+=("$env (install)") ;;
        *) failed+=("$env") ;;
    esac
done

took=$(( $(date +%s) - t_start ))
if [ ${#failed[@]} -gt 0 ]; then
    echo "install smoke: FAILED in ${failed[*]} (${took} s)"
    exit 1
fi
echo "install smoke: PASSED (${ENVS[*]}) in ${took} s"
