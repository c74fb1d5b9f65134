"""Fixtures shared by the pretraining CLI and phase tests."""

import pytest

from tests.training import tiny


@pytest.fixture
def corpus(tmp_path):
    """`(text file, vocab.txt)` of a small generated corpus (`tiny.write_text_corpus`)."""
    return tiny.write_text_corpus(tmp_path)
