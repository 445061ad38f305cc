"""The harnesses of DARC's view x prompt factorial (the shape of the paper's Table 13; played by the darc-table13
study).

On the same tasks, the guard intervention (ALFWorld's `action_pruning` in the study) runs with its repair off, so
that only the two factors act:

- the action view: the env's whole admissible list (`view=full`) or the guard's top 12
  (`view=top`: the agent is shown only those, through the `agent_actions` hook);
- the recovery prompt: absent (`recovery_prompt=off`) or present every step (`always`).

A control shows 12 admissible commands drawn at random (`view=random`). Each cell is the harness
`darc-factorial:GUARD-VIEW-PROMPT`; the study's other row, the guard's top-1 command played every step with no
model, is the `guard-top1` agent under `base` (a grid that keeps its agent).
"""

from __future__ import annotations

from playground.host_api import HarnessSpec

PREFIX = "darc-factorial:"
# (row, view, recovery prompt)
CELLS = (
    ("full set, no prompt", "full", "off"),
    ("full set, prompt", "full", "always"),
    ("top-12, no prompt", "top", "off"),
    ("top-12, prompt", "top", "always"),
    ("random 12 (control)", "random", "off"),
)


def cell_harness(guard: str, view: str, prompt: str) -> str:
    """The harness name of one cell."""
    return f"{PREFIX}{guard}-{view}-{prompt}"


def cell_params(view: str, prompt: str) -> dict:
    """The parameters of one cell: the guard with `view` and `prompt`, its repair off."""
    return {"view": view, "recovery_prompt": prompt, "repair": False}


def cell_harness_spec(name: str, rest: str) -> HarnessSpec:
    """The harness loader of `darc-factorial:GUARD-VIEW-PROMPT`: one cell of the factorial."""
    guard, _, view_prompt = rest.rpartition("-")
    guard, _, view = guard.rpartition("-")
    prompt = view_prompt
    if not guard or (view, prompt) not in {(v, p) for _, v, p in CELLS}:
        raise ValueError(f"{name!r}: not {PREFIX}GUARD-VIEW-PROMPT with VIEW-PROMPT one of "
                         f"{', '.join(f'{v}-{p}' for _, v, p in CELLS)}")
    return HarnessSpec(name, (guard,), cell_params(view, prompt),
                       f"{guard} with view={view}, recovery_prompt={prompt}, no repair", "darc")


def cell_harnesses(guard: str) -> list[str]:
    """The names of the cells' harnesses, in the table's order (built by the `darc-factorial:` harness loader)."""
    return [cell_harness(guard, view, prompt) for _, view, prompt in CELLS]
