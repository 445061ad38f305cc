"""A rate-limiting reply function for `ScriptedChatServer(default=...)`: a server that admits at most `limit`
requests at once and refuses the others at once with HTTP 429 (or 503), with or without a `Retry-After`, as a
saturated model server or a hosted API's concurrency limit does. For tests and benchmarks of the HTTP client's limits
(`playground.agents.endpoint_limits`).

    admits = AdmitsAtOnce(16, FirstActionModel(), delay=0.1)
    with ScriptedChatServer(default=admits) as server:
        ...  # admits.refused, admits.peak, admits.arrivals
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from playground.testing.openai_server import Reply


@dataclass(frozen=True)
class Arrival:
    """One request as the server saw it: when it came (`time.monotonic()`), whether it was admitted, and how many
    requests were being answered when it came."""

    at: float
    admitted: bool
    answering: int


class AdmitsAtOnce:
    """Answers with `inner` (a reply function; None: "Action: look") after `delay` seconds while fewer than `limit`
    requests are being answered; refuses the rest with `status` (429 or 503) and, when given, `retry_after` (the
    header's text: seconds or an HTTP date). `refuse_first` refuses that many requests first, whatever the count.
    It keeps every `arrivals`, the `refused` and `admitted` counts and the most answered at once (`peak`)."""

    def __init__(self, limit: int, inner: Callable[[dict], str | Reply] | None = None, delay: float = 0.0,
                 status: int = 429, retry_after: str | None = None, refuse_first: int = 0) -> None:
        self.limit, self.inner, self.delay, self.status, self.retry_after = limit, inner, delay, status, retry_after
        self.refuse_first = refuse_first
        self.arrivals: list[Arrival] = []
        self.now = self.peak = self.refused = self.admitted = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> str | Reply:
        with self._lock:
            admitted = self.now < self.limit and self.refuse_first <= 0
            self.refuse_first -= 1
            self.arrivals.append(Arrival(time.monotonic(), admitted, self.now))
            if not admitted:
                self.refused += 1
                headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
                return Reply(status=self.status, raw='{"error": {"message": "rate limited", "type": "rate_limit"}}',
                             headers=headers)
            self.now += 1
            self.admitted += 1
            self.peak = max(self.peak, self.now)
        try:
            if self.delay:
                time.sleep(self.delay)
            return self.inner(body) if self.inner is not None else "Action: look"
        finally:
            with self._lock:
                self.now -= 1
