"""`RawTextInputs`: the `Task` methods that turn raw text into a preprocessed `tf.data`
pipeline for `fit`, `evaluate` and `predict` (packed ids go to Keras unchanged)."""

import keras
import tensorflow as tf

from keras_bert_zoo.models import task_inputs as inputs_lib


class RawTextInputs:
    """Mixin of `Task`: needs `self.preprocessor`."""

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, sort=False, buckets=None):
        """Returns `(dataset, order)` for raw text, or None to give `x` to Keras unchanged.

        `buckets` (batches per length-sorted window, `task_inputs.bucketed_dataset`) applies
        to shuffled in-memory text only."""
        if isinstance(x, tf.data.Dataset):
            if inputs_lib.is_packed(inputs_lib.dataset_x_spec(x)) or self.preprocessor is None:
                return None
            if y is not None or sample_weight is not None:
                raise ValueError("With a tf.data.Dataset, `y` and `sample_weight` come from the dataset. Drop them.")
            return self._pipeline(inputs_lib.batch_if_unbatched(x, batch_size)), None
        if inputs_lib.is_packed(x) or x is None:
            return None
        columns = inputs_lib.as_columns(x)
        if self.preprocessor is None:
            if any(c.dtype.kind in "USO" for c in keras.tree.flatten(columns)):
                raise ValueError(
                    "`task.preprocessor` is None, so inputs must be packed ids (a dict with "
                    "`token_ids`, `segment_ids`, `padding_mask`). Received text. Attach a "
                    "preprocessor (`task.preprocessor = ...`) or pack the text first."
                )
            return None
        order = inputs_lib.length_order(columns) if sort else None
        if buckets is not None and shuffle:
            dataset = inputs_lib.bucketed_dataset(columns, y, sample_weight, batch_size, buckets)
        else:
            dataset = inputs_lib.in_memory_dataset(columns, y, sample_weight, batch_size, shuffle, order)
        # A shuffled pipeline is counted by a pass over it, which draws its first shuffle: `fit`'s
        # epochs (and so its numbers) are those of every earlier version.
        return self._pipeline(dataset, None if shuffle else columns), order

    def _pipeline(self, dataset, columns=None):
        """Reports the truncated inputs of a raw batched dataset (counted on its in-memory
        `columns` where given) and preprocesses it."""
        prepare, count = self._pipeline_cache()
        if columns is not None:
            inputs_lib.count_truncated(columns, self.preprocessor, count)
        else:
            inputs_lib.report_truncated(dataset, self.preprocessor, count)
        return inputs_lib.preprocess(dataset, prepare)

    def _pipeline_cache(self):
        """`(prepare, count)` of `task_inputs.pipeline_functions`, traced once per preprocessor
        and settings, not once per fit/evaluate/predict call: a setting changed since
        (`task.preprocessor.sequence_length = 64`) traces them again, so that they pack, count
        and log with it."""
        preprocessor = self.preprocessor
        key = (id(preprocessor),) + tuple(getattr(preprocessor, name) for name in getattr(preprocessor, "settings", ()))
        cached = getattr(self, "_pipeline_functions", None)
        if cached is None or cached[0] != key:
            self.check_sequence_length()
            cached = self._pipeline_functions = (key,) + inputs_lib.pipeline_functions(preprocessor)
        return cached[1], cached[2]

    def check_sequence_length(self):
        """Raises if the preprocessor packs longer rows than the backbone has positions for."""
        length = getattr(self.preprocessor, "sequence_length", None)
        limit = getattr(getattr(self, "backbone", None), "max_sequence_length", None)
        if isinstance(length, int) and isinstance(limit, int) and length > limit:
            raise ValueError(
                f"The preprocessor's sequence_length={length} exceeds the backbone's max_sequence_length="
                f"{limit} (its position embeddings). Set `task.preprocessor.sequence_length` to at most {limit}."
            )

    def _prepare_validation(self, data, validation_batch_size, batch_size):
        """The validation pipeline, or None to give `data` to Keras unchanged."""
        if isinstance(data, tf.data.Dataset):
            prepared = self._prepare(data, batch_size=validation_batch_size)
        else:
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(tuple(data))
            prepared = self._prepare(x, y, sample_weight, validation_batch_size or batch_size)
        return None if prepared is None else prepared[0]
