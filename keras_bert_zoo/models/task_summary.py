"""`TaskSummary`: `Task.summary()` as keras-hub's task summary reads: the preprocessor (class,
sequence length, vocabulary), the backbone by name with its parameter count, then the layers,
each output on one line (the backbone's dict of outputs named, not listed as a stack of shapes)."""

import keras
import numpy as np


def shape_text(output):
    """One line for a layer's output: a shape, a dict's entries by name, a list's shapes counted."""
    if isinstance(output, dict):
        return ", ".join(f"{name} {shape_text(value)}" for name, value in output.items())
    if isinstance(output, (list, tuple)):
        shapes = [shape_text(value) for value in output]
        if shapes and len(set(shapes)) == 1:
            return f"{len(shapes)} × {shapes[0]}"
        return "[" + ", ".join(shapes) + "]"
    shape = getattr(output, "shape", None)
    return "?" if shape is None else str(tuple(shape))


def wrap(text, width):
    """`text` in lines of at most `width` characters where it has `, ` to break at."""
    lines = [""]
    for part in text.split(", "):
        joined = f"{lines[-1]}, {part}" if lines[-1] else part
        if len(joined) <= width or not lines[-1]:
            lines[-1] = joined
        else:
            lines[-1] += ","
            lines.append(part)
    return lines


def preprocessor_line(preprocessor):
    """The preprocessor's class, settings and vocabulary, or what a task without one takes."""
    if preprocessor is None:
        return "Preprocessor: None (inputs are packed ids: token_ids, segment_ids, padding_mask)"
    settings = ", ".join(f"{name}={getattr(preprocessor, name)!r}" for name in getattr(preprocessor, "settings", ()))
    line = f"Preprocessor: {type(preprocessor).__name__}({settings})"
    tokenizer = getattr(preprocessor, "tokenizer", None)
    if tokenizer is not None:
        line += f"; tokenizer {type(tokenizer).__name__}"
        if tokenizer.has_vocabulary():
            line += f", vocabulary_size={tokenizer.vocabulary_size():,}"
        line += f", lowercase={tokenizer.lowercase}"
    return line


def backbone_line(backbone):
    sizes = ", ".join(f"{name}={getattr(backbone, name)}" for name in ("num_layers", "hidden_dim", "num_heads")
                      if hasattr(backbone, name))
    return f'Backbone: "{backbone.name}" ({type(backbone).__name__}: {sizes}), {backbone.count_params():,} parameters'


class TaskSummary:
    """Mixin of `Task` (before `keras.Model` in its bases): needs `backbone` and `preprocessor`."""

    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False, show_trainable=False,
                layer_range=None):
        """Prints the task: its preprocessor, its backbone, then its layers and parameter counts.

        Without Keras' table arguments, the layers are one row each (name, class, output,
        parameters). `positions`, `expand_nested`, `show_trainable` or `layer_range` print
        Keras' own table after the preprocessor and backbone lines instead.

        Args:
            line_length: int or None. Width of the layer table. Defaults to 98 (or Keras').
            print_fn: callable taking one line, or None (`print`).
            positions, expand_nested, show_trainable, layer_range: as `keras.Model.summary`.
        """
        emit = print_fn or print
        emit(f'Task: "{self.name}" ({type(self).__name__})')
        emit(preprocessor_line(self.preprocessor))
        emit(backbone_line(self.backbone))
        if positions is not None or expand_nested or show_trainable or layer_range is not None:
            return super().summary(line_length=line_length, positions=positions, print_fn=print_fn,
                                   expand_nested=expand_nested, show_trainable=show_trainable,
                                   layer_range=layer_range)
        rows = [("Layer (type)", "Output", "Param #")]
        for layer in self.layers:
            if isinstance(layer, keras.layers.InputLayer):
                continue
            try:
                output = shape_text(layer.output)
            except (AttributeError, ValueError):  # a layer called more than once has no single output
                output = "(called more than once)"
            params = f"{layer.count_params():,}" if layer.built else "unbuilt"
            rows.append((f"{layer.name} ({type(layer).__name__})", output, params))
        width = line_length or 98
        first = max(len(row[0]) for row in rows)
        last = max(len(row[2]) for row in rows)
        middle = max(width - first - last - 4, 10)
        emit("Inputs: " + ", ".join(f"{name} {shape_text(tensor)}" for name, tensor in self.input.items())
             if isinstance(self.input, dict) else f"Inputs: {shape_text(self.input)}")
        emit("─" * (first + middle + last + 4))
        for i, (name, output, params) in enumerate(rows):
            lines = wrap(output, middle)
            emit(f"{name:<{first}}  {lines[0]:<{middle}}  {params:>{last}}")
            for more in lines[1:]:
                emit(f"{'':<{first}}  {more}")
            if i == 0:
                emit("─" * (first + middle + last + 4))
        emit("─" * (first + middle + last + 4))
        trainable = sum(int(np.prod(v.shape)) for v in self.trainable_weights)
        total = self.count_params()
        emit(f"Total params: {total:,} (trainable {trainable:,}, non-trainable {total - trainable:,})")
