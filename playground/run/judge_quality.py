"""Whether the judgments a run tallies say anything: empty judgments are flagged beside the counts, not only tallied.

A run counts what its judges decided (failures detected, repairs verified resolved, lessons stored); counts alone
cannot tell a newcomer that every detection had the evidence "no" or that a verdict's reason was the schema's own
wording. So every episode that made judge calls (`judge_call` events) also keeps, per source of judgments, what
they said (`judgments` in its record, summed per harness in the summary):

- `detection:<detector>`: each detection's failure type, labels and evidence;
- `verdict:<plugin>`: each verification's verdict and evidence, and, where the episode has an outcome (it did not
  end in an error), how many verdicts agree with it ("resolved" in an episode won, "unresolved" in one lost;
  counted after the episode, never shown to a judge);
- `lesson`: each stored lesson's trigger and principle (or its text);
- `reply:<role>`: a model role's parsed reply, where its `judge_call` event carries it (`reply`).

Per source: `n` judgments, their texts with counts (`values`, the first `MAX_VALUES` distinct ones an episode
saw; `other` counts the rest), `empty` (a free-text field of one word at most, or an echo) and `echo` (a field
that repeats the schema's wording, such as "a string of at most 160 characters", a JSON type word, a field's own
name, or the failure label the prompt named). The trace records no judge's schema or prompt, so echoes are these
known patterns. A source looks empty (`FLAG_RULES`) when at least 90% of at least 5 judgments are identical
("constant"), or at least half of at least 2 echo the schema or prompt ("echo") or are empty ("empty"). The
table marks the counts such a source feeds with "?" and says why in a `judges:` line under it; the HTML report
says so under its table.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from html import escape
from typing import Any, Iterable, Mapping

from playground.core.events import DetectionEvent, EndEvent, Event, JudgeCallEvent, LessonEvent, VerificationEvent
from playground.core.records import EpisodeRecord

MAX_VALUES = 20  # distinct judgment texts an episode's record keeps per source
MAX_CHARS = 100  # a judgment's text as kept
MIN_CONSTANT, CONSTANT_SHARE = 5, 0.9  # "constant": >= 90% of >= 5 judgments identical
MIN_EMPTY, EMPTY_SHARE = 2, 0.5  # "echo" / "empty": >= half of >= 2 judgments
FLAG_RULES = {
    "constant": f">= {CONSTANT_SHARE:.0%} of >= {MIN_CONSTANT} judgments identical",
    "echo": f">= {EMPTY_SHARE:.0%} of >= {MIN_EMPTY} judgments repeat the schema's wording or the prompt",
    "empty": f">= {EMPTY_SHARE:.0%} of >= {MIN_EMPTY} judgments with a free-text field of one word at most",
}
# the table's columns each kind of source feeds (marked "?" when the source looks empty)
COLUMNS = {"detection": ("detected_failures",), "verdict": ("verified_recoveries", "resolved_share"),
           "lesson": ("lessons_added",)}
LESSON_TEXTS = ("trigger", "principle")
LESSON_EXTRA_TEXTS = ("text", "content", "lesson", "insight")
TYPE_WORDS = frozenset({"string", "number", "integer", "boolean", "array", "object", "null", "true|false",
                        "any value", "description", "title", "type", "properties", "required", "enum", "schema"})
_DESCRIBED = re.compile(r"^(?:a|an|any) (?:string|number|integer|boolean|array|object|value|list)\b")
_BOUND = re.compile(r"\b(?:of )?at (?:most|least) \d+ (?:characters|chars|items)\b|\b\d+ to \d+ items\b")
_PREFIX = re.compile(r"^[a-z][\w .-]{0,19}:\s+")  # "judge: ...": a verifier's own prefix to the reason


def _norm(text: str) -> str:
    """`text` lowercased, its whitespace collapsed, quotes and end punctuation trimmed, a short "who: " prefix
    dropped."""
    text = " ".join(str(text).lower().split()).strip(" \"'`.,;:!")
    return _PREFIX.sub("", text, count=1).strip(" \"'`.,;:!")


def echoes(text: str, names: Iterable[str] = ()) -> bool:
    """Whether a reply's text repeats the schema's wording ("a string of at most 160 characters", a JSON type
    word, a length bound) or one of `names` (the reply's field names, the failure labels its prompt named)."""
    t = _norm(text)
    if not t:
        return False
    if t in TYPE_WORDS or (len(t) <= 60 and _DESCRIBED.match(t)) or _BOUND.search(t):
        return True
    return t.replace("_", " ") in {_norm(n).replace("_", " ") for n in names if n}


def terse(text: str) -> bool:
    """Whether a free-text reply says nothing: blank or one word ("no", "vacuum")."""
    return len(_norm(text).split()) <= 1


class JudgmentTally:
    """Collects one episode's judgments per source (fed event by event; `EpisodeTally` feeds it)."""

    def __init__(self) -> None:
        self.sources: dict[str, dict[str, Any]] = {}
        self._verdicts: list[tuple[str, bool]] = []  # (source, resolved) of the decisive verdicts
        self._outcome: bool | None = None  # the episode won (None: no end yet, or it ended in an error)

    def add(self, event: Event) -> None:
        """Note the judgment an event carries, if any."""
        if isinstance(event, DetectionEvent):
            labels = list(event.labels)
            text = f"{event.failure_type or '?'}/{','.join(labels) or '-'}: {event.evidence}"
            self._note(f"detection:{event.detector or '?'}", text, [event.evidence],
                       ["evidence", event.failure_type, *labels])
        elif isinstance(event, VerificationEvent):
            source = f"verdict:{event.plugin or '?'}"
            self._note(source, f"{event.verdict}: {event.evidence}", [event.evidence],
                       ["evidence", "verdict", "resolved", event.failure_type])
            if event.verdict in ("resolved", "unresolved"):
                self._verdicts.append((source, event.verdict == "resolved"))
        elif isinstance(event, LessonEvent):
            texts = [str(v) for v in (event.trigger, event.principle) if v is not None]
            texts = texts or [str(event.extra[k]) for k in LESSON_EXTRA_TEXTS if isinstance(event.extra.get(k), str)]
            if texts:
                self._note("lesson", " | ".join(texts), texts,
                           [*LESSON_TEXTS, *LESSON_EXTRA_TEXTS, event.failure_type or "", *(event.labels or [])])
        elif isinstance(event, JudgeCallEvent):
            reply = getattr(event, "reply", None)
            reply = event.extra.get("reply") if reply is None else reply
            if isinstance(reply, Mapping):
                strings = [str(v) for v in reply.values() if isinstance(v, str)]
                self._note(f"reply:{event.role or 'unknown'}", json.dumps(reply, sort_keys=True, default=str),
                           strings, list(reply), free_text=False)
            elif isinstance(reply, str):
                self._note(f"reply:{event.role or 'unknown'}", reply, [reply], [], free_text=False)
        elif isinstance(event, EndEvent):
            self._outcome = None if event.status == "error" else bool(event.won)

    def _note(self, source: str, text: str, texts: list[str], names: list[str], free_text: bool = True) -> None:
        entry = self.sources.setdefault(source, {"n": 0, "values": Counter(), "other": 0, "empty": 0, "echo": 0})
        entry["n"] += 1
        text = text[:MAX_CHARS]
        if text in entry["values"] or len(entry["values"]) < MAX_VALUES:
            entry["values"][text] += 1
        else:
            entry["other"] += 1
        echo = any(echoes(t, names) for t in texts)
        entry["echo"] += echo
        entry["empty"] += echo or (free_text and any(terse(t) for t in texts))

    def as_record(self) -> dict[str, dict[str, Any]]:
        """The episode's judgments per source, JSON-ready (verdict sources with `judged` and `agree` where the
        episode has an outcome)."""
        record = {source: {**entry, "values": dict(entry["values"].most_common())}
                  for source, entry in sorted(self.sources.items())}
        if self._outcome is not None:
            for source, resolved in self._verdicts:
                record[source]["judged"] = record[source].get("judged", 0) + 1
                record[source]["agree"] = record[source].get("agree", 0) + (resolved == self._outcome)
        return record


def merge_judgments(records: Iterable[EpisodeRecord]) -> dict[str, dict[str, Any]]:
    """The `judgments` of several records added up per source."""
    total: dict[str, dict[str, Any]] = {}
    for record in records:
        for source, entry in (record.judgments or {}).items():
            into = total.setdefault(source, {"n": 0, "values": Counter(), "other": 0, "empty": 0, "echo": 0})
            into["values"].update({str(k): int(v) for k, v in (entry.get("values") or {}).items()})
            for key in ("n", "other", "empty", "echo", "judged", "agree"):
                if key in entry or key in into:
                    into[key] = into.get(key, 0) + int(entry.get(key) or 0)
    return total


def summarise_judgments(records: Iterable[EpisodeRecord]) -> dict[str, dict[str, Any]]:
    """Per source, over a harness's records: judgments, distinct ones, the most frequent (`top`, `top_count`),
    empty and echoing ones, the verdicts' agreement with the outcomes (`outcome_agreement`) and the `flags`."""
    summary = {}
    for source, entry in sorted(merge_judgments(records).items()):
        values: Counter[str] = entry["values"]
        top, top_count = values.most_common(1)[0] if values else ("", 0)
        item = {"n": entry["n"], "distinct": len(values) + entry["other"], "top": top, "top_count": top_count,
                "empty": entry["empty"], "echo": entry["echo"]}
        if entry.get("judged"):
            item.update(judged=entry["judged"], agree=entry["agree"],
                        outcome_agreement=round(entry["agree"] / entry["judged"], 4))
        item["flags"] = judgment_flags(item)
        summary[source] = item
    return summary


def judgment_flags(item: Mapping[str, Any]) -> list[str]:
    """The `FLAG_RULES` a source's summed judgments meet: "constant", then "echo" or else "empty"."""
    n = int(item.get("n") or 0)
    flags = ["constant"] if n >= MIN_CONSTANT and item.get("top_count", 0) >= CONSTANT_SHARE * n else []
    if n >= MIN_EMPTY and item.get("echo", 0) >= EMPTY_SHARE * n:
        flags.append("echo")
    elif n >= MIN_EMPTY and item.get("empty", 0) >= EMPTY_SHARE * n:
        flags.append("empty")
    return flags


def source_name(source: str) -> str:
    """A source as the table says it: "detections by X", "verdicts by X", "lessons", "X replies"."""
    kind, _, who = source.partition(":")
    return {"detection": f"detections by {who}", "verdict": f"verdicts by {who}", "lesson": "lessons",
            "reply": f"{who} replies"}.get(kind, source)


def flag_text(source: str, item: Mapping[str, Any]) -> str:
    """What is wrong with a flagged source, with its counts: 'verdicts by X constant (20/20 identical), echo the
    schema or prompt (20/20), agree with the outcome 0/20: "resolved: ..."'."""
    n, parts = item["n"], []
    if "constant" in item["flags"]:
        parts.append(f"constant ({item['top_count']}/{n} identical)")
    if "echo" in item["flags"]:
        parts.append(f"echo the schema or prompt ({item['echo']}/{n})")
    if "empty" in item["flags"]:
        parts.append(f"empty ({item['empty']}/{n} one word or less)")
    if item.get("judged"):
        parts.append(f"agree with the outcome {item['agree']}/{item['judged']}")
    top = item["top"] if len(item["top"]) <= 60 else item["top"][:59] + "…"
    return f"{source_name(source)} {', '.join(parts)}: {json.dumps(top, ensure_ascii=False)}"


def flagged(figures: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A harness's sources whose judgments look empty, from its summary entry."""
    return [(source, item) for source, item in (figures.get("judgments") or {}).items() if item.get("flags")]


def flagged_columns(figures: Mapping[str, Any]) -> set[str]:
    """The summary keys of the table's counts fed by a flagged source of the harness."""
    return {key for source, _ in flagged(figures) for key in COLUMNS.get(source.partition(":")[0], ())}


def flag_lines(harnesses: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One 'judges: <harness>: ...' line per flagged source of each harness (none when nothing looks empty)."""
    return [f"judges: {name}: {flag_text(source, item)}"
            for name, figures in harnesses.items() for source, item in flagged(figures)]


def flags_html(series: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """The report's note under its harness table: each flagged source, or nothing when none looks empty."""
    items = [f"<li>{escape(name)}: {escape(flag_text(source, item))}</li>"
             for name, figures in series for source, item in flagged(figures)]
    if not items:
        return ""
    return ('<div class="judge-flags"><p class="interrupted">judgments that look empty (their counts above are '
            f"not evidence): constant = {escape(FLAG_RULES['constant'])}; echo = {escape(FLAG_RULES['echo'])}; "
            f"empty = {escape(FLAG_RULES['empty'])}</p><ul>{''.join(items)}</ul></div>")
