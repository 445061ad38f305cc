"""AppWorld's procedural interventions (DARC's procedure-breadth family).

Each one watches for a failed code cell (the last step's `valid_action` is False), reads
AppWorld's error, reports it as a `procedure` failure with one label, and asks the agent
for the next cell again with procedural help, then verifies the next cell: `resolved`
when it runs without error, `unresolved` otherwise. No task reward is read.

- `local_induction`: a rule induced from this error alone, e.g. "the venmo app has no
  API send_money; these names are close: ...", "log in first", "look the record up
  first instead of a guessed value". Cheapest.
- `auto_knowledge`: the API docs relevant to the instruction and the failing call
  (BM25 over AppWorld's own API docs, which the env fetches from its server once and
  passes in its reset info).
- `retrieval_fallback`: the rule first; if the next cell fails again, the relevant docs;
  if it fails a third time, every API of the task's apps. Richer context only after the
  cheaper sources fail.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Mapping

from playground.core.hookspecs import hookimpl
from playground.core.payloads import (
    Decision,
    Detection,
    EpisodeStart,
    InterventionMessage,
    StepContext,
    StepOutcome,
    Verification,
    invalid_streak,
)
from playground.envs.appworld.params import ProceduralParams
from playground.envs.appworld.schema import signature
from playground.host_api import TextIndex, built_once

FAILURE_TYPE = "procedure"
# what `classify_error` reads from a failed cell, and `unknown_argument` (a keyword the API does not take, which
# AppWorld drops without a word, so no failed cell shows it: the noisy agent's wrong-keyword cells carry it)
LABELS = ("unknown_api", "missing_login", "missing_lookup", "missing_argument", "syntax_error", "api_error",
          "unknown_argument")


@dataclass(frozen=True)
class CellError:
    """A failed cell's error: its label, the app and API it names (if any) and the message."""

    label: str
    app: str = ""
    api: str = ""
    message: str = ""


def classify_error(output: str, code: str = "") -> CellError:
    """Read AppWorld's "Execution failed" output into a `CellError`."""
    message = output.strip().splitlines()[-1] if output.strip() else ""
    call = re.findall(r"apis\.(\w+)\.(\w+)\(", code)
    app, api = call[-1] if call else ("", "")
    if m := re.search(r"No API named '(\w+)' found in the (\w+) app", output):
        return CellError("unknown_api", m.group(2), m.group(1), message)
    if "Syntax error" in output or "SyntaxError" in output:
        return CellError("syntax_error", message=message)
    if "status code is 401" in output:
        return CellError("missing_login", app, api, message)
    if "status code is 422" in output and "field required" in output:
        return CellError("missing_argument", app, api, message)
    if (re.search(r"status code is 40[49]", output)
            and re.search(r"does not exist|not found|No \w+ found", output, re.I)):
        return CellError("missing_lookup", app, api, message)
    return CellError("api_error", app, api, message)


def describe_api(app: str, api: str, doc: dict) -> str:
    """One line: `apis.app.api(param, optional=default, ...)`: description."""
    return f"{signature(app, api, doc)}: {doc.get('description', '').strip()}"


def relevant_docs(docs: dict, query: str, apps: list[str], k: int = 5) -> list[str]:
    """The k API descriptions most similar to `query` (BM25), within `apps` when given."""
    entries, index = built_once(docs, tuple(apps), lambda: _docs_index(docs, tuple(apps)))
    return [describe_api(*entries[i]) for i, _ in index.search(query, k)]


def _docs_index(docs: dict, apps: tuple[str, ...]) -> tuple[list[tuple[str, str, dict]], TextIndex]:
    """The docs of `apps` (plus supervisor) as (app, api, doc) entries, and a BM25 index over them."""
    entries = [(app, api, doc) for app, apis in docs.items() if not apps or app in apps or app == "supervisor"
               for api, doc in apis.items()]
    texts = [f"{app} {api.replace('_', ' ')} {doc.get('description', '')}" for app, api, doc in entries]
    return entries, TextIndex(texts)


# -- the help each source gives -----------------------------------------------------------


def induced_rule(error: CellError, docs: dict | None = None) -> str:
    """A rule for this error alone (local induction)."""
    if error.label == "unknown_api":
        known = sorted((docs or {}).get(error.app, {}))
        close = difflib.get_close_matches(error.api, known, n=3, cutoff=0.4)
        hint = f" Close names: {', '.join(close)}." if close else ""
        return (f"The {error.app} app has no API {error.api}. Use an existing API "
                f"(apis.api_docs.show_api_descriptions(app_name='{error.app}') lists them).{hint}")
    if error.label == "missing_login":
        app = error.app or "<app>"
        return (f"Calls to {app} need access_token=... from apis.{app}.login(username=<the supervisor's email>, "
                f"password=<the {app} password from apis.supervisor.show_account_passwords()>); log in first.")
    if error.label == "missing_lookup":
        return ("A record you referred to does not exist. Look it up first with the app's search_ or show_ APIs "
                "and use the id or email they return, never a guessed value.")
    if error.label == "missing_argument":
        return (f"The call is missing required arguments ({error.message}). Check "
                f"apis.api_docs.show_api_doc(app_name='{error.app}', api_name='{error.api}').")
    if error.label == "syntax_error":
        return f"The cell is not valid Python ({error.message}). Send the corrected cell."
    return f"The call failed ({error.message}). Read the error, fix the call, and try again."


