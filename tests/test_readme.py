"""README and docs stay true: the Quickstart block and the plugin example."""

from __future__ import annotations

import re
from pathlib import Path

from playground.cli.scaffold import MODULE

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
WRITING_PLUGINS = (ROOT / "docs" / "writing-plugins.md").read_text()
QUICKSTART = [
    "pip install -e '.[local]' && playground run",
    "pip install -e '.[test,local,alfworld,scienceworld,langgraph,ray,prompt-opt]' && playground envs setup appworld && pytest -q",
]


def test_quickstart_block_is_the_two_documented_lines():
    # .ci/run runs line 2 of this block: keep it byte-identical.
    block = re.search(r"## Quickstart\n\n```bash\n(.*?)```", README, re.S).group(1)
    assert block.splitlines() == QUICKSTART


def test_readme_stays_short():
    assert len(README.splitlines()) <= 150


def test_plugin_example_is_what_the_scaffold_writes():
    example = re.search(r"<!-- plugin-example -->\n```python\n(.*?)```", WRITING_PLUGINS, re.S).group(1)
    assert example == MODULE.format(name="no-repeat", module="no_repeat", dist="playground-no-repeat")


def test_ci_and_docs_build_llama_cpp_with_the_flags_the_pins_were_made_with():
    """.ci/run and docs/models.md spell out the portable llama.cpp build flags; they must stay the ones the client
    names (the SmolLM2 pins in tests/data were made with that build)."""
    from playground.agents.local_model import PORTABLE_CMAKE_ARGS

    assert f'CMAKE_ARGS="${{CMAKE_ARGS:-{PORTABLE_CMAKE_ARGS}}}"' in (ROOT / ".ci" / "run").read_text()
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in (ROOT / "docs" / "models.md").read_text()
