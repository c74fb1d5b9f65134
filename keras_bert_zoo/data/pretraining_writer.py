"""Static pretraining data: TFRecords in the original layout, parallel over input shards.

Each input file is one shard, written to its own output file; a shard's instances
depend only on (random_seed, shard index), never on the number of threads or workers.
By default one process runs one traced `tf.data` pipeline over all shards (several
shards in flight, records encoded in graph); the loop only writes bytes. Optional
worker processes are fresh `python -m keras_bert_zoo.data.pretraining_writer` processes
talking JSON (nothing is pickled).
"""

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data import pretraining_report as report_lib
from keras_bert_zoo.data.documents import resolve_files
from keras_bert_zoo.data.example_encoder import encode_instances
from keras_bert_zoo.data.pretraining import instance_windows, make_masker, validate_options
from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from keras_bert_zoo.text.vocabulary import load_vocabulary

SHARD_SEED_STRIDE = 7919


def output_paths(output_file, num_inputs):
    """One output per input shard: the name itself for one shard, else `-0000i-of-0000n`."""
    names = [p.strip() for p in str(output_file).split(",") if p.strip()]
    if len(names) == num_inputs:
        return names
    if len(names) != 1:
        raise ValueError(
            f"`output_file` must be one path or one per input file ({num_inputs}). Received: output_file={output_file!r}."
        )
    if num_inputs == 1:
        return names
    return [f"{names[0]}-{i:05d}-of-{num_inputs:05d}" for i in range(num_inputs)]


def build_tokenizer(spec):
    """A tokenizer from a JSON spec: `{"vocabulary": path, "lowercase": bool}` or `{"preset": name}`."""
    if "preset" in spec:
        preset = open_preset(spec["preset"])
        vocabulary = preset.vocabulary_path()
        lowercase = spec.get("lowercase")
        if lowercase is None:  # the registry entry, our saved preset, the name, else the vocabulary
            lowercase = preset.lowercase(load_vocabulary(vocabulary))
        return BertTokenizer(vocabulary, lowercase=lowercase)
    return BertTokenizer(spec["vocabulary"], lowercase=spec.get("lowercase", True))


