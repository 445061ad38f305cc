"""Paths are paths, URLs are URLs: an option that takes a file or folder path refuses a value that looks like a URL.

Without this check `--playbook postgresql://user@host:5432/db` is a relative path: it makes a folder
`postgresql:/user@host:5432/` in the working directory and a file inside it, and the run succeeds while the user
believes the lessons went to their database (a password in the URL becomes a folder name). `plain_path` refuses
such a value before anything is made, with `URLPathError`: it says the value looks like a URL (its password
masked, `redact_url`), names the option and the URL schemes the option supports.

What looks like a URL: the value (leading blanks aside) starts with an RFC 3986 scheme (a letter, then letters,
digits, `+`, `-` or `.`) of at least two characters, then `://`. Not a URL: a Windows drive (`C:\\x`, `C://x`: one
letter), a relative path with a colon later (`runs/a:b`, `./s3://x`), a name with a colon and no `//`
(`prefix:name`, `file:x`).

Which schemes an option supports is kept per option, none today: a backend that stores somewhere other than a
file registers its scheme for its option (`register_url_scheme("--playbook", "postgresql")`), and from then on
`plain_path` lets such a value through for that option, for the backend to open.
"""

from __future__ import annotations

import os
import re
from typing import Any

from playground.core.errors import PlaygroundError
from playground.run.secrets import MASK, redact_url

# RFC 3986: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ); two characters at least, so `C://x` stays a drive.
URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")

_SCHEMES: dict[str, set[str]] = {}  # option -> the URL schemes it supports (lower case); none registered today


class URLPathError(PlaygroundError, ValueError):
    """A path option was given a URL with a scheme the option does not support; the message names the option and
    the schemes it supports, with the URL's password masked."""


def url_scheme(value: str | os.PathLike) -> str | None:
    """The scheme (lower case) of `value` when it looks like a URL (`scheme://...`), else None."""
    found = URL_SCHEME.match(os.fspath(value).lstrip()) if isinstance(value, (str, os.PathLike)) else None
    return found.group(1).lower() if found else None


def register_url_scheme(option: str, scheme: str) -> None:
    """Let `option` (e.g. `--playbook`) take URLs of `scheme` (e.g. `postgresql`): a backend that can open them
    registers it, and `plain_path` lets them through for that option from then on."""
    if not URL_SCHEME.fullmatch(f"{scheme}://"):
        raise ValueError(f"{scheme!r} is not a URL scheme (a letter, then letters, digits, '+', '-' or '.')")
    _SCHEMES.setdefault(option, set()).add(scheme.lower())


def supported_schemes(option: str) -> tuple[str, ...]:
    """The URL schemes `option` supports, sorted (empty: it takes a plain path only)."""
    return tuple(sorted(_SCHEMES.get(option, ())))


def plain_path(value: Any, option: str, *, schemes_of: str | None = None) -> Any:
    """`value` (a path given to `option`), unless it looks like a URL whose scheme the option does not support:
    then URLPathError, before anything is made on disk. The schemes are those registered for `schemes_of`
    (default: `option` itself), so one command's argument can share another option's (a playbook's PATH, say).
    None and other non-strings pass through unchanged."""
    scheme = url_scheme(value) if isinstance(value, (str, os.PathLike)) else None
    if scheme is None:
        return value
    supported = supported_schemes(schemes_of or option)
    if scheme in supported:
        return value
    # the userinfo masked again by hand, for a URL too broken for `redact_url` to parse (`u:pw@[::1`)
    shown = re.sub(r"^([^:/]+://)[^/?#]*@", rf"\1{MASK}@", redact_url(os.fspath(value).strip()))
    schemes = (f"only a plain path and the URL schemes {', '.join(f'{s}://' for s in supported)}" if supported
               else "only a plain path, no URL scheme yet")
    raise URLPathError(f"{option} {shown!r} looks like a URL ({scheme}://), not a path; {option} supports {schemes} "
                       "(for a path that starts so, write ./ before it)")


def path_callback(ctx: Any, param: Any, value: Any, *, schemes_of: str | None = None) -> Any:
    """A click callback (`@click.option("--out", callback=path_callback)`) that checks the option's or argument's
    value(s) with `plain_path`, named as on the command line (`--out`, `OUT`); `functools.partial(path_callback,
    schemes_of="--playbook")` shares another option's schemes. URLPathError exits with code 2, nothing made."""
    longs = [opt for opt in getattr(param, "opts", ()) if opt.startswith("--")]
    name = max(longs, key=len) if longs else getattr(param, "human_readable_name", None) or "a path"
    for item in value if isinstance(value, (tuple, list)) else (value,):
        plain_path(item, name, schemes_of=schemes_of)
    return value
