"""What the host hands an intervention factory: its parameters, validated into the model it declares, and a
`Services` record (`playground.core.services`: the run's ids and seed, the playbook path, a scratch folder, the
judge model), built here with the host's judge-model builder.

An intervention factory is called `factory(params, services)`: `params` is an instance of the intervention's
`params_model` (the harness's and the run's values for the keys it declares, defaults filled in), or the plain
dict of every parameter when it declares none. A factory that takes one argument is called the older way,
`factory(dict)`, with every parameter.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel

from playground.agents.chat import ChatModel
from playground.agents.judge_model import judge_or_shared
from playground.core.services import Services, declared_params
from playground.host.registry import InterventionSpec
from playground.run.files import confined, safe_file_name


def episode_services(run_id: str, env: str, harness: str, seed: int, playbook: str | None, run_dir: str,
                     intervention: str, checking: bool = False, scratch_root: str | None = None) -> Services:
    """The `Services` of one intervention of a run: its scratch folder confined to `RUN_DIR/scratch/` (or to
    `scratch_root/scratch/`: a Ray worker's, on its own node), the host's judge-model builder (`judge_or_shared`)."""
    scratch = confined(Path(scratch_root or run_dir) / "scratch", safe_file_name(intervention or "intervention"),
                       what=f"scratch folder of {intervention!r}")
    return Services(run_id, env, harness, seed, playbook, run_dir, intervention, checking, str(scratch),
                    _judge_or_shared)


def _judge_or_shared(settings: Mapping[str, Any], owner: str, max_tokens: int, retries: int) -> ChatModel | None:
    """`judge_or_shared` in the shape `Services.judge_provider` takes."""
    return judge_or_shared(settings, owner, max_tokens=max_tokens, retries=retries)


def typed_params(spec: InterventionSpec, params: Mapping[str, Any]) -> Any:
    """The parameters `spec`'s factory gets: its declared model's instance (the keys it declares, defaults filled
    in; ValueError naming the intervention when a value breaks the declaration), or the dict when it declares
    none."""
    if spec.params_model is None:
        return dict(params)
    return declared_params(spec.params_model, params, f"intervention {spec.name!r}")


def build_intervention(spec: InterventionSpec, params: Mapping[str, Any] | BaseModel, services: Services) -> Any:
    """Build one episode plugin of `spec` from the parameters (a dict, or a model instance a wrapping factory
    got): `factory(typed params, services)`, or `factory(dict)` for a factory that takes one argument."""
    if isinstance(params, BaseModel):
        params = params.model_dump()
    if _takes_one(spec.factory):
        return spec.factory(dict(params))
    return spec.factory(typed_params(spec, params), services)


def _takes_one(factory: Any) -> bool:
    """Whether `factory` cannot take two positional arguments (the older calling convention, one dict)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return True
    positional = [p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    return len(positional) < 2 and not variadic
