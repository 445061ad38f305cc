"""The settings of `playground baselines optimise` (`--setting KEY=VALUE`): the optimisers' knobs as one frozen,
validated model, and the help text listing them with their defaults."""

from __future__ import annotations

import click
from pydantic import BaseModel, ConfigDict, Field

from playground.api import declared_values
from playground.host_api import CLIError, parse_pairs

OPTION = "--setting"
OWNER = "baselines optimise"


class OptimiseSettings(BaseModel):
    """Every optimiser knob of `baselines optimise`, with its default and bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    train: int = Field(default=8, ge=1, description="the first N tasks of the split: the optimisers' train set "
                                                     "(demos, reflection minibatches)")
    val: int = Field(default=8, ge=1, description="the next N tasks of the split: the optimisers' validation set "
                                                   "(candidates are scored on it)")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="environment variable holding the endpoint's key "
                                                                   "(not needed for local servers)")
    reflection_base_url: str = Field(default="", description="endpoint of the model that proposes instructions "
                                                             "(MIPROv2) or reflects (GEPA); empty: the agent's")
    reflection_model: str = Field(default="", description="its model name; empty: the agent's")
    trials: int = Field(default=4, ge=1, description="MIPROv2: search trials")
    candidates: int = Field(default=3, ge=1, description="MIPROv2: instruction candidates and demo-set candidates")
    demos: int = Field(default=2, ge=0, description="MIPROv2: at most N bootstrapped and N labelled demos")
    lean_proposer: bool = Field(default=False, description="MIPROv2: propose instructions without its dataset and "
                                                           "program summaries (for a slow model)")
    raw_proposals: bool = Field(default=False, description="take a reply of MIPROv2's proposer or GEPA's reflector "
                                                           "that DSPy cannot parse, whole, as the instruction (a "
                                                           "deviation, for a model that answers in prose)")
    metric_calls: int = Field(default=30, ge=1, description="GEPA: the budget in metric calls")
    threads: int = Field(default=1, ge=1, description="evaluation threads")
    seed: int = Field(default=0, description="the optimisers' seed")
    max_obs_chars: int = Field(default=800, ge=1, description="the question's cut in the prompt: the llm agent's "
                                                              "max_obs_chars (pass the run's value)")
    max_tokens: int = Field(default=256, ge=1, description="reply cap: the llm agent's max_tokens")


def _shown(value: object) -> str:
    """A default as it is typed on the command line."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def settings_rows() -> list[tuple[str, str]]:
    """The settings for the command's help, one (KEY=DEFAULT, description and bounds) row each."""
    rows = []
    for name, field in OptimiseSettings.model_fields.items():
        bounds = "".join(f" (>= {m.ge})" for m in field.metadata if getattr(m, "ge", None) is not None)
        rows.append((f"{name}={_shown(field.default)}", f"{field.description}{bounds}"))
    return rows


class SettingsCommand(click.Command):
    """A command whose help ends with its settings (`settings_rows`), as click lists options."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section(f"Settings ({OPTION} KEY=VALUE, repeatable; booleans true or false)"):
            formatter.write_dl(settings_rows())
        super().format_epilog(ctx, formatter)


def parse_settings(pairs: tuple[str, ...]) -> OptimiseSettings:
    """`--setting KEY=VALUE` pairs as OptimiseSettings, the defaults filled in. A value is read as JSON (8, true),
    else taken as text; a text setting keeps the text as typed. CLIError names an unknown key (and the known
    ones), or a key whose value breaks its rule, the rule and the value."""
    values = parse_pairs(pairs, OPTION)
    fields = OptimiseSettings.model_fields
    for key, value in values.items():
        if key not in fields:
            raise CLIError(f"{OWNER} {OPTION} {key!r}: unknown setting, got {key}={value!r}; "
                           f"known: {', '.join(fields)}")
    raw = dict(pair.partition("=")[::2] for pair in pairs)  # parse_pairs checked the syntax; the last one wins
    typed = {key: raw[key] if fields[key].annotation is str else value for key, value in values.items()}
    return OptimiseSettings(**declared_values(OptimiseSettings, typed, OWNER, error=CLIError))


# prompt_search's errors name the knobs as the options they were; the command names them as settings
