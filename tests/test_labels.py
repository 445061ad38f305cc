"""The failure-label registry: declared once through `register_failure_labels`, read by everyone.

Also the guard against copies diverging: every label an agent, detector or env emits is
one the loaded plugins declare, with the same failure type.
"""

from __future__ import annotations

import ast
import inspect
import re
import types

import pytest

from playground.agents.noisy import FAILURE_LABELS
from playground.core.labels import DuplicateFailure, FailureLabel, FailureType, LabelRegistry, UnknownFailure
from playground.host import manager
from playground.host.manager import Host, PluginLoadError, default_labels
from playground.plugins.darc.profile import DARC_MODES
from playground.plugins.playbook.io import lesson_problems, read_jsonl
from playground.plugins.playbook.store import Playbook

TOOLING = """
from playground.core.hookspecs import hookimpl
from playground.core.labels import FailureLabel, FailureType

@hookimpl
def register_failure_labels(register):
    register(FailureType("tooling", "procedure_breadth", "a tool misbehaves"))
    register(FailureLabel("flaky_tool", "tooling", advice="Retry the tool once, then use another."))
"""

REDECLARES_SENTRY_LABEL = """
from playground.core.hookspecs import hookimpl
from playground.core.labels import FailureLabel

@hookimpl
def register_failure_labels(register):
    register(FailureLabel("planning_stall", "progress", advice="something else"))
"""

ORPHAN = """
from playground.core.hookspecs import hookimpl
from playground.core.labels import FailureLabel

@hookimpl
def register_failure_labels(register):
    register(FailureLabel("lost_label", "no_such_type"))
"""

NOT_A_DECLARATION = """
from playground.core.hookspecs import hookimpl

@hookimpl
def register_failure_labels(register):
    register("planning_stall")
"""


def _module(source: str, name: str = "labels_plugin") -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def _record(host: Host, name: str):
    return next(r for r in host.records if r.name == name)


# -- the registry ------------------------------------------------------------------------


def test_declaring_a_label_twice_names_the_plugin_that_declared_it():
    registry = LabelRegistry([FailureType("progress", "procedure_breadth", plugin="one"),
                              FailureLabel("planning_stall", "progress", plugin="one")])
    with pytest.raises(DuplicateFailure, match=r"failure label 'planning_stall' is already declared by plugin 'one'"):
        registry.add(FailureLabel("planning_stall", "progress", plugin="two"))
    with pytest.raises(DuplicateFailure, match=r"failure type 'progress' is already declared by plugin 'one'"):
        registry.add(FailureType("progress", "other"))


def test_a_plugin_redeclaring_a_label_is_skipped_with_an_error_naming_the_first_plugin(capsys):
    host = Host(strict=False).load(extra={"copycat": _module(REDECLARES_SENTRY_LABEL)})
    record = _record(host, "copycat")
    assert record.status == "failed"
    assert "failure label 'planning_stall' is already declared by plugin 'sentry'" in record.error
    assert host.labels.get("planning_stall").plugin == "sentry"  # the first declaration stands
    assert host.labels.get("planning_stall").advice.startswith("Your recent actions changed nothing.")
    with pytest.raises(PluginLoadError, match="copycat.*already declared by plugin 'sentry'"):
        Host(strict=True).load(extra={"copycat": _module(REDECLARES_SENTRY_LABEL)})


def test_unknown_type_and_label_errors_name_the_choices():
    labels = default_labels()
    with pytest.raises(UnknownFailure, match=r"unknown failure type 'nope'; choose from: action_validity, "
                                             r"format_precision, grounding, procedure, progress"):
        labels.check("nope", ["planning_stall"])
    with pytest.raises(UnknownFailure, match=r"unknown label\(s\) 'nope' for failure type 'progress'; choose from: "
                                             r"over_exploration, planning_stall, repetition_or_looping, "
                                             r"termination_miscalibration"):
        labels.check("progress", ["planning_stall", "nope"])
    with pytest.raises(UnknownFailure, match="choose from"):
        labels.labels_of("nope")


def test_a_label_of_an_undeclared_type_is_dropped_and_reported():
    host = Host(strict=False).load(extra={"orphan": _module(ORPHAN)})
    assert "lost_label" not in host.labels
    failed = _record(host, "orphan:lost_label")
    assert failed.status == "failed" and "undeclared failure type 'no_such_type'" in failed.error


def test_register_accepts_only_declarations():
    host = Host(strict=False).load(extra={"sloppy": _module(NOT_A_DECLARATION)})
    assert "expects a FailureType or FailureLabel, got str" in _record(host, "sloppy").error


def test_plugins_declare_their_own_types_whatever_the_load_order():
    labels = default_labels()
    owners = {t: {label.plugin for label in labels if label.failure_type == t} for t in labels.types()}
    assert owners == {"action_validity": {"sentry"}, "progress": {"sentry"}, "grounding": {"sentry"},
                      "format_precision": {"finance"}, "procedure": {"playbook", "appworld"}}
    # AppWorld loads before the playbook that declares `procedure`; its labels still count
    assert {"unknown_api", "strategies_and_hard_rules"} <= labels.labels_of("procedure")
    assert {t: labels.mode_of(t) for t in labels.types()} == {
        "action_validity": "action_validity", "format_precision": "format_precision",
        "progress": "progress", "grounding": "grounding", "procedure": "procedure_breadth"}


