"""What the host hands an intervention factory: its parameters, validated into the model it declares, and a
`Services` object (the run's ids and seed, the playbook path, a scratch folder, the judge model).

An intervention factory is called `factory(params, services)`: `params` is an instance of the intervention's
`params_model` (the harness's and the run's values for the keys it declares, defaults filled in), or the plain
dict of every parameter when it declares none. A factory that takes one argument is called the older way,
`factory(dict)`, with every parameter.
"""

from __future__ import annotations

import inspect
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel

from playground.agents.chat import ChatModel
from playground.agents.judge_model import judge_or_shared
from playground.host.registry import InterventionSpec
from playground.run.files import confined, safe_file_name


@dataclass(frozen=True)
class Services:
    """The run's facilities an intervention may use, instead of reaching into the host.

    `seed` is the episode's seed (the run's seed while a run is checked), `playbook` the path of the playbook
    the harness grows (`--playbook`, else its own under the run directory), `run_dir` the run directory.
    """

    run_id: str
    env: str
    harness: str
    seed: int
    playbook: str | None
    run_dir: str
    intervention: str = ""
    checking: bool = False  # built by the run's check, before anything is played or written

    def judge(self, settings: Mapping[str, Any], owner: str | None = None, *, max_tokens: int = 200,
              retries: int = 3) -> ChatModel | None:
        """The judge model `settings` name (`JudgeSettings`' keys), else the agent's own model where the runner
        shares it, else None; ValueError names `owner` (default: this intervention) and what is missing."""
        return judge_or_shared(settings, owner or self.intervention or "intervention", max_tokens=max_tokens,
                               retries=retries)

    def scratch_dir(self) -> Path:
        """A folder of this intervention's own under the run directory (`scratch/<intervention>`), made on
        first use; its files are the plugin's, kept with the run. While the run is checked (`checking`) the run
        directory may not exist yet, so it is a temporary folder instead."""
        if self.checking:
            return Path(tempfile.mkdtemp(prefix=f"scratch-{safe_file_name(self.intervention or 'intervention')}-"))
        path = confined(Path(self.run_dir) / "scratch", safe_file_name(self.intervention or "intervention"),
                        what=f"scratch folder of {self.intervention!r}")
        path.mkdir(parents=True, exist_ok=True)
        return path


def typed_params(spec: InterventionSpec, params: Mapping[str, Any]) -> Any:
    """The parameters `spec`'s factory gets: its declared model's instance (the keys it declares, defaults filled
    in; ValueError naming the intervention when a value breaks the declaration), or the dict when it declares
    none."""
    model = spec.params_model
    if model is None:
        return dict(params)
    try:
        return model.model_validate({key: value for key, value in params.items() if key in model.model_fields})
    except ValueError as exc:
        raise ValueError(f"intervention {spec.name!r}: {exc}") from None


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
