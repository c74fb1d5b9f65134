"""TF Serving's REST JSON for our exports' signatures: a request's rows checked and decoded,
answers encoded and shaped as TF Serving writes them.

Row format `{"instances": [...]}` or columnar `{"inputs": ...}`, as TF Serving's REST API
documents: one named input may be given bare, one named output is given bare, strings come back
as strings and bytes that are not UTF-8 as `{"b64": ...}` (inputs may be `{"b64": ...}` too).
Everything here is checked per request, so a bad one is refused before it shares a batch.
"""

import base64
import binascii

SIGNATURE = "serving_default"


class BadRequest(ValueError):
    """A request that TF Serving would refuse with 400; the message names what is wrong."""


# Count output -> the outputs padded along axis 1 to the batch's largest count (serving/entities.py,
# features.py, fill_mask.py); each row is cut to its own count.
PADDED_BY_COUNT = {
    "num_entities": ("entity_text", "entity_type", "start_char", "end_char"),
    "num_tokens": ("sequence_output", "padding_mask"),
    "num_masks": ("tokens", "probabilities"),
}


def cut_padding(outputs):
    """Per-row outputs (lists) with the padded ones cut to the row's own count."""
    for count_key, keys in PADDED_BY_COUNT.items():
        if count_key in outputs:
            for key in keys:
                if key in outputs and isinstance(outputs[key], list):
                    outputs[key] = outputs[key][: outputs[count_key]]
    return outputs


def decode_value(value, where):
    """A JSON input value (a string, `{"b64": ...}` for bytes, or a list of them: multiple choice's
    endings) -> bytes or a list; else BadRequest."""
    if isinstance(value, list):
        return [decode_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and list(value) == ["b64"] and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError) as error:
            raise BadRequest(f"{where}: invalid base64 ({error}).") from error
    raise BadRequest(f'{where} must be a string or {{"b64": "..."}}. Received {type(value).__name__}: {value!r:.100}.')


def encode_value(value):
    """An output value (numpy .tolist()) as TF Serving writes it in JSON."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    return value


def value_size(value):
    """Bytes in a decoded row value (a string or nested lists of them): sorts rows by length."""
    return sum(value_size(v) for v in value) if isinstance(value, list) else len(value)


def check_shape(value, shape, where):
    """BadRequest unless a decoded row value has the signature's per-row shape (() or (k,)...)."""
    if not shape:
        if isinstance(value, list):
            raise BadRequest(f"{where} must be one string, not a list.")
        return
    if not isinstance(value, list) or (shape[0] is not None and len(value) != shape[0]):
        want = f"a list of {shape[0]} strings" if shape[0] is not None else "a list of strings"
        raise BadRequest(f"{where} must be {want}. Received {value!r:.100}.")
    for i, item in enumerate(value):
        check_shape(item, shape[1:], f"{where}[{i}]")


def parse_request(payload, names, shapes=None):
    """A v1 request body -> (format "row"|"columnar", rows: list of {input: bytes}); BadRequest if bad.

    `shapes`: {input: its per-row shape} (the signature's shape without the batch axis); a row
    whose value has another shape is refused here, before it can share a batch with others."""
    rows_form, rows = parse_rows(payload, names)
    for index, row in enumerate(rows):
        for name in names:
            check_shape(row[name], (shapes or {}).get(name, ()), f"Instance {index} input {name!r}")
    return rows_form, rows


def parse_rows(payload, names):
    """A v1 request body -> (format, rows), the JSON structure checked (not the values' shapes)."""
    if not isinstance(payload, dict):
        raise BadRequest(f'A request must be a JSON object. Received {type(payload).__name__}.')
    signature = payload.get("signature_name", SIGNATURE)
    if signature != SIGNATURE:
        raise BadRequest(f"Unknown signature_name {signature!r}: this server answers {SIGNATURE!r}.")
    keys = set(payload) - {"signature_name"}
    if keys not in ({"instances"}, {"inputs"}):
        raise BadRequest(
            'A request must hold exactly one of "instances" (row format) or "inputs" (columnar), '
            f"as TF Serving's REST API. Received keys {sorted(payload)}."
        )
    if "instances" in payload:
        instances = payload["instances"]
        if not isinstance(instances, list) or not instances:
            raise BadRequest(f'"instances" must be a non-empty list. Received {instances!r:.100}.')
        rows = []
        for index, row in enumerate(instances):
            if len(names) == 1 and not (isinstance(row, dict) and list(row) != ["b64"]):
                row = {names[0]: row}
            if not isinstance(row, dict) or sorted(row) != names:
                raise BadRequest(f"Instance {index} must be an object with exactly the inputs {names}. Received {row!r:.100}.")
            rows.append({name: decode_value(row[name], f"Instance {index} input {name!r}") for name in names})
        return "row", rows
    columns = payload["inputs"]
    if len(names) == 1 and not isinstance(columns, dict):
        columns = {names[0]: columns}
    if not isinstance(columns, dict) or sorted(columns) != names:
        raise BadRequest(f'"inputs" must hold exactly the inputs {names}. Received {columns!r:.100}.')
    for name, values in columns.items():
        if not isinstance(values, list) or not values:
            raise BadRequest(f"Input {name!r} must be a non-empty list. Received {values!r:.100}.")
    lengths = {len(values) for values in columns.values()}
    if len(lengths) != 1:
        raise BadRequest(f"Every input needs as many rows. Received lengths {sorted(lengths)}.")
    rows = [
        {name: decode_value(columns[name][i], f"Input {name!r} row {i}") for name in names}
        for i in range(lengths.pop())
    ]
    return "columnar", rows


def format_response(form, results):
    """Per-row output dicts -> TF Serving's response (one named output is given bare)."""
    keys = sorted(results[0])
    if form == "row":
        return {"predictions": [r[keys[0]] if len(keys) == 1 else {k: r[k] for k in keys} for r in results]}
    columns = {k: [r[k] for r in results] for k in keys}
    return {"outputs": columns[keys[0]] if len(keys) == 1 else columns}
