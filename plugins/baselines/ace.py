"""ACE (Agentic Context Engineering): an itemised playbook grown by a reflector and a curator.

Roles, as in the paper: the *generator* is the agent, shown the whole playbook (up to a
token budget) as a standing note every step; after each episode the *reflector* reads the
episode's observable trajectory and writes insights and tags the bullets it was shown
(helpful, harmful, neutral); the *curator* turns that into delta operations on the playbook:
ADD a bullet, UPDATE a bullet (its text, its helpful/harmful counters), REMOVE a bullet.
The deltas are merged by plain code, not rewritten by a model: a new bullet that nearly
repeats one already there is not added (de-duplication), and a bullet tagged harmful more
often than helpful, at least `ace_prune_harmful` times, is removed.

With a judge model (`judge_base_url` + `judge_model`, or `judge_local=true`) the reflector
and the curator are the model; without one they are rules (`rule_reflection`,
`rule_curation`), and a reply that does not parse falls back to the rules.

The playbook is an ACE text file (`## SECTION`, `[id] helpful=X harmful=Y :: text`), read
and written with the playbook plugin's ACE format, so `playground playbook import ... --format
ace` and `export --format ace` carry it to and from a playbook database. Every applied delta
is appended to `<file>.deltas.jsonl`, keyed by run, episode and attempt: a replayed episode
(a resumed run) applies its deltas once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from playground import EpisodeEnd, EpisodeStart
from playground.host_api import episode_key
from playground.plugins.baselines.episode import MemoryBaseline
from playground.plugins.baselines.judge import Judge, array_schema, object_schema, string_schema
from playground.plugins.baselines.memory import ACE_DELTAS, ACE_PLAYBOOK, Memory, memory_for, written_before
from playground.plugins.baselines.params import AceParams, defaults_of
from playground.plugins.baselines.trajectory import Trajectory, abstract_action, approx_tokens, verb_of, words
from playground.plugins.playbook.io import ACE_FAILURE_TYPE, ACE_SECTIONS, ace_text, read_ace

NAME = "ace"
DEFAULTS: dict[str, Any] = defaults_of(AceParams)  # declared in params.py: types, ranges, meanings
SECTIONS = tuple(ACE_SECTIONS)  # ACE's canonical sections, in its order
SLUGS = {"STRATEGIES AND HARD RULES": "shr", "APIS TO USE FOR SPECIFIC INFORMATION": "api",
         "USEFUL CODE SNIPPETS AND TEMPLATES": "code", "COMMON MISTAKES AND CORRECT STRATEGIES": "cms",
         "PROBLEM-SOLVING HEURISTICS AND WORKFLOWS": "phw", "VERIFICATION CHECKLIST": "vc",
         "TROUBLESHOOTING AND PITFALLS": "tp", "OTHERS": "misc"}
TAGS = ("helpful", "harmful", "neutral")
WARNING_SECTIONS = ("COMMON MISTAKES AND CORRECT STRATEGIES", "TROUBLESHOOTING AND PITFALLS")
TRIGGER_OPENERS = ("when ", "to ", "before ", "after ", "if ", "for ", "while ")
MAX_BULLET_CHARS = 1000


@dataclass
class Bullet:
    """One playbook item: an id, its section, its text and how often it was tagged helpful or harmful."""

    id: str
    section: str
    text: str
    helpful: int = 0
    harmful: int = 0

    @property
    def trigger(self) -> str:
        """The bullet's condition: its text up to the first colon when that opens like a condition ("When ...",
        "To ...", "Before ..."), else "" (no trigger: such bullets are only compared as wholes)."""
        head, colon, _ = self.text.partition(":")
        head = " ".join(head.split()).lower()
        return head if colon and head.startswith(TRIGGER_OPENERS) and len(head.split()) >= 3 else ""

    def line(self) -> str:
        """The bullet as an ACE line."""
        return f"[{self.id}] helpful={self.helpful} harmful={self.harmful} :: {self.text}"


@dataclass
class Insight:
    """What the reflector learnt: a candidate bullet for a section."""

    section: str
    text: str


@dataclass
class Reflection:
    """The reflector's output: insights, and a tag for each bullet it was shown."""

    insights: list[Insight] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    by: str = "rules"


def similarity(a: str, b: str) -> float:
    """Word-set (Jaccard) similarity of two texts, 0..1 (the lexical stand-in for ACE's embedding similarity)."""
    x, y = words(a), words(b)
    return len(x & y) / len(x | y) if x | y else 1.0


