"""Every playbook shipped in playbooks/ imports cleanly, is documented, and retrieves lessons Sentry can use."""
import json
from pathlib import Path

import pytest

from tests.conftest import cli

PLAYBOOKS = Path(__file__).resolve().parent.parent / "playbooks"
SHIPPED = sorted(PLAYBOOKS.glob("*.jsonl"))


def test_at_least_one_playbook_is_shipped():
    assert SHIPPED, "playbooks/ ships no playbook"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_playbook_imports_whole_and_is_documented(capsys, tmp_path, path):
    lessons = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    target = tmp_path / "pb.sqlite"
    code, out, err = cli(capsys, "playbook", "import", str(target), str(path))
    assert code == 0, err
    assert f"imported {len(lessons)} lessons" in out
    code, out, err = cli(capsys, "playbook", "stats", str(target), "--json")
    assert code == 0 and json.loads(out)["count"] == len(lessons)
    readme = (PLAYBOOKS / "README.md").read_text()
    assert f"## {path.name}" in readme, f"{path.name} has no provenance section in playbooks/README.md"
    assert f"{len(lessons)} lessons" in readme, "the README's lesson count disagrees with the file"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_playbook_answers_retrieval_for_its_own_labels(capsys, tmp_path, path):
    lesson = json.loads(path.read_text().splitlines()[0])
    target = tmp_path / "pb.sqlite"
    assert cli(capsys, "playbook", "import", str(target), str(path))[0] == 0
    code, out, err = cli(capsys, "playbook", "retrieve", str(target), "--type", lesson["failure_type"],
                         "--labels", ",".join(lesson["labels"]), "--json")
    assert code == 0, err
    retrieved = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert retrieved, "no lesson retrieved for the labels of the playbook's own first lesson"
    assert all(set(r["labels"]) & set(lesson["labels"]) for r in retrieved)
