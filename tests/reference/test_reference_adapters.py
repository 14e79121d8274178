"""adapters.py against hand computations, against each method built for real (peft's LoRA and prompt
tuning, adapters inserted by hand, BitFit by unfreezing the biases), and against the course
encoder's sizes."""

import copy
import math

import pytest
import torch
from torch import nn

from autograder.reference.lora import apply_lora, count_trainable_parameters
from autograder.reference.adapters import BottleneckAdapter, peft_parameter_counts

# peft calls a transformers method that transformers 5 has deprecated; not our concern here
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")

SETTINGS = dict(lora_r=4, adapter_bottleneck=5, prompt_length=7)


# --------------------------------------------------------------------------- the adapter
def _gelu(x: torch.Tensor) -> torch.Tensor:
    """x * Phi(x), with Phi the standard normal distribution function, entry by entry."""
    return x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))


def test_adapter_is_built_as_stated():
    torch.manual_seed(0)
    adapter = BottleneckAdapter(400, 25)
    assert isinstance(adapter.down, nn.Linear) and isinstance(adapter.up, nn.Linear)
    assert adapter.down.weight.shape == (25, 400) and adapter.down.bias.shape == (25,)
    assert adapter.up.weight.shape == (400, 25) and adapter.up.bias.shape == (400,)
    assert {name for name, p in adapter.named_parameters() if p.requires_grad} == {
        "down.weight", "down.bias", "up.weight", "up.bias"}
    assert count_trainable_parameters(adapter) == 2 * 400 * 25 + 400 + 25
    assert not adapter.up.weight.any() and not adapter.up.bias.any()
    bound = 1 / math.sqrt(400)  # nn.Linear's default: uniform on +-1/sqrt(fan_in)
    assert adapter.down.weight.abs().max() <= bound and adapter.down.bias.abs().max() <= bound
    # variance of U(-b, b) is b^2 / 3; 10,000 samples: relative standard error ~1.4 %, allow 10 %
    assert adapter.down.weight.var().item() == pytest.approx(bound ** 2 / 3, rel=0.1)
    with pytest.raises(ValueError):
        BottleneckAdapter(8, 0)


def test_adapter_starts_as_the_identity_for_any_leading_dimensions_and_dtype():
    torch.manual_seed(1)
    for shape, dtype in [((6,), torch.float32), ((3, 6), torch.float32), ((2, 4, 5, 6), torch.float64)]:
        adapter = BottleneckAdapter(6, 3).to(dtype)
        x = torch.randn(shape, dtype=dtype)
        out = adapter(x)
        assert out.shape == x.shape and out.dtype == dtype and out is not x
        assert torch.equal(out, x)


def test_adapter_forward_and_gradients_by_hand():
    torch.manual_seed(2)
    adapter = BottleneckAdapter(5, 2).double()
    with torch.no_grad():
        for p in adapter.parameters():
            p.normal_()
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    x_before = x.clone()
    w1, b1 = adapter.down.weight.detach(), adapter.down.bias.detach()
    w2, b2 = adapter.up.weight.detach(), adapter.up.bias.detach()
    # entry by entry: out[i, j, k] = x[i, j, k] + sum_h w2[k, h] gelu(sum_l w1[h, l] x[i, j, l] + b1[h]) + b2[k]
    expected = torch.empty_like(x)
    for i in range(3):
        for j in range(4):
            h = _gelu(torch.stack([sum(w1[a, l] * x[i, j, l] for l in range(5)) + b1[a] for a in range(2)]))
            for k in range(5):
                expected[i, j, k] = x[i, j, k] + sum(w2[k, a] * h[a] for a in range(2)) + b2[k]
    out = adapter(x)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)
    assert torch.equal(x, x_before)  # x is not modified
    # gradients: d/d w2 of sum(out * g) is g^T gelu(pre), summed over positions
    g = torch.randn_like(x)
    (out * g).sum().backward()
    pre = x @ w1.T + b1
    torch.testing.assert_close(adapter.up.weight.grad, torch.einsum("ijk,ija->ka", g, _gelu(pre)))
    torch.testing.assert_close(adapter.up.bias.grad, g.sum((0, 1)))
    assert adapter.down.weight.grad is not None and adapter.down.weight.grad.abs().sum() > 0
    # exact GELU, not ReLU nor the tanh approximation
    assert not torch.allclose(nn.functional.gelu(pre, approximate="tanh"), _gelu(pre), atol=1e-9)