def test_a_failed_plugin_takes_its_labels_with_it():
    broken = TOOLING + "\n    raise RuntimeError('then it breaks')\n"
    host = Host(strict=False).load(extra={"tooling": _module(broken)})
    assert "flaky_tool" not in host.labels and "tooling" not in host.labels.types()


# -- a plugin's label reaches the playbook ----------------------------------------------


def test_a_plugins_label_reaches_playbook_validation(tmp_path, monkeypatch):
    host = Host().load(extra={"tooling": _module(TOOLING)})
    record = {"failure_type": "tooling", "labels": ["flaky_tool"], "trigger": "a tool times out", "principle": "retry"}
    assert lesson_problems(record, labels=host.labels) == []
    assert "unknown failure type 'tooling'" in lesson_problems(record)[0]  # the default host has no such plugin
    with Playbook(tmp_path / "given.sqlite", labels=host.labels) as book:
        book.add("tooling", ["flaky_tool"], "a tool times out", "retry")
        assert [item.lesson.labels for item in book.retrieve("tooling", ["flaky_tool"])] == [("flaky_tool",)]
        book.export_jsonl(tmp_path / "lessons.jsonl")
    assert read_jsonl(tmp_path / "lessons.jsonl", host.labels)[0]["labels"] == ("flaky_tool",)
    with pytest.raises(UnknownFailure, match="tooling"), Playbook(tmp_path / "plain.sqlite") as book:
        book.add("tooling", ["flaky_tool"], "a tool times out", "retry")
    monkeypatch.setattr(manager, "_HOST", host)  # the process-wide host is the default source
    with Playbook(tmp_path / "plain.sqlite") as book:
        assert book.add("tooling", ["flaky_tool"], "a tool times out", "retry") == 1


# -- no copy of the tables can diverge ---------------------------------------------------


def test_the_noisy_agents_failures_are_declared_labels_of_their_type():
    labels = default_labels()
    for mode, (failure_type, label) in FAILURE_LABELS.items():
        assert label in labels, mode
        assert labels.get(label).failure_type == failure_type, mode


def _literal_detections(module) -> list[tuple[str, tuple[str, ...]]]:
    """The (failure_type, labels) of every `Detection(...)` with literal arguments in `module`'s source."""
    found = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Detection" and len(node.args) >= 3:
            failure_type, labels = node.args[1], node.args[2]
            if isinstance(failure_type, ast.Constant) and isinstance(labels, ast.Tuple):
                found.append((failure_type.value, tuple(element.value for element in labels.elts)))
    return found


def test_every_label_sentrys_detectors_emit_is_declared_with_advice():
    from playground.plugins.sentry import detectors

    emitted = _literal_detections(detectors)
    assert len(emitted) >= 10  # the scan sees the detectors
    labels = default_labels()
    for failure_type, names in emitted:
        for name in names:
            assert name in labels and labels.get(name).failure_type == failure_type, name
            assert labels.get(name).advice, name
    for name in labels.labels_of("progress") | labels.labels_of("grounding"):  # soft-repaired, so learned from
        assert labels.get(name).trigger and labels.get(name).resolved_when, name


def test_every_label_the_envs_emit_is_declared():
    from playground.envs.appworld import env as appworld_env, interventions
    from playground.envs.finance.agents import MODE_LABELS
    from playground.envs.finance.format_check import FAILURE_TYPE as FORMAT_TYPE

    labels = default_labels()
    variants = re.findall(r'"label": "(\w+)"', inspect.getsource(appworld_env))  # what the noisy agent reports there
    cell_errors = re.findall(r'CellError\("(\w+)"', inspect.getsource(interventions))
    assert variants and cell_errors
    assert all(name in labels for name in variants), variants
    assert all(labels.get(name).failure_type == interventions.FAILURE_TYPE for name in cell_errors), cell_errors
    assert all(labels.get(name).failure_type == FORMAT_TYPE for name in MODE_LABELS.values())


def test_every_type_belongs_to_a_mode_darc_diagnoses():
    labels = default_labels()
    assert {labels.mode_of(t) for t in labels.types()} <= set(DARC_MODES)


def test_repairs_and_lessons_say_what_the_registry_declares():
    from playground.core.payloads import Detection
    from playground.plugins.sentry.lessons import summarise
    from playground.plugins.sentry.verifier import Verdict, Watch

    stall = default_labels().get("planning_stall")
    detection = Detection("sentry", "progress", ("planning_stall",), 0.8, "no change")
    draft = summarise(Verdict(Watch(2, detection, (), None, cycles=3, progress_action="open door"), True, ""), "look")
    assert draft.trigger == "several actions in a row ('look ...') change nothing in the world"
    assert draft.principle.startswith(stall.advice + " What worked: switching to a 'open ...' action")
