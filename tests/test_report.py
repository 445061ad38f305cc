"""`playground report`: one self-contained HTML file with the runs' figures, each episode linked to its trace."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import cli

NOISY = ("--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=0.3", "--agent-option", "repeat=0.2",
         "--agent-option", "stop=0.1", "--quiet")


class Links(HTMLParser):
    """Collects every src/href attribute and the tags that could load something."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self.urls += [value for name, value in attrs.items() if name in ("src", "href") and value]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from playground.cli.main import main
    from playground.host.manager import reset_host

    root = tmp_path_factory.mktemp("report")
    reset_host()
    assert main(["run", *NOISY, "--harness", "base", "--harness", "sentry", "--episodes", "5", "--trials", "2",
                 "--out", str(root / "first")]) == 0
    assert main(["run", *NOISY, "--harness", "base", "--episodes", "4", "--seed", "3", "--out",
                 str(root / "second")]) == 0
    return root


def parse(path: Path) -> Links:
    parser = Links()
    parser.feed(path.read_text())
    return parser


def test_the_report_is_self_contained_and_shows_the_summary_figures(capsys, runs, tmp_path):
    out = tmp_path / "nested" / "report.html"
    code, _, err = cli(capsys, "report", str(runs / "first"), "--out", str(out))
    assert code == 0, err
    html = out.read_text()
    links = parse(out)
    assert not [u for u in links.urls if re.match(r"\s*(https?:)?//", u)], "the report loads something remote"
    assert not [t for t, a in links.tags if t in ("link", "iframe", "img", "object", "embed")
                or (t == "script" and a.get("src"))]
    assert "http://" not in html and "https://" not in html
    assert html.count("<svg") >= 6
    summary = json.loads((runs / "first" / "summary.json").read_text())
    for name, figures in summary["harnesses"].items():
        assert f"{name}</td>" in html
        row = re.search(rf"{re.escape(name)}</td>(.*?)</tr>", html).group(1)
        cells = re.findall(r"<td>(.*?)</td>", row)
        assert cells[0] == str(figures["episodes"])
        assert cells[1] == f"{figures['success_rate']:.1%}"
        low, high = figures["success_ci95"]
        assert cells[2] == f"[{low:.1%}, {high:.1%}]"
        assert cells[4] == f"{figures['mean_steps']:.2f}"
        assert cells[5] == f"{figures['invalid_actions_per_episode']:.2f}"  # issue 44: invalid actions and
        assert cells[6] == f"{sum(figures['interventions'].values()) / figures['episodes']:.2f}"  # interventions
        assert cells[8] == "0"  # judge tokens per episode: noisy's harnesses call no model
        assert cells[9] == str(figures["detected_failures"])
        k = max(figures["pass_k"], key=int)
        assert f"{figures['pass_k'][k]:.1%} (k={k})" in row
    assert "lessons added" in html and "detections (coloured by harness)" in html


def test_every_episode_links_to_its_trace_by_a_relative_path(capsys, runs, tmp_path):
    out = tmp_path / "elsewhere" / "deeper" / "report.html"
    assert cli(capsys, "report", str(runs / "first"), str(runs / "second"), "--out", str(out))[0] == 0
    traces = [u for u in parse(out).urls if not u.startswith("#")]
    records = [json.loads(line) for run in ("first", "second")
               for line in (runs / run / "episodes.jsonl").read_text().splitlines()]
    assert len(traces) == len(records) == 5 * 2 * 2 + 4
    for href in traces:
        assert not Path(href).is_absolute()
        assert (out.parent / href).resolve().is_file(), href
    html = out.read_text()
    assert "first/sentry" in html and "second/base" in html  # several runs: series named run/harness


