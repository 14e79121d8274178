"""Accuracy: the fraction of predictions equal to their reference label.

An offline ``evaluate`` metric module; load it with ``evaluate.load(<this folder>)``.
The value is scikit-learn's ``accuracy_score``.
"""
import datasets
import evaluate
from sklearn.metrics import accuracy_score

_DESCRIPTION = "Accuracy = (number of correct predictions) / (number of predictions)."
_KWARGS = """
Args:
    predictions (list of int): predicted labels.
    references (list of int): true labels.
    normalize (bool): return the fraction (True, default) or the count of correct predictions.
    sample_weight (list of float): optional weight per example.
Returns:
    {"accuracy": float}
Example:
    >>> metric.compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0])
    {'accuracy': 0.75}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class Accuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS,
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references, normalize=True, sample_weight=None):
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        if not predictions:
            raise ValueError("accuracy of zero examples is undefined")
        value = accuracy_score(references, predictions, normalize=normalize, sample_weight=sample_weight)
        return {"accuracy": float(value)}
