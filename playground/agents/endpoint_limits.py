"""What every client of one model endpoint in a process shares: an adaptive limit on its requests in flight and the
pause a server asked for with `Retry-After` (`EndpointLimiter`, one per endpoint: `endpoint_limiter`).

The limit follows additive-increase/multiplicative-decrease (AIMD), the rule of TCP congestion control (Jacobson,
"Congestion Avoidance and Control", 1988; RFC 5681's congestion window), with CUBIC's two refinements in their
simplest form (RFC 8312): a reply of HTTP 429 or 503 (the server is full) cuts the requests allowed in flight to
`BETA` (0.7, CUBIC's multiplicative decrease, where Reno halves) of those in flight when it came, never below 1,
once per round (a refusal of a request sent before the last cut does not cut again, as TCP cuts once per window);
each window of successes (as many 2xx replies as the limit) raises it by one, never above its ceiling: the
`--max-connections` cap (`$PLAYGROUND_MAX_CONNECTIONS`) when one is given, else `DEFAULT_CEILING`. Near the level
refused last the limit plateaus (CUBIC's concave region near its last maximum): the one step back to that level
waits `PROBE_WINDOWS` windows instead of one, and a refused probe, one step above a level that just held a whole
window of successes, steps back to that level instead of cutting. So a server that admits K at once is found within
a few cuts and then held at K, probed at K + 1 once in `PROBE_WINDOWS` windows, not left on the ramp from K/2 (plain
AIMD averages 3/4 of K; with halving cuts, a short run against K = 32 of 64 took 1.48x the ideal at K, see
docs/results/machinery.md). Unlike TCP's slow start the limit starts at
the ceiling: a server that has refused nothing gets what the user asked for, as before this limit existed. The openai
SDK, by contrast, only retries a 429 with exponential backoff and honours its retry-after headers; each request waits
alone, so a server that admits K of M concurrent requests keeps refusing M - K of them.

A `Retry-After` (seconds or an HTTP date; at most `MAX_RETRY_AFTER_S`) on any retried status pauses every request to
the endpoint until it passes, not only the one that got it.

An endpoint that could not be reached (connection refused, name not resolved) on every try of a request is marked
`unreachable` (a circuit breaker): the requests after it try once, not their whole retry schedule, until one gets an
HTTP reply, so a dead endpoint costs one request's retries, not every episode's.
"""

from __future__ import annotations

import email.utils
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

MAX_CONNECTIONS_VARIABLE = "PLAYGROUND_MAX_CONNECTIONS"  # at most this many requests at once per endpoint
DEFAULT_CEILING = 256  # the most requests in flight per endpoint when no cap is given
BUSY_STATUS = frozenset({429, 503})  # the server is full: the limit is cut
PROBE_WINDOWS = 16  # windows of successes before the limit steps back to the level refused last
BETA = 0.7  # the cut on a refusal: this share of the requests in flight (CUBIC's beta, RFC 8312 section 4.5)
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class Ticket:
    """One request's place in flight: the limiter's round (`generation`) when it was let through."""

    generation: int


