"""The effect policy of each AppWorld API, derived from AppWorld's own API docs, and which API a logged request is.

The rule (`effect_policy`), over an API's doc (`method`, `description`):

- `GET`: a read, **reversible**;
- otherwise, **irreversible** when the description starts with a verb that acts outside the
  user's own records: it sends something to someone (`Send ...`: money, a payment request, a
  reminder, an email, a text or voice message, a code), `Forward`, `Reply`, `Approve` /
  `Deny` (a request someone else sent), `Remind`, `Invite` (someone is notified), `Place an
  order`, `Initiate` (a product return), `Subscribe` (a paid membership), `Withdraw` / `Add
  money` (money moves between Venmo and a card);
- otherwise **reversible**: a change to the user's own records in the app (a note, a task,
  an alarm, a playlist, a cart, a like, a review, a login), which AppWorld holds in its task
  world; a restore (a fresh world with the executed cells replayed) brings those back exactly.

With AppWorld's bundled apps the rule marks 35 of 457 APIs irreversible (docs/envs/appworld.md
lists them). No app or API is named here: everything comes from the docs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REVERSIBLE, IRREVERSIBLE = "reversible", "irreversible"
OUTSIDE = re.compile(r"^(send|forward|reply|approve|deny|remind|invite|place an order|initiate|subscribe|withdraw"
                     r"|add money)\b", re.IGNORECASE)


def effect_policy(doc: Mapping[str, Any]) -> str:
    """`reversible` or `irreversible` for one API doc (see the module docstring)."""
    if str(doc.get("method", "")).upper() == "GET":
        return REVERSIBLE
    return IRREVERSIBLE if OUTSIDE.match(str(doc.get("description", "")).strip()) else REVERSIBLE


def effect_table(docs: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, str]]:
    """{app: {api: policy}} for every API in `docs` ({app: {api: doc}}, as AppWorld's server gives them)."""
    return {app: {api: effect_policy(doc) for api, doc in apis.items()} for app, apis in docs.items()}


class Routes:
    """Which API a request AppWorld logged is: (method, path) matched against the docs' path templates."""

    def __init__(self, docs: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        self.routes: dict[str, list[tuple[re.Pattern[str], int, str, str, str]]] = {}
        for app, apis in docs.items():
            for api, doc in apis.items():
                path = str(doc.get("path", ""))
                params = path.count("{")
                pattern = re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)) + "/?$")
                self.routes.setdefault(str(doc.get("method", "")).upper(), []).append(
                    (pattern, params, app, api, effect_policy(doc)))
        for candidates in self.routes.values():
            candidates.sort(key=lambda route: route[1])  # the most literal template first

    def call(self, method: str, url: str) -> tuple[str, str]:
        """("app.api", policy) of a logged request; an unknown request is irreversible unless it is a GET
        (it cannot be classified, so it is taken at its worst)."""
        method = method.upper()
        path = re.sub(r"^\w+://[^/]+", "", url).split("?", 1)[0]
        for pattern, _, app, api, policy in self.routes.get(method, ()):
            if pattern.match(path):
                return f"{app}.{api}", policy
        return f"{method} {path}", REVERSIBLE if method == "GET" else IRREVERSIBLE
