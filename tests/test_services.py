"""What an intervention factory receives (`playground.run.services`): its declared parameters as a model
instance and the run's services; a one-argument factory the plain dict, the older way."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from playground.core.hookspecs import hookimpl
from playground.host.manager import Host
from playground.run.config import RunConfig, RunConfigError, episode_seed
from playground.run.runner import run

GOT: list[tuple[str, object, object]] = []  # (intervention, params, services) of every build


class Window(BaseModel):
    window: int = Field(default=1, ge=1)
    note: str = "hi"


class Watch:
    @hookimpl
    def episode_started(self, start):
        pass


def typed(params, services):
    GOT.append(("typed", params, services))
    (services.scratch_dir() / "seen.txt").write_text(str(services.seed))
    return Watch()


def legacy(params):
    GOT.append(("legacy", params, None))
    return Watch()


class ServicesPlugin:
    @hookimpl
    def register_interventions(self, register):
        register("typed", typed, params_model=Window)
        register("legacy", legacy)

    @hookimpl
    def register_harnesses(self, register):
        register("both", ["typed", "legacy"], {"window": 3})


@pytest.fixture
def host():
    GOT.clear()
    return Host(strict=True).load(extra={"services-test": ServicesPlugin()})


def config(tmp_path, **changes):
    values = dict(env="tiny", task_set="default", split="test", tasks=["tiny-20000"], agent="expert",
                  harnesses=["both"], out=str(tmp_path / "run"), strict=True, seed=7)
    return RunConfig(**{**values, **changes})


def test_a_typed_factory_gets_its_model_and_the_services_a_one_argument_factory_the_dict(host, tmp_path):
    run(host, config(tmp_path, params={"extra": 1}))
    played = [(kind, params, services) for kind, params, services in GOT if services is None or not services.checking]
    typed_params, services = next((p, s) for kind, p, s in played if kind == "typed")
    assert typed_params == Window(window=3)  # the declared keys only, the default filled in
    assert (services.env, services.harness, services.intervention) == ("tiny", "both", "typed")
    assert services.seed == episode_seed(7, "tiny-20000", 1)
    assert services.playbook == str(tmp_path / "run" / "playbooks" / "both.sqlite")
    assert (tmp_path / "run" / "scratch" / "typed" / "seen.txt").read_text() == str(services.seed)
    assert next(p for kind, p, _ in played if kind == "legacy") == {"window": 3, "extra": 1}
    record = json.loads((tmp_path / "run" / "episodes.jsonl").read_text())
    assert record["status"] == "won"
    # the check builds each once too, before any episode, its scratch folder a temporary one
    assert [kind for kind, _, services in GOT if services is not None and services.checking] == ["typed"]


def test_a_value_that_breaks_the_declaration_is_refused_before_anything_is_built(host, tmp_path):
    with pytest.raises(RunConfigError, match="typed parameter 'window' must be a whole number of at least 1"):
        run(host, config(tmp_path, params={"window": 0}))
    assert GOT == []


def test_the_judge_service_is_the_agent_s_shared_model_unless_settings_name_one(host, tmp_path):
    from playground.agents.structured import agent_model_shared
    from playground.run.services import episode_services

    services = episode_services("r", "tiny", "both", 0, None, str(tmp_path), "typed")
    assert services.judge({}) is None

    class Model:
        def complete(self, messages, **options):
            return None

    shared = Model()
    with agent_model_shared(shared):
        assert services.judge({}) is shared
    with pytest.raises(ValueError, match="typed: judge_base_url needs judge_model too"):
        services.judge({"judge_base_url": "http://127.0.0.1:9/v1"})


def test_declared_values_validates_a_plain_dict_as_the_host_does():
    from playground.api import ParameterError, declared_values

    assert declared_values(Window, {"window": 3, "other": 1}, "w") == {"window": 3, "note": "hi"}
    assert declared_values(Window, Window(window=2), "w") == {"window": 2, "note": "hi"}
    with pytest.raises(ParameterError, match=r"w parameter 'window': Input should be greater than or equal to 1, "
                                             r"got 0"):
        declared_values(Window, {"window": 0}, "w")
    with pytest.raises(ParameterError, match="w parameter 'window'"):
        declared_values(Window, {"window": "2"}, "w")  # strict: a string is not a number
