#!/usr/bin/env bash
# Check the import-linter contracts in pyproject.toml (the layering of docs/architecture.md).
# plugins/ and envs/ install as playground.plugins and playground.envs through a package-dir
# mapping that an editable install does not lay out on disk, so the check runs on a plain
# install of the checkout into a temporary folder. Usage: scripts/check_layers.sh [TARGET_DIR]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
target="${1:-$(mktemp -d)}"
python -m pip install -q --no-deps --no-compile --target "$target" "$repo" 2>/dev/null
cd "$target"  # lint-imports puts the working folder first on sys.path
lint-imports "$repo/pyproject.toml"
