"""lora.py against peft's LoRA on the same base layer, and against hand counts."""

import math

import pytest
import torch
from torch import nn

from autograder.reference.lora import (
    LoRALinear,
    apply_lora,
    count_trainable_parameters,
    lora_parameter_count,
)

# peft calls a transformers method that transformers 5 has deprecated; not our concern here
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 7)
        self.head = nn.Linear(7, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.proj(x)))


@pytest.mark.parametrize("r, alpha", [(1, 1.0), (4, 16.0), (8, 8.0)])
def test_forward_matches_peft_with_copied_weights(r, alpha):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = TwoLayer()
    reference = TwoLayer()
    reference.load_state_dict(base.state_dict())
    peft_model = get_peft_model(reference, LoraConfig(r=r, lora_alpha=alpha, target_modules=["proj"], lora_dropout=0.0))
    peft_layer = peft_model.base_model.model.proj

    ours = LoRALinear(base.proj, r=r, alpha=alpha)
    with torch.no_grad():
        # B = 0 at initialisation on both sides; give B a value so the update matters
        peft_layer.lora_B["default"].weight.normal_()
        ours.lora_A.copy_(peft_layer.lora_A["default"].weight)
        ours.lora_B.copy_(peft_layer.lora_B["default"].weight)
    assert ours.scaling == peft_layer.scaling["default"] == alpha / r

    x = torch.randn(5, 3, 12)
    # tolerance: float32 rounding of the same products in the same order
    torch.testing.assert_close(ours(x), peft_layer(x), atol=1e-6, rtol=1e-6)
    assert (ours(x) - base.proj(x)).abs().max() > 1e-3  # the adapter really contributes


def test_initialisation_matches_peft_recipe():
    torch.manual_seed(1)
    base = nn.Linear(256, 64)
    before = base.weight.clone()
    layer = LoRALinear(base, r=32, alpha=16)
    assert layer.base is base and torch.equal(base.weight, before)
    assert not base.weight.requires_grad and not base.bias.requires_grad
    assert layer.lora_A.shape == (32, 256) and layer.lora_B.shape == (64, 32)
    assert torch.equal(layer.lora_B, torch.zeros(64, 32))
    # Kaiming uniform with a = sqrt(5): U(-b, b), b = 1 / sqrt(fan_in) = 1/16
    bound = 1 / math.sqrt(256)
    assert layer.lora_A.abs().max() <= bound
    # variance of U(-b, b) is b^2 / 3; 8192 samples: relative standard error ~1.6 %, allow 10 %
    assert layer.lora_A.var().item() == pytest.approx(bound**2 / 3, rel=0.1)
    x = torch.randn(4, 256)
    assert torch.equal(layer(x), base(x))  # starts identical to the base
    with pytest.raises(ValueError):
        LoRALinear(nn.Linear(4, 4), r=0, alpha=1)


def test_merge_equals_forward_and_only_adapters_train():
    torch.manual_seed(2)
    layer = LoRALinear(nn.Linear(10, 6), r=3, alpha=6, dropout=0.5)
    with torch.no_grad():
        layer.lora_B.normal_()
    layer.eval()  # dropout off: merge() is only equivalent without it
    x = torch.randn(8, 10)
    merged = layer.merge()
    assert type(merged) is nn.Linear
    torch.testing.assert_close(merged(x), layer(x), atol=1e-5, rtol=1e-5)
    expected_weight = layer.base.weight + 2.0 * layer.lora_B @ layer.lora_A  # scaling = 6 / 3
    torch.testing.assert_close(merged.weight, expected_weight, atol=1e-6, rtol=0)

    layer.train()
    layer(x).sum().backward()
    assert layer.lora_A.grad is not None and layer.lora_B.grad is not None
    assert layer.base.weight.grad is None and layer.base.bias.grad is None
    assert count_trainable_parameters(layer) == lora_parameter_count(10, 6, 3) == 3 * (10 + 6)


def test_apply_lora_on_bert_matches_peft_trainable_count(tiny_bert_classifier):
    from peft import LoraConfig, get_peft_model

    ours = apply_lora(tiny_bert_classifier(0), target_names=("query", "value"), r=4, alpha=8)
    reference = get_peft_model(
        tiny_bert_classifier(0),
        LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"], modules_to_save=["classifier"]),
    )
    # hand count: 4 layers x 2 matrices x r (32 + 32), plus the classifier 32 * 3 + 3
    hand = 4 * 2 * lora_parameter_count(32, 32, 4) + 32 * 3 + 3
    assert count_trainable_parameters(ours) == hand
    # peft keeps a trainable copy of the classifier ("modules_to_save"): same count
    assert count_trainable_parameters(reference) == hand

    attention = ours.bert.encoder.layer[0].attention.self
    assert isinstance(attention.query, LoRALinear) and isinstance(attention.value, LoRALinear)
    assert isinstance(attention.key, nn.Linear) and not isinstance(attention.key, LoRALinear)
    trainable = {n for n, p in ours.named_parameters() if p.requires_grad}
    assert all("lora_" in n or n.startswith("classifier.") for n in trainable)


def test_apply_lora_keeps_outputs_and_rejects_missing_targets(tiny_bert_classifier):
    model = tiny_bert_classifier(1).eval()
    ids = torch.randint(0, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(input_ids=ids).logits
        after = apply_lora(model, r=2, alpha=4)(input_ids=ids).logits
    assert torch.equal(before, after)  # B = 0: the adapted model is the same function
    with pytest.raises(ValueError):
        apply_lora(TwoLayer(), target_names=("query",))
