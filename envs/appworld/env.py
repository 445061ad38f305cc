"""The AppWorld env: Python code cells against AppWorld's apps, judged by AppWorld's `evaluate()`.

- Observation: after reset, the task instruction, the supervisor and how to call the
  APIs; after each step, the output of the executed cell.
- Action: one Python code cell, run in the task's AppWorld shell (variables persist).
- The episode ends when the agent calls `apis.supervisor.complete_task(...)` (AppWorld's
  own `task_completed`); then AppWorld's `evaluate()` runs: `won` is its success, `score`
  the tests passed out of `max_score` tests, and `info["test_report"]` its passes and
  failures. The loop's step budget truncates otherwise.
- `valid_action` is False when the cell failed ("Execution failed", e.g. an unknown API,
  a missing access token, a syntax error); `info["action_format"]` is "code", so
  command-style detectors (unparseable text, unseen words) leave it alone.
- Checkpoints by replay: a snapshot is the list of cells executed so far; restoring
  re-opens the task and runs them again (AppWorld freezes time and numbers records in
  order, so the state comes back the same). AppWorld's own `save_state`/`load_state` store
  changes against base databases (`data/base_dbs`) that the embedded set does not have,
  so they are not used.
- `admissible_actions` is None (any cell may be run) and `action_kinds` is `{}`: no cell
  can be named in advance, so no cell has a kind.
- With `expert=True` (non-LLM agents only), `expert_plan` is the rest of the task's
  scripted solution, and `failure_variants()` (the env contract's hook for
  failure-injection agents) says how the next cell looks under each of the `noisy`
  agent's failure modes: a wrong API name or a wrong keyword, a syntax error, a skipped
  lookup or a missing login, a docs-only cell, the previous cell again, or completing too
  early.
- `check_action(cell)` checks a cell against AppWorld's API docs before it runs
  (`schema.check_cell`: syntax, unknown apps and APIs, unknown and missing arguments), so
  a harness can repair a schema-invalid cell before it reaches AppWorld.
- Declared structure (for sidecars such as DART; docs/envs/appworld.md): reset info
  `workflow` (no instance yet: they are declared as cells run), then each step's info
  `structure` declares the cell as one instance: the variables it reads and writes
  (`cells.py`), the API calls it made (AppWorld's own request log) with each one's effect
  policy (`effects.py`, from the API docs). A failed cell reports `info["failure"]`, with
  the earlier variables its error blames as `keys`.
- The world outside a snapshot (`world`): the irreversible calls issued (with the cell and
  the attempt they were issued in) and how many restores crossed one (`unsafe_restores`,
  ground truth for benchmarks, never for a sidecar). Restoring the initial state starts a
  new attempt of the whole task, which supersedes the abandoned one's effects.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import uuid
from pathlib import Path
from typing import Any, Callable

from playground.core.env import EnvInfo, EnvProvider, FailureVariant, TextEnv
from playground.core.payloads import SchemaProblem
from playground.core.task_sets import TaskSet, path_from_env
from playground.envs.appworld import setup as appworld_setup
from playground.envs.appworld.cells import bindings, blamed
from playground.envs.appworld.effects import IRREVERSIBLE, REVERSIBLE, Routes
from playground.envs.appworld.interventions import classify_error
from playground.envs.appworld.schema import ROOT, check_cell
from playground.envs.appworld.server import AppWorldError, AppWorldServer

FAILED = "Execution failed"
COMPLETE = "apis.supervisor.complete_task(answer=None)"
API_CALL = re.compile(r"apis\.(\w+)\.(\w+)\(")
WRONG_PREFIX = {"show_": "get_", "create_": "add_", "search_": "find_", "update_": "edit_", "delete_": "remove_",
                "login": "sign_in", "add_": "create_"}
USAGE = ("Write one Python code cell per turn. Call apps with apis.<app>.<api>(...); "
         "apis.api_docs.show_app_descriptions(), apis.api_docs.show_api_descriptions(app_name=...) and "
         "apis.api_docs.show_api_doc(app_name=..., api_name=...) describe them. Log in to an app with the "
         "supervisor's password from apis.supervisor.show_account_passwords(). When done, call "
         "apis.supervisor.complete_task(answer=...) (answer=None when the task asks no question).")


class AppWorldInfo(EnvInfo, total=False):
    """`EnvInfo` plus AppWorld's own keys: the task's apps and, once evaluated, the test report."""

    apps: list[str]
    test_report: dict[str, Any]
    workflow: dict[str, Any]  # reset only: the declared structure so far (no instance: cells declare as they run)
    structure: dict[str, Any]  # the instance this step's cell declared and its call, where it ran or changed state


class AppWorldEnv(TextEnv):
    """One AppWorld task world at a time on a shared server (see module docstring)."""

    can_snapshot = True
    env_name = "appworld"

    def __init__(self, server: AppWorldServer, root: Path, expert: bool = False,
                 task_set: TaskSet | None = None) -> None:
        super().__init__(task_set)
        self.server, self.root, self.expert = server, Path(root), expert
        self.task_id = ""
        self.task: dict = {}
        self.done = False
        self.report: dict | None = None
        self.solution: list[str] = []
        self.meta: dict = {}
        self.solved = 0  # scripted-solution cells executed successfully, in order
        self.last_code = ""
        self.cells: list[str] = []  # every cell executed since reset, in order (replayed by restore)
        self.experiment = ""  # AppWorld's experiment name of the open task world (its request log lives there)
        self.logged = 0  # requests in that world's log already attributed to a cell
        self.bound: set[str] = set()  # the shell variables the cells so far may have bound
        self.world: dict[str, Any] = {"attempt": 0, "effects": [], "unsafe_restores": 0}
        self._routes: Routes | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Open the world of task `options["task"]` (default: one of the default split's, by seed) as it starts."""
        super().reset(seed=seed)
        task_id = self.task_for_reset(seed, options)
        if not (self.root / "data" / "tasks" / task_id).is_dir():
            raise ValueError(f"appworld: no task {task_id!r} under {self.root / 'data' / 'tasks'}")
        self._open(task_id)
        self.done, self.report, self.solved, self.last_code = False, None, 0, ""
        self.cells, self.bound = [], set()
        self.world = {"attempt": 0, "effects": [], "unsafe_restores": 0}
        self.meta = _read_meta(self.root, task_id)
        self.solution = list(self.meta.get("solution", []))
        supervisor = self.task.get("supervisor", {})
        observation = (f"Task: {self.task.get('instruction', '')}\n"
                       f"Supervisor: {supervisor.get('first_name', '')} {supervisor.get('last_name', '')} "
                       f"({supervisor.get('email', '')}, {supervisor.get('phone_number', '')}); "
                       f"now: {self.task.get('datetime', '')}\n{USAGE}")
        # The procedural interventions read the docs from here (EpisodeStart.env_info); a copy,
        # so that a caller who changes one reset's info does not change the next one's.
        return observation, {**self._info(valid=True), "api_docs": copy.deepcopy(self.server.api_docs()),
                             "workflow": {"domain": "appworld", "inputs": [], "instances": [], "dynamic": True}}

    def step(self, action: str):
        """Execute one code cell; end and evaluate when the task has been completed."""
        if not self.task_id or self.done:
            raise RuntimeError("appworld: the episode is over or not started; call reset()")
        code = str(action)
        output = str(self.server.request("/execute", task_id=self.task_id, code=code))
        valid = not output.startswith(FAILED)
        if valid and self.solved < len(self.solution) and _same_code(code, self.solution[self.solved]):
            self.solved += 1
        self.last_code = code
        structure, failure = self._declare(code, output, valid)
        self.cells.append(code)
        if self.server.request("/task_completed", task_id=self.task_id):
            self.done = True
            self.report = self.server.request("/evaluate", task_id=self.task_id, suppress_errors=True)
        won = bool(self.report and self.report.get("success"))
        info = self._info(valid=valid)
        if structure is not None:
            info["structure"] = structure
        if failure is not None:
            info["failure"] = failure
        return output, float(won), self.done, False, info

    def _declare(self, code: str, output: str, valid: bool) -> tuple[dict | None, dict | None]:
        """The structure the cell just executed declares (None for a failed cell that changed no app state),
        and its failure record (None when it ran); records its irreversible calls in `world`."""
        index, earlier = len(self.cells), set(self.bound)
        found = bindings(code)
        self.bound |= found.writes
        requests = self._new_requests()
        error = classify_error(output, code) if not valid else None
        if error is not None and requests and "status code is" in output:
            requests = requests[:-1]  # the request whose error the cell raised changed nothing
        routes = self._route_table()
        calls = [routes.call(r.get("method", ""), r.get("url", "")) for r in requests]
        changed = any(r.get("method", "").lower() != "get" for r in requests)
        for api, policy in calls:
            if policy == IRREVERSIBLE:
                self.world["effects"].append({"call": api, "cell": index, "attempt": self.world["attempt"]})
        structure = None
        if valid or changed:
            effect = IRREVERSIBLE if any(policy == IRREVERSIBLE for _, policy in calls) else REVERSIBLE
            declared = not found.dynamic
            instance = {"id": f"cell{index}", "steps": [code], "interface": declared, "effect": effect,
                        "step_effects": [effect],
                        "reads": sorted(found.loads & earlier) if declared else None,
                        "writes": sorted(found.writes) if declared else None,
                        "calls": [{"api": api, "effect": policy} for api, policy in calls],
                        "label": ", ".join(dict.fromkeys(api for api, policy in calls if policy == IRREVERSIBLE))}
            structure = {"instances": [instance], "call": [instance["id"], 0]}
        if error is None:
            return structure, None
        keys = blamed(code, output, error.label, earlier)
        failure: dict[str, Any] = {"kind": _failure_kind(error.label, output), "message": error.message,
                                   "site": code, "label": error.label}
        if keys:
            failure["keys"] = keys
        if not keys and not changed:
            failure["rejected"] = True  # it changed no app state and blames no earlier cell: nothing to undo
        return structure, failure

    def _route_table(self) -> Routes:
        if self._routes is None:
            self._routes = Routes(self.server.api_docs())
        return self._routes

    def _log_path(self) -> Path:
        return (self.root / "experiments" / "outputs" / self.experiment / "tasks" / self.task_id / "logs"
                / "api_calls.jsonl")

    def _requests(self) -> list[dict]:
        """Every request AppWorld logged in the open task world (its `api_calls.jsonl`, rewritten after each cell)."""
        path = self._log_path()
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            return []  # nothing logged yet
        return [json.loads(line) for line in lines if line.strip()]

    def _new_requests(self) -> list[dict]:
        """The requests logged since the last call (the last cell's)."""
        requests = self._requests()
        new, self.logged = requests[self.logged:], len(requests)
        return new

    def crosses_irreversible(self, cells: int) -> bool:
        """Ground truth (for benchmarks, never for a sidecar): would restoring the state after `cells` cells
        undo an irreversible call of this attempt? The initial state starts a new attempt: never."""
        return cells > 0 and any(cell >= cells for cell in self._irreversible_cells())

    def _irreversible_cells(self) -> list[int]:
        """The cells of this attempt's irreversible calls (ground truth, never for a sidecar)."""
        return [e["cell"] for e in self.world["effects"] if e["attempt"] == self.world["attempt"]]

    def ground_truth(self) -> dict[str, Any]:
        """For the trace only (`TextEnv.ground_truth`): the restores that undid an irreversible call so far, and the
        cells of this attempt's irreversible calls (a restore to a cell count at or below one undoes it:
        `crosses_irreversible`)."""
        return {"unsafe_restores": self.world["unsafe_restores"], "irreversible": self._irreversible_cells()}

    def check_action(self, action: str) -> list[SchemaProblem]:
        """The cell's problems against AppWorld's API docs (`schema.check_cell`), found without running it."""
        return check_cell(str(action), self.server.api_docs())

    def snapshot(self) -> dict:
        """The state now, as the cells executed since reset (restored by replaying them)."""
        return {"cells": tuple(self.cells), "done": self.done, "solved": self.solved, "last_code": self.last_code}

    def restore(self, snapshot: dict) -> None:
        """Re-open the task and replay the snapshot's cells: AppWorld freezes time and numbers
        records in order, so the databases and the shell's variables come back the same."""
        task_id, cells = self.task_id, list(snapshot["cells"])
        if not cells:
            self.world["attempt"] += 1
        elif self.crosses_irreversible(len(cells)):
            self.world["unsafe_restores"] += 1
        self._open(task_id)
        for cell in cells:
            self.server.request("/execute", task_id=task_id, code=cell)
        self.logged = len(self._requests())
        self.cells = cells
        self.bound = set().union(*(bindings(cell).writes for cell in cells))
        self.done, self.solved, self.last_code = snapshot["done"], snapshot["solved"], snapshot["last_code"]
        self.report = None

    def _open(self, task_id: str) -> None:
        """Close the current task world and open `task_id`'s as it starts (a fresh experiment)."""
        self.close()
        self.experiment = f"playground-{uuid.uuid4().hex[:8]}"
        self.task = self.server.request("/initialize", task_id=task_id, experiment_name=self.experiment)
        self.task_id = task_id
        self.logged = len(self._requests())

    def close(self) -> None:
        """Close the current task world on the server, if any."""
        if self.task_id:
            try:
                self.server.request("/close", task_id=self.task_id, timeout=30)
            except AppWorldError:
                pass  # the server may already be gone at exit
            self.task_id = ""

    def _info(self, valid: bool) -> AppWorldInfo:
        report = self.report or {}
        info: AppWorldInfo = {
            "goal": self.task.get("instruction", ""), "admissible_actions": None, "action_kinds": {},
            "valid_action": valid,
            "action_format": "code", "won": bool(report.get("success")),
            "lost": self.done and not report.get("success"),
            "score": float(len(report.get("passes", []))) if self.report else 0.0,
            "max_score": float(report["num_tests"]) if self.report else None, "apps": self.meta.get("apps", []),
        }
        if self.report is not None:
            info["test_report"] = {"success": report.get("success"), "num_tests": report.get("num_tests"),
                                   "passes": [p.get("requirement", "") for p in report.get("passes", [])],
                                   "failures": [f.get("requirement", "") for f in report.get("failures", [])]}
        if self.expert:
            info["expert_plan"] = [] if self.done else self.solution[self.solved:]
        return info

    def failure_variants(self) -> dict[str, FailureVariant]:
        """How the next scripted cell looks under each `noisy` failure mode: {mode: {"action", "label"}}.

        Only for an env made with `expert=True` (it reads the scripted solution); {} once done.
        """
        if not self.expert or self.done or self.solved >= len(self.solution):
            return {}
        cell = self.solution[self.solved]
        variants: dict[str, FailureVariant] = {}
        wrong = [(name, label) for name, label in ((wrong_api_name(cell), "unknown_api"),
                                                   (wrong_keyword(cell, self.server.api_docs()), "unknown_argument"))
                 if name]
        if wrong:  # the scripted cells take turns: a wrong API name, then a wrong keyword, where the cell has both
            name, label = wrong[self.solved % len(wrong)]
            variants["invalid"] = {"action": name, "label": label}
        variants["malformed"] = {"action": cell.rstrip().rstrip(")") + "\n", "label": "syntax_error"}
        if self.solved == self.meta.get("lookup_cell") and self.meta.get("skipped_lookup"):
            variants["drift"] = {"action": self.meta["skipped_lookup"], "label": "missing_lookup"}
        elif "access_token=" in cell:
            variants["drift"] = {"action": re.sub(r",?\s*access_token\s*=\s*[\w\[\]\"']+", "", cell),
                                 "label": "missing_login"}
        app = (self.meta.get("apps") or ["supervisor"])[0]
        variants["stall"] = {"action": f"print(apis.api_docs.show_api_descriptions(app_name={app!r}))",
                             "label": "planning_stall"}
        if self.last_code:
            variants["repeat"] = {"action": self.last_code, "label": "repetition_or_looping"}
        if self.solved < len(self.solution) - 1:
            variants["stop"] = {"action": COMPLETE, "label": "termination_miscalibration"}
        return variants


