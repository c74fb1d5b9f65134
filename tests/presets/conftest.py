"""Every presets test gets its own empty cache directory (never ~/.cache) and is online."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    cache = tmp_path / "kbz_cache"
    monkeypatch.setenv("KERAS_BERT_ZOO_CACHE", str(cache))
    monkeypatch.delenv("KERAS_BERT_ZOO_OFFLINE", raising=False)
    return cache
