"""Build the playground's own AppWorld task set, then check it.

Official AppWorld task data cannot be downloaded here, so this script makes a small task
set with AppWorld's own models (no AppWorld code or data is copied; it only calls the
installed ``appworld`` package). Run it with the AppWorld virtual environment's python:

    APPWORLD_ROOT=/some/root /path/to/appworld-venv/bin/python envs/appworld/build_tasks.py

The tasks, and the one deterministic world they share, are data: ``catalogue.yaml`` next to
this script. The world is built once in memory and saved once per task. Under
``$APPWORLD_ROOT/data`` it writes ``api_docs/{standard,function_calling}/<app>.json``
(from the installed apps), ``tasks/<id>/`` for every task in AppWorld's layout (``specs.json``,
``dbs/``, ``ground_truth/`` whose ``evaluation.py`` is ``evaluation.py.txt``, the same
data-driven evaluator for every task, reading the task's ``private_data.json``), plus the
playground's own ``playground.json`` (apps, solution cells, the lookup cell and its
"skipped lookup" variant), and ``datasets/playground.txt`` (the task ids).

After building, every task is checked in-process with AppWorld (unless ``--no-check``):
the solution must pass ``evaluate()``, a no-op (only ``complete_task(answer=None)``) must
fail, and the solution with its lookup cell replaced by the skipped-lookup variant must
fail. The script exits with status 1 if any expectation is not met. docs/envs/appworld.md
describes the task set.

Usage:
    build_tasks.py [--root PATH] [--only TASK_ID] [--no-check | --check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOGUE = os.path.join(HERE, "catalogue.yaml")
EVALUATION_PY = os.path.join(HERE, "evaluation.py.txt")
TASK_DATETIME = "2023-05-18T12:00:00"  # the "now" of every task
BUILD_DATETIME = "2023-05-18T08:00:00"  # default created_at of records made at build time
DATASET_NAME = "playground"
CHECK_EXPERIMENT_PREFIX = "playground_check"


def clock() -> float:
    """Wall-clock seconds; immune to the time freezing that AppWorld uses (freezegun)."""
    return os.times().elapsed


def at(day: str, hour: int = 10) -> datetime:
    """A fixed datetime on a 2023 day given as 'MM-DD'."""
    return datetime.fromisoformat(f"2023-{day}T{hour:02d}:00:00")


def load_catalogue(path: str = CATALOGUE) -> dict[str, Any]:
    """The catalogue: {"world": the shared records, "tasks": the task entries, ...}."""
    import yaml  # AppWorld depends on PyYAML, so its venv has it

    with open(path) as file:
        return yaml.safe_load(file)


# --------------------------------------------------------------------------------------
# The shared world
# --------------------------------------------------------------------------------------


def populate_world(mc: Any, world: dict[str, Any]) -> dict[str, int]:
    """Add the catalogue's shared records to the model collection; return named ids of key records."""
    ids: dict[str, int] = {}
    supervisor, passwords, people = world["supervisor"], world["passwords"], world["people"]

    def add(key: str | None, record: Any) -> Any:
        record.save()
        if key:
            ids[key] = record.id
        return record

    # Supervisor and people (admin + supervisor apps).
    add("admin:joyce", mc.admin.MainUser(**supervisor, **world["supervisor_extra"]))
    for key, (first, last, email, phone, birthday, sex) in people.items():
        add(f"admin:{key}", mc.admin.MainUser(first_name=first, last_name=last, email=email,
                                              phone_number=phone, birthday=birthday, sex=sex))
    sup = add("supervisor", mc.supervisor.Supervisor(**supervisor, **world["supervisor_extra"]))
    for app, password in passwords.items():
        add(None, mc.supervisor.AccountPassword(supervisor_id=sup.id, account_name=app, password=password))

    def app_user(app: str, key: str, **extra: Any) -> Any:
        """Create the account of a person (or of 'joyce') in an email-login app."""
        if key == "joyce":
            first, last, email = supervisor["first_name"], supervisor["last_name"], supervisor["email"]
            password = passwords[app]
        else:
            first, last, email = people[key][:3]
            password = f"{key}-{app}-pass"
        return add(f"{app}:{key}", mc[app].User(first_name=first, last_name=last, email=email,
                                                 password=password, verified=True, **extra))

    # Venmo: friends, a non-friend namesake, transactions, payment requests.
    venmo, rows = mc.venmo, world["venmo"]
    for key, balance in rows["balances"].items():
        app_user("venmo", key, venmo_balance=balance)
    for key in rows["friends"]:
        add(None, venmo.Friendship(user_id=ids["venmo:joyce"], friend_id=ids[f"venmo:{key}"],
                                   created_at=at(rows["friends_since"])))
    for sender, receiver, amount, note, day in rows["transactions"]:
        add(None, venmo.Transaction(sender_id=ids[f"venmo:{sender}"], receiver_id=ids[f"venmo:{receiver}"],
                                    amount=amount, description=note, created_at=at(day), updated_at=at(day)))
    for key, sender, amount, note, day, approved in rows["requests"]:
        add(f"request:{key}", venmo.PaymentRequest(sender_id=ids[f"venmo:{sender}"], receiver_id=ids["venmo:joyce"],
                                                   amount=amount, description=note, created_at=at(day),
                                                   updated_at=at(day), approved_at=at(day, 18) if approved else None))

    # Simple Note: each owner's account, then their notes.
    for owner, notes in world["simple_note"].items():
        user = app_user("simple_note", owner)
        for key, title, content, tags, day in notes:
            dates = {"created_at": at(day), "updated_at": at(day)} if day else {}
            record = mc.simple_note.Note(user_id=user.id, title=title, content=content, tags=tags, pinned=False,
                                         **dates)
            add(f"note:{key}" if key else None, record)

    # Todoist: accounts, projects (each with its owner as collaborator), tasks.
    todo, rows = mc.todoist, world["todoist"]
    for key in rows["users"]:
        app_user("todoist", key)
    for key, owner, name, is_inbox in rows["projects"]:
        project = add(f"project:{key}", todo.Project(user_id=ids[f"todoist:{owner}"], name=name, is_inbox=is_inbox))
        add(None, todo.ProjectCollaboratorLink(project_id=project.id, user_id=ids[f"todoist:{owner}"]))
    for key, project, owner, title, priority, done in rows["tasks"]:
        project_id = ids[f"project:{project}"]
        order = sum(1 for t in todo.Task.all() if t.project_id == project_id)
        add(f"todo:{key}", todo.Task(project_id=project_id, user_id=ids[f"todoist:{owner}"], title=title,
                                     priority=priority, is_completed=done, order_index=order))

    # Phone: Joyce's contacts and alarms (phone logs in by phone number).
    joyce_phone = add("phone:joyce", mc.phone.User(first_name=supervisor["first_name"],
                                                   last_name=supervisor["last_name"],
                                                   phone_number=supervisor["phone_number"],
                                                   password=passwords["phone"]))
    for key, relationships in world["phone"]["contacts"].items():
        first, last, email, phone, birthday, _ = people[key]
        add(f"contact:{key}", mc.phone.Contact(user_id=joyce_phone.id, first_name=first, last_name=last,
                                                email=email, phone_number=phone,
                                                relationships=relationships, birthday=birthday))
    for key, time, days, label in world["phone"]["alarms"]:
        add(f"alarm:{key}", mc.phone.Alarm(user_id=joyce_phone.id, time=time, repeat_days=days, label=label,
                                           enabled=True, snooze_minutes=10, vibration=True))

    # Spotify: accounts, artists, songs, playlists.
    spotify, rows = mc.spotify, world["spotify"]
    for key in rows["users"]:
        app_user("spotify", key)
    for key, (name, genre) in rows["artists"].items():
        add(f"artist:{key}", spotify.Artist(name=name, genre=genre))
    for key, title, artist, seconds, released in rows["songs"]:
        add(f"song:{key}", spotify.Song(title=title, artist_ids=[ids[f"artist:{artist}"]], duration=seconds,
                                        release_date=datetime.fromisoformat(released),
                                        genre=spotify.Artist.by_id(ids[f"artist:{artist}"]).genre))
    for key, owner, title, public, songs in rows["playlists"]:
        playlist = add(f"playlist:{key}", spotify.Playlist(title=title, user_id=ids[f"spotify:{owner}"],
                                                           is_public=public))
        for song in songs:
            add(None, spotify.PlaylistSong(playlist_id=playlist.id, song_id=ids[f"song:{song}"]))
    return ids


