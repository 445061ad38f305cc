"""playground: a plugin host for studying how agents fail and how they recover."""

__version__ = "0.1.0"
