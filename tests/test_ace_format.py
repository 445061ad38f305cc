"""Issue 56: ACE playbooks are read as ACE reads them (docs/playbook-ace-format.md, "the specification we implement").

A corpus of edge cases is read twice: by the playbook plugin (`io.read_ace`) and by `rules`, a small
re-implementation of ACE's rules written here from the specification (not from the plugin's code). They
agree on every case, except the few limits of a playbook that the docs name, each with its reason. Then
the round trip: a file imported into a playbook and exported gives the same headers (empty sections and
repeated headers included) and the same bullets in the same order.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from playground.plugins.playbook import io as playbook_io
from playground.plugins.playbook.io import PlaybookImportWarning, read_ace
from playground.plugins.playbook.store import Playbook

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "playbook-ace-format.md"
ACE_SAMPLE = ROOT.parent / "shared" / "data" / "playbooks" / "ace_appworld_online_trained_playbook.txt"

# ---- the rules, as the specification states them ------------------------------------------------------------

COUNTED = re.compile(r"\[([^\]]+)\]\s*helpful=(\d+)\s*harmful=(\d+)\s*::\s*(.*)", re.S)  # ACE's generator
PLAIN = re.compile(r"\[([^\]]+)\]\s*(.+)", re.S)  # ACE-AppWorld: no counters


def rules(data: bytes) -> dict:
    """Headers (line, name), bullets (line, section or None, id, helpful, harmful, content; counters None when the
    bullet has none) and the numbers of the lines that are neither, by the specification's rules."""
    text = data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")  # (not UTF-8: see DIFFERENCES)
    headers, bullets, other = [], [], []
    section = None
    for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("##"):
            section = line.lstrip("#").strip()
            headers.append((number, section))
        elif match := COUNTED.match(line):
            bullets.append((number, section, match[1], int(match[2]), int(match[3]), match[4]))
        elif (match := PLAIN.match(line)) and not match[2].startswith(("helpful=", "harmful=")):
            bullets.append((number, section, match[1], None, None, match[2]))
        else:
            other.append(number)
    return {"headers": headers, "bullets": bullets, "other": other}


# ---- the corpus ------------------------------------------------------------------------------------------------