def shards_dataset(paths, shard_indices, tokenizer, options, parallel_shards=1):
    """Every shard's windows in one traced pipeline, as `(position, records, stats, done)`.

    One graph for all shards (graph building costs about a second, so a graph per
    shard was most of the start-up on many shards): the shard's path and seed are
    tensors of the interleaved function (`position` indexes `paths`; the seed uses
    `shard_indices[position]`). `parallel_shards` shards are produced
    concurrently; each shard's elements keep their order, and its instances depend only
    on `(random_seed, shard index)`. A shard's elements end with one `done=True` element
    (no records, zero stats). Records are serialized `tf.train.Example`s, encoded in the
    pipeline.
    """
    masker = make_masker(tokenizer, options["max_predictions_per_seq"], options["masked_lm_prob"],
                         options["do_whole_word_mask"], options.get("per_word_replacement", False))
    paths_t = tf.constant(list(paths))

    @tf.autograph.experimental.do_not_convert  # TF control flow only: AutoGraph is pure start-up cost
    def shard(position):
        index = tf.gather(tf.constant(list(shard_indices), tf.int64), position)
        windows = instance_windows(
            paths_t[position], tokenizer, masker, options["max_seq_length"], options["short_seq_prob"],
            options["random_seed"] + SHARD_SEED_STRIDE * index, options["dupe_factor"],
            options["window_size"], cache_tokens=True,
        )
        zeros = tf.nest.map_structure(lambda spec: tf.zeros([d or 0 for d in spec.shape], spec.dtype),
                                      windows.element_spec[1])
        end = tf.data.Dataset.from_tensors((position, tf.zeros([0], tf.string), zeros, True))
        windows = windows.map(lambda features, stats: (position, encode_instances(features), stats, False),
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return windows.concatenate(end)

    # Shards may interleave in any order (whichever has a window ready): each shard's own
    # elements stay in order and go to its own file, so the outputs do not change.
    dataset = tf.data.Dataset.range(len(paths)).interleave(
        shard, cycle_length=parallel_shards, num_parallel_calls=parallel_shards, deterministic=False)
    # Without the autotuner (AUTOTUNE is then one call per core) the iterator's teardown no
    # longer waits for the autotuner's thread; without tf.data's default graph rewrites (our
    # stages set their parallelism) the pipeline starts sooner and uses less CPU time.
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.apply_default_optimizations = False
    return dataset.with_options(options)


def drain_shards(dataset, outputs, max_seq_length, on_window=None, on_shard=None):
    """Writes `shards_dataset` elements to `outputs[position]` (each atomically); returns raw totals."""
    totals = report_lib.empty_totals(max_seq_length)
    open_writers = {}  # shard -> (writer, temporary path)
    remaining = len(outputs)
    try:
        for shard, records, stats, done in dataset.prefetch(2):
            shard = int(shard)
            if shard not in open_writers:
                tmp = f"{outputs[shard]}.tmp{os.getpid()}-{threading.get_ident()}"
                open_writers[shard] = (tf.io.TFRecordWriter(tmp), tmp)
            writer, tmp = open_writers[shard]
            if done:
                writer.close()
                # Atomic on a local disk (a killed run never leaves a partial shard); through
                # tf.io.gfile so a Beam worker can write gs:// outputs too.
                tf.io.gfile.rename(tmp, outputs[shard], overwrite=True)
                del open_writers[shard]
                if on_shard:
                    on_shard()
                remaining -= 1
                if not remaining:  # every shard is written: no need to wait for the end of input
                    break
                continue
            records = records.numpy()
            for record in records:
                writer.write(record)
            report_lib.accumulate(totals, stats)
            if on_window:
                on_window(len(records))
    finally:
        for writer, tmp in open_writers.values():
            writer.close()
            tf.io.gfile.remove(tmp)
    return totals


def write_shards(paths, outputs, tokenizer, options, shard_indices=None, parallel_shards=1, on_window=None,
                 on_shard=None):
    """Writes input files' instances (all `dupe_factor` rounds) to `outputs`; returns raw totals."""
    shard_indices = range(len(paths)) if shard_indices is None else shard_indices
    dataset = shards_dataset(paths, shard_indices, tokenizer, options, parallel_shards)
    return drain_shards(dataset, outputs, options["max_seq_length"], on_window, on_shard)


def _spawn(job):
    cmd = [sys.executable, "-m", "keras_bert_zoo.data.pretraining_writer", json.dumps(job)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _run_workers(jobs, num_workers, progress):
    """Runs shard jobs in at most `num_workers` processes; returns their totals."""
    pending, running, results = list(jobs), [], []
    while pending or running:
        while pending and len(running) < num_workers:
            job = pending.pop(0)
            proc = _spawn(job)
            lines = []
            reader = threading.Thread(target=_read_progress, args=(proc, lines, progress), daemon=True)
            reader.start()
            running.append((proc, reader, lines, job))
        for item in list(running):
            proc, reader, lines, job = item
            if proc.poll() is None:
                continue
            reader.join()
            running.remove(item)
            err = proc.stderr.read()
            if proc.returncode != 0 or not lines:
                raise RuntimeError(f"Worker for input {job['path']} failed (exit {proc.returncode}):\n{err[-3000:]}")
            totals = json.loads(lines[-1])
            totals["length_histogram"] = np.asarray(totals["length_histogram"], np.int64)
            results.append(totals)
        time.sleep(0.05)
    return results


def _read_progress(proc, lines, progress):
    for line in proc.stdout:
        if line.startswith("P "):
            progress(int(line[2:]))
        elif line.strip():
            lines.append(line)


class _Progress:
    """A one-line progress bar on stderr (instances written, shards done)."""

    def __init__(self, total_shards, enabled):
        self.total, self.done, self.count, self.enabled = total_shards, 0, 0, enabled
        self.start, self.lock = time.time(), threading.Lock()

    def __call__(self, n):
        with self.lock:
            self.count += n
            if self.enabled:
                rate = self.count / max(1e-9, time.time() - self.start)
                sys.stderr.write(f"\r{self.count} instances ({rate:.0f}/s), {self.done}/{self.total} shards")
                sys.stderr.flush()

    def shard_done(self):
        with self.lock:
            self.done += 1
        self(0)


def writer_options(max_seq_length=128, max_predictions_per_seq=20, random_seed=12345, dupe_factor=10,
                   masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False, window_size=256):
    """The generation options (the original flags) as one validated dict; the defaults are the writers'."""
    validate_options(max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob, window_size)
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError(f"`dupe_factor` must be a positive int. Received: dupe_factor={dupe_factor!r}.")
    return dict(max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                random_seed=random_seed, dupe_factor=dupe_factor, masked_lm_prob=masked_lm_prob,
                short_seq_prob=short_seq_prob, do_whole_word_mask=do_whole_word_mask, window_size=window_size)


def write_pretraining_tfrecords(files, output_file, tokenizer, max_seq_length=128, max_predictions_per_seq=20,
                                random_seed=12345, dupe_factor=10, masked_lm_prob=0.15, short_seq_prob=0.1,
                                do_whole_word_mask=False, window_size=256, num_workers=1, progress=False,
                                threads=None):
    """Writes pretraining TFRecords (original layout) and a report next to the output.

    Args:
        files: str or list of str. Input text files/globs; each file is one shard.
        output_file: str. Output path (one input) or prefix (`-0000i-of-0000n` appended),
            or a comma-separated list with one path per input.
        tokenizer: a tokenizer object (used in this process; `num_workers` must be 1) or a
            JSON spec `{"vocabulary": path, "lowercase": bool}` / `{"preset": name}`.
        max_seq_length, max_predictions_per_seq, random_seed, dupe_factor,
        masked_lm_prob, short_seq_prob, do_whole_word_mask: the original flags.
        window_size: int. Documents among which the random next document is drawn.
        num_workers: int. Worker processes (one shard each at a time). Defaults to 1.
            Each process pays Python + TensorFlow start-up and graph building (seconds);
            the default single process is faster.
        threads: int or None. With `num_workers=1`: shards in flight at once in this
            process's one pipeline (each runs its own tf.data stages; same output as one
            at a time). Defaults to `os.cpu_count()`.
        progress: bool. Print a progress line to stderr. Defaults to False.

    Returns:
        The report dict (also written to `<output_file>.report.{json,txt}`; the first
        output's name when `output_file` is a list).
    """
    options = writer_options(max_seq_length, max_predictions_per_seq, random_seed, dupe_factor, masked_lm_prob,
                             short_seq_prob, do_whole_word_mask, window_size)
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"`num_workers` must be a positive int. Received: num_workers={num_workers!r}.")
    is_spec = isinstance(tokenizer, dict)
    if num_workers > 1 and not is_spec:
        raise ValueError("`num_workers > 1` needs `tokenizer` as a JSON spec ({'vocabulary': path, 'lowercase': "
                         f"bool}} or {{'preset': name}}). Received a {type(tokenizer).__name__} object.")
    paths = resolve_files(files)
    outputs = output_paths(output_file, len(paths))
    bar = _Progress(len(paths), progress)
    threads = (os.cpu_count() or 1) if threads is None else threads
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"`threads` must be a positive int. Received: threads={threads!r}.")
    for out in outputs:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    if num_workers == 1:
        tok = build_tokenizer(tokenizer) if is_spec else tokenizer
        results = [write_shards(paths, outputs, tok, options, parallel_shards=min(threads, len(paths)),
                                on_window=bar, on_shard=bar.shard_done)]
    else:
        jobs = [dict(path=p, out=o, tokenizer=tokenizer, options=options, shard=i)
                for i, (p, o) in enumerate(zip(paths, outputs))]
        results = _run_workers(jobs, num_workers, bar)
    if progress:
        sys.stderr.write("\n")
    totals = report_lib.empty_totals(max_seq_length)
    for r in results:
        report_lib.accumulate(totals, r)
    empty = [p for p in paths if os.path.getsize(p) == 0]
    report = report_lib.summarize(totals, options, paths, empty, dupe_factor)
    report["outputs"] = outputs
    report["report_prefix"] = outputs[0] if len(outputs) == 1 or "," in str(output_file) else str(output_file)
    report_lib.write_report(report, report["report_prefix"])
    return report


def _worker_main(job):
    tokenizer = build_tokenizer(job["tokenizer"])

    def on_window(n):
        print(f"P {n}", flush=True)

    totals = write_shards([job["path"]], [job["out"]], tokenizer, job["options"], [job["shard"]],
                          on_window=on_window)
    totals = {k: (v.tolist() if k == "length_histogram" else int(v)) for k, v in totals.items()}
    print(json.dumps(totals), flush=True)


if __name__ == "__main__":
    _worker_main(json.loads(sys.argv[1]))
