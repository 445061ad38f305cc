"""The playbook: the external store of recovery lessons (SQLite), its file formats and its CLI.

`store` holds the database, `io` the JSONL import/export and validation, `cli` the
`playground playbook ...` commands, added through `register_commands`. Declares the
failure type `procedure` (lessons without a diagnosed failure, e.g. imported ACE
playbooks) with one label per ACE section.
"""

from playground.core.hookspecs import hookimpl


@hookimpl
def register_failure_labels(register) -> None:
    """Declare the `procedure` type and its ACE-section labels."""
    from playground.plugins.playbook.io import FAILURE_LABELS

    for declaration in FAILURE_LABELS:
        register(declaration)


@hookimpl
def register_commands(cli) -> None:
    """Add the `playbook` command group."""
    from playground.plugins.playbook.cli import playbook_group

    cli.add_command(playbook_group)