def test_a_trace_link_never_leaves_the_run_nor_reads_as_a_url_scheme(capsys, runs, tmp_path):
    """Issue 38: a record's crafted `trace: "javascript:..."` became a clickable script link."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs / "first", run)
    lines = (run / "episodes.jsonl").read_text().splitlines()
    crafted = [json.loads(line) for line in lines]
    shutil.copy(run / crafted[0]["trace"], run / "javascript:alert(1)")  # a file of that name inside the run
    crafted[0]["trace"], crafted[1]["trace"] = "javascript:alert(1)", "../../../etc/passwd"
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in crafted))
    out = run / "report.html"  # inside the run: a bare relative path would read as javascript:
    assert cli(capsys, "report", str(run), "--out", str(out))[0] == 0
    urls = [u for u in parse(out).urls if not u.startswith("#")]
    assert all(u.startswith("./") for u in urls) and not any("passwd" in u or "javascript" in u for u in urls)
    assert len(urls) == len(crafted) - 1  # the trace outside the run gets no link; the crafted name a transcript
    assert all((out.parent / u).resolve().is_relative_to(out.parent.resolve()) for u in urls)


def test_records_without_failure_counts_get_them_from_their_traces(capsys, runs, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(runs / "first", old)
    lines = [json.loads(line) for line in (old / "episodes.jsonl").read_text().splitlines()]
    for record in lines:
        for field in ("failures", "lessons_retrieved", "lessons_helped"):
            record.pop(field)
    (old / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    new_html = tmp_path / "new.html"
    old_html = tmp_path / "old.html"
    assert cli(capsys, "report", str(runs / "first"), "--out", str(new_html))[0] == 0
    assert cli(capsys, "report", str(old), "--out", str(old_html))[0] == 0
    section = lambda html: html[html.index('id="detected-failures'):html.index('id="tokens-per-episode"')]  # noqa: E731
    assert "invalid_action" in section(old_html.read_text())
    assert section(old_html.read_text()) == section(new_html.read_text())


def test_bad_input_exits_2_and_an_existing_report_is_kept(capsys, runs, tmp_path):
    code, _, err = cli(capsys, "report", str(tmp_path / "nothing"), "--out", str(tmp_path / "r.html"))
    assert code == 2 and "not a run directory" in err
    existing = tmp_path / "r.html"
    existing.write_text("mine")
    code, _, err = cli(capsys, "report", str(runs / "first"), "--out", str(existing))
    assert code == 2 and "--force" in err and existing.read_text() == "mine"
    assert cli(capsys, "report", str(runs / "first"), "--out", str(existing), "--force")[0] == 0
    assert existing.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium(capsys, runs, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install -y chromium); the render check "
                    "needs a real browser and playwright's would be downloaded from outside PyPI")
    out = tmp_path / "report.html"
    assert cli(capsys, "report", str(runs / "first"), "--out", str(out))[0] == 0
    shot = tmp_path / "report.png"
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=1200,2400", f"--screenshot={shot}", out.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # a page whose charts drew is far from blank: the PNG of the rendered page compresses to well over 50 KB
    assert len(data) > 50_000, len(data)


def transcripts(out: Path) -> dict[str, str]:
    """The transcript pages the report `out` links to, by episode key (their title); each inside the report's
    folder."""
    pages = {}
    for href in [u for u in parse(out).urls if not u.startswith("#")]:
        page = out.parent / href
        assert page.resolve().is_relative_to(out.parent.resolve()) and page.is_file(), href
        html = page.read_text()
        pages[unescape(re.search(r"<title>(.*?)</title>", html).group(1))] = html
        back = Links()
        back.feed(html)
        assert back.urls == ["../../report.html"] and (page.parent / back.urls[0]).resolve() == out.resolve()
    return pages


def test_each_transcript_shows_the_episode_step_by_step_with_what_the_harness_did(capsys, runs, tmp_path):
    out = tmp_path / "report.html"
    assert cli(capsys, "report", str(runs / "first"), "--out", str(out))[0] == 0
    pages = transcripts(out)
    records = [json.loads(line) for line in (runs / "first" / "episodes.jsonl").read_text().splitlines()]
    assert sorted(pages) == sorted(r["key"] for r in records)
    shown = 0
    for record in records:
        html = pages[record["key"]]
        assert html.count('<div class="ev step">') == record["steps"]
        assert html.count('<div class="ev detection">') == record["detected_failures"]
        assert html.count('<div class="ev intervention">') == sum(record["interventions"].values())
        assert html.count('<div class="ev verification') == (record["verified_recoveries"]
                                                              + record["unresolved_recoveries"])
        shown += record["detected_failures"] > 0 and sum(record["interventions"].values()) > 0
    assert shown  # some episode shows a detection and a repair


def test_a_transcript_escapes_what_the_trace_says(capsys, runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs / "second", run)
    record = json.loads((run / "episodes.jsonl").read_text().splitlines()[0])
    trace = run / record["trace"]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    for event in events:
        if event["type"] == "step":
            event["observation"] = "<script>alert(1)</script><a href='https://example.com'>x</a>"
    trace.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "report.html"
    assert cli(capsys, "report", str(run), "--out", str(out))[0] == 0
    html = transcripts(out)[record["key"]]  # its only link: back to the report
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html


def test_an_errored_episode_shows_its_one_line_cause(capsys, runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs / "second", run)
    lines = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    lines[0].update(status="error", won=False, error="HTTP 400 from the endpoint: requested 2307 tokens\nTraceback ...")
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "report.html"
    assert cli(capsys, "report", str(run), "--out", str(out))[0] == 0
    html = out.read_text()
    assert '<div class="cause">HTTP 400 from the endpoint: requested 2307 tokens</div>' in html
    assert html.count('class="cause"') == 1 and "Traceback" not in html
