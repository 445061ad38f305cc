"""docs/writing-plugins.md names only what a plugin author can use: every name it imports imports, from the public
modules only (`playground`, `playground.core`, `playground.api`, `playground.host_api`, and `playground.testing` for tests), every module path
it points at is public, and every hook it names is a hook the host specifies (playground/core/hookspecs.py)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

import playground
import playground.api
import playground.host_api
from playground.core import hookspecs

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "writing-plugins.md").read_text()
HOOKS = frozenset(name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "playground_spec"))
PUBLIC = ("playground", "playground.core", "playground.api", "playground.host_api", "playground.testing")  # and their submodules

PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PROSE_IMPORT = re.compile(r"`from (playground[\w.]*) import ([\w\s,]+?)`")
DOTTED = re.compile(r"`(playground(?:\.\w+)+)")
FILE_PATH = re.compile(r"\bplayground/[\w/]+\.py\b")
REGISTER_HOOK = re.compile(r"\bregister_\w+")
HOOK_TABLE = re.compile(r"^\| hook \|.*\n\|[-| ]+\|\n((?:\|.*\n?)*)", re.M)
TABLE_HOOK = re.compile(r"^\| `(\w+)\(")
CALL = re.compile(r"`(?:[\w.]+\.)?(\w+)\(")


def is_public(module: str) -> bool:
    """Whether `module` is one a plugin may import: `playground`, or under playground.core, .api or .testing."""
    return module == "playground" or any(module == p or module.startswith(p + ".") for p in PUBLIC[1:])


def imports(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The (module, name) pairs `text` imports (its python blocks' imports and its `from X import Y` spans; a plain
    `import X` gives (X, "")), and the python blocks that do not parse."""
    found: list[tuple[str, str]] = []
    broken: list[str] = []
    for block in PYTHON_BLOCK.findall(text):
        try:
            tree = ast.parse(block)
        except SyntaxError as exc:
            broken.append(f"a python block does not parse ({exc.msg}, line {exc.lineno}): {block[:60]!r}")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found += [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(alias.name, "") for alias in node.names]
    for module, names in PROSE_IMPORT.findall(text):
        found += [(module, name.strip()) for name in names.split(",") if name.strip()]
    return found, broken


def import_problem(module: str, name: str) -> str | None:
    """Why `from module import name` (or `import module`) is not something the guide may tell an author, or None.

    A playground module must be public and hold the name; another module is checked where it is installed (the
    plugin's own module in an example, `no_repeat`, is not)."""
    statement = f"from {module} import {name}" if name else f"import {module}"
    if module.split(".")[0] == "playground":
        if not is_public(module):
            return f"{statement}: {module} is not public (use playground.api or playground.core)"
    elif importlib.util.find_spec(module.split(".")[0]) is None:
        return None
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        return f"{statement}: {exc}"
    if name and not hasattr(imported, name):
        try:
            importlib.import_module(f"{module}.{name}")
        except ImportError:
            return f"{statement}: {module} has no {name}"
    return None


