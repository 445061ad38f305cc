#!/usr/bin/env bash
# Mutation testing of the behaviours the tests must pin (issue 22): the playbook's retrieval, DARC's chain
# distillation, and (as a baseline) Sentry's recovery verifier. Each mutant is one planted change; a survivor
# is a change no test noticed. Run from the repository root in a dev install (`pip install -e '.[test]'`);
# it rewrites each file in place for each mutant and restores it, so run nothing else in the tree meanwhile.
# Takes about 8 minutes. Usage: bash scripts/mutation.sh [retrieval|distill|verifier ...]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(retrieval distill verifier)
for target in "${targets[@]}"; do
    case "$target" in
        retrieval) python scripts/mutation.py plugins/playbook/retrieval.py \
                       --functions pick,_pick,_rank,_unseen_newest,_newest,_retrieved -- tests/test_playbook.py
                   python scripts/mutation.py plugins/playbook/store.py --functions Playbook.retrieve \
                       -- tests/test_playbook.py ;;
        distill)   python scripts/mutation.py plugins/darc/distill.py -- tests/test_darc_distill.py ;;
        verifier)  python scripts/mutation.py plugins/sentry/verifier.py -- -m "not slow" \
                       tests/test_sentry_verifier.py tests/test_sentry_detectors.py tests/test_sentry_blind.py \
                       tests/test_sentry_ablations.py tests/test_sentry_run.py ;;
        *) echo "unknown target $target (retrieval, distill, verifier)" >&2; exit 2 ;;
    esac
done
