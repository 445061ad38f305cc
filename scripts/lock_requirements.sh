#!/usr/bin/env bash
# Refresh requirements/lock.txt, the exact versions CI tests with (.ci/run installs under it as PIP_CONSTRAINT).
# It resolves pyproject.toml with the extras of README's test command (line 2 of the Quickstart block, read as
# .ci/run reads it) plus `train`, for CPython 3.11 on Linux x86_64, with uv (`pip install uv`). Without --upgrade uv
# keeps every version already in the lock that still fits, so only new or changed requirements move; with --upgrade
# (or --upgrade-package NAME) it takes the newest. pip and setuptools are left out (the installer's own; a setuptools
# pin in PIP_CONSTRAINT would also reach packages' build environments). torch stays the CPU build .ci/run installs
# (requirements/torch.txt, even under --upgrade: else uv takes the newest CUDA build), from PyTorch's CPU index; where
# that index cannot be reached, set TORCH_INDEX= (empty) and pass --find-links DIR holding the wheel.
# Usage: scripts/lock_requirements.sh [--upgrade] [other uv pip compile options]   (see docs/requirements-lock.md)
set -euo pipefail
cd "$(dirname "$0")/.."
test_command=$(awk '/^## Quickstart/{q=1} q && /^```/{n++; next} q && n==1 {print}' README.md | sed -n 2p)
extras=$(printf '%s\n' "$test_command" | { grep -o "\.\[[^]]*\]" || true; } | head -n 1 | tr -d '.[]')
if [ -z "$extras" ]; then
    echo "scripts/lock_requirements.sh: no extras found in README.md's test command" >&2
    exit 1
fi
args=()
for extra in ${extras//,/ } train; do args+=(--extra "$extra"); done
args+=(-c requirements/torch.txt)
torch_index="${TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
if [ -n "$torch_index" ]; then args+=(--extra-index-url "$torch_index"); fi
mkdir -p requirements
set -x
uv pip compile pyproject.toml "${args[@]}" --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
    --index-strategy unsafe-best-match --no-emit-package pip --no-emit-package setuptools \
    --custom-compile-command "scripts/lock_requirements.sh" -o requirements/lock.txt "$@"
