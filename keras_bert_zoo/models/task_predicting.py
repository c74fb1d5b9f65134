"""`TaskPredicting`: the `Task` methods of `predict`, on raw text (length-sorted batches,
answers in input order) or packed ids, in the model's or a per-call precision; and
`postprocess` answers as NumPy values when called eagerly."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.models import task_predict
from keras_bert_zoo.models.predict_precision import predicting_in


def answers_as_numpy(answers):
    """Eager tensors of `answers` as NumPy arrays (what a user prints, compares or serialises);
    inside a traced graph (an export's serving function) the tensors are kept."""
    if not tf.executing_eagerly():
        return answers

    def convert(value):
        if isinstance(value, keras.KerasTensor) or isinstance(value, tf.RaggedTensor):
            return value
        if isinstance(value, (tf.Tensor, tf.Variable)):
            return value.numpy()
        if keras.ops.is_tensor(value):
            return keras.ops.convert_to_numpy(value)
        return value

    return keras.tree.map_structure(convert, answers)


class TaskPredicting:
    """Mixin of `Task` (before `keras.Model` in its bases): needs `self.preprocessor` and
    `RawTextInputs`' `_prepare` / `_pipeline_cache`."""

    def predict_step(self, data):
        # Float outputs leave the step as float32: a MultiWorkerMirroredStrategy gathers them with
        # collective ops that take no bfloat16 (a bf16 model's predict failed there), and users get
        # float32 from `predict` whatever the policy.
        return task_predict.widen_in_graph(super().predict_step(data))

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, precision=None):
        """`keras.Model.predict` on raw text (sorted by length, returned in input order) or ids.

        One example (a string, or a tuple of strings such as one pair) is a batch of one.

        `precision`: None (the model's own policy, float32 unless the user asked otherwise: no
        switch), `"auto"` (`utils.precision.auto_precision()`: mixed_bfloat16 where bf16 is
        native) or a policy name, for this call only; the
        model's policy is untouched for training (`models/predict_precision.py`). Float
        outputs are float32 whatever the policy.
        """
        self.checked_inputs(x, call="predict")
        with predicting_in(self, precision):
            return task_predict.as_float32(self._predict(x, batch_size, verbose, steps, callbacks))

    def _predict(self, x, batch_size, verbose, steps, callbacks):
        if (self.preprocessor is not None and steps is None and not callbacks and not isinstance(x, tf.data.Dataset)
                and not inputs_lib.is_packed(x) and x is not None):
            columns = inputs_lib.as_columns(x)
            if inputs_lib.num_rows(columns) and all(c.dtype.kind in "USO" for c in keras.tree.flatten(columns)):
                prepare, count = self._pipeline_cache()
                return task_predict.predict_sorted(self, columns, prepare, count, batch_size, verbose)
        prepared = self._prepare(x, batch_size=batch_size, sort=True)
        if prepared is None:
            return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)
        dataset, order = prepared
        outputs = super().predict(dataset, verbose=verbose, steps=steps, callbacks=callbacks)
        if order is None:
            order = np.arange(len(keras.tree.flatten(outputs)[0]))
        return task_predict.restore_order(outputs, order)
