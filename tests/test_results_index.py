"""docs/results.md's "Index of figures" covers the figure pages under docs/results/ and the committed run files.

docs/results.md is the index; the figures themselves are on the pages under docs/results/. The index is the table
under `## Index of figures`: one row per figure section (its first cell a link to the section's anchor on its page,
`results/PAGE.md#anchor`, or "(no section)" for a run directory no section uses), its kind, how to reproduce it and
its run files (links to docs/runs/<dir>/, or "not kept").

The rule for "a section that reports figures": a `## ` or `### ` heading (outside code fences) whose own body, the
lines up to the next `#`, `##` or `###` heading, holds a fenced ```bash block or a table separator line (a line
starting `|---` or `|:--`). "The papers' tables as studies" (the studies' own table) and the index itself are not
figure sections. A heading whose figures sit only in its subsections needs no row; a section that reports figures
in prose alone may have one (the test does not ask for it).

The test fails when a docs/runs/* directory is in no row, when a row links a docs/runs directory or a study file
that does not exist, when a row's section anchor is not a heading of the page it names, when a row names no kind
(real-model, instrument or machinery) or no run files, or when a figure section has no row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "results.md"
FIGURE_PAGES = sorted((ROOT / "docs" / "results").glob("*.md"))
RUNS = ROOT / "docs" / "runs"
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^(#{1,3}) (.*)$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
NOT_FIGURES = {"The papers' tables as studies", "Index of figures"}
KINDS = ("real-model", "instrument", "machinery")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading, as tests/test_docs_links.py computes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(text: str) -> list[tuple[int, str, str]]:
    """(level, heading, own body) for every heading of level 1-3 outside code fences, the body up to the next one."""
    found: list[tuple[int, str, list[str]]] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2).strip(), []))
        elif found:
            found[-1][2].append(line)
    return [(level, heading, "\n".join(body)) for level, heading, body in found]


def reports_figures(body: str) -> bool:
    return "```bash" in body or re.search(r"^\|\s*:?-{3}", body, re.M) is not None


def index_rows(text: str) -> list[list[str]]:
    """The index table's rows (header and separator left out), each as its cells."""
    body = next(body for level, heading, body in sections(text) if level == 2 and heading == "Index of figures")
    rows = [line for line in body.splitlines() if line.startswith("|")]
    assert rows and rows[0].startswith("| section |") and re.match(r"^\|-", rows[1]), "the index has no table"
    # a cell's `|` only ever separates cells here (no code span in the index holds one)
    return [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows[2:]]


TEXT = PAGE.read_text()
ROWS = index_rows(TEXT)
SECTION_LINK = re.compile(r"\[[^\]]+\]\(results/([\w-]+\.md)#([^)]+)\)")
# (page name, heading) of every section of every figure page
SECTIONS = [(page.name, level, heading, body) for page in FIGURE_PAGES
            for level, heading, body in sections(page.read_text())]


def test_results_md_is_an_index_and_the_figures_are_on_their_pages():
    assert len(FIGURE_PAGES) >= 4
    assert len(TEXT.splitlines()) < 200, "docs/results.md is the index: the figures belong on docs/results/ pages"
    assert not [heading for level, heading, body in sections(TEXT)
                if level in (2, 3) and heading not in NOT_FIGURES and reports_figures(body)]


def test_the_index_has_rows_of_four_cells():
    assert len(ROWS) > 20
    assert not [row for row in ROWS if len(row) != 4]


def test_every_run_directory_is_in_a_row_and_every_linked_one_exists():
    linked = set()
    missing = []
    for row in ROWS:
        for target in LINK.findall(" ".join(row)):
            match = re.match(r"runs/([^/#]+)/?$", target)
            if match:
                linked.add(match.group(1))
                if not (RUNS / match.group(1)).is_dir():
                    missing.append(target)
    assert not missing, f"the index links run directories that do not exist: {missing}"
    unlisted = sorted(p.name for p in RUNS.iterdir() if p.is_dir()) if RUNS.is_dir() else []
    unlisted = [name for name in unlisted if name not in linked]
    assert not unlisted, f"docs/runs directories in no row of the index: {unlisted}"


def test_every_linked_study_file_exists():
    studies = [t for row in ROWS for t in LINK.findall(" ".join(row)) if "/studies/" in t]
    assert studies, "the index links no study file"
    missing = [t for t in studies if not (PAGE.parent / t).resolve().is_file()
               or not re.match(r"\.\./plugins/[\w-]+/studies/[\w.-]+\.toml$", t)]
    assert not missing, f"the index links study files that do not exist: {missing}"


def test_every_row_names_a_section_a_kind_and_its_run_files():
    anchors = {(page, slug(heading)) for page, _, heading, _ in SECTIONS}
    bad = []
    for section, kind, _, runs in ROWS:
        match = SECTION_LINK.fullmatch(section)
        if not (section == "(no section)" or (match and match.groups() in anchors)):
            bad.append(f"{section}: not a link to a heading of a page under docs/results/")
        if not any(k in kind for k in KINDS):
            bad.append(f"{section}: no kind")
        if not ("not kept" in runs or re.search(r"\]\(runs/[^)]+\)", runs)):
            bad.append(f"{section}: no run files and not 'not kept'")
        if section == "(no section)" and "not kept" in runs:
            bad.append("a (no section) row must name the run directory it is for")
    assert not bad, "; ".join(bad)


def test_every_figure_section_has_a_row():
    indexed = {m.groups() for row in ROWS for m in [SECTION_LINK.fullmatch(row[0])] if m}
    figures = [(page, heading) for page, level, heading, body in SECTIONS
               if level in (2, 3) and reports_figures(body)]
    assert len(figures) > 20
    unindexed = [f"{page}: {heading}" for page, heading in figures if (page, slug(heading)) not in indexed]
    assert not unindexed, f"figure sections of docs/results/ with no row in docs/results.md's index: {unindexed}"


@pytest.mark.parametrize("body, figures", [
    ("text\n```bash\nplayground run\n```\n", True),
    ("| a | b |\n|---|---|\n| 1 | 2 |\n", True),
    ("prose only, with 73/100 in it\n", False),
])
def test_the_rule_for_a_figure_section(body, figures):
    assert reports_figures(body) is figures
