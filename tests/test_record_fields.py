"""No code outside the record module reads an episode record's field by its name as a string.

Episode records are typed (`playground.core.records.EpisodeRecord`): a reader writes `record.won`, never
`record["won"]` or `record.get("won")`. This test walks the syntax tree of every module under playground/,
plugins/, envs/ and scripts/ and fails on each of these, naming file, line and field:

1. a string read (`X["f"]`, `X.get("f")`, `"f" in X`) of a field only episode records have (`DISTINCTIVE`:
   `won`, `task_id`, `trial`, the tallied counts, ...), on any expression;
2. a string read of any record field on an expression named as a record (`record`, `rec`, `r`, `records[i]`).

Dicts that are not episode records but share a distinctive name (an env's step info `{"won": ...}`, a lesson's
provenance `{"task_id": ...}`, a summary's per-harness counts) are listed in `OTHER_DICTS` by file, with what they
are. A planted example of each pattern shows the check catches it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from playground.core.records import EpisodeRecord

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("playground", "plugins", "envs", "scripts")
ALLOWED = {"playground/core/records.py"}
FIELDS = frozenset(EpisodeRecord.model_fields)
# Fields no other JSON object of the project shares a name with (save those in OTHER_DICTS).
DISTINCTIVE = frozenset({
    "won", "task_id", "episode_id", "trial", "invalid_actions", "detected_failures", "verified_recoveries",
    "unresolved_recoveries", "lessons_added", "lessons_retrieved", "lessons_helped", "judge_prompt_tokens",
    "judge_completion_tokens", "agent_calls", "schema_invalid_steps", "cascade_length", "response_cache",
    "judge_replies", "max_score", "record_version"})
RECORD_NAMES = frozenset({"record", "rec", "r", "records", "episode_record"})
# file -> {field: what the dict read there is}: dicts that are not episode records.
OTHER_DICTS: dict[str, dict[str, str]] = {
    "playground/core/loop.py": {"won": "the env's step info", "max_score": "the env's reset and step info"},
    "playground/run/forks.py": {"max_score": "the env's reset info at the fork point"},
    "playground/run/html_report.py": {"detected_failures": "a summary.json per-harness entry",
                                      "verified_recoveries": "a summary.json per-harness entry",
                                      "lessons_added": "a summary.json per-harness entry"},
    "plugins/dart/structure.py": {"steps": "an instance of the env's declared workflow (reset info['workflow'])"},
    "plugins/playbook/provenance.py": {"verified": "a playbook lesson record (the row to insert)"},
    "envs/alfworld/env.py": {"won": "the TextWorld game state ALFWorld's engine returns (its infos)"},
    "envs/textworld/env.py": {"max_score": "the TextWorld engine's game state (its infos)",
                              "won": "the TextWorld engine's game state (its infos)"},
    "envs/workflow/env.py": {"won": "the env's step info"},
    "plugins/aed/diagnose.py": {"trace": "an AED diagnosis record (diagnoses.jsonl, rejected.jsonl)",
                                "won": "diagnose_run's Counter of the run's episodes (won ones counted)"},
    "plugins/aed/replay.py": {"won": "a replayed candidate of an AED replay record",
                              "trace": "an AED diagnosis record", "task_id": "an AED diagnosis record"},
    "plugins/aed/figures.py": {"won": "a candidate of an AED replay record (its trials won)",
                               "trace": "an AED replay record (the diagnosed trace)"},
    "plugins/aed/train.py": {"trace": "an AED diagnosis record",
                             "task_id": "an example of AED's training dataset (train.jsonl, holdout.jsonl)"},
    "plugins/aed/views.py": {"won": "the search-selected candidate of an AED replay record (its trials won)",
                             "trace": "an AED diagnosis record"},
    "plugins/baselines/awm.py": {"steps": "a workflow of AWM's memory file (workflows.jsonl)"},
    "plugins/baselines/prompt_search.py": {"max_score": "the env's step info", "won": "the env's step info"},
    "plugins/darc/agreement.py": {"task_id": "a per_episode entry of darc diagnose's diagnosis.json"},
    "plugins/darc/profile.py": {"won": "a per_episode entry of darc diagnose's diagnosis.json"},
    "scripts/bench_alfworld.py": {"won": "the env's reset and step info"},
    "scripts/bench_appworld.py": {"detected_failures": "a summary.json per-harness entry"},
    "scripts/bench_baselines.py": {"steps": "a workflow of AWM's memory file (workflows.jsonl)"},
    "scripts/bench_dart_steps.py": {"won": "a LangGraph run's figures (plugins/dart/graph.py play)"},
    "scripts/bench_dart_appworld.py": {"won": "a row of this benchmark's counts (episodes won)"},
    "scripts/bench_local_model.py": {"won": "a figures row of this benchmark (episodes won)"},
    "scripts/bench_scienceworld.py": {"won": "the env's step info"},
    "scripts/bench_sweep_cache.py": {"response_cache": "summary.json's response-cache counts",
                                     "lessons_added": "a summary.json per-harness entry"},
    "scripts/sweep_instrument.py": {"judge_replies": "a summary.json per-harness entry",
                                    "won": "a table row of this sweep (episodes won)"},
}


def _field_read(node: ast.AST) -> tuple[str, ast.AST] | None:
    """(field, receiver) of `X["f"]` (read, not assigned), `X.get("f", ...)` or `"f" in X` / `"f" not in X`; None
    for anything else."""
    if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)):
        return node.slice.value, node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value, node.func.value
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
        return node.left.value, node.comparators[0]
    return None


def _named_as_record(node: ast.AST) -> bool:
    """An expression named as a record: `record`, `r`, ..., or an item of one (`records[0]`)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and node.id in RECORD_NAMES


