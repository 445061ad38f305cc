"""`playground cache`: what the response cache holds, and clearing it."""

from __future__ import annotations

import datetime

import click

from playground.agents.response_cache import RESPONSE_CACHE_VARIABLE, cache_contents, clear_cache, default_cache_dir
from playground.run.paths import path_callback


def _folder(folder: str | None):
    """The cache folder to act on: the one given, else the shared one (an error when the variable turns it off)."""
    if folder:
        return folder
    shared = default_cache_dir()
    if shared is None:
        raise click.ClickException(f"the response cache is off (${RESPONSE_CACHE_VARIABLE}); pass --folder")
    return shared


def _when(seconds: float | None) -> str:
    return "-" if seconds is None else datetime.datetime.fromtimestamp(seconds).isoformat(timespec="seconds")


@click.group("cache")
def cache_command() -> None:
    """The response cache: model replies to deterministic requests, shared by every run on this machine."""


@cache_command.command("info")
@click.option("--folder", default=None, callback=path_callback, help="a cache folder [default: the shared one]")
def cache_info(folder: str | None) -> None:
    """Print the cache's folder, entries, size and the oldest and newest entry."""
    contents = cache_contents(_folder(folder))
    click.echo(f"folder:  {contents.folder}\nentries: {contents.entries}\nsize:    {contents.bytes / 1e6:.1f} MB\n"
               f"oldest:  {_when(contents.oldest)}\nnewest:  {_when(contents.newest)}")


@cache_command.command("clear")
@click.option("--folder", default=None, callback=path_callback, help="a cache folder [default: the shared one]")
@click.option("--older-than", type=click.FloatRange(min=0), default=None,
              help="only entries not written for this many days [default: every entry]")
@click.option("--yes", is_flag=True, help="do not ask")
def cache_clear(folder: str | None, older_than: float | None, yes: bool) -> None:
    """Delete cached replies (the next identical request asks the model again); runs and their records stay."""
    where = _folder(folder)
    scope = "every entry" if older_than is None else f"the entries older than {older_than:g} days"
    if not yes:
        click.confirm(f"delete {scope} of the response cache in {where}?", abort=True)
    removed = clear_cache(where, None if older_than is None else older_than * 86400)
    click.echo(f"removed {removed} entries from {where}")
