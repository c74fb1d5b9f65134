"""Stage 3 of `tools/quickstart.py`: serve the best start of stage 2.

The start with the best mean dev accuracy on movie-review polarity (dev picks, as everywhere in the
protocol; its first seed's model at its picked rate, which stage 2 saved as a preset) is exported
by `keras_bert_zoo.serving.export` as a SavedModel that answers raw strings; a fresh Python process
that imports only TensorFlow and tensorflow-text (`tools/demo/serve_client.py`) loads it,
classifies held-out test reviews and times the served throughput.
"""

import json
import os
import subprocess
import sys

from tools.demo import recipe
from tools.demo.compare import SERVED_TASK, STARTS
from tools.demo.stages import say

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_client.py")


def _best(finetuning):
    """The start with the best mean dev accuracy on the served task (dev picks; test only reports)."""
    return max(STARTS, key=lambda start: finetuning[SERVED_TASK][start]["dev_mean"])


def start_client():
    """The serving process (`tools/demo/serve_client.py -`): it imports TensorFlow, then waits for
    the export's path on stdin, so its import overlaps the work before (`tools/quickstart.py`
    starts it with stage 2)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.Popen([sys.executable, CLIENT, "-"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _export_best(run, finetuning, best):
    """`run("export", "1")`: the best start's model, exported (replacing the run's own earlier export)."""
    from keras_bert_zoo.models.bert_classifier import BertClassifier  # lazy: the quickstart imports stages before TensorFlow (start-up time)
    from keras_bert_zoo.serving.export import export  # lazy: as above

    return export(BertClassifier.from_preset(finetuning[SERVED_TASK][best]["preset"]), run("export", "1"),
                  overwrite=True)


def _tensorboard(log_dir, answer, gold_names):
    """Stage 3 in TensorBoard (`tensorboard/serve`): the served throughput, and the served
    sentences with their label, probability and gold label as a Markdown table."""
    import tensorflow as tf  # lazy: the quickstart imports stages before TensorFlow (start-up time)

    rows = ["| label | probability | gold | sentence |", "|---|---|---|---|"]
    rows += [f"| {p['label']} | {p['probability']:.3f} | {gold} | {p['text'].replace('|', '/')} |"
             for p, gold in zip(answer["predictions"], gold_names)]
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        tf.summary.scalar("serve/sentences_per_second", answer["sentences_per_second"], step=0)
        tf.summary.text("serve/predictions", "\n".join(rows), step=0)
    writer.close()


def serve(args, run, finetuning=None, client=None):
    """Serves the best start of stage 2 in a fresh process (`client`, from `start_client`, or one
    started here).

    Returns:
        dict: the summary's `serving` block (the start, export path, the sentences with their
        label and probability, sentences per second, the modules the client had loaded).
    """
    from keras_bert_zoo.utils.files import atomic_write_json  # lazy: the quickstart imports stages before TensorFlow (start-up time)

    if finetuning is None:  # --stages serve alone: the presets and figures of an earlier run
        with open(run("summary.json"), encoding="utf-8") as f:
            finetuning = json.load(f).get("finetuning")
        if not finetuning:
            raise ValueError(f"`--stages serve` needs stage 2's models: run the finetune stage first "
                             f"(no comparison in {run('summary.json')}).")
    best = _best(finetuning)
    # The fresh process starts before the export: its TensorFlow import overlaps it.
    client = client or start_client()
    try:
        path = _export_best(run, finetuning, best)
        # Held-out text: test reviews, never trained on or picked by.
        texts, labels = recipe.task_data(SERVED_TASK, rows=args.task_rows)["test"]
        request = {"texts": list(texts[: args.serve_examples]),
                   "labels": [int(y) for y in labels[: args.serve_examples]],
                   "throughput_texts": list(texts[: args.throughput_examples])}
        atomic_write_json(run("export", "request.json"), request)
    except BaseException:
        client.kill()
        client.communicate()
        raise
    stdout, stderr = client.communicate(f"{path}\t{run('export', 'request.json')}\n")
    if client.returncode != 0:
        raise RuntimeError(f"The serving process failed (exit {client.returncode}):\n{stderr[-3000:]}")
    answer = json.loads(stdout.strip().splitlines()[-1])
    gold_names = [recipe.TASK_LABELS[SERVED_TASK][gold] for gold in request["labels"]]
    for row, gold in zip(answer["predictions"], gold_names):
        print(f"  {row['label']:>7s} {row['probability']:.2f} (gold {gold})  {row['text'][:90]}", flush=True)
    _tensorboard(run("tensorboard", "serve"), answer, gold_names)
    say("serve", f"{best} (best polarity dev accuracy) exported → {path}; a fresh process with "
        f"{', '.join(answer['imported'])} served {answer['sentences_per_second']:.1f} sentences/s "
        f"({answer['throughput_sentences']} sentences)")
    return dict(answer, model=best, export=path)
