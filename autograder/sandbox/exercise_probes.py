"""Probes and fixture builders of the hidden suites of the programming exercises 2-4.

Trusted instructor code, like ``item_probes``: the worker imports it at start-up
(next to ``item_probes``), and the grader imports it too, so that ``fixture(...)``
knows the names below and the hidden tests can run the same ``drive_*`` functions
with the reference implementation. Nothing here imports ``autograder.reference``.

It imports ``item_probes`` for the fixtures and probes it shares with the other
suites (``decoder_lm``, ``bert_classifier``, ``raises``).

Fixtures (``fixture(name, **params)``):

* ``prompt_tokenizer(padding_side="right")``: a word-level tokenizer with GPT-2's
  byte-level pre-tokenisation (a space before a word belongs to the word, as in
  SmolLM2's tokenizer: " positive" is one token, "positive" another), a fixed
  vocabulary of ``PROMPT_VOCAB_SIZE`` entries (unknown words become ``<unk>``),
  ``<pad>`` as its pad token, and no special tokens added. Pair it with
  ``decoder_lm(vocab_size=PROMPT_VOCAB_SIZE)``. Its padding side defaults to the
  right, like SmolLM2's, so code that relies on the default pads on the wrong side.
* ``bert_mlm(seed, vocab_size=64, hidden=32, layers=2, heads=4)``: a seeded
  ``BertForMaskedLM`` whose decoder weight is tied to the word embeddings.
* ``bert_bare(seed, vocab_size=64, hidden=32, layers=2, heads=4, pooler=True)``:
  a seeded bare ``BertModel``, with or without its pooler.

Probes: ``subsample_balanced_seeds``, ``truncate_encoder_run`` (documented below).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from . import item_probes  # noqa: F401  (registers decoder_lm, bert_classifier, raises, ...)
from .fixtures import register_fixture, seeded
from .probes import register_probe, student_definition

# --------------------------------------------------------------------- the prompt tokenizer
PROMPT_INSTRUCTION = "Classify the sentiment of each movie review as positive or negative."
# Words the hidden tests build their reviews from (any other word becomes <unk>).
REVIEW_WORDS = (
    "a the this film movie plot cast story script ending acting is was and but not very too "
    "great good fine superb moving funny charming clever bad dull boring awful weak silly long "
    "slow mess gem loved hated enjoyed it I so quite rather truly !"
).split()


def _prompt_vocabulary() -> list[str]:
    """The byte-level pieces of every word and separator the prompts use, sorted."""
    from tokenizers import pre_tokenizers

    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    words = set(REVIEW_WORDS) | set(PROMPT_INSTRUCTION.replace(".", " .").split()) | {
        "Review", "Sentiment", "positive", "negative", "Positive", "Negative", ":", ".", ",", "'"}
    text = " ".join(sorted(words)) + " " + " ".join(sorted(words))  # every word with a space before it
    pieces = {piece for piece, _ in pre.pre_tokenize_str(text)}
    pieces |= {piece for word in sorted(words) for piece, _ in pre.pre_tokenize_str(word)}  # ...and without
    for separator in ("\n", "\n\n", ": ", ":\n", " \n"):
        pieces |= {piece for piece, _ in pre.pre_tokenize_str(separator)}
    return ["<pad>", "<unk>", "<eos>"] + sorted(pieces - {"<pad>", "<unk>", "<eos>"})


PROMPT_VOCAB = _prompt_vocabulary()
PROMPT_VOCAB_SIZE = len(PROMPT_VOCAB)


@register_fixture("prompt_tokenizer")
def prompt_tokenizer(padding_side: str = "right"):
    """A small deterministic ``PreTrainedTokenizerFast`` (see the module docstring)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({piece: i for i, piece in enumerate(PROMPT_VOCAB)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                   eos_token="<eos>", padding_side=padding_side,
                                   model_input_names=["input_ids", "attention_mask"])


# --------------------------------------------------------------------- BERT fixtures
def _bert_config(vocab_size: int, hidden: int, layers: int, heads: int, **extra):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=64,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                      attn_implementation="eager", pad_token_id=0, **extra)


