"""Generate one TextWorld game with textworld's own generator.

Run as a script (the game cache does so in a child process with a fixed
PYTHONHASHSEED, because tw-cooking iterates over sets and would otherwise write
different bytes in every process):

    python generate.py --seed 20000 --params '{"challenge": "custom", ...}' --out DIR/game.z8

It writes `game.z8` and `game.json` (both needed to play) next to each other. This
module imports only textworld and the standard library, so it runs without playground.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def make_game_file(params: dict[str, Any], seed: int, path: Path) -> Path:
    """Generate and compile the game `params` describe for `seed` into `path` (a .z8)."""
    from textworld import GameOptions
    from textworld.generator import compile_game, make_game

    options = GameOptions()
    options.seeds = seed
    options.path = str(path)
    options.file_ext = ".z8"
    challenge = params["challenge"]
    if challenge == "custom":
        options.nb_rooms = params["nb_rooms"]
        options.nb_objects = params["nb_objects"]
        options.quest_length = params["quest_length"]
        game = make_game(options)
    elif challenge == "tw-cooking":
        from textworld.challenges.tw_cooking import cooking

        settings = {key: value for key, value in params.items() if key != "challenge"}
        game = cooking.make(settings, options)
    else:
        raise ValueError(f"textworld: unknown challenge {challenge!r}")
    return Path(compile_game(game, options))


def main(argv: list[str] | None = None) -> None:
    """Command line: generate one game (see module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--params", required=True, help="generator settings as JSON")
    parser.add_argument("--out", type=Path, required=True, help="path of the .z8 to write")
    args = parser.parse_args(argv)
    make_game_file(json.loads(args.params), args.seed, args.out)


if __name__ == "__main__":
    main()
