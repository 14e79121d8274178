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
