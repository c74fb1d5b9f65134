"""`ClassifierHead`: the checkpoint side of a head that is one `Dense` to `num_classes`."""


class ClassifierHead:
    """Mixed into a `Task` whose head is `self.output_dense` (one `Dense` to `num_classes`),
    per example (`BertClassifier`) or per token (`BertTokenClassifier`): the head under
    `run_classifier.py`'s variable names, which Google's fine-tuned checkpoints use and
    HF's `classifier.*` map onto, and the `num_classes` such a head fixes."""

    def head_variables(self):
        """The head under `run_classifier.py`'s names (HF `classifier.*` maps onto them)."""
        return {"output_weights": self.output_dense.kernel, "output_bias": self.output_dense.bias}

    @classmethod
    def config_from_checkpoint(cls, tensors):
        """A fine-tuned head fixes `num_classes`."""
        if "output_bias" in tensors:
            return {"num_classes": int(tensors["output_bias"].shape[0])}
        return {}