CASES: dict[str, str | bytes] = {
    # what the issue found read differently
    "no space between the counters": "## A\n[a-1] helpful=1harmful=0 :: text\n",
    "no whitespace at all": "## A\n[a-1]helpful=3harmful=2::text\n",
    "empty :: bullet": "## A\n[a-1] helpful=0 harmful=0 ::\n[a-2] helpful=2 harmful=1 ::   \n[a-3] x\n",
    "non-ASCII digits in counters": "## A\n[a-1] helpful=١٢ harmful=٣ :: Arabic-Indic\n[a-2] helpful=३ harmful=０ :: more\n",
    "an id of only spaces": "## A\n[   ] helpful=1 harmful=0 :: text\n[ ] plain\n",
    "##OTHERS": "##OTHERS\n[o-1] text\n",
    "### Sub": "## A\n[a-1] x\n### Sub\n[s-1] y\n",
    "an empty '## '": "## A\n[a-1] x\n## \n[e-1] y\n##\n[e-2] z\n",
    "a leading byte-order mark": "\ufeff## STRATEGIES AND HARD RULES\n[s-1] helpful=1 harmful=0 :: x\n",
    "CR-only line endings": "## A\r[a-1] helpful=1 harmful=0 :: x\r[a-2] y\r## B\r[b-1] z\r",
    "identical duplicate lines": "## A\n[a-1] helpful=1 harmful=0 :: x\n[a-1] helpful=1 harmful=0 :: x\n",
    "duplicates with other counters": "## A\n[a-1] helpful=1 harmful=0 :: x\n[a-1] helpful=5 harmful=0 :: x\n",
    "a header that comes twice": "## A\n[a-1] x\n## B\n[b-1] y\n## A\n[a-2] z\n",
    "an empty section": "## A\n[a-1] x\n## EMPTY\n## B\n[b-1] y\n",
    # ordinary files and lines
    "counters": "## COMMON MISTAKES AND CORRECT STRATEGIES\n[cms-1] helpful=3 harmful=1 :: When paging, fetch all.\n",
    "no counters": "## STRATEGIES AND HARD RULES\n[shr-1] Make sure to end code blocks.\n",
    "CRLF line endings": "## A\r\n[a-1] helpful=1 harmful=0 :: x\r\n\r\n[a-2] y\r\n",
    "mixed line endings": "## A\r\n[a-1] x\r[a-2] y\n[a-3] z",
    "a trailing colon": "## TROUBLESHOOTING AND PITFALLS:\n[t-1] x\n",
    "prose is not a bullet": "## A\nSome prose the author wrote.\n[a-1] x\n",
    "a one-'#' title": "# My playbook\n## A\n[a-1] x\n#\n",
    "a markdown list item": "## A\n- [a-1] x\n* item\n",
    "an empty id": "## A\n[] helpful=1 harmful=0 :: x\n[] text\n",
    "an id with no text": "## A\n[a-1]\n[a-2]    \n",
    "one counter": "## A\n[a-1] helpful=1 :: x\n[a-2] harmful=1 :: y\n",
    "counters the other way round": "## A\n[a-1] harmful=0 helpful=1 :: x\n",
    "a negative or fractional counter": "## A\n[a-1] helpful=-1 harmful=0 :: x\n[a-2] helpful=1.5 harmful=0 :: y\n",
    "counters with no '::'": "## A\n[a-1] helpful=1 harmful=0 text\n",
    "spaces around '='": "## A\n[a-1] helpful = 1 harmful = 0 :: x\n",
    "'::' in the text": "## A\n[a-1] helpful=2 harmful=1 :: Use\tthe docs :: first.\n[a-2] :: plain\n",
    "much whitespace": "## A\n   [a-1]   helpful=1   harmful=2   ::   spaced   text   \n\t[a-2]\tTabbed\n",
    "Unicode whitespace": "## A\n[a-1]\u00a0helpful=1\u2003harmful=2\u00a0::\u00a0text\u00a0\n",
    "leading zeros": "## A\n[a-1] helpful=007 harmful=0000000000000000000000000001 :: x\n",
    "bullets before any header": "[p-1] first\n[p-2] helpful=1 harmful=0 :: second\n## A\n[a-1] x\n",
    "a header's own spacing": "##    Spaced   Name  \n[a-1] x\n## A ##\n[a-2] y\n",
    "brackets in an id": "## A\n[[a]] x\n[a[1] y\n",
    "other line breaks stay in a line": "## A\n[a-1] x\x0cy\n[a-2] p\u2028q\x85r\n",
    "blank and whitespace lines": "\n   \n\t\n## A\n\n[a-1] x\n   \n",
    "only headers": "## STRATEGIES AND HARD RULES\n\n## OTHERS\n",
    "only prose": "A title\nand some words.\n",
    "an empty file": "",
    "no final newline": "## A\n[a-1] helpful=1 harmful=0 :: x",
    "a counted bullet spelled like a plain one": "## A\n[a-1] helpful: 1\n[a-2] helpfully written\n",
    "the canonical sections": "".join(f"## {name}\n[{n}] helpful={n} harmful=0 :: text {n}\n"
                                      for n, name in enumerate(playbook_io.ACE_SECTIONS, start=1)),
    "a header over 200 characters": "## " + "H" * 300 + ":\n[a-1] x\n",
    # a playbook's limits (DIFFERENCES)
    "a counter over 2^53 - 1": "## A\n[a-1] helpful=9007199254740992 harmful=0 :: x\n[a-2] y\n",
    "a text over 4,000 characters": "## A\n[a-1] " + "x" * 4_001 + "\n[a-2] y\n",
    "a header over 4,000 characters": "## " + "H" * 4_100 + "\n[a-1] x\n## A\n[a-2] y\n",
    "a line that is not UTF-8": b"## A\n[a-1] caf\xe9\n[a-2] y\n",
    "a line over 128 KiB": "## A\n[a-1] " + "x" * (128 * 1024) + "\n[a-2] y\n",
}
# Lines the rules read as bullets that a playbook cannot hold: the import skips them with a warning, and the
# docs name each limit (the phrase) with its reason.
DIFFERENCES = {
    "a counter over 2^53 - 1": ([2], "2^53 − 1"),
    "a text over 4,000 characters": ([2], "4,000 characters"),
    "a header over 4,000 characters": ([2], "header of more than"),
    "a line that is not UTF-8": ([2], "not UTF-8"),
    "a line over 128 KiB": ([2], "128 KiB"),
}


