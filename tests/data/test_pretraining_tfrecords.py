"""Static pretraining TFRecords: original layout, reader aliases, static == on the fly,
report, bad input, CLI."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data.example_encoder import ORIGINAL_NAMES, _flat_compatible
from keras_bert_zoo.data.pretraining import instance_windows, make_masker
from keras_bert_zoo.data.pretraining_writer import write_pretraining_tfrecords
from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords, serialize_examples
from tests.data import pretraining_corpus as corpus

S, P = 32, 5

# The original run_pretraining.py input_fn feature spec, written out.
ORIGINAL_SPEC = {
    "input_ids": tf.io.FixedLenFeature([S], tf.int64),
    "input_mask": tf.io.FixedLenFeature([S], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([S], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([P], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([P], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([P], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("tfrecords")
    files = corpus.write_corpus(d, num_sentences=600, shards=2)
    vocab = corpus.write_vocab(d)
    tokenizer = corpus.make_tokenizer(vocab)
    out = str(d / "out.tfrecord")
    report = write_pretraining_tfrecords(files, out, tokenizer, max_seq_length=S, max_predictions_per_seq=P,
                                         random_seed=5, dupe_factor=2)
    return files, vocab, tokenizer, report


def _varint(n):
    n &= (1 << 64) - 1  # negative int64: two's complement, 10 bytes
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):  # a length-delimited protobuf field
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def reference_example(features, i):
    """Row i as protobuf writes an Example built in the original's order (pure Python)."""
    entries = b""
    for ours, original in ORIGINAL_NAMES:
        values = np.atleast_1d(features[ours][i])
        if ours == "mlm_weights":  # Feature.float_list = 2, FloatList.value = 1 (packed fixed32)
            feature = _field(2, _field(1, np.asarray(values, "<f4").tobytes()))
        else:  # Feature.int64_list = 3, Int64List.value = 1 (packed varints)
            feature = _field(3, _field(1, b"".join(_varint(int(v)) for v in values)))
        entries += _field(1, _field(1, original.encode()) + _field(2, feature))  # map entry: key 1, value 2
    return _field(1, entries)  # Example.features = 1


@pytest.mark.parametrize("weights", ["any floats", "1.0 then 0.0"])
def test_encoder_matches_protobuf(weights):
    """Both encoders (nested encode_proto for any weights; one flat varint stream for the
    writer's 1.0…0.0 weights) give protobuf's bytes, for any int64 values."""
    rng = np.random.default_rng(0)
    f = dict(token_ids=rng.integers(-2**40, 2**40, (6, S)), padding_mask=rng.integers(0, 2, (6, S)),
             segment_ids=rng.integers(0, 300, (6, S)), mask_positions=rng.integers(0, S, (6, P)),
             mlm_ids=rng.integers(0, 130000, (6, P)), mlm_weights=rng.random((6, P)).astype("float32"),
             nsp_labels=rng.integers(0, 2, (6,)))
    f["token_ids"][0, :8] = [0, 127, 128, 16383, 16384, 2**21, -1, -(2**63)]
    if weights != "any floats":
        f["mlm_weights"] = (np.arange(P)[None] < np.array([0, 1, 2, P - 1, P, 3])[:, None]).astype("float32")
        f["padding_mask"][:3] = 1  # one byte per value
    flat = bool(_flat_compatible(tf.constant(f["mlm_weights"])))
    assert flat == (weights != "any floats")
    records = serialize_examples(f)
    assert len(records) == 6 and serialize_examples({k: v[:0] for k, v in f.items()}) == []
    for i, record in enumerate(records):
        assert record == reference_example(f, i)
        ex = tf.train.Example()
        for ours, orig in ORIGINAL_NAMES:
            kind = "float_list" if ours == "mlm_weights" else "int64_list"
            getattr(ex.features.feature[orig], kind).value.extend(np.atleast_1d(f[ours][i]).tolist())
        assert tf.train.Example.FromString(record) == ex


