"""What the host hands an intervention factory besides its parameters (`Services`), and the parameters that name
a judge model (`JudgeSettings`), for a plugin's parameter model to inherit.

Plain records of the plugin API: the host fills them in (`playground.run.services` builds a `Services` per
episode, with its judge-model builder), so a plugin reaches the run's facilities through them and never through
the host's modules.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from pydantic import BaseModel, Field, ValidationError

from playground.core.errors import PlaygroundError


class JudgeSettings(BaseModel):
    """The parameters that name a judge model; a plugin's parameter model inherits them."""

    judge_base_url: str = Field(default="", description="the judge model's OpenAI-compatible endpoint ...")
    judge_model: str = Field(default="", description="... and its model name")
    judge_local: bool = Field(default=False, description="... or the embedded GGUF model (extra `local`)")


def _no_judge(settings: Mapping[str, Any], owner: str, max_tokens: int, retries: int) -> Any:
    """The judge provider of a `Services` built without a host: no model."""
    return None


@dataclass(frozen=True)
class Services:
    """The run's facilities an intervention may use, instead of reaching into the host.

    `seed` is the episode's seed (the run's seed while a run is checked), `playbook` the path of the playbook
    the harness grows (`--playbook`, else its own under the run directory), `run_dir` the run directory,
    `scratch` the folder `scratch_dir()` makes, `checking` true while the run's configuration is checked (before
    anything is played or written). `judge_provider(settings, owner, max_tokens, retries)` is the host's judge
    model builder (`judge`).
    """

    run_id: str
    env: str
    harness: str
    seed: int
    playbook: str | None
    run_dir: str
    intervention: str = ""
    checking: bool = False
    scratch: str = ""
    judge_provider: Callable[[Mapping[str, Any], str, int, int], Any] = field(default=_no_judge, repr=False)

    def judge(self, settings: Mapping[str, Any], owner: str | None = None, *, max_tokens: int = 200,
              retries: int = 3) -> Any:
        """The judge model `settings` name (`JudgeSettings`' keys), else the agent's own model where the runner
        shares it, else None (a `ChatModel`); ValueError names `owner` (default: this intervention) and what is
        missing."""
        return self.judge_provider(settings, owner or self.intervention or "intervention", max_tokens, retries)

    def scratch_dir(self) -> Path:
        """A folder of this intervention's own under the run directory, made on first use; its files are the
        plugin's, kept with the run. While the run is checked (`checking`), or without one, a temporary folder."""
        if self.checking or not self.scratch:
            return Path(tempfile.mkdtemp(prefix="scratch-"))
        path = Path(self.scratch)
        path.mkdir(parents=True, exist_ok=True)
        return path


_Model = TypeVar("_Model", bound=BaseModel)


class ParameterError(PlaygroundError, ValueError):
    """A plugin's parameters break its declaration: names the owner, the parameter, the rule and the value."""


def declared_values(model: type[BaseModel], params: Mapping[str, Any] | BaseModel, owner: str,
                    error: type[Exception] = ParameterError) -> dict[str, Any]:
    """A plugin's parameters as a dict, validated by its declaration `model` (a pydantic model class).

    An instance of `model` (what the host hands a factory: it validated the values) is taken as it is; a mapping,
    or another model's values, has the keys `model` declares validated strictly, as a run checks them (a bool is
    true or false, a number is not a string), the defaults filled in, other keys ignored. `error` (ParameterError
    unless the plugin names its own class) says "OWNER parameter 'KEY': RULE, got VALUE".
    """
    return declared_params(model, params, owner, error).model_dump()


def declared_params(model: type[_Model], params: Mapping[str, Any] | BaseModel, owner: str,
                    error: type[Exception] = ParameterError) -> _Model:
    """`declared_values` as an instance of `model`: what the host hands an intervention factory."""
    if isinstance(params, model):
        return params
    source = params.model_dump() if isinstance(params, BaseModel) else params
    given = {key: value for key, value in source.items() if key in model.model_fields}
    try:
        return model.model_validate(given, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = first["loc"][0] if first["loc"] else None
        if key in given:
            raise error(f"{owner} parameter {key!r}: {first['msg']}, got {given[key]!r}") from None
        raise error(f"{owner} parameters: {first['msg']}") from None
