"""`SwagKind`: SWAG (Zellers et al., 2018) in a fine-tuning run or search (see `kind.py`).

The GLUE kind's run (`glue.GlueKind`: every epoch's dev accuracy by `GlueDevMetrics`, the same
results.json) with SWAG's own parts: its CSV files (`keras_bert_zoo.data.read_swag`; tensorflow-
datasets has no SWAG), a `BertMultipleChoice` over as many choices as the training rows have,
choices reported by index, and writes into `output_dir`:

- `results.json` and `preset/`, as the GLUE kind's (`BertMultipleChoice.from_preset` reloads it);
- `dev_predictions.tsv`: `index<TAB>prediction<TAB>label` per dev row (the choice's index), then
  the probability of each ending (`probability_<ending>`);
- `test_predictions.tsv` for `test_file`, the same without labels;
- with `export_dir`, there the fine-tuned task as a SavedModel that answers raw strings
  (`context` and `endings`).
"""

from keras_bert_zoo.data.swag import read_swag
from keras_bert_zoo.finetuning.glue import GlueKind, read_task_data
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.tasks import names_of

TEST_PREDICTIONS = "test_predictions.tsv"


class SwagKind(GlueKind):
    """SWAG: `BertMultipleChoice`, dev accuracy by `glue_metrics`, choices by index."""

    tasks = names_of("swag")
    task_class = BertMultipleChoice

    def labels(self):
        """None: a choice is reported by its index."""
        return None

    def read_source(self, name, labelled, skipped):
        """`(x, y, ids)` of SWAG's CSV file in the data field `name` (`read_swag`)."""
        return read_task_data(self.config, name, labelled,
                              lambda source, errors: read_swag(source, errors=errors, with_ids=True, skipped=skipped))

    def build(self, learning_rate, seed=None):
        c = self.config
        task = BertMultipleChoice.from_preset(self.preset, num_choices=len(self.train[0][1][0]),
                                              sequence_length=c.sequence_length, dtype=c.precision,
                                              **c.dropout_kwargs())
        return self.recase(self.compile(task, learning_rate))

    def write_test(self, ids, outputs):
        """`test_predictions.tsv`: the test rows' choices and their probabilities."""
        self.write_predictions(TEST_PREDICTIONS, ids, outputs)

    def test_names(self):
        return [TEST_PREDICTIONS]
