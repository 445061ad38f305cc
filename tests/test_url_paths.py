"""Issue 56: paths are paths, URLs are URLs. An option that takes a file path refuses a value that looks like a URL
(exit 2, a message that names the option and the schemes it supports, the password masked) and makes nothing on
disk; a path with a colon later (`runs/a:b`) is still a path."""

from __future__ import annotations

import pytest

from playground.run import paths
from playground.run.paths import URLPathError, plain_path, register_url_scheme, supported_schemes, url_scheme
from tests.conftest import cli

URLS = ["postgresql://user:secret@host:5432/db", "s3://bucket/key", "file:///tmp/x.sqlite",
        "http://example.com/p.sqlite"]
NOT_PLAYBOOKS = [url for url in URLS if not url.startswith("postgresql")]  # the playbook plugin registers postgresql
RUN = ["run", "--env", "tiny", "--agent", "noisy", "--episodes", "1", "--quiet"]


def _entries(root):
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def _refused(capsys, tmp_path, monkeypatch, option: str, url: str, *args: str) -> str:
    """Run `playground ARGS` in an empty working directory; check it exits 2 naming `option` and the URL (its
    password masked) and that nothing was made; return stderr."""
    monkeypatch.chdir(tmp_path)
    before = _entries(tmp_path)
    code, _, err = cli(capsys, *args)
    assert code == 2, err
    assert "looks like a URL" in err and option in err, err
    expected = "postgres://, postgresql://" if option in ("--playbook", "PATH") else "no URL scheme yet"
    assert expected in err, err  # the schemes the option supports: a playbook's are PostgreSQL's
    assert "secret" not in err, err
    assert url.replace("user:secret@", "***@") in err, err
    assert _entries(tmp_path) == before, "a refused URL made something on disk"
    return err


@pytest.mark.parametrize("url", NOT_PLAYBOOKS)
def test_run_playbook_refuses_a_url(capsys, tmp_path, monkeypatch, url):
    _refused(capsys, tmp_path, monkeypatch, "--playbook", url, *RUN, "--harness", "sentry", "--out", "run",
             "--playbook", url)


@pytest.mark.parametrize("url", URLS)
def test_run_out_refuses_a_url(capsys, tmp_path, monkeypatch, url):
    _refused(capsys, tmp_path, monkeypatch, "--out", url, *RUN, "--out", url)


@pytest.mark.parametrize("url", NOT_PLAYBOOKS)
def test_playbook_commands_refuse_a_url(capsys, tmp_path, monkeypatch, url):
    lessons = tmp_path / "lessons.jsonl"
    lessons.write_text("")
    _refused(capsys, tmp_path, monkeypatch, "PATH", url, "playbook", "import", url, str(lessons))
    _refused(capsys, tmp_path, monkeypatch, "PATH", url, "playbook", "stats", url)
    _refused(capsys, tmp_path, monkeypatch, "SOURCE", url, "playbook", "import", "book.sqlite", url)
    _refused(capsys, tmp_path, monkeypatch, "OUT", url, "playbook", "export", "book.sqlite", url)


def test_a_postgresql_url_is_a_playbook_location_not_a_path(capsys, tmp_path, monkeypatch):
    """The playbook plugin registers postgresql:// for --playbook and PATH (issue 55): the URL goes to the server
    (here one that does not resolve: exit 2, saying so), its password masked, nothing made on disk."""
    monkeypatch.chdir(tmp_path)
    url = "postgresql://user:secret@host.invalid:5432/db"
    for args in ([*RUN, "--harness", "sentry", "--out", "run", "--playbook", url], ["playbook", "stats", url]):
        code, _, err = cli(capsys, *args)
        assert code == 2 and "cannot connect" in err and "secret" not in err, err
        assert "***@host.invalid" in err and "looks like a URL" not in err, err
    assert _entries(tmp_path) == []


@pytest.mark.parametrize("url", URLS)
def test_report_and_plugin_outputs_refuse_a_url(capsys, tmp_path, monkeypatch, url):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _refused(capsys, tmp_path, monkeypatch, "--out", url, "report", str(run_dir), "--out", url)  # its option names it
    _refused(capsys, tmp_path, monkeypatch, "--out", url, "aed", "export", str(run_dir), "--view", "diagnosis",
             "--out", url)
    _refused(capsys, tmp_path, monkeypatch, "--evidence", url, "darc", "distill", "--evidence", url)
    _refused(capsys, tmp_path, monkeypatch, "--out", url, "study", "run", "sentry-table4-heldout", "--out", url)


def test_a_path_with_a_colon_later_is_still_a_path(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, *RUN, "--harness", "sentry", "--out", "runs/a:b/run", "--playbook", "runs/a:b/p.sqlite")
    assert code == 0, err
    assert (tmp_path / "runs" / "a:b" / "run" / "summary.json").is_file()
    code, out, err = cli(capsys, "playbook", "export", "runs/a:b/p.sqlite", "runs/a:b/lessons.jsonl")
    assert code == 0, err
    assert (tmp_path / "runs" / "a:b" / "lessons.jsonl").is_file()


@pytest.mark.parametrize("value", [
    "runs/a:b", "a:b", "sentry:default", "prefix:../x/p.json", "file:x", "C:\\runs\\p.sqlite", "C:/runs/p.sqlite",
    "C://runs/p.sqlite", "./s3://bucket/key", "/tmp/http://x", "", "plain.sqlite",
])
def test_what_is_not_a_url(value):
    assert url_scheme(value) is None
    assert plain_path(value, "--out") == value


@pytest.mark.parametrize("value, scheme", [
    ("postgresql://user:secret@host:5432/db", "postgresql"), ("S3://bucket/key", "s3"), ("  http://x/y", "http"),
    ("git+ssh://host/repo", "git+ssh"), ("file:///tmp/x.sqlite", "file"),
])
def test_what_is_a_url(value, scheme):
    assert url_scheme(value) == scheme
    with pytest.raises(URLPathError, match="looks like a URL"):
        plain_path(value, "--out")


def test_a_password_in_the_query_or_a_broken_url_is_masked_too():
    for url in ("postgresql://host/db?password=secret", "postgresql://u:secret@[::1/db"):
        with pytest.raises(URLPathError) as caught:
            plain_path(url, "--out")  # (--playbook takes PostgreSQL URLs)
        assert "secret" not in str(caught.value)


def test_a_backend_registers_the_schemes_its_option_supports(monkeypatch):
    monkeypatch.setattr(paths, "_SCHEMES", {})
    url = "postgresql://user:secret@host:5432/db"
    assert supported_schemes("--playbook") == ()
    register_url_scheme("--playbook", "PostgreSQL")
    assert supported_schemes("--playbook") == ("postgresql",)
    assert plain_path(url, "--playbook") == url
    assert plain_path(url, "PATH", schemes_of="--playbook") == url
    with pytest.raises(URLPathError, match=r"--out supports only a plain path, no URL scheme yet"):
        plain_path(url, "--out")  # per option: --out takes none
    with pytest.raises(URLPathError, match=r"supports only a plain path and the URL schemes postgresql://"):
        plain_path("s3://bucket/key", "--playbook")
    with pytest.raises(ValueError):
        register_url_scheme("--playbook", "not a scheme")
