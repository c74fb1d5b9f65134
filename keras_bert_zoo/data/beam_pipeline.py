"""Static pretraining data on Apache Beam: the local writer's shards, one Beam element each.

The pipeline is `input shards → write each shard (the same traced tf.data code as
`write_pretraining_tfrecords`) → merge the per-shard counts → one data report`. A shard's
instances depend only on `(random_seed, shard index)` (`pretraining_writer.SHARD_SEED_STRIDE`),
so any runner, any number of workers and any scheduling writes files byte-identical to the
local writer's. Beam only distributes the shards: nothing here re-implements tokenization,
pairing or masking.

Runners: `DirectRunner` (in-process or multi-process on this machine), and Beam's
`DataflowRunner`, `FlinkRunner`, `SparkRunner` with their own pipeline options. Every worker
reads its input shard and the vocabulary and writes its output shard (and one the report)
itself, all through `tf.io.gfile`, so these paths must be ones all workers see: one machine,
NFS, or a bucket (`gs://`; not tested here, where no bucket can be reached).

`apache-beam` is an optional dependency (`pip install keras-bert-zoo[beam]`); it is imported
only when a pipeline is built.
"""

import json
import posixpath

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data import pretraining_report as report_lib
from keras_bert_zoo.data.documents import resolve_files
from keras_bert_zoo.data.pretraining_writer import build_tokenizer, output_paths, write_shards, writer_options

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")


def _totals_to_json(totals):
    return {k: (v.tolist() if k == "length_histogram" else int(v)) for k, v in totals.items()}


class _WriteShardFn:
    """A `beam.DoFn` body: writes one shard with the local writer's pipeline, yields its counts.

    Kept as a plain class (wrapped in `beam.DoFn` by `build_pipeline`) so this module
    imports without Beam. The tokenizer is built once per worker in `setup`.
    """

    def __init__(self, tokenizer_spec, options):
        self.tokenizer_spec = tokenizer_spec
        self.options = options
        self._tokenizer = None

    def setup(self):
        self._tokenizer = build_tokenizer(self.tokenizer_spec)

    def process(self, job):
        index, path, output = job
        totals = write_shards([path], [output], self._tokenizer, self.options, shard_indices=[index])
        # JSON-friendly: Beam moves it between workers; the merge below sums it.
        yield json.dumps(_totals_to_json(totals))


def _merge_totals(encoded, sequence_length):
    totals = report_lib.empty_totals(sequence_length)
    for item in encoded:
        report_lib.accumulate(totals, json.loads(item))
    return totals


def build_pipeline(pipeline, paths, outputs, tokenizer_spec, options):
    """Adds the shard-writing steps to a `beam.Pipeline`; returns the PCollection of merged totals."""
    import apache_beam as beam  # lazy: apache_beam is optional (the `beam` extra) and slow to import

    fn = type("WriteShard", (_WriteShardFn, beam.DoFn), {})(tokenizer_spec, options)
    jobs = [(i, p, o) for i, (p, o) in enumerate(zip(paths, outputs))]
    length = options["max_seq_length"]
    return (
        pipeline
        | "Shards" >> beam.Create(jobs)
        # One shard per worker call; without the reshuffle a runner may fuse Create with the
        # writes and run every shard on one worker.
        | "Distribute" >> beam.Reshuffle()
        | "WriteShard" >> beam.ParDo(fn)
        | "MergeCounts" >> beam.combiners.ToList()
        | "Totals" >> beam.Map(lambda items: _totals_to_json(_merge_totals(items, length)))
    )


def write_pretraining_tfrecords_beam(files, output_file, tokenizer, runner="DirectRunner", pipeline_args=(),
                                     **options):
    """Writes pretraining TFRecords with Apache Beam; byte-identical to `write_pretraining_tfrecords`.

    Args:
        files: str or list of str. Input text files/globs; each file is one shard.
        output_file: str. As in `write_pretraining_tfrecords` (a path, a prefix, or one path per input).
        tokenizer: dict. A JSON tokenizer spec, `{"vocabulary": path, "lowercase": bool}` or
            `{"preset": name}`: each worker builds its own tokenizer from it.
        runner: str. A Beam runner: one of `RUNNERS`. Defaults to "DirectRunner".
        pipeline_args: list of str. Beam's own pipeline options, passed through
            (e.g. `["--direct_running_mode=multi_processing", "--direct_num_workers=2"]`, or
            Dataflow's `--project`, `--region`, `--temp_location`).
        **options: the generation options of `write_pretraining_tfrecords` (`max_seq_length`,
            `max_predictions_per_seq`, `random_seed`, `dupe_factor`, `masked_lm_prob`,
            `short_seq_prob`, `do_whole_word_mask`, `window_size`).

    Returns:
        The data report dict, merged over all shards (also written next to the output).
    """
    if runner not in RUNNERS:
        raise ValueError(f"`runner` must be one of {RUNNERS}. Received: runner={runner!r}.")
    if not isinstance(tokenizer, dict):
        raise ValueError("`tokenizer` must be a JSON spec ({'vocabulary': path, 'lowercase': bool} or "
                         f"{{'preset': name}}) that every worker can rebuild. Received a {type(tokenizer).__name__}.")
    try:
        import apache_beam as beam  # lazy: apache_beam is optional (the `beam` extra) and slow to import
        from apache_beam.options.pipeline_options import PipelineOptions  # lazy: apache_beam is optional (the `beam` extra) and slow to import
    except ImportError as e:
        raise ImportError("The Beam writer needs apache-beam: pip install 'keras-bert-zoo[beam]' "
                          "(or pip install apache-beam).") from e
    options = writer_options(**options)
    paths = resolve_files(files)
    outputs = output_paths(output_file, len(paths))

    for directory in {posixpath.dirname(o) for o in outputs} - {""}:
        tf.io.gfile.makedirs(directory)  # gfile: also gs:// on Dataflow
    prefix = _report_prefix(output_file, outputs)
    with beam.Pipeline(runner=runner, options=PipelineOptions(list(pipeline_args))) as pipeline:
        totals = build_pipeline(pipeline, paths, outputs, tokenizer, options)
        # The report is written by a worker (on Dataflow this process may not see the files'
        # counts otherwise), then read back here.
        totals | "Report" >> beam.Map(_write_report, options, paths, outputs, prefix)
    with tf.io.gfile.GFile(prefix + ".report.json") as f:
        return json.load(f)


def _report_prefix(output_file, outputs):
    return outputs[0] if len(outputs) == 1 or "," in str(output_file) else str(output_file)


def _write_report(totals, options, paths, outputs, prefix):
    totals = dict(totals)
    totals["length_histogram"] = np.asarray(totals["length_histogram"], np.int64)
    empty = [p for p in paths if tf.io.gfile.stat(p).length == 0]
    report = report_lib.summarize(totals, options, paths, empty, options["dupe_factor"])
    report["outputs"] = outputs
    report["report_prefix"] = prefix
    report_lib.write_report(report, prefix)
