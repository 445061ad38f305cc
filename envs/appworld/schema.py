"""Check an AppWorld code cell against AppWorld's API docs before it runs (`AppWorldEnv.check_action`).

The cell is parsed with `ast`, never run. Every `apis.APP` and `apis.APP.API` it names is
checked against the docs ({app: {api: doc}}, as AppWorld's server gives them), and every
call `apis.APP.API(...)` against the API's parameters:

- a cell that does not compile: `syntax_error`, with the line and column;
- an app or API the docs do not have: `unknown_api`, with the closest names;
- a keyword the API does not take: `unknown_argument` (AppWorld would silently drop it,
  so a misspelt optional argument is lost without a word), with the closest parameter
  names; except `access_token` on an API that needs none (harmless: agents pass it to
  every call of an app they logged in to, and AppWorld ignores it there);
- a required parameter not given: `missing_argument`; a positional argument counts for
  the parameter in its place, but AppWorld's APIs take keywords only, so it is also a
  `bad_argument` naming the keyword to use.

Every problem of a known API carries its full signature (`signature`). A cell that rebinds
the name `apis`, or passes `*args` / `**kwargs` (which cannot be read without running it),
is checked only as far as it can be. Code that calls no API passes.
"""

from __future__ import annotations

import ast
import difflib

from playground.core.payloads import SchemaProblem

ROOT = "apis"
TOKEN = "access_token"  # accepted by every API: those that need no login ignore it
CLOSEST = 3  # alternatives offered per problem


def signature(app: str, api: str, doc: dict) -> str:
    """`apis.app.api(required, optional=default, ...)`: the call's full signature from its doc."""
    parts = []
    for param in doc.get("parameters", []):
        name = str(param.get("name", ""))
        if param.get("required"):
            parts.append(name)
        else:
            parts.append(f"{name}={param['default']!r}" if "default" in param else f"{name}=...")
    return f"{ROOT}.{app}.{api}({', '.join(parts)})"


def closest(name: str, choices, n: int = CLOSEST) -> tuple[str, ...]:
    """The `n` choices most similar to `name` (difflib's ratio), best first."""
    return tuple(difflib.get_close_matches(name, sorted(choices), n=n, cutoff=0.0))


def check_cell(cell: str, docs: dict) -> list[SchemaProblem]:
    """The problems of `cell` against `docs` (see the module docstring); [] when it passes."""
    try:
        compile(cell, "<cell>", "exec", dont_inherit=True)  # what AppWorld's shell does first (a repeated keyword too)
        tree = ast.parse(cell)
    except SyntaxError as exc:
        text = (exc.text or "").strip()
        where = f"line {exc.lineno}, column {exc.offset}" if exc.lineno else "somewhere"
        return [SchemaProblem("syntax_error", text, f"{exc.msg} ({where}): {text!r}", line=exc.lineno,
                              col=exc.offset)]
    except ValueError as exc:  # e.g. a null byte
        return [SchemaProblem("syntax_error", "", str(exc))]
    if any(isinstance(node, ast.Name) and node.id == ROOT and not isinstance(node.ctx, ast.Load)
           for node in ast.walk(tree)):
        return []  # `apis` is not AppWorld's any more
    problems: dict[tuple[str, str, str], SchemaProblem] = {}  # each once, in source order
    for node in sorted(ast.walk(tree), key=_position):
        for problem in _node_problems(node, docs):
            problems.setdefault((problem.kind, problem.text, problem.message), problem)
    return list(problems.values())


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _app_of(node: ast.AST) -> str | None:
    """APP for a node `apis.APP`, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == ROOT:
        return node.attr
    return None


def _node_problems(node: ast.AST, docs: dict) -> list[SchemaProblem]:
    """What is wrong with one node: an unknown app (`apis.APP`), an unknown API (`apis.APP.API`), or the
    arguments of a call to a known API."""
    if not isinstance(node, (ast.Attribute, ast.Call)):
        return []
    line, col = node.lineno, node.col_offset + 1
    app = _app_of(node)
    if app is not None and app not in docs:
        return [SchemaProblem("unknown_api", f"{ROOT}.{app}", f"there is no app named {app!r}", closest(app, docs),
                              line=line, col=col)]
    if isinstance(node, ast.Attribute):
        app = _app_of(node.value)
        if app is not None and app in docs and node.attr not in docs[app]:
            near = closest(node.attr, docs[app])
            return [SchemaProblem("unknown_api", f"{ROOT}.{app}.{node.attr}",
                                  f"the {app} app has no API {node.attr!r}", near,
                                  tuple(signature(app, name, docs[app][name]) for name in near), line=line, col=col)]
        return []
    if isinstance(node.func, ast.Attribute):
        app = _app_of(node.func.value)
        if app is not None and app in docs and node.func.attr in docs[app]:
            return _argument_problems(node, app, node.func.attr, docs[app][node.func.attr])
    return []


def _argument_problems(call: ast.Call, app: str, api: str, doc: dict) -> list[SchemaProblem]:
    """The argument problems of a call to a known API: positional, unknown and missing arguments."""
    params = [str(p.get("name", "")) for p in doc.get("parameters", [])]
    required = [str(p.get("name", "")) for p in doc.get("parameters", []) if p.get("required")]
    name, full = f"{ROOT}.{app}.{api}", (signature(app, api, doc),)
    line, col = call.lineno, call.col_offset + 1
    problems = []
    positional = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
    for i, arg in enumerate(positional):
        param = params[i] if i < len(params) else ""
        problems.append(SchemaProblem(
            "bad_argument", ast.unparse(arg), f"{name} takes keyword arguments only; "
            + (f"write {param}={ast.unparse(arg)}" if param else f"it takes {len(params)} at most"),
            (param,) if param else (), full, line=line, col=col))
    given = set(params[:len(positional)])
    for keyword in call.keywords:
        if keyword.arg is None:
            continue  # **kwargs: its keys are not known before it runs
        given.add(keyword.arg)
        if keyword.arg not in params and keyword.arg != TOKEN:
            problems.append(SchemaProblem("unknown_argument", keyword.arg, f"{name} takes no argument {keyword.arg!r}",
                                          closest(keyword.arg, params), full, line=keyword.lineno,
                                          col=keyword.col_offset + 1))
    unpacked = any(isinstance(arg, ast.Starred) for arg in call.args) or any(k.arg is None for k in call.keywords)
    if not unpacked:
        problems += [SchemaProblem("missing_argument", param, f"{name} needs the argument {param!r}", (param,), full,
                                   line=line, col=col) for param in required if param not in given]
    return problems
