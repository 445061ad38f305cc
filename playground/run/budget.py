"""A run-wide token budget (`--max-tokens-total N`, `RunConfig.max_tokens_total`): once the tokens the run's recorded
episodes spent (the agent's and the model roles' prompt and completion tokens, as each episode record counts them)
reach N, the runner hands out no new episode; those not started stay unplayed, for a rerun with a larger budget (or
none) to play. Episodes already handed out play to their end and are recorded, so a run may pass N by what they
spend. The spending counts every episode recorded in the run directory, earlier sessions' too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable

from playground.core.records import EpisodeRecord


class TokenBudget:
    """The tokens a run may spend (`limit`; None: no budget) and those its recorded episodes spent (`spent`).

    `stop` is called once, when the spending first reaches the limit (the runner asks its executor to hand out no
    new episode then)."""

    def __init__(self, limit: int | None, recorded: Iterable[EpisodeRecord] = (),
                 stop: Callable[[], None] = lambda: None) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"max_tokens_total must be a whole number of at least 1, got {limit!r}")
        self.limit, self.stop = limit, stop
        self.spent = sum(record.tokens for record in recorded)
        self.stopped = False

    @property
    def reached(self) -> bool:
        """Whether the spending has reached the limit (never without one)."""
        return self.limit is not None and self.spent >= self.limit

    def add(self, record: EpisodeRecord) -> bool:
        """Count a newly recorded episode; return True the first time the spending reaches the limit (after calling
        `stop`)."""
        self.spent += record.tokens
        if self.reached and not self.stopped:
            self.stopped = True
            self.stop()
            return True
        return False

    def message(self, not_played: int | None = None) -> str:
        """The named message of a run the budget stopped ("token budget reached: ..."), with how many episodes it
        left unplayed when known (None: while episodes still play)."""
        left = ("no new episode is handed out (those playing finish and are recorded)" if not_played is None
                else f"{not_played} episode(s) not played")
        return (f"token budget reached: {self.spent:,} tokens spent of --max-tokens-total {self.limit:,}; {left}. "
                "Rerun the same command with a larger --max-tokens-total (or none) to play the rest")

    def summary(self, not_played: int) -> dict[str, Any]:
        """What summary.json says of the budget: the limit, the tokens spent, whether it stopped the run and the
        episodes it left unplayed."""
        return {"max_tokens_total": self.limit, "tokens_spent": self.spent, "stopped_by_budget": self.stopped,
                "not_played": not_played}
