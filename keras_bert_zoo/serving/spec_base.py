"""What every serving spec shares: the packed-ids input names, string input specs, the
`text_inputs` refusal, the `examples` signature of a one-`text` task, and the in-graph
checks of a request's rows and ids.

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


def check_rows(raw):
    """Asserts in the graph that every string input of a request has as many rows."""
    names = sorted(raw)
    rows = tf.shape(raw[names[0]])[0]
    return [tf.debugging.assert_equal(
        tf.shape(raw[name])[0], rows,
        message=f"Every input of a request needs one row per example: `{name}` and `{names[0]}` have "
        "different numbers of rows. Send as many of each.") for name in names[1:]]


def check_ids(packed, max_length):
    """Asserts in the graph that the packed ids share one shape, at most `max_length` positions."""
    checks = [tf.debugging.assert_equal(
        tf.shape(packed[name]), tf.shape(packed["token_ids"]),
        message=f"`{name}` must have the shape of `token_ids` (one entry per token).") for name in IDS[1:]]
    if max_length is not None:
        checks.append(tf.debugging.assert_less_equal(
            tf.shape(packed["token_ids"])[-1], max_length,
            # No apostrophes: the runtime quotes the message and would escape them.
            message=f"`token_ids` has more positions than max_sequence_length={max_length}, the most this model "
            f"takes. Cut or window each row to at most {max_length} ids (`serving_default` windows raw text)."))
    return checks
