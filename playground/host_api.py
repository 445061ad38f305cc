"""The host's facilities for plugins that read runs and add commands: run folders, records and traces, forks,
statistics, models, agents, command-line helpers, text retrieval and processes. No plugin plays a run: runs are
played by `playground run` and by studies (study files a plugin ships, `register_studies`).

The plugin API has two floors. `playground.api` is the ground floor every plugin and env author uses (hooks,
payloads, the env contract, labels, parameter and service types; it imports nothing above `playground.core`).
This module is the floor above it, for methods that read whole runs (diagnoses, evidence, forks, replays) and add
commands. Plugins (`plugins/`) and envs (`envs/`) import only these two and `playground.core`;
an import-linter contract in pyproject.toml forbids them any other module of `playground`, so the host's
modules can move without breaking a plugin. Names are loaded on first use (module `__getattr__`), so importing
this module costs nothing until a name is used. What is stable and how a change is announced:
docs/plugin-api.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The modules that define the API's names, by group: {module: names}.
_MODULES: dict[str, tuple[str, ...]] = {
    # The host: its loaded plugins and registries
    "playground.host.manager": ("default_labels", "get_host", "Host",),
    "playground.host.registry": ("HarnessSpec", "InterventionSpec",),
    # What a run was asked for and what an attempt cost (runs themselves are played by `playground run` and studies)
    "playground.run.config": ("RunConfigError",),
    "playground.run.validation": ("resolve_tasks",),
    "playground.run.costs": ("attempt_cost",),
    "playground.run.services": ("build_intervention",),
    "playground.cli.main": ("pass_host",),
    # Run folders, records and traces
    "playground.core.records": ("AttemptOutcome", "EpisodeRecord", "read_record", "RecordError",),
    "playground.run.rundir": ("identity_mismatch", "load_records", "read_config", "record_trace", "records_so_far",
                              "RunDirError",),
    "playground.run.traces": ("read_events", "read_header", "read_jsonl", "read_trace", "TraceError", "TraceWriter",),
    "playground.run.lock": ("git_state", "plugin_distributions",),
    "playground.run.forks": (
        "EpisodeTrace", "fork", "fork_path", "ForkError", "ForkResult", "load_episode", "RecordedStep",
        "replay_contexts",
    ),
    "playground.run.report": ("merge_judge_replies", "summarise_harness", "wilson_interval",),
    "playground.run.secrets": ("redact_url",),
    # Exactly-once writes of episodes to a plugin's store, across kills and resumes
    "playground.run.exactly_once": ("EPISODE_FIELDS", "episode_key", "key_values", "written_under",),
    # Files written safely
    "playground.run.files": (
        "atomic_write", "atomic_write_text", "check_output", "confined", "json_object", "JSONFileError", "OutputError",
        "safe_file_name",
    ),
    # Paths that are not URLs (`scheme://...` refused unless a backend registered the scheme for the option)
    "playground.run.paths": ("path_callback", "plain_path", "register_url_scheme",),
    # Statistics
    "playground.run.stats": (
        "bootstrap_ci", "compare", "holm", "mcnemar_exact", "Metric", "sign_flip_p", "split_by_harness",
    ),
    # Models and structured replies
    "playground.agents.chat": ("ChatModel", "LLMError",),
    "playground.agents.http_model": ("HTTPChatModel", "endpoint_answers",),
    "playground.agents.local_model": ("default_gguf_path", "LocalChatModel",),
    "playground.agents.structured": ("ask_structured", "CALL_FAILED", "json_object_in", "shared_agent_model",),
    "playground.agents.response_cache": ("default_cache_dir",),
    "playground.agents.judge_model": ("build_judge_model", "judge_or_shared",),
    "playground.agents.llm": ("history_start", "parse_reply", "render_prompt",),
    # The failure-injection instrument as the judges' model, for roles that read recorded episodes
    "playground.agents.instrument_judge": ("show_episode", "state_from_events", "TraceInstrumentJudge",),
    # Agents
    "playground.agents.base": ("bind_env", "expert_action", "parse_options",),
    "playground.agents.noisy": ("NoisyAgent",),
    "playground.testing.play": ("ScriptedAgent",),
    # Command-line helpers for `register_commands`
    "playground.cli.options": (
        "CLIError", "nonempty", "parse_pairs",
    ),
    "playground.cli.terminal": ("visible",),
    "playground.cli.step": ("model_options",),
    # Text retrieval and processes
    "playground.text_index": ("built_once", "TextIndex",),
    "playground.processes": ("die_with_parent", "is_running", "process_start_time", "stop_process_group",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_WHERE)

if TYPE_CHECKING:  # the same names, for type checkers (F401 is off for this file in pyproject.toml)
    from playground.agents.base import bind_env, expert_action, parse_options
    from playground.agents.chat import ChatModel, LLMError
    from playground.agents.http_model import HTTPChatModel, endpoint_answers
    from playground.agents.instrument_judge import TraceInstrumentJudge, show_episode, state_from_events
    from playground.agents.judge_model import build_judge_model, judge_or_shared
    from playground.agents.llm import history_start, parse_reply, render_prompt
    from playground.agents.local_model import LocalChatModel, default_gguf_path
    from playground.agents.noisy import NoisyAgent
    from playground.agents.response_cache import default_cache_dir
    from playground.agents.structured import CALL_FAILED, ask_structured, json_object_in, shared_agent_model
    from playground.cli.main import pass_host
    from playground.cli.options import CLIError, nonempty, parse_pairs
    from playground.cli.step import model_options
    from playground.cli.terminal import visible
    from playground.core.records import AttemptOutcome, EpisodeRecord, RecordError, read_record
    from playground.host.manager import Host, default_labels, get_host
    from playground.host.registry import HarnessSpec, InterventionSpec
    from playground.processes import die_with_parent, is_running, process_start_time, stop_process_group
    from playground.run.config import RunConfigError
    from playground.run.costs import attempt_cost
    from playground.run.exactly_once import EPISODE_FIELDS, episode_key, key_values, written_under
    from playground.run.files import (
        JSONFileError,
        OutputError,
        atomic_write,
        atomic_write_text,
        check_output,
        confined,
        json_object,
        safe_file_name,
    )
    from playground.run.forks import (
        EpisodeTrace,
        ForkError,
        ForkResult,
        RecordedStep,
        fork,
        fork_path,
        load_episode,
        replay_contexts,
    )
    from playground.run.lock import git_state, plugin_distributions
    from playground.run.paths import path_callback, plain_path, register_url_scheme
    from playground.run.report import merge_judge_replies, summarise_harness, wilson_interval
    from playground.run.rundir import (
        RunDirError,
        identity_mismatch,
        load_records,
        read_config,
        record_trace,
        records_so_far,
    )
    from playground.run.secrets import redact_url
    from playground.run.services import build_intervention
    from playground.run.stats import Metric, bootstrap_ci, compare, holm, mcnemar_exact, sign_flip_p, split_by_harness
    from playground.run.traces import TraceError, TraceWriter, read_events, read_header, read_jsonl, read_trace
    from playground.run.validation import resolve_tasks
    from playground.testing.play import ScriptedAgent
    from playground.text_index import TextIndex, built_once


def __getattr__(name: str) -> Any:
    """Import `name` from the module that defines it, on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'playground.host_api' has no attribute {name!r}; the host API is: "
                             f"{', '.join(__all__)}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
