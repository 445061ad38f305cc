"""Issue 53, item 3: no plugin calls `get_host()`. The process-wide host is the host layer's; a plugin's command takes
the host the `playground` click group keeps on its context (`playground.host_api.pass_host`), and the gymnasium entry
point (envs/) loads its own through the plugin API. The scan is of the code (its AST), so a comment or a docstring
that mentions the name does not count."""

from __future__ import annotations

import ast
from pathlib import Path

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = "get_host"


def get_host_uses(path: Path) -> list[str]:
    """Where the code of `path` names `get_host`: a name, an attribute (`api.get_host`), an import or an alias."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Name) and node.id == FORBIDDEN:
            found.append((node.lineno, "name"))
        elif isinstance(node, ast.Attribute) and node.attr == FORBIDDEN:
            found.append((node.lineno, "attribute"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [(node.lineno, "import") for alias in node.names
                      if FORBIDDEN in (alias.name.rpartition(".")[2], alias.asname)]
        elif isinstance(node, ast.Constant) and node.value == FORBIDDEN:  # getattr(api, "get_host")
            found.append((node.lineno, "string"))
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}: {what}"
            for line, what in sorted(found)]


def scan(folders: list[Path]) -> list[str]:
    """Every use of `get_host` in the .py files under `folders`."""
    return [use for folder in folders for path in sorted(folder.rglob("*.py")) for use in get_host_uses(path)]


def test_no_plugin_or_env_names_get_host():
    folders = [ROOT / "plugins", ROOT / "envs"]
    assert all(folder.is_dir() for folder in folders)
    assert sum(1 for folder in folders for _ in folder.rglob("*.py")) > 20  # the scan sees the code
    found = scan(folders)
    assert not found, "plugins and envs take the host handed to them (playground.host_api.pass_host), never get_host():\n" \
        + "\n".join(found)


def test_the_scan_catches_a_planted_call_and_ignores_comments(tmp_path):
    plugin = tmp_path / "plugins" / "planted"
    plugin.mkdir(parents=True)
    (plugin / "clean.py").write_text('"""Mentions get_host in a docstring only."""\n# get_host() in a comment\n'
                                     'x = "call get_host() to ..."\n')
    (plugin / "cli.py").write_text("from playground.api import get_host\n\n\ndef command():\n"
                                   "    return get_host().envs\n")
    (plugin / "attribute.py").write_text("import playground.api as api\n\nhost = api.get_host()\n")
    (plugin / "aliased.py").write_text("from playground.api import get_host as load\n")
    found = scan([tmp_path / "plugins"])
    assert [use.rpartition("/")[2] for use in found] == [
        "aliased.py:1: import", "attribute.py:3: attribute", "cli.py:1: import", "cli.py:5: name"]


def test_pass_host_hands_a_command_the_host_of_the_cli(monkeypatch):
    """A command decorated with `pass_host` gets the host the CLI's other commands use (the host layer's
    process-wide one, so a test that injects a host reaches plugin commands too), loaded only when a command asks."""
    from playground.host_api import pass_host
    from playground.cli.main import cli
    from playground.host import manager
    from playground.host.manager import Host

    loads = []

    def load():
        loads.append(1)
        return Host(strict=True).load()

    monkeypatch.setattr("playground.cli.main.get_host", load)  # the CLI's loader (the host layer's get_host)
    seen = []

    @click.command("show-host")
    @click.option("--tag", default="x")
    @pass_host
    def show_host(host, tag):
        """A plugin's command."""
        seen.append((host, tag))
        click.echo(f"{tag}: {len(list(host.envs))} envs")

    monkeypatch.setitem(cli.commands, "show-host", show_host)
    assert CliRunner().invoke(cli, ["--help"]).exit_code == 0 and not loads  # --help loads no host
    result = CliRunner().invoke(cli, ["show-host", "--tag", "t"])
    assert result.exit_code == 0, result.output
    assert loads == [1] and isinstance(seen[0][0], Host) and seen[0][1] == "t"
    assert result.output.startswith("t: ")

    monkeypatch.undo()
    injected = Host(strict=True).load()
    monkeypatch.setattr(manager, "_HOST", injected)
    monkeypatch.setitem(cli.commands, "show-host", show_host)
    assert CliRunner().invoke(cli, ["show-host"]).exit_code == 0
    assert seen[-1][0] is injected