def test_records_parse_with_the_original_spec_and_equal_on_the_fly(written):
    files, _, tokenizer, report = written
    assert report["outputs"] == [f"{report['report_prefix']}-0000{i}-of-00002" for i in range(2)]
    parsed = [tf.io.parse_single_example(r, ORIGINAL_SPEC) for r in tf.data.TFRecordDataset(report["outputs"][0])]
    assert len(parsed) > 50
    masker = make_masker(tokenizer, P, 0.15)
    fly = [f for f, _ in instance_windows(files[:1], tokenizer, masker, S, 0.1, 5, 2, 256)]
    fly = {k: np.concatenate([f[k].numpy() for f in fly]) for k in fly[0]}
    assert len(parsed) == len(fly["nsp_labels"])
    pairs = [("input_ids", "token_ids"), ("input_mask", "padding_mask"), ("segment_ids", "segment_ids"),
             ("masked_lm_positions", "mask_positions"), ("masked_lm_ids", "mlm_ids"),
             ("masked_lm_weights", "mlm_weights")]
    for orig, ours in pairs:
        np.testing.assert_array_equal(np.stack([p[orig].numpy() for p in parsed]), fly[ours])
    np.testing.assert_array_equal([p["next_sentence_labels"].numpy()[0] for p in parsed], fly["nsp_labels"])
    # Byte for byte what protobuf writes for these instances (encoded in the pipeline).
    raw = [r.numpy() for r in tf.data.TFRecordDataset(report["outputs"][0])]
    assert raw == [reference_example(fly, i) for i in range(len(raw))]


def test_shards_do_not_depend_on_threads_and_output_dirs_are_made(written, tmp_path):
    files, _, tokenizer, report = written
    out = tmp_path / "new" / "dirs" / "out.tfrecord"  # neither directory exists yet
    one = write_pretraining_tfrecords(files, str(out), tokenizer, max_seq_length=S, max_predictions_per_seq=P,
                                      random_seed=5, dupe_factor=2, threads=1)
    assert one["counts"] == report["counts"] and os.path.isfile(str(out) + ".report.json")
    for ours, theirs in zip(one["outputs"], report["outputs"]):
        assert open(ours, "rb").read() == open(theirs, "rb").read()
    assert sorted(os.listdir(out.parent)) == sorted(
        [os.path.basename(p) for p in one["outputs"]] + ["out.tfrecord.report.json", "out.tfrecord.report.txt"])


def test_reader_gives_the_shared_layout(written):
    _, _, _, report = written
    ds = read_pretraining_tfrecords(report["report_prefix"] + "-*", batch_size=4)  # the glob also hits the reports
    x, y = next(iter(ds))
    assert {k: (v.shape, v.dtype) for k, v in x.items()} == {
        "token_ids": ((4, S), tf.int32), "segment_ids": ((4, S), tf.int32),
        "padding_mask": ((4, S), tf.int32), "mask_positions": ((4, P), tf.int32)}
    assert y["mlm_weights"].dtype == tf.float32 and y["nsp_labels"].shape == (4,)
    total = sum(int(b[1]["nsp_labels"].shape[0]) for b in read_pretraining_tfrecords(report["outputs"], 1))
    assert total == report["counts"]["instances"]


@pytest.mark.parametrize("names", ["model_garden", "ours"])
def test_reader_accepts_other_names(tmp_path, names):
    rename = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"} if names == "model_garden" else {
        "input_ids": "token_ids", "input_mask": "padding_mask", "masked_lm_positions": "mask_positions",
        "masked_lm_ids": "mlm_ids", "masked_lm_weights": "mlm_weights", "next_sentence_labels": "nsp_labels"}
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(3):
            ex = tf.train.Example()
            for name, spec in ORIGINAL_SPEC.items():
                value = [float(i)] * spec.shape[0] if spec.dtype == tf.float32 else [i + 1] * spec.shape[0]
                kind = "float_list" if spec.dtype == tf.float32 else "int64_list"
                getattr(ex.features.feature[rename.get(name, name)], kind).value.extend(value)
            w.write(ex.SerializeToString())
    x, y = next(iter(read_pretraining_tfrecords(path, 3)))
    np.testing.assert_array_equal(x["token_ids"][:, 0], [1, 2, 3])
    np.testing.assert_array_equal(x["segment_ids"][:, 0], [1, 2, 3])
    np.testing.assert_array_equal(y["nsp_labels"], [1, 2, 3])
    np.testing.assert_allclose(y["mlm_weights"][:, 0], [0, 1, 2])


def test_report_written_next_to_output(written):
    _, _, _, report = written
    data = json.load(open(report["report_prefix"] + ".report.json"))
    text = open(report["report_prefix"] + ".report.txt").read()
    assert data["counts"] == report["counts"] and "NSP random next" in text and "length histogram" in text
    for key in ("nsp_random_next", "same_document_fallback", "mask_rate", "mask_cap_hit", "truncated",
                "short_target_documents", "unknown_tokens"):
        assert key in data["rates"]
    assert data["counts"]["unknown_tokens"] > 0  # the corpus has "zzq" words
    assert data["counts"]["documents_per_epoch"] * 2 == data["counts"]["documents"]


