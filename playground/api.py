"""The plugin API: everything of the host that plugins and envs may import, besides `playground.core`.

Plugins (`plugins/`) and envs (`envs/`) import host facilities from here and from `playground.core` (hooks,
payloads, the env contract, labels, errors) only; an import-linter contract in pyproject.toml forbids them any
other module of `playground`, so the host's modules can move without breaking a plugin. Names are loaded on
first use (module `__getattr__`), so importing this module costs nothing until a name is used. What is stable and
how a change is announced: docs/plugin-api.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The modules that define the API's names, by group: {module: names}.
_MODULES: dict[str, tuple[str, ...]] = {
    # The host: its loaded plugins and registries
    "playground.host.manager": ("default_labels", "get_host", "Host",),
    "playground.host.registry": ("HarnessSpec", "InterventionSpec",),
    # Running episodes and sub-runs (what methods that drive whole runs need)
    "playground.run.runner": (
        "check_finished", "playbook_path", "resolve_tasks", "run", "RunConfig", "RunConfigError",
    ),
    "playground.run.costs": ("attempt_cost",),
    "playground.cli.main": ("run_with_progress",),
    # Run folders, records and traces
    "playground.run.rundir": ("identity_mismatch", "load_records", "read_config", "record_trace", "RunDirError",),
    "playground.run.traces": ("read_jsonl", "read_trace",),
    "playground.run.forks": (
        "EpisodeTrace", "fork", "fork_path", "ForkError", "load_episode", "RecordedStep", "replay_contexts",
    ),
    "playground.run.report": ("merge_judge_replies", "summarise_harness", "wilson_interval",),
    "playground.run.secrets": ("redact_url",),
    # Files written safely
    "playground.run.files": (
        "atomic_write", "atomic_write_text", "check_output", "confined", "OutputError", "safe_file_name",
    ),
    # Statistics
    "playground.run.stats": (
        "bootstrap_ci", "compare", "holm", "mcnemar_exact", "Metric", "sign_flip_p", "split_by_harness",
    ),
    # Models and structured replies
    "playground.agents.client": ("ChatModel", "default_gguf_path", "HTTPChatModel", "LLMError", "LocalChatModel",),
    "playground.agents.structured": ("ask_structured", "CALL_FAILED", "json_object_in", "shared_agent_model",),
    "playground.agents.response_cache": ("default_cache_dir",),
    "playground.agents.llm": ("parse_reply", "render_prompt",),
    # Agents
    "playground.agents.base": ("bind_env", "expert_action", "parse_options",),
    "playground.agents.noisy": ("NoisyAgent",),
    "playground.testing": ("ScriptedAgent",),
    # Command-line helpers for `register_commands`
    "playground.cli.options": (
        "CLIError", "default_env", "episode_options", "make_config", "nonempty", "parse_pairs",
    ),
    "playground.cli.terminal": ("visible",),
    # Text retrieval and processes
    "playground.text_index": ("built_once", "TextIndex",),
    "playground.processes": ("die_with_parent", "is_running", "process_start_time", "stop_process_group",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_WHERE)

if TYPE_CHECKING:  # the same names, for type checkers
    from playground.agents.base import (
        bind_env as bind_env,
    )
    from playground.agents.base import (
        expert_action as expert_action,
    )
    from playground.agents.base import (
        parse_options as parse_options,
    )
    from playground.agents.client import (
        ChatModel as ChatModel,
    )
    from playground.agents.client import (
        HTTPChatModel as HTTPChatModel,
    )
    from playground.agents.client import (
        LLMError as LLMError,
    )
    from playground.agents.client import (
        LocalChatModel as LocalChatModel,
    )
    from playground.agents.client import (
        default_gguf_path as default_gguf_path,
    )
    from playground.agents.llm import (
        parse_reply as parse_reply,
    )
    from playground.agents.llm import (
        render_prompt as render_prompt,
    )
    from playground.agents.noisy import (
        NoisyAgent as NoisyAgent,
    )
    from playground.agents.response_cache import (
        default_cache_dir as default_cache_dir,
    )
    from playground.agents.structured import (
        CALL_FAILED as CALL_FAILED,
    )
    from playground.agents.structured import (
        ask_structured as ask_structured,
    )
    from playground.agents.structured import (
        json_object_in as json_object_in,
    )
    from playground.agents.structured import (
        shared_agent_model as shared_agent_model,
    )
    from playground.cli.main import (
        run_with_progress as run_with_progress,
    )
    from playground.cli.options import (
        CLIError as CLIError,
    )
    from playground.cli.options import (
        default_env as default_env,
    )
    from playground.cli.options import (
        episode_options as episode_options,
    )
    from playground.cli.options import (
        make_config as make_config,
    )
    from playground.cli.options import (
        nonempty as nonempty,
    )
    from playground.cli.options import (
        parse_pairs as parse_pairs,
    )
    from playground.cli.terminal import (
        visible as visible,
    )
    from playground.host.manager import (
        Host as Host,
    )
    from playground.host.manager import (
        default_labels as default_labels,
    )
    from playground.host.manager import (
        get_host as get_host,
    )
    from playground.host.registry import (
        HarnessSpec as HarnessSpec,
    )
    from playground.host.registry import (
        InterventionSpec as InterventionSpec,
    )
    from playground.processes import (
        die_with_parent as die_with_parent,
    )
    from playground.processes import (
        is_running as is_running,
    )
    from playground.processes import (
        process_start_time as process_start_time,
    )
    from playground.processes import (
        stop_process_group as stop_process_group,
    )
    from playground.run.costs import (
        attempt_cost as attempt_cost,
    )
    from playground.run.files import (
        OutputError as OutputError,
    )
    from playground.run.files import (
        atomic_write as atomic_write,
    )
    from playground.run.files import (
        atomic_write_text as atomic_write_text,
    )
    from playground.run.files import (
        check_output as check_output,
    )
    from playground.run.files import (
        confined as confined,
    )
    from playground.run.files import (
        safe_file_name as safe_file_name,
    )
    from playground.run.forks import (
        EpisodeTrace as EpisodeTrace,
    )
    from playground.run.forks import (
        ForkError as ForkError,
    )
    from playground.run.forks import (
        RecordedStep as RecordedStep,
    )
    from playground.run.forks import (
        fork as fork,
    )
    from playground.run.forks import (
        fork_path as fork_path,
    )
    from playground.run.forks import (
        load_episode as load_episode,
    )
    from playground.run.forks import (
        replay_contexts as replay_contexts,
    )
    from playground.run.report import (
        merge_judge_replies as merge_judge_replies,
    )
    from playground.run.report import (
        summarise_harness as summarise_harness,
    )
    from playground.run.report import (
        wilson_interval as wilson_interval,
    )
    from playground.run.rundir import (
        RunDirError as RunDirError,
    )
    from playground.run.rundir import (
        identity_mismatch as identity_mismatch,
    )
    from playground.run.rundir import (
        load_records as load_records,
    )
    from playground.run.rundir import (
        read_config as read_config,
    )
    from playground.run.rundir import (
        record_trace as record_trace,
    )
    from playground.run.runner import (
        RunConfig as RunConfig,
    )
    from playground.run.runner import (
        RunConfigError as RunConfigError,
    )
    from playground.run.runner import (
        check_finished as check_finished,
    )
    from playground.run.runner import (
        playbook_path as playbook_path,
    )
    from playground.run.runner import (
        resolve_tasks as resolve_tasks,
    )
    from playground.run.runner import (
        run as run,
    )
    from playground.run.secrets import (
        redact_url as redact_url,
    )
    from playground.run.stats import (
        Metric as Metric,
    )
    from playground.run.stats import (
        bootstrap_ci as bootstrap_ci,
    )
    from playground.run.stats import (
        compare as compare,
    )
    from playground.run.stats import (
        holm as holm,
    )
    from playground.run.stats import (
        mcnemar_exact as mcnemar_exact,
    )
    from playground.run.stats import (
        sign_flip_p as sign_flip_p,
    )
    from playground.run.stats import (
        split_by_harness as split_by_harness,
    )
    from playground.run.traces import (
        read_jsonl as read_jsonl,
    )
    from playground.run.traces import (
        read_trace as read_trace,
    )
    from playground.testing import (
        ScriptedAgent as ScriptedAgent,
    )
    from playground.text_index import (
        TextIndex as TextIndex,
    )
    from playground.text_index import (
        built_once as built_once,
    )


def __getattr__(name: str) -> Any:
    """Import `name` from the module that defines it, on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'playground.api' has no attribute {name!r}; the plugin API is: "
                             f"{', '.join(__all__)}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