def one_line(text: str) -> str:
    """`text` on one line, at most MAX_BULLET_CHARS characters."""
    return " ".join(str(text).split())[:MAX_BULLET_CHARS]


class AcePlaybook:
    """An ACE playbook in memory: bullets by section; delta operations; rendering within a token budget."""

    def __init__(self, bullets: list[Bullet] | None = None) -> None:
        self.bullets: list[Bullet] = list(bullets or [])

    @classmethod
    def load(cls, path: Path | None) -> AcePlaybook:
        """Read an ACE playbook file (empty when there is none); PlaybookImportError names bad lines."""
        if path is None or not path.is_file():
            return cls()
        return cls.from_text(path.read_text(encoding="utf-8"), str(path))

    @classmethod
    def from_text(cls, text: str, where: str) -> AcePlaybook:
        """Read an ACE playbook's text (`where` names it in errors; empty text: an empty playbook)."""
        if not text.strip():
            return cls()
        bullets = []
        for record in read_ace(where, strict=True, data=text.encode("utf-8")):  # its own: a bad line is damage
            provenance = record["provenance"]
            text = "" if provenance.get("empty") is True else record["principle"]  # an empty bullet stays empty
            bullets.append(Bullet(str(provenance["id"]), record["subtype"] or "OTHERS", text,
                                  int(record["helped"]), int(provenance.get("harmful", 0))))
        return cls(bullets)

    def text(self) -> str:
        """The whole playbook in the ACE format."""
        return ace_text({"failure_type": ACE_FAILURE_TYPE, "labels": [ACE_SECTIONS.get(b.section.upper(), "others")],
                         "subtype": b.section, "trigger": b.trigger or b.section, "principle": b.text,
                         "provenance": {"source": "ace", "id": b.id, "harmful": b.harmful}, "helped": b.helpful}
                        for b in self.bullets)

    def save(self, memory: Memory) -> None:
        """Write the playbook to `memory` (its text replaced whole)."""
        memory.write_text(self.text())

    def get(self, bullet_id: str) -> Bullet | None:
        """The bullet with this id, or None."""
        return next((b for b in self.bullets if b.id == bullet_id), None)

    def render(self, budget: int) -> tuple[str, list[str]]:
        """The playbook as the agent sees it, within `budget` tokens, and the ids shown.

        When the whole playbook does not fit, the bullets with the best helpful - harmful score
        (then the newest) are kept; they are shown in section order.
        """
        order = {b.id: i for i, b in enumerate(self.bullets)}
        ranked = sorted(self.bullets, key=lambda b: (b.helpful - b.harmful, order[b.id]), reverse=True)
        header = "ACE playbook (strategies learnt on earlier tasks; [id] helpful/harmful counts):"
        used, kept = approx_tokens(header), set()
        for bullet in ranked:
            cost = approx_tokens(bullet.line()) + 1
            if used + cost > budget:
                continue
            used += cost
            kept.add(bullet.id)
        if not kept:
            return "", []
        lines, shown = [header], []
        for section in [*SECTIONS, *sorted({b.section for b in self.bullets} - set(SECTIONS))]:
            mine = [b for b in self.bullets if b.section == section and b.id in kept]
            if mine:
                lines.append(f"## {section}")
                lines += [b.line() for b in mine]
                shown += [b.id for b in mine]
        return "\n".join(lines), shown

    def new_id(self, section: str) -> str:
        """A fresh id for a bullet of `section`: its slug and the next number (`cms-00004`)."""
        numbers = [int(b.id.rsplit("-", 1)[1]) for b in self.bullets if b.id.rsplit("-", 1)[-1].isdigit()]
        return f"{SLUGS.get(section, 'misc')}-{max(numbers, default=0) + 1:05d}"

    def apply(self, operations: list[dict], dedupe: float) -> list[dict]:
        """Apply delta operations in order; return what was done (the applied ones, and skips with why).

        `{"op": "add", "section", "text"}`: added, unless a bullet has the same trigger in the
        same section (then that bullet's text is updated instead) or a word-set similarity of at
        least `dedupe` (then it is a repeat: `dedupe`, nothing added). `{"op": "update", "id",
        "text"?, "helpful"?, "harmful"?}`: the text replaced and/or the counters raised.
        `{"op": "remove", "id"}`: the bullet deleted. An operation on an id not in the playbook is
        skipped (another process may have removed it).
        """
        done = []
        for op in operations:
            kind = op.get("op")
            if kind == "add":
                done.append(self._add(op["section"], one_line(op["text"]), dedupe))
                continue
            bullet = self.get(str(op.get("id", "")))
            if bullet is None:
                done.append({**op, "skipped": "no such bullet"})
            elif kind == "update":
                if op.get("text"):
                    bullet.text = one_line(op["text"])
                bullet.helpful += int(op.get("helpful", 0))
                bullet.harmful += int(op.get("harmful", 0))
                done.append(dict(op))
            elif kind == "remove":
                self.bullets.remove(bullet)
                done.append({**op, "text": bullet.text})
        return done

    def _add(self, section: str, text: str, dedupe: float) -> dict:
        section = section if section in SECTIONS else "OTHERS"
        candidate = Bullet("", section, text)
        same = next((b for b in self.bullets if candidate.trigger and b.section == section
                     and b.trigger == candidate.trigger), None)
        if same is not None and same.text != text:
            same.text = text
            return {"op": "update", "id": same.id, "text": text, "from": "add with the same trigger"}
        repeat = max(self.bullets, key=lambda b: similarity(b.text, text), default=None)
        if repeat is not None and similarity(repeat.text, text) >= dedupe:
            return {"op": "dedupe", "id": repeat.id, "text": text,
                    "similarity": round(similarity(repeat.text, text), 3)}
        bullet = Bullet(self.new_id(section), section, text)
        self.bullets.append(bullet)
        return {"op": "add", "id": bullet.id, "section": section, "text": text}