# --------------------------------------------------------------------------- the counts, built for real
def _count_by_hand(model: nn.Module, *, lora_r: int, adapter_bottleneck: int, prompt_length: int) -> dict[str, int]:
    """Each method built on a copy of the model; what requires grad is counted."""
    def with_head():
        clone = copy.deepcopy(model)
        clone.requires_grad_(False)
        clone.classifier.requires_grad_(True)
        return clone

    adapters = with_head()
    width = adapters.config.hidden_size
    for layer in adapters.bert.encoder.layer:
        for block in (layer.attention.output, layer.output):  # after attention, after the feed-forward block
            block.dense = nn.Sequential(block.dense, BottleneckAdapter(width, adapter_bottleneck))
    bitfit = with_head()
    for name, p in bitfit.bert.named_parameters():
        p.requires_grad_(name.endswith("bias"))
    prompt = nn.Parameter(torch.zeros(prompt_length, width))
    return {
        "full": sum(p.numel() for p in model.parameters()),
        "lora": count_trainable_parameters(apply_lora(copy.deepcopy(model), r=lora_r)),
        "adapters": count_trainable_parameters(adapters),
        "prompt_tuning": prompt.numel() + count_trainable_parameters(with_head()),
        "bitfit": count_trainable_parameters(bitfit),
    }


@pytest.mark.parametrize("num_layers, num_labels", [(1, 2), (4, 3), (2, 5)])
def test_counts_match_each_method_built_on_a_copy(tiny_bert_classifier, num_layers, num_labels):
    model = tiny_bert_classifier(0, num_labels=num_labels, num_layers=num_layers)
    counts = peft_parameter_counts(model, **SETTINGS)
    assert counts == _count_by_hand(model, **SETTINGS)
    assert list(counts) == ["full", "lora", "adapters", "prompt_tuning", "bitfit"]
    assert all(type(n) is int for n in counts.values())


def test_inserted_adapters_leave_the_outputs_alone(tiny_bert_classifier):
    model = tiny_bert_classifier(1, dropout=0.0).eval()
    adapted = copy.deepcopy(model)
    for layer in adapted.bert.encoder.layer:
        for block in (layer.attention.output, layer.output):
            block.dense = nn.Sequential(block.dense, BottleneckAdapter(32, 4))
    ids = torch.randint(0, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, adapted(input_ids=ids).logits)


def test_lora_and_prompt_tuning_counts_match_peft(tiny_bert_classifier):
    from peft import LoraConfig, PromptTuningConfig, TaskType, get_peft_model

    counts = peft_parameter_counts(tiny_bert_classifier(2), **SETTINGS)
    with_lora = get_peft_model(tiny_bert_classifier(2), LoraConfig(
        r=SETTINGS["lora_r"], lora_alpha=8, target_modules=["query", "value"], modules_to_save=["classifier"]))
    # peft keeps a trainable copy of the classifier ("modules_to_save") and a frozen original
    assert count_trainable_parameters(with_lora) == counts["lora"]
    prompted = get_peft_model(tiny_bert_classifier(2), PromptTuningConfig(
        task_type=TaskType.SEQ_CLS, num_virtual_tokens=SETTINGS["prompt_length"]))
    assert count_trainable_parameters(prompted) == counts["prompt_tuning"]


def test_counts_ignore_what_is_frozen_and_leave_the_model_alone(tiny_bert_classifier):
    model = tiny_bert_classifier(3)
    model.bert.embeddings.requires_grad_(False)
    before = {name: (p.detach().clone(), p.requires_grad) for name, p in model.named_parameters()}
    modules = [(name, type(m)) for name, m in model.named_modules()]
    assert peft_parameter_counts(model, **SETTINGS)["full"] == sum(p.numel() for p in model.parameters())
    assert [(name, type(m)) for name, m in model.named_modules()] == modules
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name][0]) and p.requires_grad == before[name][1]


@pytest.mark.parametrize("name", ["lora_r", "adapter_bottleneck", "prompt_length"])
def test_settings_below_one_raise(tiny_bert_classifier, name):
    with pytest.raises(ValueError):
        peft_parameter_counts(tiny_bert_classifier(0), **{**SETTINGS, name: 0})


def test_the_course_encoder_by_hand():
    """all-MiniLM-L6-v2's sizes (6 layers, width 384, feed-forward 1,536, 30,522 word pieces, 512
    positions, 2 token types) with a 2-way head, built on the meta device: counted by hand."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2, num_labels=2)
    with torch.device("meta"):
        model = BertForSequenceClassification(config)
    d, i, layers, head = 384, 1536, 6, 384 * 2 + 2
    per_layer = 4 * (d * d + d) + 2 * d + (d * i + i) + (i * d + d) + 2 * d
    full = (30522 + 512 + 2) * d + 2 * d + layers * per_layer + (d * d + d) + head
    assert full == 22_713_986  # the 22.7 M of the notebook's B6 model answer
    counts = peft_parameter_counts(model, lora_r=8, adapter_bottleneck=64, prompt_length=20)
    assert counts == {
        "full": full,
        "lora": 6 * 2 * 8 * (384 + 384) + head,                    # 73,728 + 770 = 74,498
        "adapters": 6 * 2 * (2 * 384 * 64 + 384 + 64) + head,      # 595,200 + 770
        "prompt_tuning": 20 * 384 + head,                          # 7,680 + 770
        "bitfit": d + 6 * (4 * d + d + i + d + d) + d + head,      # 26,112 + 770
    }
    assert counts["lora"] == 74_498