def reference_problem(dotted: str) -> str | None:
    """Why the dotted name `dotted` (`playground.core.actions.env_accepts`) is not public or does not exist, or
    None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            value = importlib.import_module(module)
        except ImportError:
            continue
        if not is_public(module):
            return f"`{dotted}`: {module} is not public (use playground.api or playground.core)"
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return f"`{dotted}`: {module} has no {'.'.join(parts[cut:])}"
            value = getattr(value, attribute)
        return None
    return f"`{dotted}`: no such module"


def path_problem(path: str) -> str | None:
    """Why the file path `path` (`playground/core/env.py`) is not a public module of this checkout, or None."""
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    if not (ROOT / path).is_file():
        return f"{path}: no such file"
    if not is_public(module):
        return f"{path}: {module} is not public (point at playground.api or playground.core)"
    return None


@cache
def internal_names() -> frozenset[str]:
    """The functions and classes defined at the top of the host's internal modules (outside playground.core and
    playground.testing) that no public module offers: what the guide may not tell an author to call."""
    public = set(playground.api.__all__) | set(playground.host_api.__all__) | set(playground.__all__)
    internal: set[str] = set()
    for path in (ROOT / "playground").rglob("*.py"):
        tree = ast.parse(path.read_text())
        defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        names = {node.name for node in tree.body if isinstance(node, defined) and not node.name.startswith("_")}
        in_public = path.relative_to(ROOT / "playground").parts[0] in ("core", "testing")
        (public if in_public else internal).update(names)
    return frozenset(internal - public)


def hook_names(text: str) -> set[str]:
    """The hooks `text` names: every `register_*` word, and the first column of its tables headed `| hook |`."""
    names = set(REGISTER_HOOK.findall(text))
    for table in HOOK_TABLE.findall(text):
        names |= {match.group(1) for line in table.splitlines() if (match := TABLE_HOOK.match(line))}
    return names


def plugin_name_problems(text: str, hooks: frozenset[str] = HOOKS) -> list[str]:
    """Everything `text` (a plugin guide) names that an author cannot use: imports that fail or reach past the plugin
    API, non-public module paths, and hooks not in `hooks`. Empty when all is well."""
    found, problems = imports(text)
    problems += [p for module, name in dict.fromkeys(found) if (p := import_problem(module, name))]
    problems += [p for dotted in dict.fromkeys(DOTTED.findall(text)) if (p := reference_problem(dotted))]
    problems += [p for path in dict.fromkeys(FILE_PATH.findall(text)) if (p := path_problem(path))]
    problems += [f"`{name}`: no such hook in playground/core/hookspecs.py" for name in sorted(hook_names(text) - hooks)]
    problems += [f"`{name}(...)`: not in the plugin API (playground.api) nor in playground.core"
                 for name in sorted(set(CALL.findall(text)) & internal_names())]
    return problems


def test_the_plugin_guide_names_only_public_importable_names_and_real_hooks():
    """Every name docs/writing-plugins.md tells an author to import imports from a public module, every module it
    points at is public, and every hook it names exists."""
    assert plugin_name_problems(GUIDE) == []


def test_the_checker_reads_the_guide():
    """The checker sees the guide's imports, its references and its hooks (so an empty verdict means something)."""
    found, broken = imports(GUIDE)
    assert not broken
    assert ("playground.core.hookspecs", "hookimpl") in found
    assert ("playground.core.events", "InterventionEvent") in found
    assert ("playground.host_api", "ask_structured") in found and ("playground.testing", "play") in found
    assert {"register_interventions", "register_failure_labels", "decide_intervention", "check_playbook"} <= \
        hook_names(GUIDE)
    assert "playground.core.actions.env_accepts" in DOTTED.findall(GUIDE)
    assert "playground/core/hookspecs.py" in FILE_PATH.findall(GUIDE)
    assert {"ask_structured", "play", "check_env"} <= set(CALL.findall(GUIDE))
    assert "report_judge_call" in internal_names() and "ask_structured" not in internal_names()


@pytest.mark.parametrize("planted, named", [
    ("declare them with `register_failure_type`.", "register_failure_type"),
    ("a plugin reports it with `report_judge_call(reply, role=...)`.", "report_judge_call"),
    ("```python\nfrom playground.api import report_judge_call\n```\n", "report_judge_call"),
    ("```python\nfrom playground.run.runner import run\n```\n", "playground.run.runner is not public"),
    ("```python\nimport playground.host.manager\n```\n", "playground.host.manager is not public"),
    ("```python\nfrom playground.core.payloads import Decisoin\n```\n", "Decisoin"),
    ("```python\nfrom pydantic import BaseModle\n```\n", "BaseModle"),
    ("```python\nfrom playground import (\n```\n", "does not parse"),
    ("Or `from playground.testing import play, replay_all`.", "replay_all"),
    ("(`playground.agents.structured.shared_agent_model()`)", "playground.agents.structured is not public"),
    ("(`playground.core.actions.env_accepted`)", "env_accepted"),
    ("`HTTPChatModel` from `playground/agents/http_model.py`", "playground.agents.http_model is not public"),
    ("see `playground/core/nowhere.py`", "no such file"),
    ("| hook | kind | result |\n|---|---|---|\n| `episode_paused(start)` | observer | ignored |\n", "episode_paused"),
])
def test_a_planted_bad_name_makes_the_check_fail(planted, named):
    """A name an author cannot use, planted in the guide's text, is reported by name."""
    problems = plugin_name_problems(GUIDE + "\n" + planted)
    assert problems and any(named in problem for problem in problems), problems
    assert plugin_name_problems(planted), planted  # on its own too


def test_every_hook_the_host_specifies_is_known_to_the_checker():
    """The checker's hooks are hookspecs.py's: none missing, none extra."""
    specs = re.findall(r"@hookspec(?:\([^)]*\))?\ndef (\w+)", (ROOT / "playground/core/hookspecs.py").read_text())
    assert HOOKS == set(specs) and len(HOOKS) > 10
