"""Stage 3 of `tools/quickstart.py`: serve the best fine-tuned model.

`keras_bert_zoo.serving.export` writes it as a SavedModel that answers raw strings (the fine-tuning
process of `real_pretrained` already has, when that is the best); a fresh Python process that
imports only TensorFlow and tensorflow-text (`tools/demo/serve_client.py`) loads it, classifies
held-out sentences and times the served throughput.
"""

import json
import os
import shutil
import subprocess
import sys

from tools.demo.finetune import VARIANTS
from tools.demo.stages import say

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_client.py")


def _best(finetuning):
    return max(VARIANTS, key=lambda name: finetuning[name]["dev_accuracy"])


def start_client():
    """The serving process (`tools/demo/serve_client.py -`): it imports TensorFlow, then waits for
    the export's path on stdin, so its import overlaps the work before (`tools/quickstart.py`
    starts it with stage 2)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.Popen([sys.executable, CLIENT, "-"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _exported(finetuning, name):
    """The SavedModel the fine-tuning run of `name` wrote (`export_dir`), or None."""
    path = finetuning[name].get("export")
    return path if path and os.path.isfile(os.path.join(path, "saved_model.pb")) else None


def _export_best(args, run, finetuning, best):
    """`run("export", "1")`: the best model's SavedModel, moved from its fine-tuning run's export
    if it wrote one, else exported here; the other runs' exports are removed (one export per
    run directory). Returns `(path, whether its fine-tuning run had exported it)`."""
    from keras_bert_zoo.utils.files import atomic_directory  # lazy: the quickstart imports stages before TensorFlow (start-up time)

    target = run("export", "1")
    ready = _exported(finetuning, best)
    for name in VARIANTS:
        if name != best and _exported(finetuning, name):
            shutil.rmtree(finetuning[name]["export"])
    if ready:
        with atomic_directory(target) as tmp:
            os.rmdir(tmp)
            os.replace(ready, tmp)
        return target, True
    from keras_bert_zoo.models.bert_classifier import BertClassifier  # lazy: TensorFlow only when exporting here (start-up time)
    from keras_bert_zoo.serving.export import export  # lazy: as above

    # In the policy it was fine-tuned and scored in (a preset records it but builds float32
    # unless `dtype` asks): the served answers are the scored model's.
    model = BertClassifier.from_preset(finetuning[best]["preset"], dtype=args.finetune_precision)
    return export(model, target, overwrite=True), False  # the run's own export/1, replaced on a rerun


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
    """Serves the best fine-tuned model of stage 2 in a fresh process (`client`, from
    `start_client`, or one started here); exports it first unless its fine-tuning run did.

    Returns:
        dict: the summary's `serving` block (export path, whether the fine-tuning run had
        exported it, the sentences with their label and probability, sentences per second,
        the modules the client had loaded).
    """
    from keras_bert_zoo.data.glue import glue_labels, read_glue  # lazy: the quickstart imports stages before TensorFlow (start-up time)
    from keras_bert_zoo.utils.files import atomic_write_json  # lazy: as above

    if finetuning is None:  # --stages serve alone: the presets and figures of an earlier run
        with open(run("summary.json"), encoding="utf-8") as f:
            finetuning = json.load(f).get("finetuning")
        if not finetuning:
            raise ValueError(f"`--stages serve` needs a fine-tuned model: run the finetune stage first "
                             f"(no fine-tuning figures in {run('summary.json')}).")
    best = _best(finetuning)
    # The fresh process starts before the export: its TensorFlow import overlaps it.
    client = client or start_client()
    try:
        path, exported_while_fine_tuning = _export_best(args, run, finetuning, best)
        # Held-out text: dev rows the model was scored on, not trained on.
        texts, labels = read_glue("sst2", os.path.join(run("finetune", "data", "dev.tsv")))
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
    gold_names = [glue_labels("sst2")[gold] for gold in request["labels"]]
    for row, gold in zip(answer["predictions"], gold_names):
        print(f"  {row['label']:>5s} {row['probability']:.2f} (gold {gold})  {row['text'][:90]}", flush=True)
    _tensorboard(run("tensorboard", "serve"), answer, gold_names)
    where = " (by its fine-tuning process)" if exported_while_fine_tuning else ""
    say("serve", f"{best} exported{where} → {path}; a fresh process with {', '.join(answer['imported'])} served "
        f"{answer['sentences_per_second']:.1f} sentences/s ({answer['throughput_sentences']} sentences)")
    return dict(answer, model=best, export=path, exported_while_fine_tuning=exported_while_fine_tuning)
