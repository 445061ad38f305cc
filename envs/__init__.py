"""Built-in environment plugins, installed as `playground.envs`."""