# -- the reflector --------------------------------------------------------------------------------------------------


def rule_reflection(trajectory: Trajectory, shown: list[Bullet], success: bool | None, limit: int) -> Reflection:
    """The rule reflector: insights from the observable trajectory, tags for the bullets shown.

    Insights (at most `limit`): a rejected action's verb (COMMON MISTAKES), an action repeated
    with the same result (TROUBLESHOOTING), a long run of steps that brought nothing new
    (HEURISTICS), a stop with no completion message (VERIFICATION CHECKLIST), an observable
    env failure (TROUBLESHOOTING), and, when a completion message was observed (or, with
    `ace_feedback=outcome`, the env says it was won), the abstracted steps that worked
    (STRATEGIES). `success` False (outcome feedback) with a completion message adds a check of
    the goal's constraints (VERIFICATION CHECKLIST). Tags: a shown mistake or pitfall bullet whose
    quoted action's verb failed again in this episode (invalid or repeated) is harmful; every
    other shown bullet is helpful when the task was completed, neutral otherwise.
    """
    insights: list[Insight] = []
    for verb in dict.fromkeys(verb_of(a) for a in trajectory.invalid_actions()):
        named = f"'{verb} ...'" if verb in trajectory.verbs else "an action with a verb the environment does not know"
        insights.append(Insight("COMMON MISTAKES AND CORRECT STRATEGIES",
                                f"When {named} is rejected as invalid: choose an action from the admissible list "
                                "and copy its exact wording instead of rephrasing it."))
    for action, _ in trajectory.repeats()[:1]:
        step = next((abstract_action(s.action, s.kind, trajectory.goal) for s in trajectory.steps
                     if s.action == action), action)
        insights.append(Insight("TROUBLESHOOTING AND PITFALLS",
                                f"When '{step}' brings the same observation again: do not repeat it; take an action "
                                "of another kind that the goal needs."))
    if trajectory.longest_stall() >= 4:
        insights.append(Insight("PROBLEM-SOLVING HEURISTICS AND WORKFLOWS",
                                "When several steps in a row bring nothing new: re-read the goal, list the objects it "
                                "names, and act on one you have not acted on yet."))
    for kind in trajectory.failures()[:1]:
        insights.append(Insight("TROUBLESHOOTING AND PITFALLS",
                                f"When the environment reports '{kind}': read its message and fix that call before "
                                "doing anything else."))
    if trajectory.stopped_early:
        insights.append(Insight("VERIFICATION CHECKLIST",
                                "Before declaring the task done: check that an observation confirms it (a completion "
                                "message); until then keep acting on the goal."))
    completed = trajectory.completed if success is None else success
    if success is False and trajectory.completed:
        insights.append(Insight("VERIFICATION CHECKLIST",
                                "Before the final action: check every constraint the goal states (attributes, "
                                "options, amounts) against what you chose."))
    steps = trajectory.abstract_steps()
    if completed and steps:
        insights.append(Insight("STRATEGIES AND HARD RULES",
                                f"To complete a task that starts with '{steps[0]}': a sequence that worked was "
                                + " -> ".join(steps[:12]) + ("" if len(steps) <= 12 else " -> ...")
                                + "; fill its slots from the goal."))
    failed_verbs = {verb_of(a) for a in trajectory.invalid_actions()} | {verb_of(a) for a, _ in trajectory.repeats()}
    tags = {}
    for bullet in shown:
        quoted_verbs = {verb_of(quoted) for quoted in bullet.text.split("'")[1::2]}
        if bullet.section in WARNING_SECTIONS and quoted_verbs & failed_verbs:
            tags[bullet.id] = "harmful"  # it warns about an action that failed again all the same
        else:
            tags[bullet.id] = "helpful" if completed else "neutral"
    insights = list({i.text: i for i in insights}.values())  # two unknown verbs make one insight, not two
    return Reflection(insights[:limit] if limit else insights, tags)


