"""What a code cell reads and writes (shell variables), and which earlier variables a failed cell's error blames.

Cells share one Python shell, so data flows between them through variables: a cell *reads*
the names it loads that earlier cells bound, and *writes* the names it binds at the top
level (assignments, loop and `with` targets, imports, `def`, `class`; names bound only
inside a function, lambda or comprehension are local to it). A cell that reaches its
namespace indirectly (`globals()`, `locals()`, `vars()`, `exec`, `eval`, `__import__`,
`del`, `global`, a star import) has no declared interface: who it reads or writes cannot
be read from its text.

`blamed` reads AppWorld's "Execution failed" output: the failing top-level statement (the
traceback's `line N, in <module>`; AppWorld strips the cell before it runs) and, by the
error's label (`interventions.classify_error`), the earlier cells' variables it implicates:

- `syntax_error`, `unknown_api`, `missing_argument`: the cell's own code, nothing earlier;
- `missing_login` (HTTP 401): the variables the statement passes as `access_token`;
- anything else (a record that does not exist, a Python error such as a KeyError): the
  variables the statement reads, except those passed as `access_token`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

TOKEN = "access_token"
DYNAMIC = frozenset({"globals", "locals", "vars", "exec", "eval", "__import__"})
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp)
FAILING_LINE = re.compile(r'File "<python-input>", line (\d+), in <module>')
OWN_CODE = ("syntax_error", "unknown_api", "missing_argument")


@dataclass(frozen=True)
class Bindings:
    """The names a cell loads (anywhere in it) and binds at its top level; `dynamic` when they cannot be read."""

    loads: frozenset[str]
    writes: frozenset[str]
    dynamic: bool = False


def parse(cell: str) -> ast.Module | None:
    """The cell as AppWorld runs it (stripped), parsed; None when it does not parse."""
    try:
        return ast.parse(cell.strip())
    except (SyntaxError, ValueError):
        return None


def bindings(cell: str) -> Bindings:
    """What `cell` loads and writes (see the module docstring)."""
    tree = parse(cell)
    if tree is None:
        return Bindings(frozenset(), frozenset(), dynamic=True)
    loads = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    dynamic = bool(loads & DYNAMIC) or any(
        isinstance(node, (ast.Delete, ast.Global, ast.Nonlocal))
        or (isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names))
        for node in ast.walk(tree))
    return Bindings(frozenset(loads), frozenset(_top_level_writes(tree.body)), dynamic)


def _top_level_writes(body: list[ast.stmt]) -> set[str]:
    """Names bound in the module scope by these statements (not inside functions, classes or comprehensions)."""
    found: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        if isinstance(node, SCOPES):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return found


def blamed(cell: str, output: str, label: str, earlier: set[str]) -> list[str]:
    """The variables bound by earlier cells (`earlier`) that the failing statement's error implicates, sorted."""
    tree = parse(cell)
    match = FAILING_LINE.search(output)
    if tree is None or match is None or label in OWN_CODE:
        return []
    line = int(match.group(1))
    before: set[str] = set()
    for statement in tree.body:
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            tokens = _token_names(statement)
            names = tokens if label == "missing_login" else _loads(statement) - tokens
            return sorted((names & earlier) - before)
        before |= _top_level_writes([statement])
    return []


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _token_names(node: ast.AST) -> set[str]:
    """The names read by the `access_token=` arguments of the calls in `node`."""
    return {name for call in ast.walk(node) if isinstance(call, ast.Call)
            for keyword in call.keywords if keyword.arg == TOKEN for name in _loads(keyword.value)}
