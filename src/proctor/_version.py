"""The installed proctor version, a pure constant other modules import."""

__version__ = "0.1.0"
