"""The upgrade steps of trace events from older trace format versions (`playground.core.events.UPGRADES`).

Version 1: traces written before `trace_version` existed. `upgrade_v1` fills in every field a version-1 record could
lack with the value its readers assumed (`V1_DEFAULTS`) and renames what was renamed.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

# Version 1: every field a version-1 record could lack, with the value its readers assumed.
V1_DEFAULTS: dict[str, dict[str, Any]] = {
    "header": {"trace_version": 1, "env": "", "task_set": "", "task_id": "", "seed": None, "harness": "",
               "agent": "", "max_steps": None, "run_id": None, "split": None, "params": {}, "interventions": [],
               "agent_options": {}},
    "reset": {"goal": "", "observation": "", "admissible_actions": None, "max_score": None},
    "checkpoint": {"step": 0, "id": "", "branch": 0, "parent": None},
    "proposal": {"step": 0, "attempt": 0, "thought": "", "action": "", "finish": False, "prompt_tokens": 0,
                 "completion_tokens": 0, "intervention_chars": 0, "seconds": 0.0, "admissible_actions": None,
                 "message": None, "notes": [], "prompt": None},
    "detection": {"step": 0, "attempt": 0, "detector": "", "failure_type": "", "labels": [], "confidence": 1.0,
                  "evidence": "", "subtype": ""},
    "intervention": {"step": 0, "attempt": 0, "plugin": "", "kind": "", "message": None, "action": None,
                     "stop": False, "rollback_to": None, "detections": [], "details": {}},
    "rollback": {"to_step": 0, "restored": True, "checkpoint": "", "branch": 0, "from_step": None},
    "step": {"step": 0, "action": "", "observation": "", "reward": 0.0, "score": None, "valid_action": True,
             "won": False, "terminated": False, "truncated": False},
    "verification": {"plugin": "", "repair_step": 0, "failure_type": "", "verdict": "", "evidence": "",
                     "lesson": None},
    "lesson": {},
    "error": {"message": ""},
    "end": {"status": "error", "won": False, "steps": 0, "error": None, "score": None, "max_score": None},
    "prompt": {"hash": "", "text": ""},
    "judge_call": {"role": "unknown", "prompt_tokens": 0, "completion_tokens": 0, "usable": True, "mode": "prompt"},
    "attempt_verdict": {"verifier": "", "passed": False, "why": ""},
}


def upgrade_v1(record: Mapping[str, Any]) -> dict[str, Any]:
    """A version-1 record as version 2: the fields it lacks filled in from `V1_DEFAULTS`; a rollback that
    named its target `step` (before `to_step`) renamed; nulls where version 1 wrote null for "none" in a field
    that version 2 always fills (a detection's labels, an intervention's detections and details) emptied."""
    upgraded = dict(record)
    kind = upgraded.get("type")
    if kind == "rollback" and "to_step" not in upgraded and "step" in upgraded:
        upgraded["to_step"] = upgraded.pop("step")
    for key in ("labels", "detections", "details", "notes", "params", "interventions", "agent_options"):
        if key in upgraded and upgraded[key] is None and key in V1_DEFAULTS.get(str(kind), {}):
            del upgraded[key]
    for key, default in V1_DEFAULTS.get(str(kind), {}).items():
        if key not in upgraded:
            upgraded[key] = copy.deepcopy(default)
    return upgraded
