"""The crash tests' store fixture (shared with tests/nested through ``crash_stores``)."""

from crash_stores import store_url

__all__ = ["store_url"]
