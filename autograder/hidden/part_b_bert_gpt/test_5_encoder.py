"""Hidden tests of part_b_bert_gpt.ipynb, the assembled BERT: multi-head self-attention, the
post-LN encoder layer and the whole encoder, graded against the reference and against
``transformers``' own ``BertSelfAttention``, ``BertLayer`` and ``BertModel``.

The models are tiny random BERTs (hidden size 32, 4 heads, 2 layers), every parameter drawn
afresh (LayerNorm weights around 1, everything else of scale 0.3, so that no weight is the
identity a wrong route could hide behind), built once per grading process and seed. Each item
uses the student's own ``scaled_dot_product_attention``, as the notebook does: where that
function is wrong, these items are wrong too, and their failure message says so, so that the
student fixes the attention first (the notebook's convention: ``scaled_dot_product_attention``
uses the student's ``softmax``, ``apply_lora`` their ``LoRALinear``).
"""
from __future__ import annotations

import functools

import torch

from autograder.reference import attention, encoder
from autograder.suite import GradingFailure, expect, expect_close, expect_tensor, graded, on_devices, seed_for

from ._common import _gen, _randn

HIDDEN, HEADS, LAYERS, VOCAB, MAX_POSITIONS = 32, 4, 2, 60, 16
# Which tokens are real in a batch of three: a full row, padding at the end, a single real token.
PADDED = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0]])
# tolerance: float32 rounding of two layers (measured: 2e-6 between the reference and BertModel)
ATOL, RTOL = 1e-5, 1e-5
LIBRARY_ATOL = 1e-4  # against transformers' modules, whose additive mask and kernels round differently


@functools.lru_cache(maxsize=8)
def _bert(seed: int, device: str, *, layers: int = LAYERS, heads: int = HEADS, eps: float = 1e-12):
    """A tiny BertModel (eval mode, eager attention, with its pooler) whose parameters are all drawn
    from ``seed``; built once per process, seed and device, and only read."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=2 * HIDDEN, max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                        layer_norm_eps=eps, attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):  # BertModel's own initialisation draws from the global generator
        model = BertModel(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.2 * noise if name.endswith("LayerNorm.weight") else 0.3 * noise)
    return model.to(device)


def _model(number: int, device: str, **config):
    """The tiny BERT of the hidden inputs numbered ``number``, for the student being graded."""
    return _bert(seed_for(number), device, **config)


def _weights(model, prefix: str = "") -> dict[str, torch.Tensor]:
    """The entries of ``model``'s state dict under ``prefix``, the prefix taken off, as copies."""
    return {name[len(prefix):]: value.detach().clone() for name, value in model.state_dict().items()
            if name.startswith(prefix)}


def _config(model) -> dict:
    return {key: getattr(model.config, key) for key in ("num_hidden_layers", "num_attention_heads", "layer_norm_eps",
                                                        "hidden_size", "hidden_act")}


