import keras
import numpy as np
import pytest

from keras_bert_zoo.layers import MaskedLMHead


def test_transform_is_as_wide_as_the_tied_embeddings_from_construction():
    embedding = keras.layers.Embedding(30, 16)
    embedding.build((None, None))
    head = MaskedLMHead(embedding)
    assert head.transform_dense.units == 16  # was Dense(1), patched in build
    logits = head(np.ones((2, 5, 16), "float32"), np.array([[0, 4], [1, 2]], "int32"))
    assert tuple(head.transform_dense.kernel.shape) == (16, 16) and logits.shape == (2, 2, 30)
    with pytest.raises(ValueError, match="width 8, token_embedding.output_dim=16"):
        MaskedLMHead(embedding)(np.ones((2, 5, 8), "float32"))
