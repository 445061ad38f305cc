"""Frozen DARC policies: a `policy.json` file deployed as a cascade harness (`--harness darc:PATH`).

A policy file is a JSON object: a non-empty `chain` of distinct intervention names,
optional `verifier` ("env:won", the default: the benchmark's grade; or a grade-blind deployment verifier,
"agent:done" or "agent:self-check", plugins/darc/verifiers.py), optional `params` and any other keys `darc distill`
writes for the record (`J`, `succ`, `cost`, `evidence`, ...), which deployment ignores.

`params` may set only the tuning parameters in POLICY_PARAMS, each to a scalar: a policy
file must not choose endpoints, models, keys or files (`judge_base_url`, `judge_model`,
`demo_pool`, ...); those come from the command line (`--param`). The harness's
description carries the file's SHA-256, so a resumed run notices a policy that changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from playground.core.errors import PlaygroundError
from playground.host_api import HarnessSpec, JSONFileError, json_object

# The verifiers a policy may stop on: the benchmark's grade, or the deployment verifiers DARC registers.
VERIFIERS = ("env:won", "agent:done", "agent:self-check")
MAX_POLICY_BYTES = 1_000_000
# The parameters a policy file may set (see docs/methods/darc.md).
POLICY_PARAMS = frozenset({
    "window", "k", "horizon", "quiet_steps", "threshold", "cooldown", "follow_up", "max_repairs", "top_actions",
    "fallback", "max_reasks_per_step", "hard_repair", "screen", "soft_repair", "update_playbook", "persistent",
    "block_early_stop", "detector", "verifier", "summariser", "docs_k", "demo_pool_size",
    "view", "recovery_prompt", "repair",
})


class PolicyError(PlaygroundError, ValueError):
    """A policy file that cannot be deployed; the message names the file and what is wrong."""


def read_policy(path: str | Path) -> dict:
    """Read and check a policy file; PolicyError names the file and what is wrong."""
    return parse_policy(_read_bytes(path), path)


def _read_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise PolicyError(f"cannot read DARC policy {str(path)!r}: {exc.strerror or exc}") from None


def parse_policy(data: bytes, path: str | Path) -> dict:
    """Check the bytes of the policy file `path`; return the policy, or raise PolicyError."""
    where = f"DARC policy {str(path)!r}"
    try:
        policy = json_object(data, where, MAX_POLICY_BYTES)
    except JSONFileError as exc:
        raise PolicyError(str(exc)) from None
    chain = policy.get("chain")
    if not isinstance(chain, list) or not chain or not all(isinstance(n, str) and n for n in chain):
        raise PolicyError(f"{where} needs a non-empty 'chain' list of intervention names")
    if len(set(chain)) != len(chain):
        raise PolicyError(f"{where}: the chain repeats an intervention: {chain}")
    verifier = policy.get("verifier", "env:won")
    if not isinstance(verifier, str) or verifier not in VERIFIERS:
        raise PolicyError(f"{where}: unknown verifier {verifier!r}; choose from: {', '.join(VERIFIERS)}")
    params = policy.get("params", {})
    if not isinstance(params, dict):
        raise PolicyError(f"{where}: 'params' must be an object")
    refused = sorted(key for key in params if key not in POLICY_PARAMS)
    if refused:
        raise PolicyError(f"{where}: a policy may not set {', '.join(map(repr, refused))} (endpoints, models and "
                          f"files come from the command line); it may set: {', '.join(sorted(POLICY_PARAMS))}")
    for key, value in params.items():
        if not isinstance(value, str | int | float | bool) or value != value:  # NaN != NaN
            raise PolicyError(f"{where}: parameter {key!r} must be a string, number or boolean, got {value!r}")
    return policy


def cascade_harness(name: str, path: str) -> HarnessSpec:
    """The harness that deploys the policy at `path` as a cascade of its chain."""
    data = _read_bytes(path)
    policy = parse_policy(data, path)
    digest = hashlib.sha256(data).hexdigest()
    return HarnessSpec(name, params=dict(policy.get("params", {})), cascade=tuple(policy["chain"]),
                       verifier=policy.get("verifier", "env:won"),
                       description=f"DARC cascade {' -> '.join(policy['chain'])} from {path} (sha256 {digest})")
