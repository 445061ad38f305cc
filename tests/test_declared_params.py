"""Declared harness parameters: every built-in intervention declares the `--param` keys it reads as a pydantic model;
a run's keys are checked against the declarations (an unknown key, an ill-typed value: a named error before anything
is played), an undeclared third-party intervention stays opaque, and `playground harnesses --params NAME` lists them."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import BaseModel, Field

from playground import hookimpl
from playground.host.manager import Host
from playground.host.registry import InterventionSpec
from playground.run.config import RunConfig, RunConfigError
from playground.run.harnesses import resolve_harness, resolve_intervention
from playground.run.parameters import LOOP_PARAMS, LoopParams, check_params, declarations
from playground.run.validation import check_config
from tests.conftest import cli

HOST = Host().load()
HARNESSES = [spec.name for spec in HOST.harnesses]
ILL_TYPED = [1, 2]  # a list: no declared parameter of a built-in takes one


def _check(harness: str, params: dict, host: Host = HOST) -> None:
    check_params(host, [(harness, resolve_harness(host, harness))], params)


def _a_declared_key(harness: str) -> tuple[str, str, object]:
    """(intervention or "loop", key, a valid value) of one parameter the harness declares: its first intervention's
    first declared key, or the loop's for a harness without interventions."""
    spec = resolve_harness(HOST, harness)
    for one in declarations(HOST, spec):
        if one.model is not None and one.model.model_fields:
            key, field = next(iter(one.model.model_fields.items()))
            return one.intervention, key, spec.params.get(key, field.default)
    return "loop", LOOP_PARAMS[0], LoopParams.model_fields[LOOP_PARAMS[0]].default


def test_every_builtin_intervention_declares_its_parameters():
    assert HARNESSES and [spec.name for spec in HOST.interventions if spec.params_model is None] == []
    for spec in HOST.interventions:
        assert issubclass(spec.params_model, BaseModel)
        for key, field in spec.params_model.model_fields.items():
            assert field.description, f"{spec.name}: parameter {key!r} has no description"


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_unknown_key_is_a_named_error(harness):
    with pytest.raises(RunConfigError) as refused:
        _check(harness, {"no_such_parameter": 1})
    message = str(refused.value)
    assert "unknown --param 'no_such_parameter'" in message and harness in message
    assert "known: " in message and "max_reasks_per_step" in message


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_ill_typed_value_of_a_declared_key_is_a_named_error(harness):
    intervention, key, _ = _a_declared_key(harness)
    with pytest.raises(RunConfigError) as refused:
        _check(harness, {key: ILL_TYPED})
    message = str(refused.value)
    assert f"harness {harness!r}" in message and key in message and "must be" in message
    assert str(ILL_TYPED) in message
    if key == "max_reasks_per_step":  # the loop's own rule comes first
        assert f"max_reasks_per_step must be a whole number from 0 to 100, got {ILL_TYPED}" in message
    else:
        assert f"{intervention} parameter {key!r}" in message


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_valid_value_of_a_declared_key_passes(harness):
    _, key, value = _a_declared_key(harness)
    _check(harness, {key: value})
    _check(harness, {})


@pytest.mark.parametrize("harness, params, message", [
    ("sentry", {"threshold": -0.5}, "harness 'sentry': sentry parameter 'threshold' must be a non-negative number, "
                                    "got -0.5"),
    ("sentry", {"fallback": "pray"}, "sentry parameter 'fallback' must be one of best, reask, give_up, got 'pray'"),
    ("sentry", {"need_check": 1}, "sentry parameter 'need_check' must be true or false, got 1"),
    ("guard-only", {"judge_model": 7}, "validity-guard parameter 'judge_model' must be a string, got 7"),
    ("ace", {"ace_mode": "sometimes"}, "ace parameter 'ace_mode' must be one of online, frozen"),
    ("alfworld-guard", {"top_actions": 0}, "action_pruning parameter 'top_actions' must be a whole number of at "
                                           "least 1, got 0"),
    ("alfworld-guard", {"prior_games": 2.5}, "must be a non-negative whole number, got 2.5"),
    ("dart", {"certify": "no"}, "dart parameter 'certify' must be true or false, got 'no'"),
    ("demos-k4", {"demo_pool_size": 0}, "demos-k4 parameter 'demo_pool_size' must be a whole number of at least 1"),
    ("demos-k4", {"demo_pool": 3}, "demos-k4 parameter 'demo_pool' must be a string or null, got 3"),
    ("base", {"max_rollbacks": -1}, "the episode loop parameter 'max_rollbacks' must be a non-negative whole number"),
    ("base", {"max_reasks_per_step": 101}, "max_reasks_per_step must be a whole number from 0 to 100, got 101"),
])
def test_the_rule_broken_is_named_from_the_declaration(harness, params, message):
    with pytest.raises(RunConfigError, match="^harness ") as refused:
        _check(harness, params)
    assert message in str(refused.value)


def test_a_key_of_one_harness_of_the_run_is_known_to_the_run_and_checked_where_declared():
    harnesses = [(name, resolve_harness(HOST, name)) for name in ("base", "sentry")]
    check_params(HOST, harnesses, {"k": 3, "max_rollbacks": 4})  # `k` is Sentry's; base ignores it, as before
    with pytest.raises(RunConfigError, match="harness 'sentry': sentry parameter 'k'"):
        check_params(HOST, harnesses, {"k": "three"})


def test_the_harness_own_values_are_checked_with_the_run_values_over_them():
    _check("sentry-k3", {})
    _check("sentry-k3", {"k": 4.5})  # a number, as Sentry has always taken it
    with pytest.raises(RunConfigError, match="sentry parameter 'k' must be a non-negative number, got -1"):
        _check("sentry-k3", {"k": -1})


