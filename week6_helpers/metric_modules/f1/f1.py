"""F1 score: the harmonic mean of precision and recall.

An offline ``evaluate`` metric module; load it with ``evaluate.load(<this folder>)``.
Binary F1 scores the class ``pos_label``; ``average="macro"`` averages the per-class
F1 over the labels present; ``average="micro"`` pools all decisions (equal to
accuracy for single-label classification). The values are scikit-learn's
``f1_score``, with ``zero_division=0``: a class that is never predicted and never
true, or whose true positives are none, scores 0.
"""
import datasets
import evaluate
from sklearn.metrics import f1_score

_DESCRIPTION = "F1 = 2 * precision * recall / (precision + recall)."
_KWARGS = """
Args:
    predictions (list of int): predicted labels.
    references (list of int): true labels.
    pos_label (int): the positive class for average="binary" (default 1).
    average (str): "binary" (default), "macro" or "micro".
Returns:
    {"f1": float}
Example:
    >>> metric.compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0])
    {'f1': 0.6666666666666666}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class F1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS,
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references, pos_label=1, average="binary"):
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        if average == "binary":
            # The F1 of class pos_label, one against the rest (whatever the other labels are).
            value = f1_score(references, predictions, labels=[pos_label], average="macro", zero_division=0)
        elif average in ("macro", "micro"):
            value = f1_score(references, predictions, average=average, zero_division=0)
        else:
            raise ValueError(f"average must be 'binary', 'macro' or 'micro', not {average!r}")
        return {"f1": float(value)}
