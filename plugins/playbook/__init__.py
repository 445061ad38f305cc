"""The playbook: the external store of recovery lessons (an SQLite file, or a PostgreSQL schema), its file formats
and its CLI.

`backend` is where a playbook lives, behind one protocol: `sqlite_backend` (a file path, the default) or `postgres`
(`postgresql://...` URLs, registered here for `--playbook`; `postgres_schema` its tables), opened by one factory
(`open_playbook`); `copying` moves a whole playbook between them. `store` holds the `Playbook` object, composed of
`schema` (tables, creating, migrating and
checking files), `retrieval` (Sentry's retrieval rules), `provenance` (exactly-once writes,
the change log) and `maintenance` (merge, prune, import, export, copy); `io` holds the JSONL
and ACE file formats and validation (`ace_format` the rules of ACE's text), `cli` the
`playground playbook ...` commands (`cli_output` what they print), added through
`register_commands`. Declares the failure type `procedure` (lessons without a diagnosed
failure, e.g. imported ACE playbooks) with one label per ACE section. For runs, it
checks each playbook file before the first episode (`check_playbook`), copies a whole playbook for a
study's grid that starts from another's (`copy_playbook`) and, before unfinished
episodes are played again, takes back what they wrote to it (`discard_episodes`).
"""

from playground.core.hookspecs import hookimpl
from playground.plugins.playbook.backend import register_schemes

register_schemes()  # `--playbook postgresql://...` is a playbook's location, not a path to refuse


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
    database, a playbook of a newer schema or with damaged pages (a missing or empty file becomes a new playbook);
    for a PostgreSQL URL, a server that cannot be reached or a schema that holds something else."""
    from playground.plugins.playbook.backend import location_problem

    return location_problem(path, read_pages=True)


@hookimpl
def playbook_digest(path: str) -> str | None:
    """A hash of a playbook's content (a read-only dump of its tables), None for a file that is not SQLite and a
    PostgreSQL schema that holds no playbook."""
    from playground.plugins.playbook.backend import location_digest

    return location_digest(path)


@hookimpl
def copy_playbook(source: str, target: str) -> bool | None:
    """Copy the playbook at `source` to `target` (`Playbook.copy_to`: whole or absent); a missing source file
    copies as an empty playbook. None for a source that is not a playbook."""
    from pathlib import Path

    from playground.plugins.playbook.backend import is_database_url, location_problem
    from playground.plugins.playbook.store import Playbook

    if not is_database_url(source) and not Path(source).exists():
        Playbook(target).close()  # the source cell stored nothing: an empty playbook
        return True
    if location_problem(source, read_pages=False) is not None:
        return None
    with Playbook(source, read_only=not is_database_url(source)) as playbook:
        playbook.copy_to(target)
    return True


@hookimpl
def discard_episodes(run_id: str, episode_ids: list[str], playbook: str) -> None:
    """Take back the lessons and counter updates that unfinished plays of these episodes left in the playbook."""
    from playground.plugins.playbook.store import discard_episodes as discard

    discard(playbook, run_id, episode_ids)
