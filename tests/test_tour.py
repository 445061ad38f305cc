"""README's five-minute tour, run exactly as written in a fresh clone, so the tour cannot drift from the code.

Steps 1-3 run (4 needs a model endpoint and 5 real benchmark data). The clone gets a fresh virtual environment
that sees this one's packages (through a .pth file, as tests/test_scaffold.py does) with the clone installed in
it, so `pip install -e no-repeat pytest` installs the scaffold there and not into the environment under test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def tour_blocks(readme: str) -> list[str]:
    """The bash blocks of the tour's steps 1 to 3."""
    tour = readme.split("## A five-minute tour", 1)[1].split("**4.", 1)[0]
    return re.findall(r"```bash\n(.*?)```", tour, flags=re.S)


def fresh_venv(root: Path, clone: Path) -> Path:
    """A venv that sees this one's packages, with the clone installed (no dependencies) in it; its bin folder."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site_packages = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip()
    Path(site_packages, "_host_venv.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(clone)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    return venv / "bin"


def test_the_readme_tour_runs_as_written_in_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{REPO}", str(clone)], check=True)
    blocks = tour_blocks((clone / "README.md").read_text())
    assert len(blocks) == 3, blocks
    bin_dir = fresh_venv(tmp_path, clone)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PLAYGROUND_PLUGINS", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    outputs = []
    for block in blocks:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=clone, env=env, capture_output=True,
                                text=True)
        assert result.returncode == 0, f"{block}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        outputs.append(result.stdout)
    look = outputs[1]
    # the episode the tour points at shows a detection, a repair and the verifier's verdict
    assert "detected" in look and "intervention soft_repair" in look and "verdict" in look.lower(), look[-3000:]
    assert (clone / "tour.html").is_file()
    assert "no-repeat" in outputs[2] or (clone / "no-repeat").is_dir()