def wrong_api_name(cell: str) -> str | None:
    """`cell` with its first app API call renamed to a plausible API that does not exist."""
    for match in API_CALL.finditer(cell):
        app, api = match.groups()
        if app in ("supervisor", "api_docs"):
            continue
        prefix = next((p for p in WRONG_PREFIX if api.startswith(p)), None)
        wrong = WRONG_PREFIX[prefix] + api[len(prefix):] if prefix else api + "s"
        return cell[: match.start(2)] + wrong + cell[match.end(2):]
    return None


def wrong_keyword(cell: str, docs: dict) -> str | None:
    """`cell` with the first keyword of its first app API call renamed to one the API does not take
    (`access_token` -> `token`, `query` -> `querys`), or None where no call has a keyword."""
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return None
    calls = [(node, names) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and (names := _app_call(node)) is not None]
    for call, (app, api) in sorted(calls, key=lambda found: (found[0].lineno, found[0].col_offset)):
        params = {p.get("name") for p in docs.get(app, {}).get(api, {}).get("parameters", [])}
        for keyword in call.keywords:
            if keyword.arg is None:
                continue
            wrong = keyword.arg.split("_")[-1] if "_" in keyword.arg else keyword.arg + "s"
            if wrong in params:
                wrong = keyword.arg + "s"
            lines = cell.splitlines(keepends=True)
            line = lines[keyword.lineno - 1]
            start = len(line.encode()[:keyword.col_offset].decode())  # ast columns count UTF-8 bytes
            lines[keyword.lineno - 1] = line[:start] + wrong + line[start + len(keyword.arg):]
            return "".join(lines)
    return None


