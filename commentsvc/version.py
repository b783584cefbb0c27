"""The package's version, in a module of its own so that any module may read it."""

__version__ = "1.0.0"