def _additive(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` [B, T] as the additive [B, 1, 1, T] mask that BertLayer's eager attention adds to its scores."""
    return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min


def _own_attention_hint(student, device: str) -> str:
    """A sentence for a failure message when the student's own scaled_dot_product_attention, which
    these items use, is itself wrong on a padded multi-head case (empty when it is right)."""
    q, k, v = (_randn(3, HEADS, 7, HIDDEN // HEADS, seed=590 + i, device=device) for i in range(3))
    padding_mask = PADDED.bool().to(device)
    try:
        output, _ = student.call(q, k, v, padding_mask=padding_mask, name="scaled_dot_product_attention")
        expected, _ = attention.scaled_dot_product_attention(q, k, v, padding_mask=padding_mask)
        expect_close(output, expected, atol=ATOL, rtol=RTOL, what="scaled_dot_product_attention")
    except Exception:  # noqa: BLE001 - wrong, raising or missing: the hint applies either way
        return (" Your scaled_dot_product_attention, which this item uses, is itself wrong on [B, heads, T, d] "
                "inputs with a padding mask: test_scaled_dot_product_attention grades it; fix it first.")
    return ""


def _expect_close(student, actual, expected, *, device: str, atol: float = ATOL, rtol: float = RTOL,
                  what: str) -> None:
    """expect_close, with the hint about the student's own attention added to a failure."""
    try:
        expect_close(actual, expected, atol=atol, rtol=rtol, what=what)
    except GradingFailure as failure:
        hint = _own_attention_hint(student, device)
        if not hint:
            raise
        raise GradingFailure(f"{failure}{hint}", detail=f"{failure.detail}{hint}", compared=failure.compared,
                             public=failure.public) from None


# =============================================================== multi_head_self_attention
def _attention_weights(model, layer: int) -> dict[str, torch.Tensor]:
    return _weights(model, f"encoder.layer.{layer}.attention.")


@graded("test_multi_head_self_attention")
@on_devices
def test_multi_head_self_attention_matches_bert(student, device):
    model = _model(500, device)
    x = _randn(3, 7, HIDDEN, seed=501, device=device)
    mask = PADDED.to(device)
    weights = _attention_weights(model, 0)
    actual = expect_tensor(student.call(x, mask, weights, HEADS), dtype=torch.float32, device=device,
                           what="multi_head_self_attention")
    # The library's self-attention, then the output projection (BertSelfOutput without its residual and LayerNorm).
    block = model.encoder.layer[0].attention
    with torch.no_grad():
        context = block.self(x, attention_mask=_additive(mask))
        library = block.output.dense(context[0] if isinstance(context, tuple) else context)
    _expect_close(student, actual, library, device=device, atol=LIBRARY_ATOL,
                  what="multi_head_self_attention on a padded batch [3, 7, 32] with 4 heads, compared with "
                       "BERT's own self-attention and output projection")
    _expect_close(student, actual, encoder.multi_head_self_attention(x, mask, weights, HEADS), device=device,
                  what="multi_head_self_attention on a padded batch [3, 7, 32] with 4 heads")


@graded("test_multi_head_self_attention")
def test_multi_head_self_attention_head_counts(student):
    model = _model(510, "cpu")
    weights = _attention_weights(model, 1)
    x = _randn(2, 5, HIDDEN, seed=511)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    for n_heads in (1, 2, 8):
        _expect_close(student, student.call(x, mask, weights, n_heads),
                      encoder.multi_head_self_attention(x, mask, weights, n_heads), device="cpu",
                      what=f"multi_head_self_attention with n_heads={n_heads} (heads of {HIDDEN // n_heads} "
                           "consecutive features, each scaled by the square root of its own size)")


@graded("test_multi_head_self_attention")
def test_multi_head_self_attention_padding(student):
    model = _model(520, "cpu")
    weights = _attention_weights(model, 0)
    x = _randn(3, 7, HIDDEN, seed=521)
    for kind, mask in (("int64", PADDED), ("bool", PADDED.bool())):
        actual = student.call(x, mask, weights, HEADS)
        _expect_close(student, actual, encoder.multi_head_self_attention(x, mask, weights, HEADS), device="cpu",
                      what=f"multi_head_self_attention with attention_mask as {kind} (1 or True: a real token)")
    # Padding keys must not matter: change the inputs at padding positions, the real rows stay put.
    noisy = x.clone()
    noisy[~PADDED.bool()] = _randn(int((PADDED == 0).sum()), HIDDEN, seed=522, scale=5.0)
    changed = student.call(noisy, PADDED, weights, HEADS)
    real = PADDED.bool()
    expect_tensor(changed, shape=x.shape, what="multi_head_self_attention")
    expect(bool(torch.allclose(changed[real], actual[real], atol=ATOL, rtol=RTOL)),
           "multi_head_self_attention: the rows of real tokens changed when only the inputs at padding positions "
           "changed; padding keys must get no attention")


@graded("test_multi_head_self_attention")
def test_multi_head_self_attention_heads_must_divide(student):
    weights = _attention_weights(_model(500, "cpu"), 0)
    x = _randn(1, 3, HIDDEN, seed=530)
    ones = torch.ones(1, 3, dtype=torch.long)
    expect_tensor(student.call(x, ones, weights, 8), dtype=torch.float32, shape=x.shape,
                  what="multi_head_self_attention with n_heads=8")
    for n_heads in (3, 5):
        reply = student.probe("raises", name="multi_head_self_attention",
                              args=[x, ones, weights, n_heads])
        expect(reply["raised"] == "ValueError",
               f"multi_head_self_attention with hidden size {HIDDEN} and n_heads={n_heads} must raise ValueError "
               "(n_heads must divide the hidden size), "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


# =============================================================== encoder_layer
def _layer_weights(model, layer: int) -> dict[str, torch.Tensor]:
    return _weights(model, f"encoder.layer.{layer}.")


def _library_layer(model, layer: int, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model.encoder.layer[layer](x, attention_mask=_additive(mask))
    return out[0] if isinstance(out, tuple) else out


@graded("test_encoder_layer")
@on_devices
def test_encoder_layer_matches_bert_layer(student, device):
    model = _model(540, device)
    x = _randn(3, 7, HIDDEN, seed=541, device=device)
    mask = PADDED.to(device)
    for layer in range(LAYERS):
        actual = expect_tensor(student.call(x, mask, _layer_weights(model, layer), n_heads=HEADS, eps=1e-12),
                               dtype=torch.float32, shape=x.shape, device=device, what="encoder_layer")
        _expect_close(student, actual, _library_layer(model, layer, x, mask), device=device, atol=LIBRARY_ATOL,
                      what=f"encoder_layer with the weights of layer {layer} of a tiny BERT, compared with its "
                           "BertLayer (post-LN: attention, residual, LayerNorm, then GELU feed-forward, "
                           "residual, LayerNorm)")


@graded("test_encoder_layer")
def test_encoder_layer_layer_norm_eps(student):
    # A large eps changes the result well beyond the tolerance, so a fixed one is seen.
    model = _model(550, "cpu", eps=0.25)
    x = _randn(2, 6, HIDDEN, seed=551, scale=0.5)
    mask = PADDED[:2, 1:]
    actual = student.call(x, mask, _layer_weights(model, 1), n_heads=HEADS, eps=0.25)
    _expect_close(student, actual, _library_layer(model, 1, x, mask), device="cpu", atol=LIBRARY_ATOL,
                  what="encoder_layer with eps=0.25, compared with a BertLayer whose layer_norm_eps is 0.25")


@graded("test_encoder_layer")
def test_encoder_layer_large_activations(student):
    # Inputs of scale 3 drive the feed-forward far into GELU's curved part, where its tanh
    # approximation differs from the exact form by up to 5e-4.
    model = _model(560, "cpu")
    weights = _layer_weights(model, 0)
    for seed, (batch, length, n_heads) in enumerate([(1, 1, 4), (2, 9, 2)]):
        x = _randn(batch, length, HIDDEN, seed=561 + seed, scale=3.0)
        mask = torch.ones(batch, length, dtype=torch.long)
        mask[1:, length - 2:] = 0
        _expect_close(student, student.call(x, mask, weights, n_heads=n_heads, eps=1e-12),
                      encoder.encoder_layer(x, mask, weights, n_heads=n_heads, eps=1e-12), device="cpu",
                      what=f"encoder_layer on a [{batch}, {length}, {HIDDEN}] input of scale 3 with "
                           f"n_heads={n_heads} (GELU in its exact erf form)")


@graded("test_encoder_layer")
def test_encoder_layer_leaves_inputs_unchanged(student):
    model = _model(570, "cpu")
    x = _randn(2, 5, HIDDEN, seed=571)
    mask = PADDED[:2, :5].clone()
    weights = _layer_weights(model, 1)
    reply = student.probe("call_keeping_inputs", name="encoder_layer", args=[x, mask, weights],
                          kwargs=dict(n_heads=HEADS, eps=1e-12))
    after_x, after_mask, after_weights = reply["args_after"]
    expect(bool(torch.equal(after_x, x)) and bool(torch.equal(after_mask, mask)),
           "encoder_layer modified its input x or attention_mask in place; the residual must make a new tensor "
           "(h = x + ..., not x += ...)")
    expect(all(torch.equal(after_weights[name], value) for name, value in weights.items()),
           "encoder_layer modified the weights it was given; leave them as they are")
    _expect_close(student, reply["value"], encoder.encoder_layer(x, mask, weights, n_heads=HEADS, eps=1e-12),
                  device="cpu", what="encoder_layer on a [2, 5, 32] input")


# =============================================================== bert_encoder
def _ids(number: int, batch: int, length: int) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, length), generator=_gen(number))


def _library_encoder(model, input_ids, mask, token_type_ids=None) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids).last_hidden_state


@graded("test_bert_encoder")
@on_devices
def test_bert_encoder_matches_bert_model(student, device):
    model = _model(580, device)
    ids, mask = _ids(581, 3, 7).to(device), PADDED.to(device)
    actual = expect_tensor(student.call(ids, mask, _weights(model), _config(model)), dtype=torch.float32,
                           shape=(3, 7, HIDDEN), device=device, what="bert_encoder")
    _expect_close(student, actual, _library_encoder(model, ids, mask), device=device, atol=LIBRARY_ATOL,
                  what="bert_encoder on a padded batch of 3 sequences of 7 tokens, compared with "
                       "BertModel(...).last_hidden_state (the state dict has the pooler's weights too)")


@graded("test_bert_encoder")
def test_bert_encoder_token_types(student):
    model = _model(580, "cpu")
    ids, mask = _ids(582, 3, 7), PADDED
    token_types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]])
    _expect_close(student, student.call(ids, mask, _weights(model), _config(model), token_type_ids=token_types),
                  _library_encoder(model, ids, mask, token_types), device="cpu", atol=LIBRARY_ATOL,
                  what="bert_encoder with token_type_ids (two segments)")


@graded("test_bert_encoder")
def test_bert_encoder_reads_its_config(student):
    # Another depth, head count and eps: none of them may be fixed in the code.
    model = _model(590, "cpu", layers=3, heads=2, eps=0.1)
    ids, mask = _ids(591, 2, 6), PADDED[:2, 1:]
    _expect_close(student, student.call(ids, mask, _weights(model), _config(model)),
                  _library_encoder(model, ids, mask), device="cpu", atol=LIBRARY_ATOL,
                  what="bert_encoder with a config of 3 layers, 2 heads and layer_norm_eps=0.1")


@graded("test_bert_encoder")
def test_bert_encoder_lengths(student):
    model = _model(580, "cpu")
    state_dict, config = _weights(model), _config(model)
    for batch, length in ((1, 1), (2, MAX_POSITIONS)):
        ids = _ids(600 + length, batch, length)
        mask = torch.ones(batch, length, dtype=torch.long)
        _expect_close(student, student.call(ids, mask, state_dict, config),
                      encoder.bert_encoder(ids, mask, state_dict, config), device="cpu",
                      what=f"bert_encoder on {batch} sequence(s) of {length} token(s) (positions 0 .. T-1)")