def _data(case: str) -> bytes:
    value = CASES[case]
    return value if isinstance(value, bytes) else value.encode("utf-8")


def _file(tmp_path: Path, case: str) -> Path:
    path = tmp_path / "ace.txt"
    path.write_bytes(_data(case))
    return path


def _section(record: dict) -> str | None:
    """The section a record's bullet came under, as written (None: before any header)."""
    provenance = record["provenance"]
    return provenance["header"] if "header" in provenance else (record["subtype"] or None)


def _bullet(record: dict) -> tuple:
    provenance = record["provenance"]
    counted = "harmful" in provenance
    return (record["line"], _section(record), provenance["id"], record["helped"] if counted else None,
            provenance["harmful"] if counted else None, "" if provenance.get("empty") else record["principle"])


def _expected(case: str) -> dict:
    """What the plugin should read: the rules' reading, less the lines a playbook cannot hold."""
    expected = rules(_data(case))
    refused = DIFFERENCES.get(case, ([], ""))[0]
    return {"bullets": [b for b in expected["bullets"] if b[0] not in refused],
            "other": sorted(expected["other"] + refused), "headers": expected["headers"]}


def _line_numbers(messages: list[str]) -> list[int]:
    return sorted(int(re.search(r"line (\d+): ", message)[1]) for message in messages)


def test_every_case_is_read_as_the_rules_read_it(tmp_path):
    """Bullets (line, section, id, counters, content) and the lines skipped, for every case at once."""
    assert len(CASES) >= 40 and set(DIFFERENCES) <= set(CASES)
    wrong = {}
    for case in CASES:
        skipped: list[str] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PlaybookImportWarning)  # notes; the skipped lines are in `skipped`
            records = read_ace(_file(tmp_path, case), skipped=skipped)
        got = {"bullets": [_bullet(r) for r in records], "other": _line_numbers(skipped)}
        expected = _expected(case)
        if got != {"bullets": expected["bullets"], "other": expected["other"]}:
            wrong[case] = (got, expected)
    assert not wrong, "\n".join(f"{case}:\n  plugin {got}\n  rules  {exp}" for case, (got, exp) in wrong.items())


def test_header_lines_are_read_as_the_rules_read_them(tmp_path):
    wrong = {}
    for case in CASES:
        headers: list[tuple[int, str]] = []
        read_ace(_file(tmp_path, case), skipped=[], notes=[], headers=headers)
        if headers != _expected(case)["headers"]:
            wrong[case] = (headers, _expected(case)["headers"])
    assert not wrong, wrong


def test_every_line_the_rules_skip_warns_naming_file_and_line(tmp_path):
    wrong = {}
    for case in CASES:
        path = _file(tmp_path, case)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            read_ace(path)
        messages = [str(w.message) for w in caught if issubclass(w.category, PlaybookImportWarning)]
        skipped = [m for m in messages if m.endswith("(skipped)")]
        if not all(m.startswith(f"{path}: line ") for m in skipped) or \
                _line_numbers(skipped) != _expected(case)["other"]:
            wrong[case] = skipped
    assert not wrong, wrong


def test_each_difference_is_named_in_the_specification():
    text = SPEC.read_text(encoding="utf-8")
    assert "the specification we implement" in text.lower()
    missing = [phrase for _, phrase in DIFFERENCES.values() if phrase not in text]
    assert not missing, f"{SPEC.name} does not name: {missing}"


def test_a_file_with_no_bullet_is_never_read_silently(tmp_path):
    """CR-only line endings gave one line and 0 bullets with no warning; now they are lines, and a non-blank file
    with no bullet at all (only headers, only prose) says so."""
    assert [r["provenance"]["id"] for r in read_ace(_file(tmp_path, "CR-only line endings"))] == ["a-1", "a-2", "b-1"]
    for case in ("only headers", "only prose"):
        path = _file(tmp_path, case)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert read_ace(path) == []
        last, skipped = (3, 0) if case == "only headers" else (2, 2)
        assert [str(w.message) for w in caught if "no bullet" in str(w.message)] == \
            [f"{path}: lines 1-{last}: no bullet in 2 non-blank line(s) ({skipped} skipped); nothing to import"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaybookImportWarning)
        assert read_ace(_file(tmp_path, "an empty file")) == []
    with Playbook(tmp_path / "pb.sqlite") as playbook:
        report = playbook.import_ace(_file(tmp_path, "only headers"))
        assert report.imported == 0 and any("no bullet" in note for note in report.notes)


