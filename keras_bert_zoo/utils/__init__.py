"""keras_bert_zoo.utils: the lowest floor, used by every other one.

- `files`: atomic writes and sha256 hashes of every artifact the package writes;
- `archives`: safe extraction of downloaded archives;
- `precision`: float policies: float32 unless asked (`default_policy()`), the opt-in `auto_precision()`
  (bf16 where the CPU has it), and the line each command prints (`precision_line()`);
- `quantization`: int8 inference of a task (`task.quantize("int8")` calls it);
- `plotting`: training-curve plots (matplotlib, imported when a plot is drawn).

`keras_internals` is the package's one accessor of private Keras/TensorFlow API, not for users.
"""

from keras_bert_zoo.utils import archives, files, plotting, precision, quantization

__all__ = ["archives", "files", "plotting", "precision", "quantization"]