def _app_call(node: ast.Call) -> tuple[str, str] | None:
    """(app, api) of a call `apis.APP.API(...)` to an app other than supervisor and api_docs, else None."""
    func = node.func
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
            and isinstance(func.value.value, ast.Name) and func.value.value.id == ROOT
            and func.value.attr not in ("supervisor", "api_docs")):
        return func.value.attr, func.attr
    return None


def _failure_kind(label: str, output: str) -> str:
    """The observable failure kind (`FAILURE_KINDS`) of a failed cell's error label."""
    if "timed out" in output:
        return "timeout"
    if label == "missing_login":
        return "missing_input"
    return "tool_error" if "status code is" in output else "contract_violation"


def _same_code(a: str, b: str) -> bool:
    return a.strip() == b.strip()


def _read_meta(root: Path, task_id: str) -> dict:
    path = root / "data" / "tasks" / task_id / "playground.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"appworld: {path} is not valid JSON ({exc})") from None


_SERVERS: dict[str, AppWorldServer] = {}


def server_for(root: Path) -> AppWorldServer:
    """The (per-process) server for an AppWorld root; started on first use, stopped at exit."""
    key = str(root)
    if key not in _SERVERS:
        python = appworld_setup.venv_python()
        if not python.is_file():
            raise RuntimeError(appworld_setup.not_set_up_message())
        log = appworld_setup.home() / "server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        _SERVERS[key] = AppWorldServer(python, root, log)
    return _SERVERS[key]