@register_fixture("bert_mlm")
def bert_mlm(seed: int = 0, vocab_size: int = 64, hidden: int = 32, layers: int = 2, heads: int = 4):
    """A seeded ``BertForMaskedLM`` (decoder tied to the word embeddings), in eval mode."""
    from transformers import BertForMaskedLM

    with seeded(seed):
        model = BertForMaskedLM(_bert_config(vocab_size, hidden, layers, heads, tie_word_embeddings=True))
    if model.cls.predictions.decoder.weight is not model.bert.embeddings.word_embeddings.weight:
        raise RuntimeError("bert_mlm: the MLM decoder is not tied to the word embeddings")
    return model.eval()


@register_fixture("bert_bare")
def bert_bare(seed: int = 0, vocab_size: int = 64, hidden: int = 32, layers: int = 2, heads: int = 4,
              pooler: bool = True):
    """A seeded bare ``BertModel`` (with or without its pooler), in eval mode."""
    from transformers import BertModel

    with seeded(seed):
        model = BertModel(_bert_config(vocab_size, hidden, layers, heads), add_pooling_layer=pooler)
    return model.eval()


# --------------------------------------------------------------------- exercise 2
@register_probe("subsample_balanced_seeds")
def subsample_balanced_seeds(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Call the student's ``subsample_balanced(labels, n, seed)`` once per seed.

    params: ``labels`` (tensor or list), ``n``, ``seeds`` (list of ints), ``name``
    (default "subsample_balanced"). The global generator is seeded with 0 first
    (and restored after), so code that wrongly draws from it gives the same
    stream in every run.

    Returns ``{"values": the results stacked along a new first dimension when they
    are all tensors of one shape (else the list), "stacked": bool, "labels_after":
    labels after the calls}``.
    """
    function = student_definition(namespace, params.get("name", "subsample_balanced"))
    labels, n = params["labels"], params["n"]
    with item_probes.forked_rng("cpu", 0):
        values = [function(labels, n, seed) for seed in params["seeds"]]
    stackable = (all(type(v) is torch.Tensor for v in values)
                 and len({(v.shape, v.dtype, v.device) for v in values}) == 1 and len(values) > 0)
    return {"values": torch.stack(values) if stackable else values, "stacked": bool(stackable),
            "labels_after": labels}


# --------------------------------------------------------------------- exercise 4
def drive_truncate_encoder(truncate_encoder: Callable, model: nn.Module, num_layers: int, *,
                           input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, Any]:
    """``truncate_encoder(model, num_layers)`` on a BERT model, then a look at both models.

    Returns ``{"class_name": class of the new model, "same_class": same class as
    the original, "returned_original": the very object passed in, "config_layers":
    new.config.num_hidden_layers, "layers": len(new.base_model.encoder.layer),
    "parameters": {name: tensor} of the new model, "logits": the new model's
    output on (input_ids, attention_mask) in eval mode, "original_unchanged": the
    original still has its layers, config value and weights, "shares_storage":
    names of the new model's parameters that share memory with a parameter of the
    original, "shares_config": the new model's config is the original's object}``.
    """
    device = next(model.parameters()).device
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    layers_before = len(model.base_model.encoder.layer)
    config_before = model.config.num_hidden_layers

    new = truncate_encoder(model, num_layers)

    named = dict(model.named_parameters())
    original_pointers = {p.data_ptr() for p in model.parameters()}
    new_named = dict(new.named_parameters())
    new.eval()
    with torch.no_grad():
        output = new(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device))
    logits = output.logits if hasattr(output, "logits") else output.last_hidden_state
    return {
        "class_name": type(new).__name__,
        "same_class": type(new) is type(model),
        "returned_original": new is model,
        "config_layers": getattr(new.config, "num_hidden_layers", None),
        "layers": len(new.base_model.encoder.layer),
        "parameters": {name: p.detach() for name, p in new_named.items()},
        "logits": logits.detach(),
        "original_unchanged": bool(
            len(model.base_model.encoder.layer) == layers_before
            and model.config.num_hidden_layers == config_before
            and set(named) == set(before)
            and all(torch.equal(named[name].detach(), value) for name, value in before.items())),
        "shares_storage": sorted(name for name, p in new_named.items() if p.data_ptr() in original_pointers),
        "shares_config": new.config is model.config,
    }


@register_probe("truncate_encoder_run")
def truncate_encoder_run(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """``drive_truncate_encoder`` with the student's ``truncate_encoder``. params:
    ``model`` (fixture reference), ``num_layers``, ``input_ids``, ``attention_mask``."""
    params = dict(params)
    function = student_definition(namespace, params.pop("name", "truncate_encoder"))
    return drive_truncate_encoder(function, params.pop("model"), params.pop("num_layers"), **params)
