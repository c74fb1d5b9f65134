"""tools/pretrain.py and `run_pretraining`: text in, preset out, resumable, held-out accuracy."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from tools import pretrain  # noqa: E402



def _argv(tmp_path, text, vocab, steps):
    return ["--train-files", text, "--vocabulary", vocab, "--num-layers", "2", "--num-heads", "2",
            "--hidden-dim", "16", "--intermediate-dim", "32", "--max-sequence-length", "32",
            "--sequence-length", "32", "--max-predictions", "5", "--steps", str(steps),
            "--warmup-steps", "2", "--batch-size", "4", "--learning-rate", "1e-3",
            "--save-every", "2", "--eval-every", "2", "--eval-batches", "2", "--strategy", "cpu",
            "--checkpoint-dir", str(tmp_path / "ckpt"), "--output-dir", str(tmp_path / "preset"),
            "--log-dir", str(tmp_path / "logs"), "--no-progress"]


@pytest.mark.slow
def test_cli_trains_resumes_and_writes_a_loadable_preset(tmp_path, corpus, capsys):
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    text, vocab = corpus
    first = pretrain.main(_argv(tmp_path, text, vocab, 2))
    assert first["step"] == 2 and first["resumed_from"] == 0
    second = pretrain.main(_argv(tmp_path, text, vocab, 4))  # same command, more steps: resumes
    assert second["step"] == 4 and second["resumed_from"] == 2
    assert [r["step"] for r in second["held_out"]] == [4]
    record = second["held_out"][0]
    assert 0.0 <= record["mlm_accuracy"] <= 1.0 and 0.0 <= record["nsp_accuracy"] <= 1.0
    assert "held-out step 4" in capsys.readouterr().out
    assert os.listdir(tmp_path / "logs")  # TensorBoard wrote something

    backbone = BertBackbone.from_preset(str(tmp_path / "preset"))
    trained = second["model"].backbone
    assert backbone.num_layers == 2 and backbone.hidden_dim == 16 and backbone.vocabulary_size == 18
    for loaded, expected in zip(backbone.weights, trained.weights):
        if "seed" not in loaded.path:
            np.testing.assert_array_equal(np.array(loaded), np.array(expected), err_msg=loaded.path)


def test_cli_and_library_validate_arguments(tmp_path, corpus):
    from keras_bert_zoo.pretraining.config import PretrainingConfig

    text, vocab = corpus
    with pytest.raises(SystemExit):  # text and TFRecords are exclusive
        pretrain.build_parser().parse_args(["--train-files", text, "--tfrecords", "x",
                                            "--checkpoint-dir", "c", "--output-dir", "o"])
    with pytest.raises(ValueError, match="precision.*'float8'"):
        PretrainingConfig("o", "c", train_files=text, vocabulary=vocab, size={"num_layers": 1},
                          precision="float8")
    with pytest.raises(ValueError, match="needs a `vocabulary`"):
        PretrainingConfig("o", "c", train_files=text, size={"num_layers": 1})
    with pytest.raises(ValueError, match="`steps` must be a positive integer.*steps=0"):
        PretrainingConfig("o", "c", train_files=text, vocabulary=vocab, size={"num_layers": 1}, steps=0)
    with pytest.raises(ValueError, match=r"custom size needs \['num_heads'"):
        PretrainingConfig(str(tmp_path / "o"), str(tmp_path / "c"), train_files=text, vocabulary=vocab,
                          size={"num_layers": 1}, strategy="cpu")


@pytest.mark.slow
def test_tfrecords_input_trains_the_records(tmp_path):
    """TFRecords in the original layout → training on exactly those records → preset."""
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.pretraining.config import PretrainingConfig
    from keras_bert_zoo.pretraining.run import run_pretraining
    from tests.training import tiny

    batch = next(iter(tiny.synthetic_dataset(12)))
    features = {**{k: np.asarray(v) for k, v in batch[0].items()},
                **{k: np.asarray(v) for k, v in batch[1].items()}}
    path = tiny.write_tfrecord(tmp_path / "data.tfrecord", features)
    vocab = tiny.write_placeholder_vocab(tmp_path / "vocab.txt")
    result = run_pretraining(PretrainingConfig(
        str(tmp_path / "preset"), str(tmp_path / "ckpt"), tfrecords=path, vocabulary=str(vocab),
        size=dict(tiny.TINY), strategy="cpu", steps=3, warmup_steps=1, batch_size=4, learning_rate=1e-3,
        save_every=3, progress=False))
    assert result["step"] == 3
    model = result["model"]
    # The trained model predicts the records' targets better than the untrained one.
    x, y = batch
    untrained = tiny.make_pretrainer(seed=12345)
    losses = [float(m.compute_loss(x=x, y=y, y_pred=m(x, training=False))) for m in (untrained, model)]
    assert losses[1] < losses[0], losses
    loaded = BertBackbone.from_preset(str(tmp_path / "preset"))
    np.testing.assert_array_equal(np.array(loaded.token_embedding.embeddings),
                                  np.array(model.backbone.token_embedding.embeddings))