def test_identical_lines_stay_two_lessons_with_their_own_counters(tmp_path):
    path = _file(tmp_path, "duplicates with other counters")
    with pytest.warns(PlaybookImportWarning, match=r"line 3: the same bullet as line 2"):
        read_ace(path)
    with Playbook(tmp_path / "pb.sqlite") as playbook:
        report = playbook.import_ace(path)
        assert report.imported == 2 and report.notes and report.notes[0].startswith("line 3: the same bullet as line 2")
        lessons = list(playbook.all())
        assert [(l.provenance["id"], l.helped, l.provenance.get("copy")) for l in lessons] == \
            [("a-1", 1, None), ("a-1", 5, 2)]
        assert playbook.import_ace(path).imported == 0  # importing the file again adds nothing
        playbook.export_ace(tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == "## A\n[a-1] helpful=1 harmful=0 :: x\n[a-1] helpful=5 harmful=0 :: x\n"


def test_a_header_that_comes_twice_keeps_the_bullets_in_file_order(tmp_path):
    with Playbook(tmp_path / "pb.sqlite") as playbook:
        playbook.import_ace(_file(tmp_path, "a header that comes twice"))
        playbook.export_ace(tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == (
        "## A\n[a-1] helpful=0 harmful=0 :: x\n\n## B\n[b-1] helpful=0 harmful=0 :: y\n\n"
        "## A\n[a-2] helpful=0 harmful=0 :: z\n")


def _reading(data: bytes) -> tuple[list[str], list[tuple]]:
    """The header names and bullets (section, id, helpful, harmful, content; no counters read as 0) by the rules."""
    read = rules(data)
    return ([name for _, name in read["headers"]],
            [(section, bullet_id, helpful or 0, harmful or 0, content)
             for _, section, bullet_id, helpful, harmful, content in read["bullets"]])


def test_every_case_round_trips_through_a_playbook(tmp_path):
    """Import, then export: the rules read the same headers (empty sections, repeated headers) and bullets, in order;
    the export imported into a new playbook and exported again gives the same bytes."""
    wrong = {}
    for number, case in enumerate(CASES):
        if case in DIFFERENCES:
            continue
        out, again = tmp_path / f"out{number}.txt", tmp_path / f"again{number}.txt"
        with Playbook(tmp_path / f"pb{number}.sqlite") as playbook:
            playbook.import_ace(_file(tmp_path, case))
            playbook.export_ace(out)
        with Playbook(tmp_path / f"second{number}.sqlite") as playbook:
            playbook.import_ace(out)
            playbook.export_ace(again)
        if _reading(out.read_bytes()) != _reading(_data(case)) or again.read_bytes() != out.read_bytes():
            wrong[case] = (out.read_text(encoding="utf-8"), _reading(_data(case)))
    assert not wrong, "\n".join(f"{case}: exported {text!r}\n  rules {exp}" for case, (text, exp) in wrong.items())


def test_the_shipped_appworld_sample_exports_with_its_empty_section(tmp_path):
    if not ACE_SAMPLE.exists():
        pytest.skip(f"ACE sample not present at {ACE_SAMPLE} (see ../shared/data/SOURCES.md)")
    sample = ACE_SAMPLE.read_bytes()
    headers, bullets = _reading(sample)
    assert "USEFUL CODE SNIPPETS AND TEMPLATES" in headers and len(bullets) == 359
    with Playbook(tmp_path / "pb.sqlite") as playbook:
        assert playbook.import_ace(ACE_SAMPLE).imported == 359
        playbook.export_ace(tmp_path / "out.txt")
    exported = (tmp_path / "out.txt").read_bytes()
    assert _reading(exported) == (headers, bullets)
    assert [line for line in exported.decode().splitlines() if line.startswith("## ")] == \
        [line for line in sample.decode().splitlines() if line.startswith("## ")]
