import numpy as np

from keras_bert_zoo.layers.masked_mean_pooling import MaskedMeanPooling
from tests.helpers import assert_config_round_trip


def test_mean_of_the_real_positions_only_and_zero_for_an_empty_row():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 4)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], "int32")
    got = np.asarray(MaskedMeanPooling()(x, mask))
    np.testing.assert_allclose(got[0], x[0, :3].mean(0), rtol=1e-6)
    np.testing.assert_allclose(got[1], x[1].mean(0), rtol=1e-6)
    np.testing.assert_array_equal(got[2], np.zeros(4, "float32"))
    x[0, 3:] = 1e6  # padded positions are not read
    np.testing.assert_allclose(np.asarray(MaskedMeanPooling()(x, mask))[0], got[0], rtol=1e-6)


def test_config_round_trip():
    assert_config_round_trip(MaskedMeanPooling(name="mean_pooling"))
