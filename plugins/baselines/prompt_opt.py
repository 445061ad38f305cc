"""An optimised prompt, frozen: the `prompt-opt:PROMPT.json` harness of the MIPROv2 and GEPA baselines.

`playground baselines optimise` (see `prompt_search`) writes a prompt file: a JSON object
whose `instructions` (a string) and `demos` (a list of `{"question", "answer"}` objects) are
what the agent's prompt gets, plus a record of how they were found (optimiser, env, split,
tasks, model, budget, dev scores), which deployment ignores. Deployed, the instructions and
demos are one standing note (`agent_notes`), rendered by `render_note`: the same text the
optimiser put in the agent's prompt while it searched. The harness's description carries
the file's SHA-256, so a resumed run notices a prompt that changed, and every episode checks
the file still has that hash.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

from playground import PlaygroundError, StepContext, hookimpl
from playground.host_api import JSONFileError, json_object
from playground.plugins.baselines.params import PromptOptParams, parse_params

NAME = "prompt-opt"
PREFIX = "prompt-opt:"
FORMAT = "playground-prompt/1"
MAX_PROMPT_BYTES = 1_000_000
INSTRUCTIONS_HEADER = "Instructions for this task:"
DEMOS_HEADER = "Solved examples (question -> answer):"


class PromptFileError(PlaygroundError, ValueError):
    """A prompt file that cannot be deployed; the message names the file and what is wrong."""


def render_note(instructions: str, demos: list[Mapping[str, str]]) -> str:
    """The standing note an optimised prompt becomes: the instructions, then the demos as question -> answer pairs."""
    blocks = [f"{INSTRUCTIONS_HEADER}\n{instructions.strip()}"] if instructions.strip() else []
    if demos:
        examples = [f"Example {n}\nQuestion: {str(d['question']).strip()}\nAnswer: {str(d['answer']).strip()}"
                    for n, d in enumerate(demos, 1)]
        blocks.append("\n\n".join([DEMOS_HEADER, *examples]))
    return "\n\n".join(blocks)


def parse_prompt(data: bytes, path: str | Path) -> dict[str, Any]:
    """Check the bytes of the prompt file `path`; return its object, or raise PromptFileError naming the file."""
    where = f"prompt file {str(path)!r}"
    try:
        prompt = json_object(data, where, MAX_PROMPT_BYTES)
    except JSONFileError as exc:
        raise PromptFileError(str(exc)) from None
    if prompt.get("format") != FORMAT:
        raise PromptFileError(f"{where}: 'format' must be {FORMAT!r} (written by `playground baselines optimise`), "
                              f"got {prompt.get('format')!r}")
    instructions, demos = prompt.get("instructions"), prompt.get("demos", [])
    if not isinstance(instructions, str):
        raise PromptFileError(f"{where}: 'instructions' must be a string")
    if not isinstance(demos, list) or not all(
            isinstance(d, dict) and isinstance(d.get("question"), str) and isinstance(d.get("answer"), str)
            for d in demos):
        raise PromptFileError(f"{where}: 'demos' must be a list of objects with string 'question' and 'answer'")
    if not instructions.strip() and not demos:
        raise PromptFileError(f"{where} has neither instructions nor demos: nothing to show the agent")
    return prompt


def read_prompt(path: str | Path) -> tuple[dict[str, Any], str]:
    """Read and check a prompt file; return its object and the SHA-256 of its bytes."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PromptFileError(f"cannot read prompt file {str(path)!r}: {exc.strerror or exc}") from None
    return parse_prompt(data, path), hashlib.sha256(data).hexdigest()


def prompt_harness(name: str, rest: str):
    """The harness `prompt-opt:PATH`: the optimised prompt at PATH shown as a standing note every step."""
    from playground.host_api import HarnessSpec

    if not rest:
        raise PromptFileError(f"harness {name!r}: name the prompt file (prompt-opt:PATH)")
    prompt, digest = read_prompt(rest)
    optimizer = prompt.get("optimizer", "an optimiser")
    return HarnessSpec(name, interventions=(NAME,), params={"prompt_file": rest, "prompt_sha256": digest},
                       description=f"{optimizer} prompt (instructions and {len(prompt.get('demos', []))} demos) "
                                   f"from {rest} (sha256 {digest})")


class PromptNote:
    """The `prompt-opt` intervention: the prompt file's instructions and demos as a standing note, every step."""

    def __init__(self, params: PromptOptParams | Mapping[str, Any]) -> None:
        """`params`: a `PromptOptParams` (the host validated it), or a dict validated by it."""
        p = parse_params(NAME, PromptOptParams, params)
        path = p["prompt_file"]
        if not path:
            raise PromptFileError(f"{NAME} needs a prompt file: run it as --harness {PREFIX}PATH")
        prompt, digest = read_prompt(path)
        expected = p["prompt_sha256"]
        if expected and digest != expected:
            raise PromptFileError(f"prompt file {path!r} changed since the run started (sha256 {digest}, the harness "
                                  f"has {expected}); run it under a new name or in a new run directory")
        self.note = render_note(prompt["instructions"], prompt.get("demos", []))

    @hookimpl
    def agent_notes(self, context: StepContext):
        return self.note
