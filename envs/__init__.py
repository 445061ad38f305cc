"""Built-in environment plugins, installed as `playground.envs`.

Importing this package (which loading any built-in env plugin does) also registers the
built-in envs in gymnasium's registry as `playground/<Name>-v0` (see
`gymnasium_registry` and docs/gymnasium.md).
"""

from playground.envs.gymnasium_registry import register_envs as _register_gymnasium_envs

_register_gymnasium_envs()