def test_an_intervention_built_by_a_loader_carries_the_declaration_of_what_it_wraps():
    assert resolve_intervention(HOST, "detect-only:sentry").params_model is resolve_intervention(HOST, "sentry") \
        .params_model
    _check("darc-profile:sentry", {"window": 3})
    with pytest.raises(RunConfigError, match="detect-only:sentry parameter 'window' must be a non-negative number"):
        _check("darc-profile:sentry", {"window": "wide"})


def test_the_plugins_defaults_are_their_declarations_defaults_and_choices():
    from playground.envs.alfworld import interventions as guard
    from playground.envs.alfworld.params import GuardParams
    from playground.plugins.baselines import ace, awm, monitor, reasoningbank, reflexion, success
    from playground.plugins.sentry import harness as sentry
    from playground.plugins.sentry.params import SentryParams
    from playground.plugins.sentry.verifier import ADMISSIONS

    for module, name in ((sentry, "sentry"), (ace, "ace"), (awm, "awm"), (reasoningbank, "reasoningbank"),
                         (reflexion, "reflexion"), (monitor, "monitor"), (guard, "action_pruning")):
        model = HOST.interventions.get(name).params_model
        assert module.DEFAULTS == {key: field.default for key, field in model.model_fields.items()}, name
        for key, choices in getattr(module, "CHOICES", {}).items():
            assert get_args(model.model_fields[key].annotation) == tuple(choices), (name, key)
    assert get_args(SentryParams.model_fields["admission"].annotation) == ADMISSIONS
    assert get_args(HOST.interventions.get("awm").params_model.model_fields["awm_success"].annotation) == success.MODES
    assert guard.parse_params({}) == GuardParams().model_dump()  # the guard validates through its declaration


class _Opaque:
    """A third-party intervention registered without a declaration."""

    @hookimpl
    def register_interventions(self, register):
        register("opaque-one", lambda params: object(), description="reads what it likes")

    @hookimpl
    def register_harnesses(self, register):
        register("opaque-harness", ["opaque-one"], description="the undeclared intervention")


class _Declaring:
    """A third-party intervention that declares its parameters."""

    class Params(BaseModel):
        """The parameters it reads."""

        depth: int = Field(default=2, ge=1, le=5, description="how deep it looks")

    @hookimpl
    def register_interventions(self, register):
        register("declaring-one", lambda params: object(), params_model=self.Params)

    @hookimpl
    def register_harnesses(self, register):
        register("declaring-harness", ["declaring-one"])


def test_an_undeclared_intervention_is_opaque_and_a_declaring_one_is_checked():
    host = Host().load(extra={"opaque": _Opaque(), "declaring": _Declaring()})
    assert host.interventions.get("opaque-one").params_model is None
    _check("opaque-harness", {"anything": "goes"}, host)
    with pytest.raises(RunConfigError, match="harness 'declaring-harness': declaring-one parameter 'depth' must be "
                                             "a whole number from 1 to 5, got 9"):
        _check("declaring-harness", {"depth": 9}, host)
    with pytest.raises(RunConfigError, match="unknown --param 'breadth'.*known: depth, max_checkpoints_per_branch"):
        _check("declaring-harness", {"breadth": 9}, host)


def test_a_declaration_that_is_not_a_pydantic_model_is_refused_at_registration():
    class Bad:
        @hookimpl
        def register_interventions(self, register):
            register("bad-one", lambda params: object(), params_model={"depth": 2})

    host = Host().load(extra={"bad": Bad()})
    assert "bad-one" not in host.interventions
    assert any(r.name == "bad" and r.status == "failed" and "params_model must be a pydantic model class" in r.error
               for r in host.records)
    assert isinstance(HOST.interventions.get("sentry"), InterventionSpec)


def test_check_config_refuses_a_bad_value_before_building_anything(tmp_path):
    config = RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-1"], agent="noisy",
                       harnesses=["base", "sentry"], out=str(tmp_path / "run"), params={"soft_repair": "no"})
    with pytest.raises(RunConfigError, match="harness 'sentry': sentry parameter 'soft_repair' must be true or "
                                             "false, got 'no'"):
        check_config(HOST, config)
    check_config(HOST, RunConfig(**{**config.__dict__, "params": {"soft_repair": False, "max_rollbacks": 3}}))
    assert not (tmp_path / "run").exists()


def test_the_cli_lists_a_harness_parameters(capsys):
    code, out, _ = cli(capsys, "harnesses", "--params", "sentry-k3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("harness sentry-k3:") and "set by the harness: k=3" in out
    assert "the episode loop:" in out and "intervention sentry:" in out
    row = next(line.split() for line in lines if line.strip().startswith("threshold "))
    assert row[:4] == ["threshold", "float", "0.6", ">="] and "soft repair" in " ".join(row)
    fallback = next(line.split() for line in lines if line.strip().startswith("fallback "))
    assert fallback[:4] == ["fallback", "str", "'reask'", "best|reask|give_up"]
    reasks = next(line.split() for line in lines if line.strip().startswith("max_reasks_per_step "))
    assert reasks[:4] == ["max_reasks_per_step", "int", "2", "0..100"]


def test_the_cli_lists_every_builtin_harness_and_refuses_an_unknown_one(capsys):
    for harness in HARNESSES:
        code, out, _ = cli(capsys, "harnesses", "--params", harness)
        assert code == 0 and out.startswith(f"harness {harness}:") and "max_reasks_per_step" in out
    code, _, err = cli(capsys, "harnesses", "--params", "no-such-harness")
    assert code == 2 and "unknown harness 'no-such-harness'" in err
