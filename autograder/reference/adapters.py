"""Parameter-efficient fine-tuning beyond LoRA: bottleneck adapters, and what each method trains.

Four ways to adapt a pre-trained encoder while training few of its numbers:

* LoRA (Hu et al., 2022; ``lora.py``): a low-rank update of chosen weight matrices;
* bottleneck adapters (Houlsby et al., 2019): a small residual MLP, d -> m -> d with m << d,
  inserted twice into every layer (after the attention block and after the feed-forward block);
* prompt tuning (Lester et al., 2021): a few trainable vectors prepended to the input embeddings;
* BitFit (Ben Zaken et al., 2022): only the bias terms of the pre-trained network train.

In every method the task head (a new classifier) trains in full. ``peft_parameter_counts`` counts
what each method trains on a ``BertForSequenceClassification``, from the model's own sizes.
"""

import torch
from torch import nn


class BottleneckAdapter(nn.Module):
    """A bottleneck adapter (Houlsby et al., 2019): x + up(gelu(down(x))).

    Args:
        hidden_size: width d of the vectors the adapter reads and writes.
        bottleneck: width m of the bottleneck, >= 1 (ValueError otherwise); usually m << d.

    Modules (created on the default device and dtype; move the adapter with ``.to(...)``):
        down: ``nn.Linear(hidden_size, bottleneck)`` with a bias, keeping ``nn.Linear``'s own
            initialisation (weight and bias uniform on [-1/sqrt(hidden_size), 1/sqrt(hidden_size)],
            drawn from the global generator). It must be random: with down and up both zero, no
            gradient would ever reach either of them.
        up: ``nn.Linear(bottleneck, hidden_size)`` with a bias, weight and bias set to zero, so the
            adapter starts as the identity and the network it is inserted into computes exactly
            what it computed before.

    The adapter's parameters are exactly down.weight [m, d], down.bias [m], up.weight [d, m] and
    up.bias [d] (2 d m + d + m numbers), all trainable; no other parameter.

    forward(x) for x [..., hidden_size] (any leading dimensions; the dtype and device of the
    adapter's parameters) returns a new tensor of x's shape, dtype and device:
        x + up(gelu(down(x)))
    with the exact GELU, x * Phi(x) (``nn.GELU()``, not its tanh approximation). x itself is not
    modified.
    """

    def __init__(self, hidden_size: int, bottleneck: int):
        super().__init__()
        if bottleneck < 1:
            raise ValueError(f"the adapter's bottleneck must be at least 1, got {bottleneck}")
        self.down = nn.Linear(hidden_size, bottleneck)
        self.act = nn.GELU()
        self.up = nn.Linear(bottleneck, hidden_size)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(self.act(self.down(x)))


def _numel(parameters) -> int:
    return sum(p.numel() for p in parameters)


def peft_parameter_counts(model: nn.Module, *, lora_r: int, adapter_bottleneck: int,
                          prompt_length: int) -> dict[str, int]:
    """How many numbers each fine-tuning method trains on a BERT classifier.

    Args:
        model: a ``transformers`` ``BertForSequenceClassification``: the encoder
            ``model.base_model`` (a ``BertModel`` with ``.embeddings``, ``.encoder.layer``, a list
            of L layers, and ``.pooler``) and the task head ``model.classifier``.
        lora_r: the LoRA rank r, >= 1.
        adapter_bottleneck: the adapters' bottleneck width m, >= 1.
        prompt_length: the number of trainable prompt vectors, >= 1.
        Raises ValueError if any of the three is smaller than 1.

    The head is ``model.classifier`` (its weight and bias) and nothing else: it is new for the task,
    so every method trains it in full. The pooler (``model.base_model.pooler``) is pre-trained and
    belongs to the encoder: it is not part of the head.

    Returns a dict of Python ints (numbers of trainable parameter elements) with exactly the keys:
        "full": every parameter of the model, whatever its requires_grad at the call.
        "lora": r * (in_features + out_features) for every ``nn.Linear`` named ``query`` or
            ``value`` (W_q and W_v of every layer, as ``apply_lora`` does by default), plus the head.
        "adapters": two ``BottleneckAdapter(hidden_size, m)`` per layer (one after the attention
            block, one after the feed-forward block), 2 * hidden_size * m + hidden_size + m
            numbers each, plus the head. (Houlsby et al. also train the layer norms; not counted.)
        "prompt_tuning": prompt_length vectors of the word-embedding width (hidden_size),
            plus the head.
        "bitfit": every bias of the encoder, i.e. every parameter of ``model.base_model`` whose
            name ends in ``bias`` (linear layers, LayerNorms, the pooler), plus the head.

    Counts come from the model's own modules and config, not from BERT-base's numbers, and the
    model is left exactly as it was (no module added or replaced, no requires_grad or value changed).
    """
    for name, value in (("lora_r", lora_r), ("adapter_bottleneck", adapter_bottleneck),
                        ("prompt_length", prompt_length)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    encoder = model.base_model
    hidden = model.config.hidden_size
    layers = len(encoder.encoder.layer)
    head = _numel(model.classifier.parameters())

    lora = sum(lora_r * (module.in_features + module.out_features)
               for name, module in model.named_modules()
               if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in ("query", "value"))
    adapter = 2 * hidden * adapter_bottleneck + hidden + adapter_bottleneck
    prompt = prompt_length * encoder.embeddings.word_embeddings.embedding_dim
    biases = _numel(p for name, p in encoder.named_parameters() if name.endswith("bias"))
    return {
        "full": _numel(model.parameters()),
        "lora": lora + head,
        "adapters": 2 * layers * adapter + head,
        "prompt_tuning": prompt + head,
        "bitfit": biases + head,
    }
