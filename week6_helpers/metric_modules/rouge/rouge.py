"""ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum F-measures (Lin, 2004).

An offline ``evaluate`` metric module built on Google's ``rouge-score`` package;
load it with ``evaluate.load(<this folder>)``. Scores are averaged over examples.
"""
import datasets
import evaluate
from rouge_score import rouge_scorer

_CITATION = """Lin, Chin-Yew (2004). ROUGE: A Package for Automatic Evaluation of Summaries.
Text Summarization Branches Out, ACL Workshop."""
_DESCRIPTION = "ROUGE compares n-gram and longest-common-subsequence overlap with references."
_KWARGS = """
Args:
    predictions (list of str): generated summaries.
    references (list of str): reference summaries.
    rouge_types (list of str): default ["rouge1", "rouge2", "rougeL", "rougeLsum"].
    use_stemmer (bool): Porter-stem words before matching (default False).
    use_aggregator (bool): return the mean over examples (default True) or a list per example.
Returns:
    {"rouge1": float, "rouge2": float, "rougeL": float, "rougeLsum": float}
Example:
    >>> metric.compute(predictions=["the cat sat"], references=["the cat sat down"])["rouge1"]
    0.857142857142857
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class Rouge(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references, rouge_types=None, use_stemmer=False, use_aggregator=True):
        rouge_types = rouge_types or ["rouge1", "rouge2", "rougeL", "rougeLsum"]
        scorer = rouge_scorer.RougeScorer(rouge_types=rouge_types, use_stemmer=use_stemmer)
        per_example = [scorer.score(ref, pred) for ref, pred in zip(references, predictions)]
        if use_aggregator:
            # A plain mean, not rouge-score's bootstrap estimate, so results are exact.
            return {
                key: float(sum(s[key].fmeasure for s in per_example) / len(per_example))
                for key in rouge_types
            }
        return {key: [float(s[key].fmeasure) for s in per_example] for key in rouge_types}
