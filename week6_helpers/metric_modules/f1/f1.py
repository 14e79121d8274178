"""F1 score: the harmonic mean of precision and recall.

An offline ``evaluate`` metric module; load it with ``evaluate.load(<this folder>)``.
Binary F1 scores the class ``pos_label``; ``average="macro"`` averages the per-class
F1 over the labels present; ``average="micro"`` pools all decisions (equal to
accuracy for single-label classification).
"""
import datasets
import evaluate

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


def _f1_for(label, predictions, references):
    tp = sum(1 for p, r in zip(predictions, references) if p == label and r == label)
    fp = sum(1 for p, r in zip(predictions, references) if p == label and r != label)
    fn = sum(1 for p, r in zip(predictions, references) if p != label and r == label)
    # Convention shared with scikit-learn (zero_division=0): an empty class scores 0.
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


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
            return {"f1": float(_f1_for(pos_label, predictions, references))}
        if average == "micro":
            correct = sum(1 for p, r in zip(predictions, references) if p == r)
            return {"f1": float(correct / len(predictions))}
        if average == "macro":
            labels = sorted(set(predictions) | set(references))
            scores = [_f1_for(label, predictions, references) for label in labels]
            return {"f1": float(sum(scores) / len(scores))}
        raise ValueError(f"average must be 'binary', 'macro' or 'micro', not {average!r}")
