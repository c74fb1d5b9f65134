"""Serves an exported classifier with TensorFlow and tensorflow-text only (stage 3 of the demo).

    python tools/demo/serve_client.py EXPORT_DIR REQUEST.json
    python tools/demo/serve_client.py -      # then one line on stdin: EXPORT_DIR<TAB>REQUEST.json

With `-`, the process imports TensorFlow first and then waits for the paths: the demo
starts it before it exports, so the import (several seconds) overlaps the export.
REQUEST.json: `{"texts": [...], "throughput_texts": [...]}`. Prints one JSON line: each
text with its label and probability, the served sentences per second (batches of 32
after one warm-up call) and which of keras / keras_bert_zoo the process had imported
(none: the SavedModel needs no Python of ours).
"""

import json
import sys
import time

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the WordPiece ops the SavedModel uses)


def main(export_dir, request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    out = serve(text=tf.constant(request["texts"]))
    predictions = [
        {"text": t, "label": label.decode("utf-8"), "label_id": int(i), "probability": float(p[int(i)])}
        for t, label, i, p in zip(request["texts"], out["label"].numpy(), out["label_id"].numpy(),
                                  out["probabilities"].numpy())
    ]
    texts = request["throughput_texts"]
    serve(text=tf.constant(texts[:32]))  # warm-up
    start = time.perf_counter()
    for i in range(0, len(texts), 32):
        serve(text=tf.constant(texts[i : i + 32]))
    seconds = time.perf_counter() - start
    imported = ["tensorflow", "tensorflow_text"] + [m for m in ("keras", "keras_bert_zoo") if m in sys.modules]
    print(json.dumps({"predictions": predictions, "sentences_per_second": len(texts) / seconds,
                      "throughput_sentences": len(texts), "imported": imported,
                      "keras_bert_zoo_imported": "keras_bert_zoo" in sys.modules}))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments == ["-"]:
        arguments = sys.stdin.readline().rstrip("\n").split("\t")
    if len(arguments) != 2:
        sys.exit(f"usage: serve_client.py EXPORT_DIR REQUEST.json, or `-` and both on one line of stdin "
                 f"(tab-separated). Received: {arguments!r}.")
    main(*arguments)
