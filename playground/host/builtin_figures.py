"""Built-in study table columns that need no method: the agent's and the judges' tokens per episode, and the share
of judge replies that were usable. Loaded like any plugin's (`register_figures`)."""

from playground.core.figures import Figure, per_episode
from playground.core.hookspecs import hookimpl


def _usable_share(records, events) -> float | None:
    """Usable judge replies / judge calls over the cell's episodes (None where no judge was called)."""
    calls = unusable = 0
    for record in records:
        for counts in (record.judge_replies or {}).values():
            calls += int(counts.get("calls", 0))
            unusable += int(counts.get("unusable", 0))
    return (calls - unusable) / calls if calls else None


@hookimpl
def register_figures(register) -> None:
    """Register `agent_tokens`, `judge_tokens` (per episode) and `judge_usable` (a share)."""
    register(Figure("agent_tokens", "the agent's prompt and completion tokens per episode",
                    per_episode(lambda r: r.prompt_tokens + r.completion_tokens)))
    register(Figure("judge_tokens", "the judges' prompt and completion tokens per episode",
                    per_episode(lambda r: r.judge_prompt_tokens + r.judge_completion_tokens)))
    register(Figure("judge_usable", "the share of judge replies that were usable (schema-valid, on time)",
                    _usable_share, share=True))
