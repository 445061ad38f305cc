"""Build the playground's own AppWorld task set, then check it.

Official AppWorld task data cannot be downloaded here, so this script makes a small task
set with AppWorld's own models (no AppWorld code or data is copied; it only calls the
installed ``appworld`` package). Run it with the AppWorld virtual environment's python:

    APPWORLD_ROOT=/some/root /path/to/appworld-venv/bin/python envs/appworld/build_tasks.py

What it writes under ``$APPWORLD_ROOT/data``:

* ``api_docs/standard/<app>.json`` and ``api_docs/function_calling/<app>.json``,
  generated from the installed apps.
* ``tasks/pgNN_1/`` for every task in ``define_tasks()``, in AppWorld's layout:
  ``specs.json``, ``dbs/`` (one SQLite file per app) and ``ground_truth/``
  (``metadata.json``, ``public_data.json``, ``private_data.json``, ``answer.json``,
  ``test_data.json``, ``evaluation.py``), plus the playground's own ``playground.json``
  (apps, solution cells, which cell logs in, which cell looks something up, and a
  "skipped lookup" variant of that cell that hard-codes a plausible but wrong value).
* ``datasets/playground.txt``: the task ids, one per line.

All tasks share one deterministic world (a supervisor, Joyce Weaver, with accounts on
venmo, simple_note, todoist, phone and spotify, friends, notes, to-dos, contacts,
alarms, songs and playlists, plus distractor records); they differ in their instruction
and ground truth. The world is built once in memory and saved once per task.

Every task's ``evaluation.py`` is the same data-driven AppWorld-style evaluator: it
checks the answer, ``models.changed_model_names()`` and ``models.changed_records(...)``
against the expectations stored in that task's ``private_data.json``.

After building, every task is checked in-process with AppWorld (unless ``--no-check``):
the solution must pass ``evaluate()``, a no-op (only ``complete_task(answer=None)``) must
fail, and the solution with its lookup cell replaced by the skipped-lookup variant must
fail. The script exits with status 1 if any expectation is not met.

Usage:
    build_tasks.py [--root PATH] [--only TASK_ID] [--no-check | --check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

TASK_DATETIME = "2023-05-18T12:00:00"  # the "now" of every task
BUILD_DATETIME = "2023-05-18T08:00:00"  # default created_at of records made at build time
DATASET_NAME = "playground"
CHECK_EXPERIMENT_PREFIX = "playground_check"

SUPERVISOR = {
    "first_name": "Joyce",
    "last_name": "Weaver",
    "email": "joyce.weaver@example.com",
    "phone_number": "3155673041",
}
SUPERVISOR_EXTRA = {"birthday": "1985-02-11", "sex": "female"}
PASSWORDS = {
    "venmo": "jw-venmo-8817",
    "simple_note": "jw-notes-2231",
    "todoist": "jw-todo-5510",
    "phone": "jw-phone-7702",
    "spotify": "jw-spot-9143",
}

# Other people: key -> (first, last, email, phone, birthday, sex).
# First names must be unique (admin.MainUser is unique by first name).
PEOPLE = {
    "stacy": ("Stacy", "Kim", "stacy.kim@example.com", "2065550101", "1991-06-03", "female"),
    "priya": ("Priya", "Patel", "priya.patel@example.com", "2065550102", "1989-01-22", "female"),
    "dan": ("Dan", "Lopez", "dan.lopez@example.com", "2065550103", "1986-09-09", "male"),
    "olivia": ("Olivia", "Grant", "olivia.grant@example.com", "2065550104", "1979-12-01", "female"),
    "mike": ("Mike", "Chen", "mchen.dev@example.com", "2065550105", "1990-04-17", "male"),
    "michael": ("Michael", "Brown", "michael.brown@example.com", "2065550106", "1975-07-30", "male"),
    "nina": ("Nina", "Weaver", "nina.weaver@example.com", "3155550107", "1990-08-14", "female"),
    "ben": ("Ben", "Weaver", "ben.weaver@example.com", "3155550108", "1987-11-30", "male"),
    "rosa": ("Rosa", "Weaver", "rosa.weaver@example.com", "3155550199", "1958-03-02", "female"),
}


def clock() -> float:
    """Wall-clock seconds; immune to the time freezing that AppWorld uses (freezegun)."""
    return os.times().elapsed


def at(day: str, hour: int = 10) -> datetime:
    """A fixed datetime on a 2023 day given as 'MM-DD'."""
    return datetime.fromisoformat(f"2023-{day}T{hour:02d}:00:00")


# --------------------------------------------------------------------------------------
# The shared world
# --------------------------------------------------------------------------------------


def populate_world(mc: Any) -> dict[str, int]:
    """Add the shared records to the model collection; return named ids of key records."""
    ids: dict[str, int] = {}

    def add(key: str | None, record: Any) -> Any:
        record.save()
        if key:
            ids[key] = record.id
        return record

    # Supervisor and people (admin + supervisor apps).
    add("admin:joyce", mc.admin.MainUser(**SUPERVISOR, **SUPERVISOR_EXTRA))
    for key, (first, last, email, phone, birthday, sex) in PEOPLE.items():
        add(f"admin:{key}", mc.admin.MainUser(first_name=first, last_name=last, email=email,
                                              phone_number=phone, birthday=birthday, sex=sex))
    sup = add("supervisor", mc.supervisor.Supervisor(**SUPERVISOR, **SUPERVISOR_EXTRA))
    for app, password in PASSWORDS.items():
        add(None, mc.supervisor.AccountPassword(supervisor_id=sup.id, account_name=app,
                                                password=password))

    def app_user(app: str, key: str, **extra: Any) -> Any:
        """Create the account of a person (or of 'joyce') in an email-login app."""
        if key == "joyce":
            first, last, email = SUPERVISOR["first_name"], SUPERVISOR["last_name"], SUPERVISOR["email"]
            password = PASSWORDS[app]
        else:
            first, last, email = PEOPLE[key][:3]
            password = f"{key}-{app}-pass"
        return add(f"{app}:{key}", mc[app].User(first_name=first, last_name=last, email=email,
                                                 password=password, verified=True, **extra))

    # Venmo: friends, a non-friend namesake, transactions, payment requests.
    venmo = mc.venmo
    joyce = app_user("venmo", "joyce", venmo_balance=500.0)
    for key in ("stacy", "priya", "dan", "olivia", "mike", "michael", "nina"):
        app_user("venmo", key, venmo_balance=100.0)
    for key in ("stacy", "priya", "dan", "olivia", "mike", "nina"):  # not michael
        add(None, venmo.Friendship(user_id=joyce.id, friend_id=ids[f"venmo:{key}"],
                                   created_at=at("01-15")))
    for sender, receiver, amount, note, day in [
        ("joyce", "dan", 12.50, "coffee", "04-20"),
        ("joyce", "mike", 20.00, "lunch", "04-28"),
        ("joyce", "stacy", 35.00, "internet bill", "05-01"),
        ("joyce", "dan", 30.00, "concert tickets", "05-02"),
        ("dan", "joyce", 15.00, "gas money", "05-05"),
        ("priya", "joyce", 50.00, "birthday gift", "05-08"),
        ("joyce", "dan", 7.25, "snacks", "05-12"),
    ]:
        add(None, venmo.Transaction(sender_id=ids[f"venmo:{sender}"], receiver_id=ids[f"venmo:{receiver}"],
                                    amount=amount, description=note, created_at=at(day),
                                    updated_at=at(day)))
    for key, sender, amount, note, day, approved in [
        ("request:dan_movie", "dan", 18.00, "movie tickets", "05-10", False),
        ("request:priya_concert", "priya", 45.00, "concert", "04-01", True),
        ("request:priya_groceries", "priya", 27.50, "groceries", "05-15", False),
    ]:
        add(key, venmo.PaymentRequest(sender_id=ids[f"venmo:{sender}"], receiver_id=joyce.id,
                                      amount=amount, description=note, created_at=at(day),
                                      updated_at=at(day),
                                      approved_at=at(day, 18) if approved else None))

    # Simple Note: Joyce's notes first (so note 1 is hers), then another user's namesake note.
    joyce_notes = app_user("simple_note", "joyce")
    for key, title, content, tags in [
        ("note:office_wifi", "Office Wifi", "Network: ACME-Guest\nPassword: bluebird77", ["wifi", "work"]),
        ("note:grocery", "Grocery List", "eggs\nbread\nspinach", ["shopping"]),
        ("note:home_wifi", "Home Wifi", "Network: Weaver-Home\nPassword: sunflower42", ["wifi", "home"]),
        ("note:dinner", "Dinner split",
         "Dinner at Luigi's on May 12, total $97.20.\nOlivia owes: 32.40\nDan owes: 29.10\nMe: 35.70",
         ["money"]),
        ("note:books", "Book recommendations", "Project Hail Mary\nThe Overstory", ["books"]),
    ]:
        add(key, mc.simple_note.Note(user_id=joyce_notes.id, title=title, content=content, tags=tags,
                                     pinned=False, created_at=at("05-03"), updated_at=at("05-03")))
    nina_notes = app_user("simple_note", "nina")
    add(None, mc.simple_note.Note(user_id=nina_notes.id, title="Grocery List", content="apples\nrice",
                                  tags=["shopping"], pinned=False))

    # Todoist: Inbox (project 1), Work, Personal; Dan has his own "Personal" project.
    todo = mc.todoist
    joyce_todo = app_user("todoist", "joyce")
    dan_todo = app_user("todoist", "dan")
    for key, owner, name, is_inbox in [
        ("project:inbox", joyce_todo, "Inbox", True),
        ("project:work", joyce_todo, "Work", False),
        ("project:personal", joyce_todo, "Personal", False),
        ("project:dan_personal", dan_todo, "Personal", False),
    ]:
        project = add(key, todo.Project(user_id=owner.id, name=name, is_inbox=is_inbox))
        add(None, todo.ProjectCollaboratorLink(project_id=project.id, user_id=owner.id))
    for key, project, owner, title, priority, done in [
        ("todo:atomic_habits", "inbox", joyce_todo, "Read 'Atomic Habits'", "low", False),
        ("todo:q2_report", "work", joyce_todo, "Prepare Q2 report", "high", False),
        ("todo:slides", "work", joyce_todo, "Email Olivia the slides", "medium", False),
        ("todo:review", "work", joyce_todo, "Review pull requests", "medium", False),
        ("todo:expenses", "work", joyce_todo, "Submit expense report", "low", True),
        ("todo:car_insurance", "personal", joyce_todo, "Renew car insurance", "high", False),
        ("todo:plumber", "personal", joyce_todo, "Call plumber", "medium", True),
        ("todo:gift", "personal", joyce_todo, "Buy birthday gift for Nina", "medium", False),
        ("todo:dan_insurance", "dan_personal", dan_todo, "Renew car insurance", "high", False),
    ]:
        project_id = ids[f"project:{project}"]
        order = sum(1 for t in todo.Task.all() if t.project_id == project_id)
        add(key, todo.Task(project_id=project_id, user_id=owner.id, title=title, priority=priority,
                           is_completed=done, order_index=order))

    # Phone: Joyce's contacts and alarms (phone logs in by phone number).
    joyce_phone = add("phone:joyce", mc.phone.User(first_name=SUPERVISOR["first_name"],
                                                   last_name=SUPERVISOR["last_name"],
                                                   phone_number=SUPERVISOR["phone_number"],
                                                   password=PASSWORDS["phone"]))
    for key, relationships in [
        ("stacy", ["roommate", "friend"]), ("dan", ["friend"]), ("priya", ["friend"]),
        ("olivia", ["coworker", "manager"]), ("mike", ["coworker"]), ("nina", ["sister"]),
        ("ben", ["brother"]), ("rosa", ["mother"]),
    ]:
        first, last, email, phone, birthday, _ = PEOPLE[key]
        add(f"contact:{key}", mc.phone.Contact(user_id=joyce_phone.id, first_name=first, last_name=last,
                                                email=email, phone_number=phone,
                                                relationships=relationships, birthday=birthday))
    for key, clock, days, label in [
        ("alarm:wake_up", "06:30", ["monday", "tuesday", "wednesday", "thursday", "friday"], "Wake up"),
        ("alarm:gym", "18:00", ["monday", "wednesday", "friday"], "Gym"),
        ("alarm:medication", "21:00", None, "Medication"),
    ]:
        add(key, mc.phone.Alarm(user_id=joyce_phone.id, time=clock, repeat_days=days, label=label,
                                enabled=True, snooze_minutes=10, vibration=True))

    # Spotify: song 1 is a "Midnight ..." namesake; playlist 1 is Joyce's "Road Trip".
    spotify = mc.spotify
    joyce_spotify = app_user("spotify", "joyce")
    dan_spotify = app_user("spotify", "dan")
    for key, name, genre in [("kai", "Kai Moreno", "indie"), ("nova", "Nova Lane", "pop"),
                             ("drifters", "The Drifters Club", "rock")]:
        add(f"artist:{key}", spotify.Artist(name=name, genre=genre))
    for key, title, artist, seconds, released in [
        ("midnight_city", "Midnight City Lights", "kai", 214, "2021-03-05"),
        ("midnight_rain", "Midnight Rain", "nova", 187, "2022-10-21"),
        ("open_road", "Open Road", "drifters", 242, "2019-06-14"),
        ("golden_hour", "Golden Hour Drive", "nova", 201, "2020-08-07"),
        ("paper_planes", "Paper Planes Home", "kai", 233, "2018-11-02"),
    ]:
        add(f"song:{key}", spotify.Song(title=title, artist_ids=[ids[f"artist:{artist}"]], duration=seconds,
                                        release_date=datetime.fromisoformat(released),
                                        genre=spotify.Artist.by_id(ids[f"artist:{artist}"]).genre))
    for key, owner, title, public, songs in [
        ("playlist:road_trip", joyce_spotify, "Road Trip", False, ["open_road", "golden_hour"]),
        ("playlist:focus", joyce_spotify, "Focus", False, ["paper_planes"]),
        ("playlist:dan_road_trip", dan_spotify, "Road Trip Classics", True, ["open_road"]),
    ]:
        playlist = add(key, spotify.Playlist(title=title, user_id=owner.id, is_public=public))
        for song in songs:
            add(None, spotify.PlaylistSong(playlist_id=playlist.id, song_id=ids[f"song:{song}"]))
    return ids


# --------------------------------------------------------------------------------------
# Task definitions
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


def cell(code: str) -> str:
    """Dedent a code cell written as an indented triple-quoted string."""
    return textwrap.dedent(code).strip()


COMPLETE = "print(apis.supervisor.complete_task(answer=None))"
VENMO_PAYMENT = ["venmo.Transaction", "venmo.User"]


def define_tasks(ids: dict[str, int]) -> list[TaskDef]:
    """The task table. `ids` are the world's record ids (see populate_world)."""
    return [
        TaskDef(
            id="pg01_1", apps=["venmo"], kind="action",
            instruction='Send $25 to my friend Mike on Venmo with the note "pizza night".',
            cells=[
                cell("""
                    friends = apis.venmo.search_friends(query="Mike", access_token=venmo_token)
                    print(friends)
                    mike_email = [f["email"] for f in friends if f["first_name"] == "Mike"][0]
                    print(mike_email)
                """),
                cell("""
                    print(apis.venmo.create_transaction(receiver_email=mike_email, amount=25,
                                                        description="pizza night", access_token=venmo_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                mike_email = "mike.chen@example.com"  # guessed, not looked up
                print(mike_email)
            """),
            changed_models=VENMO_PAYMENT,
            checks=[Check("venmo.Transaction", "added", [
                ("sender_id", "==", ids["venmo:joyce"]), ("receiver_id", "==", ids["venmo:mike"]),
                ("amount", "==", 25.0), ("description", "text", "pizza night")])],
        ),
        TaskDef(
            id="pg02_1", apps=["venmo"], kind="action",
            instruction="Approve the pending Venmo payment request that Priya Patel sent me.",
            cells=[
                cell("""
                    requests = apis.venmo.show_received_payment_requests(status="pending", access_token=venmo_token)
                    print(requests)
                    request_id = [r["payment_request_id"] for r in requests
                                  if r["sender"]["name"] == "Priya Patel"][0]
                    print(request_id)
                """),
                cell("""
                    print(apis.venmo.approve_payment_request(payment_request_id=request_id,
                                                             access_token=venmo_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                request_id = 1  # guessed, not looked up
                print(request_id)
            """),
            changed_models=["venmo.PaymentRequest", *VENMO_PAYMENT],
            checks=[
                Check("venmo.PaymentRequest", "updated", [
                    ("id", "==", ids["request:priya_groceries"]), ("approved_at", "set", None)]),
                Check("venmo.Transaction", "added", [
                    ("receiver_id", "==", ids["venmo:priya"]), ("amount", "==", 27.5)]),
            ],
        ),
        TaskDef(
            id="pg03_1", apps=["venmo"], kind="question",
            instruction="How much money have I sent to Dan Lopez on Venmo in total? Answer with just the number.",
            cells=[
                cell("""
                    dan_email = apis.venmo.search_friends(query="Dan Lopez", access_token=venmo_token)[0]["email"]
                    sent = apis.venmo.show_transactions(user_email=dan_email, direction="sent", page_limit=20,
                                                        access_token=venmo_token)
                    print(sent)
                    total = round(sum(t["amount"] for t in sent), 2)
                    print(total)
                """),
                "print(apis.supervisor.complete_task(answer=total))",
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                total = 30.0  # guessed, not looked up
                print(total)
            """),
            answer=49.75,
        ),
        TaskDef(
            id="pg04_1", apps=["simple_note"], kind="action",
            instruction=('Create a note titled "Packing list" with the content '
                         '"passport, charger, sunscreen" and the tag "travel".'),
            cells=[
                cell("""
                    print(apis.simple_note.create_note(title="Packing list", content="passport, charger, sunscreen",
                                                       tags=["travel"], access_token=simple_note_token))
                """),
                COMPLETE,
            ],
            changed_models=["simple_note.Note"],
            checks=[Check("simple_note.Note", "added", [
                ("title", "text", "Packing list"), ("content", "text", "passport, charger, sunscreen"),
                ("tags", "==", ["travel"])])],
        ),
        TaskDef(
            id="pg05_1", apps=["simple_note"], kind="question",
            instruction='What is the wifi password written in my "Home Wifi" note?',
            cells=[
                cell("""
                    notes = apis.simple_note.search_notes(query="Home Wifi", access_token=simple_note_token)
                    print(notes)
                    note_id = [n["note_id"] for n in notes if n["title"] == "Home Wifi"][0]
                    print(note_id)
                """),
                cell("""
                    note = apis.simple_note.show_note(note_id=note_id, access_token=simple_note_token)
                    print(note["content"])
                    password = [line.split(":", 1)[1].strip() for line in note["content"].splitlines()
                                if line.startswith("Password:")][0]
                    print(password)
                """),
                "print(apis.supervisor.complete_task(answer=password))",
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                note_id = 1  # guessed, not looked up
                print(note_id)
            """),
            answer="sunflower42",
        ),
        TaskDef(
            id="pg06_1", apps=["simple_note"], kind="action",
            instruction='Add "oat milk" as a new line at the end of my "Grocery List" note.',
            cells=[
                cell("""
                    notes = apis.simple_note.search_notes(query="Grocery List", access_token=simple_note_token)
                    print(notes)
                    note_id = [n["note_id"] for n in notes if n["title"] == "Grocery List"][0]
                    print(note_id)
                """),
                cell("""
                    print(apis.simple_note.add_content_to_note(note_id=note_id, append_or_prepend="append",
                                                               added_content="oat milk",
                                                               access_token=simple_note_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                note_id = 1  # guessed, not looked up
                print(note_id)
            """),
            changed_models=["simple_note.Note"],
            checks=[Check("simple_note.Note", "updated", [
                ("id", "==", ids["note:grocery"]), ("content", "text", "eggs\nbread\nspinach\noat milk")])],
        ),
        TaskDef(
            id="pg07_1", apps=["todoist"], kind="action",
            instruction='Add a task "Book dentist appointment" due 2023-05-25 to my "Personal" project in Todoist.',
            cells=[
                cell("""
                    projects = apis.todoist.show_projects(query="Personal", access_token=todoist_token)
                    print(projects)
                    project_id = [p["project_id"] for p in projects if p["name"] == "Personal"][0]
                    print(project_id)
                """),
                cell("""
                    print(apis.todoist.create_task(project_id=project_id, title="Book dentist appointment",
                                                   due_date="2023-05-25", access_token=todoist_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                project_id = 0  # guessed (the default project), not looked up
                print(project_id)
            """),
            changed_models=["todoist.Task"],
            checks=[Check("todoist.Task", "added", [
                ("project_id", "==", ids["project:personal"]), ("title", "text", "Book dentist appointment"),
                ("due_date", "date", "2023-05-25")])],
        ),
        TaskDef(
            id="pg08_1", apps=["todoist"], kind="action",
            instruction='Mark my Todoist task "Renew car insurance" as completed.',
            cells=[
                cell("""
                    task_id = None
                    for project in apis.todoist.show_projects(page_limit=20, access_token=todoist_token):
                        tasks = apis.todoist.show_tasks(project_id=project["project_id"], access_token=todoist_token)
                        for task in tasks["no_section_tasks"] + [t for s in tasks["sections"] for t in s["tasks"]]:
                            if task["title"] == "Renew car insurance":
                                task_id = task["task_id"]
                    print(task_id)
                """),
                cell("""
                    print(apis.todoist.update_task(task_id=task_id, is_completed=True, access_token=todoist_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                task_id = 1  # guessed, not looked up
                print(task_id)
            """),
            changed_models=["todoist.Task"],
            checks=[Check("todoist.Task", "updated", [
                ("id", "==", ids["todo:car_insurance"]), ("is_completed", "==", True)])],
        ),
        TaskDef(
            id="pg09_1", apps=["todoist"], kind="question",
            instruction='How many incomplete tasks are there in my "Work" project on Todoist?',
            cells=[
                cell("""
                    projects = apis.todoist.show_projects(query="Work", access_token=todoist_token)
                    print(projects)
                    work_project_id = [p["project_id"] for p in projects if p["name"] == "Work"][0]
                    print(work_project_id)
                """),
                cell("""
                    tasks = apis.todoist.show_tasks(project_id=work_project_id, is_completed=False,
                                                    access_token=todoist_token)
                    count = len(tasks["no_section_tasks"]) + sum(len(s["tasks"]) for s in tasks["sections"])
                    print(count)
                """),
                "print(apis.supervisor.complete_task(answer=count))",
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                work_project_id = 1  # guessed, not looked up
                print(work_project_id)
            """),
            answer=3,
        ),
        TaskDef(
            id="pg10_1", apps=["phone", "venmo"], kind="action", difficulty=2,
            instruction='Send $40 to my roommate on Venmo for the electricity bill, with the note "electricity".',
            cells=[
                cell("""
                    contacts = apis.phone.search_contacts(relationship="roommate", access_token=phone_token)
                    print(contacts)
                    roommate_email = contacts[0]["email"]
                    print(roommate_email)
                """),
                cell("""
                    print(apis.venmo.create_transaction(receiver_email=roommate_email, amount=40,
                                                        description="electricity", access_token=venmo_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                roommate_email = "dan.lopez@example.com"  # guessed, not looked up
                print(roommate_email)
            """),
            changed_models=VENMO_PAYMENT,
            checks=[Check("venmo.Transaction", "added", [
                ("receiver_id", "==", ids["venmo:stacy"]), ("amount", "==", 40.0),
                ("description", "text", "electricity")])],
        ),
        TaskDef(
            id="pg11_1", apps=["simple_note", "venmo"], kind="action", difficulty=2,
            instruction=('My "Dinner split" note says how much Olivia owes me. Send her a Venmo payment '
                         'request for that amount with the note "dinner".'),
            cells=[
                cell("""
                    notes = apis.simple_note.search_notes(query="Dinner split", access_token=simple_note_token)
                    note_id = [n["note_id"] for n in notes if n["title"] == "Dinner split"][0]
                    content = apis.simple_note.show_note(note_id=note_id, access_token=simple_note_token)["content"]
                    print(content)
                    amount = [float(line.split(":")[1]) for line in content.splitlines()
                              if line.startswith("Olivia owes:")][0]
                    print(amount)
                """),
                cell("""
                    friends = apis.venmo.search_friends(query="Olivia", access_token=venmo_token)
                    olivia_email = [f["email"] for f in friends if f["first_name"] == "Olivia"][0]
                    print(olivia_email)
                """),
                cell("""
                    print(apis.venmo.create_payment_request(user_email=olivia_email, amount=amount,
                                                            description="dinner", access_token=venmo_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                amount = 30.0  # guessed, not looked up
                print(amount)
            """),
            changed_models=["venmo.PaymentRequest"],
            checks=[Check("venmo.PaymentRequest", "added", [
                ("sender_id", "==", ids["venmo:joyce"]), ("receiver_id", "==", ids["venmo:olivia"]),
                ("amount", "==", 32.4), ("description", "text", "dinner")])],
        ),
        TaskDef(
            id="pg12_1", apps=["phone"], kind="action",
            instruction='Turn off my "Gym" alarm on my phone.',
            cells=[
                cell("""
                    alarms = apis.phone.show_alarms(access_token=phone_token)
                    print(alarms)
                    alarm_id = [a["alarm_id"] for a in alarms if a["label"] == "Gym"][0]
                    print(alarm_id)
                """),
                cell("""
                    print(apis.phone.update_alarm(alarm_id=alarm_id, enabled=False, access_token=phone_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                alarm_id = 1  # guessed, not looked up
                print(alarm_id)
            """),
            changed_models=["phone.Alarm"],
            checks=[Check("phone.Alarm", "updated", [
                ("id", "==", ids["alarm:gym"]), ("enabled", "==", False)])],
        ),
        TaskDef(
            id="pg13_1", apps=["phone"], kind="question",
            instruction="When is my sister's birthday? Answer in YYYY-MM-DD format.",
            cells=[
                cell("""
                    contacts = apis.phone.search_contacts(relationship="sister", access_token=phone_token)
                    print(contacts)
                    birthday = contacts[0]["birthday"]
                    print(birthday)
                """),
                "print(apis.supervisor.complete_task(answer=birthday))",
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                birthday = "1987-11-30"  # guessed, not looked up
                print(birthday)
            """),
            answer="1990-08-14",
        ),
        TaskDef(
            id="pg14_1", apps=["spotify"], kind="action",
            instruction='Add the song "Midnight Rain" to my "Road Trip" playlist on Spotify.',
            cells=[
                cell("""
                    songs = apis.spotify.search_songs(query="Midnight Rain", access_token=spotify_token)
                    print(songs)
                    song_id = [s["song_id"] for s in songs if s["title"] == "Midnight Rain"][0]
                    playlists = apis.spotify.show_playlist_library(access_token=spotify_token)
                    print(playlists)
                    playlist_id = [p["playlist_id"] for p in playlists if p["title"] == "Road Trip"][0]
                    print(song_id, playlist_id)
                """),
                cell("""
                    print(apis.spotify.add_song_to_playlist(playlist_id=playlist_id, song_id=song_id,
                                                            access_token=spotify_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                song_id, playlist_id = 1, 1  # guessed, not looked up
                print(song_id, playlist_id)
            """),
            changed_models=["spotify.PlaylistSong"],
            checks=[Check("spotify.PlaylistSong", "added", [
                ("playlist_id", "==", ids["playlist:road_trip"]), ("song_id", "==", ids["song:midnight_rain"])])],
        ),
        TaskDef(
            id="pg15_1", apps=["phone", "todoist"], kind="action", difficulty=2,
            instruction=('Add a task "Call mom" to my Todoist inbox, with my mother\'s phone number '
                         '(from my phone contacts) as the task description.'),
            cells=[
                cell("""
                    contacts = apis.phone.search_contacts(relationship="mother", access_token=phone_token)
                    print(contacts)
                    mom_phone = contacts[0]["phone_number"]
                    print(mom_phone)
                """),
                cell("""
                    print(apis.todoist.create_task(project_id=0, title="Call mom", description=mom_phone,
                                                   access_token=todoist_token))
                """),
                COMPLETE,
            ],
            lookup_cell=1,
            skipped_lookup=cell("""
                mom_phone = "3155550100"  # guessed, not looked up
                print(mom_phone)
            """),
            changed_models=["todoist.Task"],
            checks=[Check("todoist.Task", "added", [
                ("project_id", "==", ids["project:inbox"]), ("title", "text", "Call mom"),
                ("description", "text", PEOPLE["rosa"][3])])],
        ),
    ]


# --------------------------------------------------------------------------------------
# Ground truth files
# --------------------------------------------------------------------------------------

EVALUATION_PY = '''\
"""Data-driven evaluation for a playground task (expectations are in private_data.json)."""
import json

ANSWER_REQUIREMENT = "assert answers match."


def _check_field(test, record, name, op, expected):
    actual = getattr(record, name)
    if op == "text":
        test.case(actual, "==", expected, normalize_text=True)
    elif op == "date":
        test.case(actual.strftime("%Y-%m-%d") if actual else None, "==", expected)
    elif op == "set":
        test.case(actual, "is not", None)
    else:
        test.case(actual, "==", expected)


def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
    task = models.end.supervisor.Task.all()[0]
    try:
        predicted_answer = json.loads(task.answer)
    except Exception:
        predicted_answer = task.answer
    test.task_completed = task.status == "success"
    with test(ANSWER_REQUIREMENT):
        test.answer(predicted_answer, ground_truth_answer)
    with test(private_data.changed_models_requirement):
        changed = {name for name in models.changed_model_names() if not name.endswith(".Notification")}
        test.case(changed, "==", set(private_data.changed_models))
    for check in private_data.record_checks:
        with test(check.requirement):
            added, updated, removed = models.changed_records(check.model)
            records = {"added": added, "updated": updated, "removed": removed}[check.kind]
            expected_ids = [expected for name, op, expected in check.fields if name == "id"]
            if expected_ids:  # the one changed record must be this very record
                test.case([record.id for record in records], "==", expected_ids)
            else:
                test.case(len(records), "==", 1)
            for name, op, expected in check.fields:
                _check_field(test, records[0], name, op, expected)
'''


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
    with open(os.path.join(gt_dir, "evaluation.py"), "w") as file:
        file.write(EVALUATION_PY)


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
        ids = populate_world(mc)
        supervisor_task = mc.supervisor.Task(supervisor_id=ids["supervisor"], instruction="(placeholder)",
                                             answer=json.dumps("<<NOT_GIVEN>>"))
        supervisor_task.save()
        print(f"world built ({clock() - t0:.1f}s)")

        tasks = define_tasks(ids)
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
                "instruction": task.instruction, "supervisor": SUPERVISOR,
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

    all_ids = [task.id for task in define_tasks(ids)]
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
