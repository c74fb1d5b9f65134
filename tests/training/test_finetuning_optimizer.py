"""FinetuningAdamW clips the dense gradient by its global norm, then steps as BertAdamW;
RunSchedule is the original schedule shifted to the step a `fit` run starts at."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training.finetuning_optimizer import FinetuningAdamW, RunSchedule
from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay


def test_clips_the_dense_gradient_then_steps_as_bert_adamw():
    table = tf.Variable(np.ones((4, 3), "float32"))
    reference = tf.Variable(np.ones((4, 3), "float32"))
    # An embedding's sparse gradient with row 1 twice: the gradient is the sum, row 1 = [0, 6, 4],
    # norm sqrt(52); Keras' clip of the slices would measure sqrt(34) and step differently.
    sparse = tf.IndexedSlices(tf.constant([[0.0, 3.0, 0.0], [0.0, 3.0, 4.0]]), tf.constant([1, 1]), tf.constant([4, 3]))
    dense = tf.convert_to_tensor(sparse)
    FinetuningAdamW(0.1, global_clipnorm=1.0).apply([sparse], [table])
    clipped = dense / tf.linalg.global_norm([dense])  # norm sqrt(36 + 16) > 1
    BertAdamW(0.1, global_clipnorm=None).apply([clipped], [reference])
    np.testing.assert_allclose(table.numpy(), reference.numpy(), atol=1e-7)
    np.testing.assert_allclose(FinetuningAdamW(0.1)._clip([sparse])[0], clipped, atol=1e-7)
    config = FinetuningAdamW(0.1, global_clipnorm=0.5).get_config()
    assert config["global_clipnorm"] == 0.5 and FinetuningAdamW.from_config(config).clip_global_norm == 0.5


@pytest.mark.parametrize("step", [20, 21, 22, 25, 30, 40])
def test_run_schedule_is_the_original_from_its_start_step(step):
    shifted = RunSchedule(5e-5, 2, 10, start_step=20)
    assert float(shifted(step)) == pytest.approx(float(LinearWarmupLinearDecay(5e-5, 2, 10)(step - 20)))
    assert RunSchedule.from_config(shifted.get_config()).start_step == 20
