"""Secrets kept out of what a run writes: credentials in URLs (user:password@, and query parameters named like
keys, tokens or signatures) are replaced by `***` before a config, lock, trace header or error record is written.
API keys themselves come only from the environment (agent option `api_key_env` names the variable)."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

MASK = "***"
SECRET_PARAMETER = re.compile(r"(key|token|secret|password|passwd|pwd|sig|signature|auth|credential|session)",
                              re.IGNORECASE)
URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")


def redact_url(url: str) -> str:
    """`url` with its userinfo and secret-looking query values masked (unchanged when it holds neither)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(SECRET_PARAMETER.search(name) for name, _ in pairs):
            query = "&".join(f"{urllib.parse.quote(name, safe='')}={MASK if SECRET_PARAMETER.search(name) else value}"
                             for name, value in pairs)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """`text` with every URL in it redacted (`redact_url`)."""
    return URL.sub(lambda found: redact_url(found.group(0)), text) if "://" in text else text


def redact(value: Any) -> Any:
    """A copy of `value` (dicts, lists, tuples and strings at any depth) with every URL in a string redacted."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {key: redact(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(item) for item in value)
    return value
