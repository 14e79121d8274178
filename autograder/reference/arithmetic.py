"""The handout's pen-and-paper exercises, as functions returning plain numbers."""

import math

import torch

from .attention import softmax
from .lora import lora_parameter_count


def softmax_worked_example() -> dict[str, float]:
    """Next-word probabilities for "The cat ___" from four logits.

    Logits 2.5, 1.0, 0.5, 1.5 for "sat", "ran", "jumped", "slept". With
    Z = e^2.5 + e^1.0 + e^0.5 + e^1.5 ~= 21.03, p(w) = e^logit(w) / Z:

        sat ~= 0.579, ran ~= 0.129, jumped ~= 0.078, slept ~= 0.213

    Returns:
        {word: probability} as Python floats (computed in float64 with
        ``attention.softmax``), in the order above; they sum to 1.
    """
    words = ["sat", "ran", "jumped", "slept"]
    logits = torch.tensor([2.5, 1.0, 0.5, 1.5], dtype=torch.float64)
    return dict(zip(words, softmax(logits).tolist()))


def pretraining_costs(
    n_companies: int, scratch_cost: float, pretrain_cost: float, adapt_cost: float
) -> dict[str, float]:
    """Why pre-train once and fine-tune many times: total cost of both strategies.

    Each of ``n_companies`` either trains its own model from scratch, or all
    share one pre-trained model (paid once) and each adapts it:

        scratch_total  = n_companies * scratch_cost
        shared_total   = pretrain_cost + n_companies * adapt_cost
        saved          = scratch_total - shared_total        (negative: sharing costs more)
        saved_fraction = saved / scratch_total

    Costs in any one unit (dollars, GPU hours, ...); results in the same unit
    (saved_fraction is a pure number).
    """
    scratch_total = n_companies * scratch_cost
    shared_total = pretrain_cost + n_companies * adapt_cost
    saved = scratch_total - shared_total
    return {
        "scratch_total": scratch_total,
        "shared_total": shared_total,
        "saved": saved,
        "saved_fraction": saved / scratch_total,
    }


def mlm_signal(n_tokens: int, mask_rate: float = 0.15) -> dict[str, float]:
    """Training signal per pass over ``n_tokens``: masked LM versus causal LM.

    - mlm_predictions = mask_rate * n_tokens: BERT predicts only the masked
      tokens (an expected count, so a float);
    - clm_predictions = n_tokens: a causal LM predicts every token. We count the
      text as one long stream (as GPT pre-training does with concatenated
      documents), so the "-1" of the very first token is ignored; per separate
      sequence of length n it would be n - 1;
    - passes_for_equal_signal = clm_predictions / mlm_predictions = 1 / mask_rate:
      how many passes BERT needs to see as many prediction targets as GPT gets
      in one (about 6.67 at 15 %).
    """
    mlm_predictions = mask_rate * n_tokens
    clm_predictions = n_tokens
    return {
        "mlm_predictions": mlm_predictions,
        "clm_predictions": clm_predictions,
        "passes_for_equal_signal": clm_predictions / mlm_predictions,
    }


def fine_tuning_footprint(
    energy_mwh: float,
    *,
    ref_energy_mwh: float = 1287,
    ref_co2_tonnes: float = 552,
    ref_cost_usd: float = 4.6e6,
) -> dict[str, float]:
    """CO2 and cost of a run that uses ``energy_mwh``, scaled from a reference run.

    The defaults are published estimates for pre-training GPT-3: 1,287 MWh and
    552 tonnes of CO2e (Patterson et al., 2021) and about 4.6 million US dollars
    of cloud compute (Lambda Labs, 2020). This is a deliberately crude model:
    CO2 and cost are taken proportional to energy, as if on the same hardware,
    data centre and electricity mix:

        ratio            = energy_mwh / ref_energy_mwh
        co2_tonnes       = ratio * ref_co2_tonnes
        cost_usd         = ratio * ref_cost_usd
        savings_fraction = 1 - ratio     (compared with the reference run)
    """
    ratio = energy_mwh / ref_energy_mwh
    return {
        "co2_tonnes": ratio * ref_co2_tonnes,
        "cost_usd": ratio * ref_cost_usd,
        "savings_fraction": 1.0 - ratio,
    }


def lora_savings(d: int = 768, r: int = 16, total_params: float = 340e6) -> dict[str, float]:
    """LoRA's trainable parameters for one d x d weight matrix, against a whole model.

        trainable         = r * (d + d) = 2 d r    (24,576 for d = 768, r = 16)
        fraction_of_total = trainable / total_params

    (``total_params`` defaults to BERT-large's 340 M.) ``trainable`` is an int.
    """
    trainable = lora_parameter_count(d, d, r)
    return {"trainable": trainable, "fraction_of_total": trainable / total_params}


def bits_per_example(
    seq_len: int, *, mask_rate: float, mlm_bits_per_target: float, clm_bits_per_target: float
) -> dict[str, float]:
    """Bits of supervision that one training example of ``seq_len`` tokens gives each objective.

    Every prediction target carries, on average, as many bits as the model's cross-entropy on
    it (log2 of the vocabulary size for a model that knows nothing, less once it has learned;
    nats / ln 2 from a measured loss):

        mlm_targets = mask_rate * seq_len     (an expected count: only the masked tokens)
        clm_targets = seq_len - 1             (every token but the first, in one sequence)
        mlm_bits    = mlm_targets * mlm_bits_per_target
        clm_bits    = clm_targets * clm_bits_per_target
        clm_over_mlm = clm_bits / mlm_bits    (inf when mlm_bits is 0)

    All five are Python floats. Raises ValueError for ``seq_len < 2`` (no CLM target), a
    ``mask_rate`` outside (0, 1], or a negative number of bits per target.
    """
    if seq_len < 2:
        raise ValueError(f"seq_len must be at least 2 (one CLM target), got {seq_len}")
    if not 0 < mask_rate <= 1:
        raise ValueError(f"mask_rate must be in (0, 1], got {mask_rate}")
    if mlm_bits_per_target < 0 or clm_bits_per_target < 0:
        raise ValueError("bits per target cannot be negative")
    mlm_targets = mask_rate * seq_len
    clm_targets = float(seq_len - 1)
    mlm_bits = mlm_targets * mlm_bits_per_target
    clm_bits = clm_targets * clm_bits_per_target
    return {"mlm_targets": mlm_targets, "clm_targets": clm_targets, "mlm_bits": mlm_bits, "clm_bits": clm_bits,
            "clm_over_mlm": clm_bits / mlm_bits if mlm_bits else math.inf}