REFLECTOR_SYSTEM = (
    "You are the reflector of ACE (Agentic Context Engineering). You read an agent's trajectory on a task and the "
    "playbook bullets it was shown. Diagnose what went wrong or right and write reusable insights, and tag each "
    "shown bullet as helpful, harmful or neutral for this trajectory. Sections: " + "; ".join(SECTIONS) + ". "
    'Answer with one JSON object: {"insights": [{"section": "...", "content": "..."}], '
    '"bullet_tags": [{"id": "...", "tag": "helpful|harmful|neutral"}]}.')
SECTION = {"type": "string", "enum": list(SECTIONS)}
REFLECTOR_SCHEMA = object_schema({
    "insights": array_schema(object_schema({"section": SECTION, "content": string_schema(300, 1)}), 4),
    "bullet_tags": array_schema(object_schema({"id": string_schema(40, 1),
                                               "tag": {"type": "string", "enum": list(TAGS)}}), 10),
}, optional=("bullet_tags",))


def model_reflection(judge: Judge, trajectory: Trajectory, shown: list[Bullet],
                     success: bool | None) -> Reflection | None:
    """The model reflector (None when the reply is unusable)."""
    outcome = "" if success is None else \
        f"\nEnvironment feedback: the task was {'solved' if success else 'not solved'}."
    bullets = "\n".join(b.line() for b in shown) or "(none)"
    user = (f"Goal: {trajectory.goal}\nTrajectory ({trajectory.summary()}):\n{trajectory.text()}{outcome}\n"
            f"Playbook bullets shown:\n{bullets}")
    answer = judge.ask("ace.reflector", REFLECTOR_SYSTEM, user, REFLECTOR_SCHEMA)
    if not answer:
        return None
    insights = [Insight(str(i.get("section", "OTHERS")).upper().strip(), one_line(i.get("content", "")))
                for i in answer["insights"] if isinstance(i, dict) and str(i.get("content", "")).strip()]
    shown_ids = {b.id for b in shown}
    tags = {str(t.get("id")): str(t.get("tag")) for t in answer.get("bullet_tags") or []
            if isinstance(t, dict) and str(t.get("id")) in shown_ids and t.get("tag") in TAGS}
    return Reflection(insights, tags, by="model")


# -- the curator ----------------------------------------------------------------------------------------------------


def counter_operations(tags: dict[str, str]) -> list[dict]:
    """The counter updates of the reflector's tags (neutral changes nothing)."""
    return [{"op": "update", "id": bullet_id, tag: 1} for bullet_id, tag in sorted(tags.items()) if tag != "neutral"]


def rule_curation(reflection: Reflection) -> list[dict]:
    """The rule curator: the tags' counter updates, then one ADD per insight (merging decides update or repeat)."""
    return counter_operations(reflection.tags) + [{"op": "add", "section": i.section, "text": i.text}
                                                  for i in reflection.insights]


CURATOR_SYSTEM = (
    "You are the curator of ACE (Agentic Context Engineering). Given the current playbook and a reflection, output "
    "only the delta operations that improve the playbook: ADD new insights that are not already there, UPDATE a "
    "bullet whose text should change, REMOVE a bullet that is wrong or misleading. Never rewrite the whole playbook. "
    'Answer with one JSON object: {"operations": [{"type": "ADD", "section": "...", "content": "..."}, '
    '{"type": "UPDATE", "id": "...", "content": "..."}, {"type": "REMOVE", "id": "..."}]}.')
CURATOR_SCHEMA = object_schema({"operations": array_schema(object_schema({
    "type": {"type": "string", "enum": ["ADD", "UPDATE", "REMOVE"]},
    "section": SECTION, "id": string_schema(40, 1), "content": string_schema(300, 1),
}, optional=("section", "id", "content")), 6)})


