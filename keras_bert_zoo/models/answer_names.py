"""The names of a task's answers: the keys of `postprocess` and of an export's outputs.

One vocabulary for both (a served answer is named as `task.postprocess` names it), one
value per row, as TF Serving clients read them: `label_id`, not `class_ids`.
"""

LABEL_ID = "label_id"
"""int: the predicted class of a row (a classifier) or of a piece (a token classifier)."""
LABEL = "label"
"""str: the name of `LABEL_ID` (a classifier with `labels`)."""
PROBABILITIES = "probabilities"
"""float: the softmax over the classes (or over the choices)."""
SCORE = "score"
"""float: a regression's value."""
CHOICE = "choice"
"""int: the best ending of a multiple-choice row."""
INPUT_TRUNCATED = "input_truncated"
"""bool: an export read only the first `max_input_chars` characters of a string input of the row
(the answer is of that prefix); the Python API reads whole texts and has no such key."""
