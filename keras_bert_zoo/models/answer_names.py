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
"""float: a regression's value; a span answer's score (its start and end logits)."""
CHOICE = "choice"
"""int: the best ending of a multiple-choice row."""
ANSWER_TEXT = "answer_text"
"""str: a span extractor's answer, "" for no answer (the text of the context's characters
`ANSWER_START` to `ANSWER_END`)."""
ANSWER_START = "answer_start"
"""int: the answer's first character in the context, -1 for no answer (SQuAD's own name)."""
ANSWER_END = "answer_end"
"""int: one past the answer's last character in the context, -1 for no answer."""
NULL_SCORE = "null_score"
"""float: a span extractor's score of answering nothing ([CLS]'s start and end logits)."""
SCORE_DIFF = "score_diff"
"""float: `NULL_SCORE` minus the best answer's `SCORE` (what the null threshold is compared with)."""
HAS_ANSWER = "has_answer"
"""bool: whether a span extractor answers (`ANSWER_START >= 0`); an export's key only."""
INPUT_TRUNCATED = "input_truncated"
"""bool: an export read only the first `max_input_chars` characters of a string input of the row
(the answer is of that prefix); the Python API reads whole texts and has no such key."""
