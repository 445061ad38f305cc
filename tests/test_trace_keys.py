"""No code outside the event module and the trace reader/writer tells trace events apart by their type string.

Trace events are typed (`playground.core.events`): a reader dispatches with `isinstance(event, StepEvent)` and
reads `event.action`; only `playground/core/events.py` (which maps type names to classes) and
`playground/run/traces.py` (which reads and writes the JSON records) handle the `"type"` key. This test walks the
syntax tree of every module under playground/, plugins/ and envs/ and fails on any of these, each naming file and
line:

1. comparing a type lookup with an event type name: `record["type"] == "step"`, `e.get("type") != "header"`,
   `event["type"] in ("detection", "intervention")` (either side; `==`, `!=`, `in`, `not in`);
2. comparing with an event type name a variable bound from a type lookup in the same function
   (`kind = event.get("type")` ... `if kind == "reset"`), a parameter or variable named `event_type`, or the
   first parameter of a function that also takes `data` (the `emit(kind, data)` callback shape of before);
3. a dict display whose `"type"` key holds an event type name (`{"type": "step", ...}`: a raw event built by hand);
4. calling an `emit` with an event type name first (`emit("step", {...})`: the untyped emit of before).

It is precise on purpose: a `"type"` key compared with anything but an event type name (a JSON schema's
`schema["type"] == "object"`, a playbook operation's `op.get("type")`) is not a trace event and passes, and an
event type word used for something else (`status == "error"`, `mode == "step"`) passes unless it is compared with
a type lookup. A planted example of each pattern shows the check catches it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from playground.core.events import EVENT_CLASSES

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("playground", "plugins", "envs")
ALLOWED = {"playground/core/events.py", "playground/core/event_versions.py",  # the event module, its upgrades,
           "playground/run/traces.py"}  # the reader and writer
EVENT_NAMES = frozenset(EVENT_CLASSES)


def _is_type_lookup(node: ast.AST) -> bool:
    """`X["type"]` or `X.get("type"[, default])`."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "type"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "type")


def _event_names(node: ast.AST) -> bool:
    """A string constant that names an event type, or a tuple, list or set of constants holding one."""
    if isinstance(node, ast.Constant):
        return node.value in EVENT_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and e.value in EVENT_NAMES for e in node.elts)
    return False


def _scopes(tree: ast.Module):
    """The module and each function, with the nodes that belong to it (not to a nested function)."""
    def own(scope: ast.AST):
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            yield node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.extend(ast.iter_child_nodes(node))

    yield tree, list(own(tree))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield node, list(own(node))


def violations(source: str, name: str = "<source>") -> list[str]:
    """Where `source` tells trace events apart by their type string (see the module's docstring)."""
    tree = ast.parse(source)
    found: set[tuple[int, str]] = set()
    for scope, nodes in _scopes(tree):
        bound = {"event_type"}  # names holding an event's type string
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            params = [a.arg for a in scope.args.args if a.arg not in ("self", "cls")]
            if len(params) >= 2 and "data" in params[1:]:
                bound.add(params[0])
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
                    and _is_type_lookup(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound |= {t.id for t in targets if isinstance(t, ast.Name)}
        for node in nodes:
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_event_names(s) for s in sides) and any(
                        _is_type_lookup(s) or (isinstance(s, ast.Name) and s.id in bound) for s in sides):
                    found.add((node.lineno, "compares an event's type string"))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "type" and _event_names(value):
                        found.add((node.lineno, "builds a raw trace event"))
            elif isinstance(node, ast.Call) and node.args and _event_names(node.args[0]) and (
                    (isinstance(node.func, ast.Name) and node.func.id == "emit")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "emit")):
                found.add((node.lineno, "emits an event by its type string"))
    return [f"{name}:{line}: {what}" for line, what in sorted(found)]


def _modules() -> list[Path]:
    return sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py")
                  if p.relative_to(ROOT).as_posix() not in ALLOWED and "__pycache__" not in p.parts)


def test_no_module_tells_trace_events_apart_by_their_type_string():
    found = [v for path in _modules()
             for v in violations(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]
    assert not found, "trace events read by their type string (use playground.core.events):\n" + "\n".join(found)


@pytest.mark.parametrize("planted", [
    'def f(events):\n    return [e for e in events if e["type"] == "step"]',
    'def f(event):\n    return event.get("type") != "header"',
    'def f(event):\n    return event["type"] in ("detection", "intervention")',
    'def f(event):\n    kind = event.get("type")\n    if kind == "reset":\n        return 1',
    'def add(self, event_type, data):\n    if event_type == "proposal":\n        pass',
    'def f(out):\n    out.write({"type": "end", "status": "won"})',
    'def f(trace):\n    trace.emit("step", {"action": "look"})',
    'def f(emit):\n    emit("error", {"message": "boom"})',
    'def emit(kind, data):\n    if kind == "rollback":\n        return data["to_step"]',
])
def test_a_planted_type_string_lookup_is_caught(planted):
    assert violations(planted)


@pytest.mark.parametrize("fine", [
    'def f(schema):\n    return schema["type"] == "object"',
    'def f(op):\n    return str(op.get("type", "")).upper() == "ADD"',
    'def f(state):\n    return state.status == "error"',
    'def f(record):\n    return record.get("status") == "error"',
    'SCHEMA = {"type": "string", "maxLength": 10}',
    'def f(event):\n    return isinstance(event, StepEvent) and event.action == "look"',
    'def f(kind):\n    return kind == "step"',  # a word, not a type lookup
])
def test_what_is_not_a_trace_event_passes(fine):
    assert not violations(fine)