# --------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------


@dataclass
class Check:
    """Expect exactly one `kind` (added/updated/removed) record of `model` with these fields.

    Each field is (name, op, value); op is "==" (exact), "text" (normalized text),
    "date" (YYYY-MM-DD of a datetime) or "set" (not None; value ignored).
    """

    model: str
    kind: str
    fields: list[tuple[str, str, Any]]

    def requirement(self) -> str:
        """Human-readable requirement line (also the key in test_data.json)."""
        shown = {"==": "==", "text": "~=", "date": "on date", "set": "is set"}
        parts = [f"{name} {shown[op]}" + ("" if op == "set" else f" {value!r}")
                 for name, op, value in self.fields]
        return f"assert exactly 1 {self.kind} {self.model} record with " + ", ".join(parts)


@dataclass
class TaskDef:
    """One task: instruction, ground truth (answer, model changes, record checks) and solution."""

    id: str
    apps: list[str]
    kind: str  # "action" or "question"
    instruction: str
    cells: list[str]  # cells after the login cell; the login cell is generated from `apps`
    answer: Any = None
    changed_models: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    lookup_cell: int | None = None  # index into the full cell list (login cell is 0)
    skipped_lookup: str | None = None
    difficulty: int = 1

    def __post_init__(self) -> None:
        if self.skipped_lookup is not None:
            self.skipped_lookup = self.skipped_lookup.strip()

    @property
    def solution(self) -> list[str]:
        """All solution cells, the login cell first."""
        return [login_cell(self.apps)] + [code.strip() for code in self.cells]


