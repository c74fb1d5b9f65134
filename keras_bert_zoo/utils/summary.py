"""The lines of a task's `summary()`, as keras-hub's task summary reads: the task, its preprocessor
(class, settings, vocabulary), its backbone by name with its parameter count, then the layers,
each output on one line (the backbone's dict of outputs named, not listed as a stack of shapes).

Functions of any Keras model with `preprocessor` and `backbone` attributes (`Task.summary`
prints them), so that nothing here imports the models."""

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


def heading(task):
    """Yields the lines that open the summary: the task, its preprocessor, its backbone."""
    yield f'Task: "{task.name}" ({type(task).__name__})'
    yield preprocessor_line(task.preprocessor)
    yield backbone_line(task.backbone)


def layer_table(model, width=98):
    """Yields the lines of the layer table: the inputs, then one row per layer (name and class,
    output, parameters) with outputs wrapped to the table's `width`, then the parameter counts."""
    rows = [("Layer (type)", "Output", "Param #")]
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        try:
            output = shape_text(layer.output)
        except (AttributeError, ValueError):  # a layer called more than once has no single output
            output = "(called more than once)"
        params = f"{layer.count_params():,}" if layer.built else "unbuilt"
        rows.append((f"{layer.name} ({type(layer).__name__})", output, params))
    first = max(len(row[0]) for row in rows)
    last = max(len(row[2]) for row in rows)
    middle = max(width - first - last - 4, 10)
    rule = "─" * (first + middle + last + 4)
    yield ("Inputs: " + ", ".join(f"{name} {shape_text(tensor)}" for name, tensor in model.input.items())
           if isinstance(model.input, dict) else f"Inputs: {shape_text(model.input)}")
    yield rule
    for i, (name, output, params) in enumerate(rows):
        lines = wrap(output, middle)
        yield f"{name:<{first}}  {lines[0]:<{middle}}  {params:>{last}}"
        for more in lines[1:]:
            yield f"{'':<{first}}  {more}"
        if i == 0:
            yield rule
    yield rule
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    total = model.count_params()
    yield f"Total params: {total:,} (trainable {trainable:,}, non-trainable {total - trainable:,})"
