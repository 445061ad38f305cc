"""Frozen DARC policies: a `policy.json` file deployed as a cascade harness (`--harness darc:PATH`)."""

from __future__ import annotations

import json
from pathlib import Path

from playground.host.registry import HarnessSpec

VERIFIERS = ("env:won",)


def read_policy(path: str | Path) -> dict:
    """Read and check a policy file; ValueError names the file and what is wrong."""
    try:
        policy = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read DARC policy {str(path)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"DARC policy {str(path)!r} is not JSON: {exc.msg} (line {exc.lineno})") from None
    chain = policy.get("chain") if isinstance(policy, dict) else None
    if not isinstance(chain, list) or not chain or not all(isinstance(n, str) and n for n in chain):
        raise ValueError(f"DARC policy {str(path)!r} needs a non-empty 'chain' list of intervention names")
    if len(set(chain)) != len(chain):
        raise ValueError(f"DARC policy {str(path)!r}: the chain repeats an intervention: {chain}")
    verifier = policy.get("verifier", "env:won")
    if verifier not in VERIFIERS:
        raise ValueError(f"DARC policy {str(path)!r}: unknown verifier {verifier!r}; choose from: {', '.join(VERIFIERS)}")
    return policy


def cascade_harness(name: str, path: str) -> HarnessSpec:
    """The harness that deploys the policy at `path` as a cascade of its chain."""
    policy = read_policy(path)
    return HarnessSpec(name, params=dict(policy.get("params", {})), cascade=tuple(policy["chain"]),
                       verifier=policy.get("verifier", "env:won"),
                       description=f"DARC cascade {' -> '.join(policy['chain'])} from {path}")