def login_cell(apps: list[str]) -> str:
    """Cell 0 of every solution: read the supervisor's passwords and log in to `apps`."""
    lines = [
        "profile = apis.supervisor.show_profile()",
        'passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}',
    ]
    for app in apps:
        username = 'profile["phone_number"]' if app == "phone" else 'profile["email"]'
        lines.append(f'{app}_token = apis.{app}.login(username={username}, '
                     f'password=passwords["{app}"])["access_token"]')
    lines.append(f'print("logged in to: {", ".join(apps)}")')
    return "\n".join(lines)


def define_tasks(entries: list[dict[str, Any]], ids: dict[str, int]) -> list[TaskDef]:
    """The catalogue's tasks, a check value {id: KEY} replaced by `ids[KEY]` (see populate_world)."""
    def check(entry: dict[str, Any]) -> Check:
        fields = [(name, op, ids[value["id"]] if isinstance(value, dict) else value)
                  for name, op, value in entry["fields"]]
        return Check(entry["model"], entry["kind"], fields)

    return [TaskDef(**{**entry, "checks": [check(c) for c in entry.get("checks", [])]}) for entry in entries]


# --------------------------------------------------------------------------------------
# Ground truth files
# --------------------------------------------------------------------------------------


def changed_models_requirement(changed_models: list[str]) -> str:
    """Requirement line for the changed-models test."""
    if not changed_models:
        return "assert no models changed (notifications ignored)."
    return "assert changed models are exactly " + ", ".join(sorted(changed_models)) + " (notifications ignored)."


def write_json(path: str, data: Any) -> None:
    """Write JSON with a stable layout."""
    with open(path, "w") as file:
        json.dump(data, file, indent=2)
        file.write("\n")


def write_ground_truth(task: TaskDef, gt_dir: str) -> None:
    """Write AppWorld's ground_truth/ files for a task."""
    os.makedirs(gt_dir, exist_ok=True)
    requirements = ["assert answers match.", changed_models_requirement(task.changed_models)]
    requirements += [check.requirement() for check in task.checks]
    code = "\n".join(task.solution)
    write_json(os.path.join(gt_dir, "metadata.json"), {
        "mode": "minimal",
        "difficulty": task.difficulty,
        "num_apps": len(task.apps) + 1,  # + supervisor
        "num_apis": len({part.split("(")[0] for part in code.split("apis.")[1:]}),
        "num_api_calls": code.count("apis."),
        "num_solution_code_lines": len(code.splitlines()),
    })
    write_json(os.path.join(gt_dir, "public_data.json"), {"kind": task.kind, "apps": task.apps})
    write_json(os.path.join(gt_dir, "private_data.json"), {
        "changed_models": sorted(task.changed_models),
        "changed_models_requirement": requirements[1],
        "record_checks": [
            {"requirement": check.requirement(), "model": check.model, "kind": check.kind,
             "fields": [list(f) for f in check.fields]}
            for check in task.checks
        ],
    })
    write_json(os.path.join(gt_dir, "answer.json"), task.answer)
    # A no-op run passes the answer test of action tasks and the no-change test of questions.
    no_op_passes = [task.answer is None, not task.changed_models] + [False] * len(task.checks)
    write_json(os.path.join(gt_dir, "test_data.json"), [
        {"requirement": r, "label": "no_op_pass" if passes else "no_op_fail"}
        for r, passes in zip(requirements, no_op_passes)])
    shutil.copyfile(EVALUATION_PY, os.path.join(gt_dir, "evaluation.py"))