REAL_SPLITS = ("train", "dev", "test_normal", "test_challenge")


class AppWorldProvider(EnvProvider):
    """Provides `appworld`: the embedded task set (after setup), and real data via APPWORLD_ROOT."""

    name = "appworld"
    thread_safe = False  # one server per root, shared by its envs; not checked with several threads
    description = "AppWorld: API workflows across apps as Python code cells (own venv and server; see `envs setup`)"
    default_task_set = "embedded"

    def missing(self) -> str | None:
        """The setup command when AppWorld's own venv does not exist yet."""
        return None if appworld_setup.venv_python().is_file() else appworld_setup.not_set_up_message()

    def task_sets(self) -> dict[str, TaskSet]:
        """`embedded` always listed (it needs setup); `data` when APPWORLD_ROOT is set."""
        embedded = {"test": _dataset_ids(appworld_setup.embedded_root, "playground", setup_needed=True)}
        sets = {"embedded": TaskSet("embedded", f"tasks built with AppWorld's own models at setup "
                                                f"({appworld_setup.SETUP_COMMAND})", embedded,
                                    default_split="test", default_count=12, is_task=_listed_in(embedded),
                                    task_form="a task id listed in <root>/data/datasets/playground.txt")}
        real = _real_root()
        if real is not None:
            splits = {split: _dataset_ids(lambda: real, split) for split in REAL_SPLITS}
            sets["data"] = TaskSet("data", f"AppWorld data in {real}", splits, default_split="dev", default_count=10,
                                   is_task=_listed_in(splits),
                                   task_form=f"a task id listed in {real}/data/datasets/<split>.txt "
                                             f"for a split of {', '.join(REAL_SPLITS)}")
        return sets

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> AppWorldEnv:
        """An env on the server of the task set's root (the server starts on first reset)."""
        root = self._root(task_set)
        return AppWorldEnv(server_for(root), root, expert, self.task_sets()[task_set])

    def prepare(self, task_set: str, task_ids: list[str], progress=None) -> None:
        """Check the setup, then start the server once (its start time is reported, and any stale server
        it stopped first)."""
        server = server_for(self._root(task_set))
        server.start()
        if progress:
            for stale in server.stale_stopped:
                progress(f"appworld: stopped a stale server (pid {stale['pid']}, port {stale['port']}) left by "
                         f"process {stale['parent_pid']}, which is gone")
            progress(f"appworld: server on {server.url} (started in {server.started_seconds:.1f} s)")

    def setup(self, progress) -> None:
        """Create AppWorld's venv and build the embedded task set (see `setup.py`)."""
        appworld_setup.setup(progress)

    def describe(self, task_set: str) -> dict:
        """The AppWorld version and root behind the task set, for trace headers."""
        return {"env": self.name, "task_set": task_set, "appworld": appworld_setup.APPWORLD_REQUIREMENT,
                "root": str(self._root(task_set))}

    def _root(self, task_set: str) -> Path:
        if task_set == "embedded":
            if not appworld_setup.is_set_up():
                raise RuntimeError(appworld_setup.not_set_up_message())
            return appworld_setup.embedded_root()
        if task_set == "data" and (root := _real_root()) is not None:
            return root
        raise KeyError(task_set)


def _real_root() -> Path | None:
    return path_from_env("APPWORLD_ROOT")


def _listed_in(splits: dict) -> Callable[[str], bool]:
    """A task set's `is_task`: the id is listed in one of its dataset files (read whole)."""
    return lambda task_id: any(task_id in ids(None) for ids in splits.values())


def _dataset_ids(root_of, dataset: str, setup_needed: bool = False):
    """A split read from `<root>/data/datasets/<dataset>.txt` (one task id per line; all for count None)."""
    def ids(count: int | None) -> list[str]:
        if setup_needed and not appworld_setup.is_set_up():
            raise ValueError(appworld_setup.not_set_up_message())
        path = Path(root_of()) / "data" / "datasets" / f"{dataset}.txt"
        if not path.is_file():
            raise ValueError(f"no dataset file {path} (AppWorld data: `appworld download data`, then APPWORLD_ROOT)")
        lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        return lines[:count]

    return ids
