"""The playbook: the external store of recovery lessons (SQLite), its file formats and its CLI.

`store` holds the database, `io` the JSONL import/export and validation, `cli` the
`playground playbook ...` commands, added through `register_commands`.
"""

from playground.core.hookspecs import hookimpl


@hookimpl
def register_commands(cli) -> None:
    """Add the `playbook` command group."""
    from playground.plugins.playbook.cli import playbook_group

    cli.add_command(playbook_group)
