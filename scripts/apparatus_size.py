"""How much experiment apparatus the methods carry, and how many command-line options the plugins own: the figures
of the "studies as data" change, at a base revision and now, side by side (machinery figures: code size, not
speed).

Apparatus is the code a method carries to run experiments about itself rather than to be the method: run-driving
protocols, counters and tables, bench loops, and the CLI that fronts them. Each method's apparatus modules are
listed in APPARATUS (a module that is gone counts 0 lines); a module that is the method (detectors, repair,
distillation, diagnosis, the sidecar) is not. Lines are counted twice: every line, and code lines only (no blank
line, comment or docstring: what the code does, apart from how much it explains itself). Options are counted on
the live command tree: every `click.Option` of every command, owned by a plugin when the command's callback lives
in `playground.plugins` or the command is a plugin's pipeline step mounted as a command (its options are the
step's parameters).

    python scripts/apparatus_size.py                  # now
    python scripts/apparatus_size.py --base 0256f21   # a base revision beside now (a git worktree under /tmp)
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import sys
import tokenize
from pathlib import Path

from checkout_tree import ROOT, python_env, worktree

APPARATUS = {
    "sentry": ["plugins/sentry/heldout.py", "plugins/sentry/paired.py", "plugins/sentry/truth.py",
               "plugins/sentry/measure.py", "plugins/sentry/injected.py", "plugins/sentry/bench.py",
               "plugins/sentry/table.py", "plugins/sentry/figures.py", "plugins/sentry/cli.py"],
    "darc": ["plugins/darc/cli.py", "plugins/darc/profile.py", "plugins/darc/evaluate.py", "plugins/darc/controls.py",
             "plugins/darc/factorial.py", "plugins/darc/efficiency.py", "plugins/darc/agreement.py",
             "plugins/darc/frontier.py", "plugins/darc/runs.py", "plugins/darc/figures.py", "plugins/darc/steps.py"],
    "dart": ["plugins/dart/bench.py", "plugins/dart/latency.py", "plugins/dart/cli.py", "plugins/dart/figures.py"],
    # (steps.py counts, for DARC too: it holds what were the bodies of the commands in cli.py)
    "aed": ["plugins/aed/cli.py", "plugins/aed/summary.py", "plugins/aed/steps.py", "plugins/aed/figures.py"],
}

COUNT_OPTIONS = r"""
import json, click
from playground.cli.main import cli
try:  # the plugins' commands, and their pipeline steps mounted as commands (where the tree has them)
    from playground.cli.main import load_plugin_commands
    load_plugin_commands()
except ImportError:
    from playground.host.manager import get_host
    get_host().add_commands(cli)
counts = {"host": 0, "plugins": 0, "commands": 0, "plugin_commands": 0}
def walk(command):
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            walk(sub)
        return
    owner = "plugins" if (getattr(command, "plugin", None)  # a plugin's pipeline step as a command
                          or (command.callback and command.callback.__module__.startswith("playground.plugins"))) \
        else "host"
    counts["commands"] += 1
    counts["plugin_commands"] += owner == "plugins"
    counts[owner] += sum(isinstance(p, click.Option) and p.name != "help" for p in command.params)
walk(cli)
print(json.dumps(counts))
"""


def code_lines(source: str) -> int:
    """The lines of `source` that hold code: not blank, not only a comment, not part of a docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return len(lines)


def lines_at(tree: Path, count=lambda text: len(text.splitlines())) -> dict[str, int]:
    """Apparatus lines per method in the source tree `tree` (`count`: every line, or `code_lines`)."""
    out = {}
    for method, modules in APPARATUS.items():
        out[method] = sum(count((tree / m).read_text()) for m in modules if (tree / m).is_file())
    return out


def options_at(tree: Path) -> dict[str, int]:
    """Command and option counts of the CLI in `tree` (imported from there, ahead of the installed copy)."""
    env, folder = python_env(tree)
    done = subprocess.run([sys.executable, "-c", COUNT_OPTIONS + "\nprint(__import__('playground').__file__)"],
                          capture_output=True, text=True, env=env, check=True, cwd=folder)
    where = done.stdout.strip().splitlines()[-1]
    expected = ROOT if tree == ROOT else folder
    if not where.startswith(str(expected)):
        raise SystemExit(f"counted the CLI of {where}, not of {tree}")
    return json.loads(done.stdout.strip().splitlines()[-2])


def main() -> None:
    """Print apparatus lines per method and plugin-owned options, at --base and now, with the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a git revision to compare with")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    now = {"lines": lines_at(ROOT), "code": lines_at(ROOT, code_lines), "options": options_at(ROOT)}
    base = None
    if args.base:
        tree = worktree(args.base)
        base = {"lines": lines_at(tree), "code": lines_at(tree, code_lines), "options": options_at(tree)}
    if args.json:
        print(json.dumps({"base": base, "now": now, "base_rev": args.base}, indent=2))
        return
    rows = [(f"apparatus lines, {m}", now["lines"][m], base and base["lines"][m]) for m in APPARATUS]
    rows.append(("apparatus lines, all", sum(now["lines"].values()), base and sum(base["lines"].values())))
    rows += [(f"  code lines, {m}", now["code"][m], base and base["code"][m]) for m in APPARATUS]
    rows.append(("  code lines, all", sum(now["code"].values()), base and sum(base["code"].values())))
    for key in ("plugins", "host", "plugin_commands", "commands"):
        label = {"plugins": "options owned by plugins", "host": "options owned by the host",
                 "plugin_commands": "commands owned by plugins", "commands": "commands"}[key]
        rows.append((label, now["options"][key], base and base["options"][key]))
    print(f"{'figure':32} {'base ' + (args.base or '-'):>14} {'now':>8} {'now/base':>9}")
    for label, value, was in rows:
        ratio = f"{value / was:.2f}" if was else "-"
        print(f"{label:32} {'' if was is None else was:>14} {value:>8} {ratio:>9}")


if __name__ == "__main__":
    main()
