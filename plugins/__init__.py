"""Built-in intervention plugins, installed as `playground.plugins`."""