# --------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------


def build_api_docs(data_dir: str) -> dict[str, list[dict]]:
    """Write data/api_docs/{standard,function_calling}/<app>.json; return the standard docs per app."""
    from appworld.api_docs import prepare_api_docs
    from appworld.apps import get_all_apps

    standard: dict[str, list[dict]] = {}
    for fmt in ("standard", "function_calling"):
        os.makedirs(os.path.join(data_dir, "api_docs", fmt), exist_ok=True)
    for app in get_all_apps(skip_admin=True):
        docs = prepare_api_docs(app, format="standard")
        standard[app] = docs
        write_json(os.path.join(data_dir, "api_docs", "standard", app + ".json"),
                   {d["api_name"]: {**d, "canary_string": "self-made"} for d in docs})
        write_json(os.path.join(data_dir, "api_docs", "function_calling", app + ".json"),
                   prepare_api_docs(app, format="function_calling"))
    return standard


def build(root: str, only: str | None) -> list[str]:
    """Build api docs and tasks under root; return the ids of the tasks built."""
    from appworld.apps import get_all_apps
    from appworld.apps.api_lib import set_local_date_and_time, unset_local_date_and_time
    from appworld.collections.models import ModelCollection
    from appworld.common.constants import DB_VERSION

    data_dir = os.path.join(root, "data")
    catalogue = load_catalogue()
    t0 = clock()
    api_docs = build_api_docs(data_dir)
    print(f"api docs: {sum(len(d) for d in api_docs.values())} apis ({clock() - t0:.1f}s)")

    freezer = set_local_date_and_time(datetime.fromisoformat(BUILD_DATETIME))
    try:
        mc = ModelCollection.load(to_db_home_path=":memory:playground_build", load_apps=get_all_apps(),
                                  create_db=True)
        for docs in api_docs.values():
            for d in docs:
                mc.api_docs.ApiDoc(app_name_=d["app_name"], api_name=d["api_name"], path=d["path"],
                                   method=d["method"], description=d["description"],
                                   parameters=d["parameters"], response_schemas=d["response_schemas"]).save()
        ids = populate_world(mc, catalogue["world"])
        supervisor_task = mc.supervisor.Task(supervisor_id=ids["supervisor"], instruction="(placeholder)",
                                             answer=json.dumps("<<NOT_GIVEN>>"))
        supervisor_task.save()
        print(f"world built ({clock() - t0:.1f}s)")

        tasks = define_tasks(catalogue["tasks"], ids)
        if only:
            tasks = [task for task in tasks if task.id == only]
            if not tasks:
                raise SystemExit(f"unknown task id: {only}")
        for task in tasks:
            task_dir = os.path.join(data_dir, "tasks", task.id)
            shutil.rmtree(task_dir, ignore_errors=True)
            os.makedirs(task_dir)
            supervisor_task.instruction = task.instruction
            supervisor_task.save()
            mc.save(db_home_path=os.path.join(task_dir, "dbs"), format="full")
            write_json(os.path.join(task_dir, "specs.json"), {
                "instruction": task.instruction, "supervisor": catalogue["world"]["supervisor"],
                "datetime": TASK_DATETIME, "db_version": DB_VERSION})
            write_ground_truth(task, os.path.join(task_dir, "ground_truth"))
            write_json(os.path.join(task_dir, "playground.json"), {
                "apps": task.apps,
                "solution": task.solution,
                "lookup_cell": task.lookup_cell,
                "skipped_lookup": task.skipped_lookup,
                "login_cell": 0,
                "difficulty": task.difficulty,
            })
        mc.close()
    finally:
        unset_local_date_and_time(freezer)

    all_ids = [task.id for task in define_tasks(catalogue["tasks"], ids)]
    os.makedirs(os.path.join(data_dir, "datasets"), exist_ok=True)
    listed = [tid for tid in all_ids if os.path.exists(os.path.join(data_dir, "tasks", tid, "specs.json"))]
    with open(os.path.join(data_dir, "datasets", DATASET_NAME + ".txt"), "w") as file:
        file.write("\n".join(listed) + "\n")
    print(f"built {len(tasks)} task(s) in {clock() - t0:.1f}s; dataset {DATASET_NAME}: {len(listed)} ids")
    return [task.id for task in tasks]


