#!/usr/bin/env bash
# Lint playground/, plugins/ and envs/: ruff, then the import-linter layering contracts
# (scripts/check_layers.sh), then mypy; settings in pyproject.toml. Needs the `test` extra.
# plugins/ and envs/ install as playground.plugins and playground.envs through a package-dir
# mapping that an editable install does not lay out on disk, so mypy, like lint-imports, runs
# on a plain install of the checkout into a temporary folder; its paths are mapped back to the
# checkout's in the report. Usage: scripts/lint.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
status=0

echo "+ ruff check playground plugins envs"
ruff check playground plugins envs || status=1

target="$(mktemp -d)"
trap 'rm -rf "$target"' EXIT
echo "+ scripts/check_layers.sh"
bash scripts/check_layers.sh "$target" || status=1

echo "+ mypy -p playground"
(cd "$target" && mypy --config-file "$repo/pyproject.toml" --cache-dir "$target/.mypy_cache" -p playground) \
    | sed -e 's#^playground/plugins/#plugins/#' -e 's#^playground/envs/#envs/#' || status=1

exit "$status"
