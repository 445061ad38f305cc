"""A small mutation tester: plant one change at a time in chosen functions of a file, run the tests, count survivors.

    python scripts/mutation.py FILE [--functions NAME,...] -- PYTEST ARGS

Mutations (on the AST, one at a time): comparison operators (== !=, < <=, > >=, < >, in / not in, is / is not),
arithmetic (+ -, * /, // /, % *), augmented assignment (+= -=), `and` / `or`, dropping a `not`, integer
constants (n -> n + 1, and 1 -> 0), True / False, `return X` -> `return None`, and `break` / `continue` swapped.
Only code inside the named functions (methods as `Class.method` or just `method`) is mutated; docstrings never.
The file is rewritten with `ast.unparse` for each mutant and restored afterwards (also on Ctrl-C). A mutant is
killed when pytest fails (or times out); the survivors are listed with their line and the mutated code.

(mutmut and cosmic-ray cannot follow this project's layout, where `plugins/` and `envs/` are installed as
`playground.plugins` and `playground.envs` through a package-dir mapping, so this script mutates in place.)
"""

from __future__ import annotations

import argparse
import ast
import copy
import subprocess
import sys
import time
from pathlib import Path

COMPARE_SWAPS = {ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.Gt],
                 ast.Gt: [ast.GtE, ast.Lt], ast.GtE: [ast.Gt, ast.Lt], ast.In: [ast.NotIn], ast.NotIn: [ast.In],
                 ast.Is: [ast.IsNot], ast.IsNot: [ast.Is]}
BINOP_SWAPS = {ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult],
               ast.FloorDiv: [ast.Div], ast.Mod: [ast.Mult]}


def _targets(tree: ast.Module, functions: set[str] | None) -> list[ast.AST]:
    """The function nodes to mutate in (all of them when `functions` is None)."""
    found = []

    def visit(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if functions is None or child.name in functions or f"{prefix}{child.name}" in functions:
                    found.append(child)

    visit(tree)
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def mutations(tree: ast.Module, functions: set[str] | None) -> list[tuple[int, str, callable]]:
    """(line, description, apply) for every mutation point; `apply(node)` changes the node found by its path."""
    skip = _docstrings(tree)
    found = []
    for function in _targets(tree, functions):
        for node in ast.walk(function):
            if id(node) in skip:
                continue
            line = getattr(node, "lineno", function.lineno)
            if isinstance(node, ast.Compare):
                for i, op in enumerate(node.ops):
                    for new in COMPARE_SWAPS.get(type(op), []):
                        found.append((node, line, f"{type(op).__name__} -> {new.__name__}",
                                      lambda n, i=i, new=new: n.ops.__setitem__(i, new())))
            elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAPS:
                for new in BINOP_SWAPS[type(node.op)]:
                    found.append((node, line, f"{type(node.op).__name__} -> {new.__name__}",
                                  lambda n, new=new: setattr(n, "op", new())))
            elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
                new = ast.Sub if isinstance(node.op, ast.Add) else ast.Add
                found.append((node, line, f"augmented {type(node.op).__name__} -> {new.__name__}",
                              lambda n, new=new: setattr(n, "op", new())))
            elif isinstance(node, ast.BoolOp):
                new = ast.Or if isinstance(node.op, ast.And) else ast.And
                found.append((node, line, f"{type(node.op).__name__} -> {new.__name__}",
                              lambda n, new=new: setattr(n, "op", new())))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                found.append((node, line, "drop not", lambda n: setattr(n, "op", ast.UAdd())))
            elif isinstance(node, ast.Constant) and type(node.value) is bool:
                found.append((node, line, f"{node.value} -> {not node.value}",
                              lambda n: setattr(n, "value", not n.value)))
            elif isinstance(node, ast.Constant) and type(node.value) is int:
                found.append((node, line, f"{node.value} -> {node.value + 1}",
                              lambda n: setattr(n, "value", n.value + 1)))
                if node.value == 1:
                    found.append((node, line, "1 -> 0", lambda n: setattr(n, "value", 0)))
            elif isinstance(node, ast.Return) and node.value is not None and not (
                    isinstance(node.value, ast.Constant) and node.value.value is None):
                found.append((node, line, "return X -> return None", lambda n: setattr(n, "value", None)))
            elif isinstance(node, ast.Break):
                found.append((node, line, "break -> continue", None))
            elif isinstance(node, ast.Continue):
                found.append((node, line, "continue -> break", None))
    # address each node by its index in a full walk of the module, so a fresh copy can be mutated
    order = {id(n): i for i, n in enumerate(ast.walk(tree))}
    return [(order[id(node)], line, what, apply) for node, line, what, apply in found]


def mutant_source(tree: ast.Module, index: int, apply) -> str:
    fresh = copy.deepcopy(tree)
    nodes = list(ast.walk(fresh))
    node = nodes[index]
    if apply is None:  # break <-> continue: replace the statement in its parent's body
        replacement = ast.Continue() if isinstance(node, ast.Break) else ast.Break()
        for parent in nodes:
            for field in ("body", "orelse", "finalbody"):
                body = getattr(parent, field, None)
                if isinstance(body, list) and any(s is node for s in body):
                    body[[i for i, s in enumerate(body) if s is node][0]] = ast.copy_location(replacement, node)
    else:
        apply(node)
    return ast.unparse(ast.fix_missing_locations(fresh))


def run_tests(pytest_args: list[str], timeout: float) -> bool:
    """True when the tests pass."""
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *pytest_args],
                                capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--functions", default=None, help="comma-separated functions (Class.method or name)")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args(argv[:cut])
    pytest_args = argv[cut + 1:]
    path = Path(args.file)
    original = path.read_text()
    tree = ast.parse(original)
    functions = {f.strip() for f in args.functions.split(",")} if args.functions else None
    points = mutations(tree, functions)
    started = time.perf_counter()
    if not run_tests(pytest_args, args.timeout):
        print("the tests fail without any mutation; fix that first", file=sys.stderr)
        return 2
    survivors = []
    try:
        for number, (index, line, what, apply) in enumerate(points, 1):
            source = mutant_source(tree, index, apply)
            path.write_text(source)
            killed = not run_tests(pytest_args, args.timeout)
            print(f"[{number}/{len(points)}] line {line}: {what}: {'killed' if killed else 'SURVIVED'}", flush=True)
            if not killed:
                survivors.append((line, what))
    finally:
        path.write_text(original)
    total = len(points)
    print(f"\n{path}: {total} mutants, {total - len(survivors)} killed, {len(survivors)} survived "
          f"({100 * len(survivors) / max(total, 1):.1f}% survival) in {time.perf_counter() - started:.0f} s")
    for line, what in survivors:
        print(f"  survivor: line {line}: {what}: {original.splitlines()[line - 1].strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
