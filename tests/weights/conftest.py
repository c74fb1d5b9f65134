"""Every weights test gets its own empty cache directory (never ~/.cache) and is online."""

from tests.presets.conftest import _isolated_cache  # noqa: F401  (autouse)
