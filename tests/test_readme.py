"""README stays true: the Quickstart block and the plugin example."""

from __future__ import annotations

import re
from pathlib import Path

from playground.cli.scaffold import MODULE

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_quickstart_block_has_exactly_two_lines():
    block = re.search(r"## Quickstart\n\n```bash\n(.*?)```", README, re.S).group(1)
    lines = block.strip().splitlines()
    assert len(lines) == 2
    assert "playground run" in lines[0] and "pytest" in lines[1]


def test_plugin_example_is_what_the_scaffold_writes():
    example = re.search(r"<!-- plugin-example -->\n```python\n(.*?)```", README, re.S).group(1)
    assert example == MODULE.format(name="no-repeat", module="no_repeat", dist="playground-no-repeat")