def violations(source: str, name: str = "<source>") -> list[str]:
    """Where `source` reads an episode record's field by string (see the module's docstring)."""
    other = OTHER_DICTS.get(name, {})
    found = []
    for node in ast.walk(ast.parse(source)):
        read = _field_read(node)
        if read is None:
            continue
        field, receiver = read
        if field in other:
            continue
        if field in DISTINCTIVE or (field in FIELDS and _named_as_record(receiver)):
            found.append(f"{name}:{node.lineno}: reads the record field {field!r} by string")
    return found


def _modules():
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative not in ALLOWED:
                yield relative, path


def test_no_module_reads_a_record_field_by_string():
    found = [v for relative, path in _modules() for v in violations(path.read_text(encoding="utf-8"), relative)]
    assert not found, "read these as attributes of EpisodeRecord (record.won):\n" + "\n".join(found)


def test_every_listed_other_dict_is_still_there():
    """An entry of OTHER_DICTS whose file no longer reads that name by string is stale: remove it."""
    stale = []
    for relative, fields in OTHER_DICTS.items():
        source = (ROOT / relative).read_text(encoding="utf-8")
        reads = {read[0] for node in ast.walk(ast.parse(source)) if (read := _field_read(node))}
        stale += [f"{relative}: {field}" for field in fields if field not in reads]
    assert not stale, "stale OTHER_DICTS entries:\n" + "\n".join(stale)


@pytest.mark.parametrize("source", [
    'def f(x):\n    return x["won"]\n',
    'def f(x):\n    return x.get("task_id", "")\n',
    'def f(x):\n    return "judge_prompt_tokens" in x\n',
    'def f(record):\n    return record["status"]\n',
    'def f(records):\n    return records[0].get("steps", 0)\n',
    'def f(r):\n    return "attempts" in r\n',
])
def test_a_planted_string_read_is_caught(source):
    assert violations(source)


@pytest.mark.parametrize("source", [
    'def f(record):\n    return record.won, record.steps\n',
    'def f(config):\n    return config["status"], config.get("steps")\n',  # not named as a record, not distinctive
    'def f(schema):\n    return schema["type"] == "object"\n',
])
def test_attribute_reads_and_other_dicts_pass(source):
    assert not violations(source)
