"""A hook payload and the trace event that records it are one record: the event declares every field of its
payload, and what a reader gets back from the trace (`event.payload()`) equals what the plugin returned.

The loop writes a `Detection`, `Decision`, `Verification` or `AttemptVerdict` into the trace as the matching event
(the payload's fields, flat, plus where it happened: step and attempt); a plugin reading the trace later gets the
payload back from the event, so one class family serves the hook and the reader.
"""

from __future__ import annotations

import dataclasses

import pytest

from playground.core.events import (
    AttemptVerdictEvent,
    DetectionEvent,
    InterventionEvent,
    VerificationEvent,
    from_record,
    to_record,
)
from playground.core.payloads import (
    AttemptVerdict,
    Decision,
    Detection,
    InterventionMessage,
    Verification,
    to_dict,
)

DETECTION = Detection("loop", "progress", ("repetition_or_looping",), 0.8, "same action 3 times", "")
PAIRS = [
    (DETECTION, DetectionEvent, {"step": 4, "attempt": 1}),
    (Decision("sentry", "soft_repair", message=InterventionMessage("soft_repair", "try the drawer", "progress",
                                                                   ("open drawer 1",), ("looping",)),
              detections=(DETECTION,), details={"lessons": [3]}), InterventionEvent, {"step": 4, "attempt": 1}),
    (Decision("guard", "replace", action="look"), InterventionEvent, {"step": 2}),
    (Decision("dart", "rollback", rollback_to=1), InterventionEvent, {"step": 5}),
    (Verification("sentry", 4, "progress", "resolved", "the drawer opened", {"id": 7, "principle": "p"}),
     VerificationEvent, {}),
    (AttemptVerdict(False, "the form was not submitted"), AttemptVerdictEvent, {"verifier": "submitted"}),
]


@pytest.mark.parametrize(("payload", "event_class", "where"), PAIRS, ids=lambda v: type(v).__name__)
def test_the_event_declares_the_payloads_fields_and_gives_the_payload_back(payload, event_class, where):
    declared = {f.name for f in dataclasses.fields(event_class)}
    assert {f.name for f in dataclasses.fields(payload)} <= declared
    written = event_class.from_fields(to_dict(payload), **where)  # as the loop writes it
    read = from_record(to_record(written))  # as a reader gets it from the trace's JSON
    assert read == written and read.payload() == payload
