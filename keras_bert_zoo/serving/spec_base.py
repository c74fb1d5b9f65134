"""What every serving spec shares: the packed-ids input names, string input specs, the
`text_inputs` refusal and the `examples` signature of a one-`text` task.

The bottom of `serving/`'s spec modules: `specs`, `entities`, `features` and `fill_mask`
import it, and it imports none of them.
"""

import tensorflow as tf

CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
PREDICT = "tensorflow/serving/predict"
IDS = ("token_ids", "segment_ids", "padding_mask")
"""The packed inputs every task model takes, in the `ids` signature's order."""


def string_spec(name, shape=(None,)):
    """A `tf.string` input spec named `name`, (batch,) by default."""
    return tf.TensorSpec(list(shape), tf.string, name=name)


def refuse_text_inputs(text_inputs, task_name, inputs):
    """ValueError when `text_inputs` is given to a task whose inputs are fixed (`inputs`)."""
    if text_inputs is not None:
        raise ValueError(
            f"`text_inputs` is for classifiers; a {task_name} export takes {inputs}. "
            f"Received: text_inputs={text_inputs!r}. Drop the argument."
        )


class TextExamples:
    """The `examples` signature of a task on one `text` feature: TF Serving's predict, the
    outputs of `serving_default` (a missing feature reads as "")."""

    def example_features(self):
        return {"text": tf.io.FixedLenFeature([], tf.string, default_value="")}

    def examples_method(self):
        return PREDICT

    def example_outputs(self, outputs):
        return outputs