def model_curation(judge: Judge, playbook: AcePlaybook, reflection: Reflection) -> list[dict] | None:
    """The model curator's operations, after the tags' counter updates (None when the reply is unusable)."""
    insights = "\n".join(f"- [{i.section}] {i.text}" for i in reflection.insights) or "(none)"
    user = f"Current playbook:\n{playbook.text() or '(empty)'}\nReflection insights:\n{insights}"
    answer = judge.ask("ace.curator", CURATOR_SYSTEM, user, CURATOR_SCHEMA)
    if not answer:
        return None
    operations = counter_operations(reflection.tags)
    for op in answer["operations"]:
        if not isinstance(op, dict):
            continue
        kind, content = str(op.get("type", "")).upper(), one_line(op.get("content", ""))
        if kind == "ADD" and content:
            operations.append({"op": "add", "section": str(op.get("section", "OTHERS")).upper().strip(),
                               "text": content})
        elif kind == "UPDATE" and op.get("id") and content:
            operations.append({"op": "update", "id": str(op["id"]), "text": content})
        elif kind == "REMOVE" and op.get("id"):
            operations.append({"op": "remove", "id": str(op["id"])})
    return operations


def prune_operations(playbook: AcePlaybook, harmful_at: int) -> list[dict]:
    """REMOVE each bullet tagged harmful at least `harmful_at` times and more often than helpful (0: never)."""
    if harmful_at <= 0:
        return []
    return [{"op": "remove", "id": b.id, "why": f"harmful={b.harmful} > helpful={b.helpful}"}
            for b in playbook.bullets if b.harmful >= harmful_at and b.harmful > b.helpful]


# -- the episode plugin ---------------------------------------------------------------------------------------------


class AcePlugin(MemoryBaseline):
    """ACE for one episode: the playbook as a standing note; reflect and curate when the episode ends."""

    NAME, PARAMS = NAME, AceParams
    MEMORY_PARAM = "ace_playbook"

    def __init__(self, params: AceParams | Mapping[str, Any]) -> None:
        super().__init__(params)
        self.shown: list[Bullet] = []
        self.start: EpisodeStart | None = None

    def read_memory(self, path: Path) -> AcePlaybook:
        """Read an ACE playbook file."""
        return AcePlaybook.load(path)

    def begin(self, start: EpisodeStart) -> None:
        """Render the playbook into the note, within the budget; remember the bullets shown."""
        self.start = start
        self.memory = memory_for(start, ACE_PLAYBOOK, str(self.p["ace_playbook"]), "ace_playbook")
        playbook = self._playbook()
        self.note, shown_ids = playbook.render(int(self.p["ace_budget"]))
        self.shown = [b for b in playbook.bullets if b.id in shown_ids]

    def _playbook(self) -> AcePlaybook:
        """The playbook in the memory (empty without one)."""
        return AcePlaybook.from_text(self.memory.read_text(), self.memory.location) if self.memory else AcePlaybook()

    def learn(self, end: EpisodeEnd) -> None:
        """Online: reflect on the episode and curate the playbook."""
        if self.p["ace_mode"] != "online" or self.memory is None or end.status == "error" or self.start is None:
            return
        # outcome feedback is the env's success signal (the paper's ground truth / execution feedback), by choice
        success = end.won if self.p["ace_feedback"] == "outcome" else None
        reflection = None
        if self.judge.configured:
            reflection = model_reflection(self.judge, self.trajectory, self.shown, success)
        if reflection is None:
            reflection = rule_reflection(self.trajectory, self.shown, success, int(self.p["ace_max_insights"]))
        self.curate(reflection, end)

    def curate(self, reflection: Reflection, end: EpisodeEnd) -> list[dict]:
        """Merge the reflection's deltas into the playbook file, once per (run, episode, attempt); return them."""
        assert self.memory is not None
        ids = end.ids
        key = episode_key(ids)
        log = self.memory.sibling(ACE_DELTAS)
        with self.memory.locked():
            if written_before(log, key):
                return []  # a replayed episode: its deltas are in already
            playbook = self._playbook()
            operations = model_curation(self.judge, playbook, reflection) if self.judge.configured else None
            curated_by = "model" if operations is not None else "rules"
            if operations is None:
                operations = rule_curation(reflection)
            done = playbook.apply(operations, float(self.p["ace_dedupe"]))
            done += playbook.apply(prune_operations(playbook, int(self.p["ace_prune_harmful"])), 1.0)
            playbook.save(self.memory)
            log.append({**key, "task": ids.task_id, "at": time.time(), "reflector": reflection.by,
                        "curator": curated_by, "operations": done})
        return done