class EndpointLimiter:
    """An AIMD limit on one endpoint's requests in flight, and its Retry-After pause (see the module docstring).

    `acquire()` waits until the pause is over and fewer than `limit` requests are in flight; `release(ticket, status)`
    ends the request and adapts the limit to its status (None: no HTTP reply, which leaves the limit as it is).
    `clock` and `sleep` are the time source and sleeper (a test may give fakes)."""

    def __init__(self, ceiling: int, capped: bool = False, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if ceiling < 1:
            raise ValueError(f"an endpoint's ceiling of requests in flight must be at least 1, got {ceiling}")
        self.ceiling, self.capped, self.clock, self.sleep = ceiling, capped, clock, sleep
        self.limit = ceiling  # requests allowed in flight now
        self.in_flight = 0
        self.generation = 0  # rounds: one cut per round
        self.successes = 0  # 2xx replies since the limit last changed
        self.cuts = 0  # times the limit was cut (for reports and tests)
        self.refused_at: int | None = None  # the level (requests in flight) of the last cut
        self.held: int | None = None  # the level that last held a whole window of successes (None after a cut)
        self.unreachable: str | None = None  # why every try of a request failed to connect, until a reply comes
        self._resume_at = 0.0
        self._condition = threading.Condition()

    def acquire(self) -> Ticket:
        """Wait for the endpoint's pause to pass and a place in flight; take it."""
        with self._condition:
            while True:
                left = self._resume_at - self.clock()
                if left > 0:
                    self._condition.release()
                    try:
                        self.sleep(left)
                    finally:
                        self._condition.acquire()
                    continue
                if self.in_flight < self.limit:
                    self.in_flight += 1
                    return Ticket(self.generation)
                self._condition.wait(1.0)

    def release(self, ticket: Ticket, status: int | None) -> bool:
        """End the request of `ticket`, which got HTTP `status` (None: no reply). A 2xx counts towards a window of
        successes (`PROBE_WINDOWS` of them for the step back to the level refused last); a 429 or 503 cuts the
        limit to `BETA` of those in flight, or steps a refused probe back to the level that held (once per round).
        Return whether the refusal was congestion: a 429 or
        503 while other requests of this process were in flight (a smaller limit can help; the caller retries it
        without spending an attempt)."""
        with self._condition:
            in_flight = self.in_flight
            self.in_flight -= 1
            congested = False
            if status is not None:  # the endpoint answered: it is reachable again
                self.unreachable = None
            if status is not None and status in BUSY_STATUS:
                congested = in_flight > 1
                if ticket.generation == self.generation:
                    self.refused_at = min(self.limit, in_flight)
                    if self.held is not None and self.held < self.refused_at:  # a refused probe: back to what held
                        self.limit = self.held
                    else:
                        self.limit, self.held = max(1, int(self.refused_at * BETA)), None
                    self.generation += 1
                    self.successes = 0
                    self.cuts += 1
            elif status is not None and 200 <= status < 300:
                self.successes += 1
                probing = self.limit + 1 == self.refused_at  # the step back to the level refused last
                if self.successes >= self.limit * (PROBE_WINDOWS if probing else 1):
                    self.successes, self.held = 0, self.limit
                    if self.limit < self.ceiling:
                        self.limit += 1
            self._condition.notify_all()
            return congested

    def mark_unreachable(self, why: str) -> None:
        """Note that every try of a request failed to reach the endpoint (`why`: the last error); until a reply comes
        (`release` with a status), a request tries once instead of spending its retries."""
        with self._condition:
            self.unreachable = why

    def pause(self, seconds: float) -> None:
        """Hold every request to this endpoint for `seconds` from now (a later pause wins)."""
        with self._condition:
            self._resume_at = max(self._resume_at, self.clock() + seconds)

    def wait_out_pause(self) -> None:
        """Sleep until the endpoint's pause, if any, is over."""
        while (left := self._resume_at - self.clock()) > 0:
            self.sleep(left)

    def snapshot(self) -> dict[str, int]:
        """The limiter's state: limit, ceiling, in flight, cuts."""
        with self._condition:
            return {"limit": self.limit, "ceiling": self.ceiling, "in_flight": self.in_flight, "cuts": self.cuts}


def connection_cap_from_environment() -> int | None:
    """The cap on requests at once per endpoint in `$PLAYGROUND_MAX_CONNECTIONS` (None: none, or not a whole number)."""
    value = os.environ.get(MAX_CONNECTIONS_VARIABLE, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


_limiters: dict[tuple[str, int | None], EndpointLimiter] = {}
_limiters_lock = threading.Lock()


def endpoint_limiter(base_url: str) -> EndpointLimiter:
    """The limiter every client of the endpoint at `base_url` in this process shares, under this process's cap."""
    cap = connection_cap_from_environment()
    key = (base_url.rstrip("/"), cap)
    with _limiters_lock:
        if key not in _limiters:
            _limiters[key] = EndpointLimiter(cap or DEFAULT_CEILING, capped=cap is not None)
        return _limiters[key]


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or an HTTP date, read against `now`, the Unix time,
    default the clock's), at most MAX_RETRY_AFTER_S; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