def docs_help(docs: dict, instruction: str, error: CellError, apps: list[str], k: int = 5) -> str:
    """The API docs relevant to the instruction and the failing call (auto knowledge)."""
    query = " ".join([instruction, error.app, error.api.replace("_", " "), error.message])
    lines = relevant_docs(docs, query, apps, k)
    return "Relevant APIs:\n" + "\n".join(f"- {line}" for line in lines) if lines else "No relevant API docs found."


def full_listing(docs: dict, apps: list[str]) -> str:
    """Every API of the task's apps (the richest, most expensive context)."""
    lines = [describe_api(app, api, doc) for app in (apps or sorted(docs))
             for api, doc in sorted(docs.get(app, {}).items())]
    return "All APIs of this task's apps:\n" + "\n".join(f"- {line}" for line in lines)


class ProceduralHelp:
    """Episode plugin shared by the three interventions; `source` says which help it gives."""

    SOURCES = ("local_induction", "auto_knowledge", "retrieval_fallback")

    def __init__(self, source: str, params: ProceduralParams | Mapping[str, Any]) -> None:
        """`params`: a `ProceduralParams` (the host validated it), or a dict validated by it (strictly)."""
        if source not in self.SOURCES:
            raise ValueError(f"unknown procedural source {source!r}; choose from: {', '.join(self.SOURCES)}")
        if not isinstance(params, ProceduralParams):
            params = ProceduralParams.model_validate(dict(params), strict=True)
        self.source = source
        self.k = params.docs_k
        self.max_reasks = params.max_reasks_per_step
        self.streak = 0  # failed cells in a row
        self.pending: dict[int, CellError] = {}  # step -> the error helped with there
        self.docs: dict = {}  # {app: {api: doc}} of the episode's AppWorld server
        self.apps: list[str] = []  # the task's apps

    def _error(self, context: StepContext) -> CellError | None:
        if not context.history or context.history[-1].valid_action:
            return None
        last = context.history[-1]
        return classify_error(last.observation, last.action)

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        """Take the task's apps and the API docs from the env's reset info."""
        self.docs = start.env_info.get("api_docs") or {}  # the server's own dict: its BM25 index is reused
        self.apps = list(start.env_info.get("apps") or [])

    def _docs(self) -> dict:
        return self.docs

    @hookimpl
    def detect_failures(self, context: StepContext, proposal) -> Detection | None:
        """Report the last cell's error as a `procedure` failure (first attempt of a step only)."""
        error = self._error(context)
        if error is None or context.attempt > 0:
            return None
        return Detection(self.source, FAILURE_TYPE, (error.label,), 1.0, f"last cell failed: {error.message[:300]}",
                         subtype=error.label)

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal, detections: list[Detection]) -> Decision | None:
        """After a failed cell, ask for the next cell again with this source's help."""
        mine = [d for d in detections if d.detector == self.source]
        if not mine or context.attempt >= self.max_reasks:
            return None
        error = self._error(context)
        assert error is not None  # the detection above came from this failed cell
        self.streak = invalid_streak(context.history)
        text = self.help_text(context.goal, error)
        self.pending[context.step] = error
        message = InterventionMessage("soft_repair", f"Your last cell failed: {error.message}\n{text}", FAILURE_TYPE,
                                      labels=(error.label,))
        return Decision(self.source, self.source, message=message, detections=tuple(mine),
                        details={"chars": len(text), "tier": self._tier()})

    def help_text(self, instruction: str, error: CellError) -> str:
        """The help this source gives for `error` (see the module docstring)."""
        if self.source == "local_induction":
            return induced_rule(error, self._docs())
        if self.source == "auto_knowledge":
            return docs_help(self._docs(), instruction, error, self.apps, self.k)
        tier = self._tier()
        if tier == 1:
            return induced_rule(error, self._docs())
        if tier == 2:
            return (induced_rule(error, self._docs()) + "\n"
                    + docs_help(self._docs(), instruction, error, self.apps, self.k))
        return induced_rule(error, self._docs()) + "\n" + full_listing(self._docs(), self.apps)

    def _tier(self) -> int:
        return min(3, max(1, self.streak))

    @hookimpl
    def verify_recovery(self, outcome: StepOutcome) -> Verification | None:
        """Resolved when the cell sent after the help runs without error."""
        error = self.pending.pop(outcome.context.step, None)
        if error is None:
            return None
        if outcome.valid_action:
            return Verification(self.source, outcome.context.step, FAILURE_TYPE, "resolved",
                                f"after the {error.label} help the next cell ran")
        again = classify_error(outcome.observation, outcome.proposal.action)
        return Verification(self.source, outcome.context.step, FAILURE_TYPE, "unresolved",
                            f"the next cell failed too ({again.label}: {again.message[:200]})")