def test_bad_input_counted_or_refused(written, tmp_path):
    _, vocab, tokenizer, _ = written
    (tmp_path / "empty.txt").write_bytes(b"")
    long_line = " ".join(["walk"] * 200)
    (tmp_path / "odd.txt").write_bytes(
        b"one lonely sentence.\n\n" + long_line.encode() + b"\nthe cat \xff\xfe sings.\n\n\n\xc3\n\nthe dog.\nthe tree.\n"
    )
    # A shard whose every document is empty once invalid bytes are dropped: a window
    # without documents.
    (tmp_path / "void.txt").write_bytes(b"\xc3\n\n\xff\xfe\n")
    report = write_pretraining_tfrecords(str(tmp_path / "*.txt"), str(tmp_path / "o"), tokenizer, max_seq_length=S,
                                         max_predictions_per_seq=P, dupe_factor=1, window_size=4)
    c = report["counts"]
    assert report["empty_files"] == [str(tmp_path / "empty.txt")]
    assert c["invalid_utf8_lines"] == 4 and c["single_segment_documents"] == 1 and c["long_segments"] == 1
    assert c["empty_documents"] == 3  # the lines of only invalid bytes
    assert list(tf.data.TFRecordDataset(report["outputs"][2])) == []
    assert c["documents"] == 3 and c["instances"] >= 3 and c["truncated"] >= 1
    lengths = [int(r["input_mask"].numpy().sum()) for r in
               map(lambda r: tf.io.parse_single_example(r, ORIGINAL_SPEC), tf.data.TFRecordDataset(report["outputs"][1]))]
    assert max(lengths) == S
    with pytest.raises(ValueError, match="missing-\\*"):
        write_pretraining_tfrecords([str(tmp_path / "odd.txt"), str(tmp_path / "missing-*")], str(tmp_path / "p"),
                                    tokenizer)
    with pytest.raises(ValueError, match="dupe_factor"):
        write_pretraining_tfrecords(str(tmp_path / "odd.txt"), str(tmp_path / "p"), tokenizer, dupe_factor=0)
    with pytest.raises(ValueError, match="num_workers"):
        write_pretraining_tfrecords(str(tmp_path / "odd.txt"), str(tmp_path / "p"), tokenizer, num_workers=2)
    assert not os.path.exists(str(tmp_path / "p"))


@pytest.mark.slow
def test_cli_with_parallel_workers_equals_one_worker(written, tmp_path):
    from tools import create_pretraining_data as cli

    files, vocab, _, report = written
    args = ["--input_file", ",".join(files), "--output_file", str(tmp_path / "cli"), "--vocab_file", vocab,
            "--max_seq_length", str(S), "--max_predictions_per_seq", str(P), "--random_seed", "5",
            "--dupe_factor", "2", "--num_workers", "2", "--no_progress"]
    cli.main(args)
    for ours, theirs in zip(sorted(str(tmp_path / f"cli-0000{i}-of-00002") for i in range(2)), report["outputs"]):
        a = [r.numpy() for r in tf.data.TFRecordDataset(ours)]
        b = [r.numpy() for r in tf.data.TFRecordDataset(theirs)]
        assert a == b
    assert json.load(open(str(tmp_path / "cli.report.json")))["counts"] == report["counts"]
    with pytest.raises(SystemExit, match="vocab_file"):
        cli.main(args[:4] + ["--vocab_file", str(tmp_path / "nope.txt")])


def test_report_library_function_matches_the_writer(written):
    from keras_bert_zoo.data.pretraining_report import format_report, pretraining_report

    files, _, tokenizer, report = written
    lib = pretraining_report(files[:1], tokenizer, sequence_length=S, max_predictions=P, seed=5, epochs=2)
    records = sum(1 for _ in tf.data.TFRecordDataset(report["outputs"][0]))  # shard 0 has seed 5
    assert lib["counts"]["instances"] == records
    text = format_report(lib)
    assert f"instances: {records}," in text and "[UNK] rate" in text


def test_failure_midway_leaves_no_partial_shard(written, tmp_path):
    from keras_bert_zoo.data.pretraining_writer import write_shards

    files, _, tokenizer, _ = written
    options = dict(max_seq_length=S, max_predictions_per_seq=P, random_seed=5, dupe_factor=2,
                   masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False, window_size=256)

    def fail(n):
        raise KeyboardInterrupt("stopped after the first window")

    outputs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with pytest.raises(KeyboardInterrupt):
        write_shards(files, outputs, tokenizer, options, parallel_shards=2, on_window=fail)
    assert os.listdir(tmp_path) == []
