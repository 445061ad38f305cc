"""The playbook: the external store of recovery lessons (SQLite), its file formats and its CLI.

`store` holds the `Playbook` object, composed of `schema` (tables, creating, migrating and
checking files), `retrieval` (Sentry's retrieval rules), `provenance` (exactly-once writes,
the change log) and `maintenance` (merge, prune, import, export, copy); `io` holds the JSONL
and ACE file formats and validation (`ace_format` the rules of ACE's text), `cli` the
`playground playbook ...` commands (`cli_output` what they print), added through
`register_commands`. Declares the failure type `procedure` (lessons without a diagnosed
failure, e.g. imported ACE playbooks) with one label per ACE section. For runs, it
checks each playbook file before the first episode (`check_playbook`) and, before unfinished
episodes are played again, takes back what they wrote to it (`discard_episodes`).
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


@hookimpl
def check_playbook(path: str) -> str | None:
    """Refuse a file that cannot be a playbook: a folder, a file that is not SQLite, another program's SQLite
    database, a playbook of a newer schema or with damaged pages (a missing or empty file becomes a new playbook)."""
    from playground.plugins.playbook.schema import playbook_problem

    return playbook_problem(path, read_pages=True)


@hookimpl
def playbook_digest(path: str) -> str | None:
    """A hash of an SQLite playbook's content (a read-only dump of its tables), None for a file that is not SQLite."""
    from playground.plugins.playbook.schema import content_digest

    return content_digest(path)


@hookimpl
def discard_episodes(run_id: str, episode_ids: list[str], playbook: str) -> None:
    """Take back the lessons and counter updates that unfinished plays of these episodes left in the playbook."""
    from playground.plugins.playbook.store import discard_episodes as discard

    discard(playbook, run_id, episode_ids)
