"""What a proposal event records of the view the agent saw, with each long text stored once per episode.

Every `proposal` event carries the admissible actions the agent was shown, the
intervention message (inline), the standing notes and, for agents that prompt a model,
the chat messages (`Proposal.prompt`). Notes and prompt messages repeat from step to step
(a system prompt, a whole playbook shown as a note), so each distinct text is emitted
once per episode as a `prompt` event `{"hash", "text"}` and the proposal refers to it by
hash: `notes` is a list of hashes, `prompt` a list of `{"role", "hash"}`. A trace reader
resolves them with the episode's `prompt` events (see `resolve_view`). The events are
`playground.core.events`' `ProposalEvent` and `PromptEvent`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from playground.core.events import Event, PromptEvent, ProposalEvent
from playground.core.payloads import AgentView, Proposal, to_dict


def text_hash(text: str) -> str:
    """The key a text is stored under in a trace: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class ViewRecorder:
    """Builds the view fields of an episode's proposal events, emitting each new text once (event `prompt`)."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self.emit = emit
        self.seen: set[str] = set()

    def ref(self, text: str) -> str:
        """Return the hash of `text`, emitting it as a `prompt` event the first time it is seen."""
        key = text_hash(text)
        if key not in self.seen:
            self.seen.add(key)
            self.emit(PromptEvent(hash=key, text=text))
        return key

    def fields(self, view: AgentView, proposal: Proposal) -> dict[str, Any]:
        """The fields a proposal event adds for the view it was made from (emit them after this call)."""
        admissible = list(view.admissible_actions) if view.admissible_actions is not None else None
        prompt = [{"role": str(m.get("role", "")), "hash": self.ref(str(m.get("content", "")))}
                  for m in proposal.prompt]
        return {"admissible_actions": admissible,
                "message": to_dict(view.message) if view.message is not None else None,
                "notes": [self.ref(note) for note in view.notes],
                "prompt": prompt or None}


def resolve_view(proposal: ProposalEvent, texts: Mapping[str, str]) -> dict[str, Any]:
    """The notes and prompt messages of a proposal event as text, from `texts` (hash -> text of `prompt` events)."""
    notes = [texts.get(key, "") for key in proposal.notes]
    prompt = [{"role": m.get("role", ""), "content": texts.get(m.get("hash", ""), "")} for m in proposal.prompt or ()]
    return {"admissible_actions": proposal.admissible_actions, "message": proposal.message, "notes": notes,
            "prompt": prompt or None}
