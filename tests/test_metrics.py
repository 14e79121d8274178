"""The local evaluate metrics load with no hub and give known values."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def load():
    from week6_helpers import load_metric

    return load_metric


def test_accuracy_worked_example(load):
    result = load("accuracy").compute(predictions=[0, 1, 1, 0, 1], references=[0, 1, 0, 0, 0])
    assert result == {"accuracy": pytest.approx(3 / 5, abs=1e-12)}


def test_f1_worked_example(load):
    f1 = load("f1")
    predictions, references = [0, 1, 1, 0, 1], [0, 1, 0, 0, 1]
    # Class 1: tp=2, fp=1, fn=0 -> 4/5. Class 0: tp=2, fp=0, fn=1 -> 4/5.
    assert f1.compute(predictions=predictions, references=references)["f1"] == pytest.approx(0.8)
    assert f1.compute(predictions=predictions, references=references, average="macro")["f1"] == pytest.approx(0.8)
    assert f1.compute(predictions=[0, 0], references=[1, 1])["f1"] == 0.0


def test_accuracy_and_f1_equal_scikit_learn(load):
    """The modules are scikit-learn's accuracy_score and f1_score (zero_division=0), argument for argument."""
    from sklearn.metrics import accuracy_score, f1_score

    accuracy, f1 = load("accuracy"), load("f1")
    cases = [
        ([0, 1, 1, 0, 1, 1, 0, 0], [0, 1, 0, 0, 1, 1, 1, 0]),    # binary
        ([2, 0, 1, 2, 2, 1, 0, 3], [2, 1, 1, 0, 2, 1, 0, 0]),    # four classes, one never true
        ([1, 1, 1], [0, 0, 0]),                                 # no true positive anywhere
    ]
    weights = [0.5, 1.0, 2.0, 1.0, 0.25, 1.0, 3.0, 1.0]
    for predictions, references in cases:
        assert accuracy.compute(predictions=predictions, references=references)["accuracy"] == pytest.approx(
            accuracy_score(references, predictions), abs=1e-12)
        assert accuracy.compute(predictions=predictions, references=references, normalize=False)["accuracy"] == \
            accuracy_score(references, predictions, normalize=False)
        if len(predictions) == len(weights):
            assert accuracy.compute(predictions=predictions, references=references, sample_weight=weights)[
                "accuracy"] == pytest.approx(accuracy_score(references, predictions, sample_weight=weights), abs=1e-12)
        for average in ("macro", "micro"):
            assert f1.compute(predictions=predictions, references=references, average=average)["f1"] == \
                pytest.approx(f1_score(references, predictions, average=average, zero_division=0), abs=1e-12)
        for label in sorted(set(predictions) | set(references)):
            expected = f1_score(references, predictions, labels=[label], average=None, zero_division=0)[0]
            assert f1.compute(predictions=predictions, references=references, pos_label=label)["f1"] == \
                pytest.approx(expected, abs=1e-12)
    binary = cases[0]
    assert f1.compute(predictions=binary[0], references=binary[1])["f1"] == pytest.approx(
        f1_score(binary[1], binary[0]), abs=1e-12)
    with pytest.raises(ValueError, match="average must be"):
        f1.compute(predictions=[0, 1], references=[0, 1], average="weighted")


def test_rouge_worked_example(load):
    rouge = load("rouge")
    # "the cat sat" vs "the cat sat down": unigram P = 3/3, R = 3/4 -> F = 6/7;
    # bigrams P = 2/2, R = 2/3 -> F = 4/5; LCS = 3 -> same as ROUGE-1.
    result = rouge.compute(predictions=["the cat sat"], references=["the cat sat down"])
    assert result["rouge1"] == pytest.approx(6 / 7)
    assert result["rouge2"] == pytest.approx(4 / 5)
    assert result["rougeL"] == pytest.approx(6 / 7)
    per_example = rouge.compute(
        predictions=["a b", "x y"], references=["a b", "p q"], use_aggregator=False
    )
    assert per_example["rouge1"] == [1.0, 0.0]


def test_unknown_metric_is_refused():
    from week6_helpers import metric_path

    with pytest.raises(ValueError, match="offline metrics"):
        metric_path("bleu")