# --------------------------------------------------------------------------------------
# Check
# --------------------------------------------------------------------------------------


def run_cells(task_id: str, cells: list[str], experiment: str) -> tuple[bool, list[str], list[str]]:
    """Run cells in one AppWorld shell; return (success, failed requirements, cell outputs)."""
    from appworld import AppWorld

    with AppWorld(task_id=task_id, experiment_name=experiment) as world:
        outputs = [world.execute(code) for code in cells]
        report = world.evaluate().to_dict()
    return report["success"], [f["requirement"] for f in report["failures"]], outputs


def check(root: str, task_ids: list[str], verbose: bool = False) -> bool:
    """Run solution / no-op / skipped-lookup variants of each task; print one line per task."""
    ok_all = True
    t0 = clock()
    for task_id in task_ids:
        with open(os.path.join(root, "data", "tasks", task_id, "playground.json")) as file:
            spec = json.load(file)
        variants = {
            "solution": (spec["solution"], True),
            "noop": (["apis.supervisor.complete_task(answer=None)"], False),
        }
        if spec["lookup_cell"] is not None:
            skipped = list(spec["solution"])
            skipped[spec["lookup_cell"]] = spec["skipped_lookup"]
            variants["skipped"] = (skipped, False)
        results, problems = [], []
        for name, (cells, expected) in variants.items():
            success, failures, outputs = run_cells(task_id, cells, f"{CHECK_EXPERIMENT_PREFIX}_{name}")
            results.append(f"{name}={'pass' if success else 'fail'}")
            if success != expected:
                problems.append(name)
                if name == "solution" or verbose:
                    for index, output in enumerate(outputs):
                        print(f"    [{name} cell {index}] {output[:600]}")
                    print(f"    [{name}] failed requirements: {failures}")
        if "skipped" not in variants:
            results.append("skipped=n/a")
        ok = not problems
        ok_all &= ok
        print(f"{task_id}  " + "  ".join(f"{r:<14}" for r in results) + ("OK" if ok else f"BAD {problems}"))
    print(f"checked {len(task_ids)} task(s) in {clock() - t0:.1f}s: {'all OK' if ok_all else 'FAILURES'}")
    return ok_all


def main() -> None:
    """Parse arguments, build and/or check."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.environ.get("APPWORLD_ROOT"),
                        help="AppWorld root (default: $APPWORLD_ROOT)")
    parser.add_argument("--only", help="build/check only this task id")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--no-check", action="store_true", help="build only")
    mode.add_argument("--check", action="store_true", help="check only (tasks must already be built)")
    parser.add_argument("--verbose", action="store_true", help="show cell outputs of every unexpected result")
    args = parser.parse_args()
    if not args.root:
        parser.error("give --root or set APPWORLD_ROOT")
    root = os.path.abspath(args.root)
    os.environ["APPWORLD_ROOT"] = root  # appworld reads it at import time
    os.makedirs(root, exist_ok=True)

    t0 = clock()
    if args.check:
        listed = os.path.join(root, "data", "datasets", DATASET_NAME + ".txt")
        with open(listed) as file:
            task_ids = [line.strip() for line in file if line.strip()]
        if args.only:
            task_ids = [args.only]
    else:
        task_ids = build(root, args.only)
    ok = True
    if not args.no_check:
        ok = check(root, task_ids, verbose=args.verbose)
    print(f"total time {clock() - t0:.1f}s")
    # Everything is written and closed by now. Skip the interpreter's teardown of AppWorld's
    # objects (in-memory databases, shells), which takes several seconds per world checked.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
