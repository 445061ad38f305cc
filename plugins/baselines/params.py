"""The baselines' harness parameters: defaults merged with a harness's params, checked, with a clear error.

Every baseline names its own parameters with its prefix (`ace_`, `reflexion_`, `awm_`, `rb_`,
`monitor_`), so one `--param` never changes two baselines of a run at once; the judge options
are shared with Sentry's LLM judges (`judge_base_url` + `judge_model`, or `judge_local=true`).
"""

from __future__ import annotations

from typing import Any, Mapping

from playground import PlaygroundError

JUDGE_DEFAULTS: dict[str, Any] = {
    "judge_base_url": "",   # an OpenAI-compatible endpoint for the roles a model plays ...
    "judge_model": "",
    "judge_local": False,   # ... or the embedded GGUF model (extra `local`)
}


class BaselineConfigError(PlaygroundError, ValueError):
    """A baseline parameter has a bad value."""


def parse_params(baseline: str, defaults: Mapping[str, Any], params: Mapping[str, Any],
                 choices: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Return `defaults` overridden by the keys of `params` it knows, checked by the type of each default.

    A boolean default takes only true/false, a number only a non-negative number, a string
    only a string (one of `choices[key]` where given); BaselineConfigError names the baseline,
    the parameter and the value.
    """
    merged = {**defaults, **{key: params[key] for key in defaults if key in params}}
    for key, default in defaults.items():
        value = merged[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
            want = "true or false"
        elif isinstance(default, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
            want = "a non-negative number"
        else:
            ok = isinstance(value, str)
            want = "a string"
        if not ok:
            raise BaselineConfigError(f"{baseline} parameter {key!r} must be {want}, got {value!r}")
    for key, allowed in (choices or {}).items():
        if merged[key] not in allowed:
            raise BaselineConfigError(f"{baseline} parameter {key!r} must be one of {', '.join(allowed)}, "
                                      f"got {merged[key]!r}")
    if merged.get("judge_base_url") and not merged.get("judge_model"):
        raise BaselineConfigError(f"{baseline}: judge_base_url needs judge_model too (--param judge_model=NAME)")
    return merged
