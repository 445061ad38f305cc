"""The grade text TextWorld games print, and the observation without it (imports no textworld).

A TextWorld game (Inform 7, TextWorld's templates) prints, after the action's own text:
"Your score has just gone up by one point." (or "changed by ...") when a quest step is
done, and at the end the banner "*** The End ***" (won) or "*** You lost! ***" and the
line "You scored 1 out of a possible 1, in 5 turns.". `without_grade_text` removes those
lines (and Inform's other end banners and score reports) and keeps the rest:
`TextWorldEnv.remove_grade_text` and `TextWorldProvider.remove_grade_text` are this one
function.
"""

from __future__ import annotations

from playground.core.env import cut_grade_text, grade_text_pattern

GRADE_TEXT = grade_text_pattern(
    r"\[?Your score has just gone up by [a-z -]+? points?\.\]?",
    r"\[?Your score changed by [a-z -]+? points?\.\]?",
    r"\*\*\* ?(?:The End|You lost!|You have won|You have died) ?\*\*\*",
    r"You (?:have so far )?scored (?:a total of )?-?\d+ (?:out of a possible -?\d+|points?)"
    r"(?:, in \d+ turns?(?:\(s\))?)?\.",
)


def without_grade_text(text: str) -> str:
    """A TextWorld observation without its score lines and end banners (see module docstring)."""
    return cut_grade_text(text, GRADE_TEXT)
