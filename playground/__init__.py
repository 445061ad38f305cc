"""playground: a plugin host for studying how agents fail and how they recover."""

__version__ = "0.1.0"

from playground.gym_envs import register_envs as _register_gymnasium_envs  # noqa: E402

_register_gymnasium_envs()  # `playground/<Name>-v0` ids for gymnasium.make (see docs/gymnasium.md)
