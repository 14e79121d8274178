"""arithmetic.py against numbers worked out by hand."""

import math

import pytest

from autograder.reference.arithmetic import (
    fine_tuning_footprint,
    lora_savings,
    mlm_signal,
    pretraining_costs,
    softmax_worked_example,
)


def test_softmax_worked_example():
    probs = softmax_worked_example()
    assert list(probs) == ["sat", "ran", "jumped", "slept"]
    z = math.exp(2.5) + math.exp(1.0) + math.exp(0.5) + math.exp(1.5)  # 21.031...
    logits = {"sat": 2.5, "ran": 1.0, "jumped": 0.5, "slept": 1.5}
    expected = {word: math.exp(logit) / z for word, logit in logits.items()}
    for word, p in expected.items():
        assert probs[word] == pytest.approx(p, abs=1e-12)  # float64 throughout
    assert probs["sat"] == pytest.approx(0.5793, abs=5e-5)  # the handout's 4-digit value
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-12)


def test_pretraining_costs():
    costs = pretraining_costs(10, 1_000_000, 5_000_000, 10_000)
    assert costs == {
        "scratch_total": 10_000_000,
        "shared_total": 5_100_000,
        "saved": 4_900_000,
        "saved_fraction": 0.49,
    }
    assert pretraining_costs(1, 100, 500, 10)["saved"] == -410  # one company: sharing costs more


def test_mlm_signal():
    signal = mlm_signal(1_000_000)
    assert signal["mlm_predictions"] == pytest.approx(150_000)
    assert signal["clm_predictions"] == 1_000_000
    assert signal["passes_for_equal_signal"] == pytest.approx(1 / 0.15)  # 6.67
    assert mlm_signal(1000, mask_rate=0.5)["passes_for_equal_signal"] == pytest.approx(2.0)


def test_fine_tuning_footprint():
    reference = fine_tuning_footprint(1287)
    assert reference["co2_tonnes"] == pytest.approx(552) and reference["cost_usd"] == pytest.approx(4.6e6)
    assert reference["savings_fraction"] == pytest.approx(0.0)
    small = fine_tuning_footprint(1.287)  # a thousandth of the energy
    assert small["co2_tonnes"] == pytest.approx(0.552)
    assert small["cost_usd"] == pytest.approx(4600)
    assert small["savings_fraction"] == pytest.approx(0.999)
    custom = fine_tuning_footprint(50, ref_energy_mwh=100, ref_co2_tonnes=40, ref_cost_usd=1000)
    assert custom == pytest.approx({"co2_tonnes": 20, "cost_usd": 500, "savings_fraction": 0.5})


def test_lora_savings():
    savings = lora_savings()
    assert savings["trainable"] == 2 * 768 * 16 == 24_576
    assert savings["fraction_of_total"] == pytest.approx(24_576 / 340e6)  # ~7.2e-5
    assert lora_savings(d=1024, r=8, total_params=1e6)["trainable"] == 16_384
