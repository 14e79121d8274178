"""The model fixtures of the Week 6 hidden suites: seeded models built inside the worker.

A model cannot cross the sandbox boundary, so a hidden test sends a reference
(``fixture("decoder_lm", seed=0)``) and the worker builds the model here; the
grader builds the same model from the same reference to compute the expected
answer. Builders are deterministic functions of their parameters: they seed
everything (``seeded`` restores the caller's generator), pick the eager attention
kernel and leave global state alone.

Each builder declares the slow-to-import modules it needs (``imports=``): the fork
server imports them once for every grading process, and a worker imports them
before the first call that builds the fixture, under the start-up timeout rather
than the call's.

* ``decoder_lm(seed, device="cpu", vocab_size=96, hidden=32, layers=2, heads=4,
  initializer_range=0.5)``: a seeded ``LlamaForCausalLM`` in eval mode. The large
  initializer range gives peaked next-token distributions, so greedy and beam
  search make clear choices (top logits several tenths apart) rather than
  near-ties that rounding could flip.
* ``bert_classifier(seed, device="cpu", vocab_size=64, hidden=32, layers=2,
  heads=4, num_labels=3, dropout=0.0)``: a seeded ``BertForSequenceClassification``
  in eval mode.
* ``bert_classifier_sized(seed, vocab_size=64, hidden=32, layers=2, heads=4,
  intermediate=48, num_labels=3, type_vocab_size=2, max_positions=40)``: the same
  class with every size its own parameter (the feed-forward width too, which
  ``bert_classifier`` ties to twice the hidden size), in eval mode on the CPU, for
  code that reads the sizes off a model.
* ``bigram_lm(log_probs, device="cpu")``: a fake causal LM whose next-token
  log-probabilities ([V, V] table, row = last token) depend on the last token only,
  for hand-computed decoding cases.
* ``prompt_tokenizer(padding_side="right")``: a word-level tokenizer with GPT-2's
  byte-level pre-tokenisation (a space before a word belongs to the word, as in
  SmolLM2's tokenizer: " positive" is one token, "positive" another), a fixed
  vocabulary of ``PROMPT_VOCAB_SIZE`` entries (unknown words become ``<unk>``),
  ``<pad>`` as its pad token, and no special tokens added. Pair it with
  ``decoder_lm(vocab_size=PROMPT_VOCAB_SIZE)``. Its padding side defaults to the
  right, like SmolLM2's, so code that relies on the default pads on the wrong side.
* ``bert_mlm(seed, vocab_size=64, hidden=32, layers=2, heads=4)``: a seeded
  ``BertForMaskedLM`` whose decoder weight is tied to the word embeddings.
* ``bert_bare(seed, vocab_size=64, hidden=32, layers=2, heads=4, pooler=True)``: a
  seeded bare ``BertModel``, with or without its pooler.
"""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from autograder.sandbox.fixtures import register_fixture, seeded

def on_device(model: nn.Module, device: str) -> nn.Module:
    """``model`` moved to ``device``. A model is built on the CPU, where ``.to("cpu")`` would
    still walk every submodule and parameter: a tenth of a fixture's cost, for nothing."""
    return model if torch.device(device).type == "cpu" else model.to(device)


# --------------------------------------------------------------------- models (Part A, Part B, exercises 3-4)
@register_fixture("decoder_lm", imports=("transformers.models.llama.modeling_llama",))
def decoder_lm(seed: int = 0, device: str = "cpu", vocab_size: int = 96, hidden: int = 32,
               layers: int = 2, heads: int = 4, initializer_range: float = 0.5,
               max_positions: int = 128):
    """A seeded ``LlamaForCausalLM`` (eager attention, no bos/eos/pad in its
    generation config, so only the ids a test passes mean anything), in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=heads, max_position_embeddings=max_positions,
                         initializer_range=initializer_range, attn_implementation="eager",
                         bos_token_id=None, eos_token_id=None, pad_token_id=None)
    with seeded(seed):
        model = LlamaForCausalLM(config)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(model.generation_config, name, None)
    return on_device(model, device).eval()


@register_fixture("bert_classifier", imports=("transformers.models.bert.modeling_bert",))
def bert_classifier(seed: int = 0, device: str = "cpu", vocab_size: int = 64, hidden: int = 32,
                    layers: int = 2, heads: int = 4, num_labels: int = 3, dropout: float = 0.0,
                    max_positions: int = 64):
    """A seeded ``BertForSequenceClassification`` (eager attention), in eval mode."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=2 * hidden,
                        max_position_embeddings=max_positions, num_labels=num_labels,
                        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                        attn_implementation="eager", pad_token_id=0)
    with seeded(seed):
        model = BertForSequenceClassification(config)
    return on_device(model, device).eval()


@register_fixture("bert_classifier_sized", imports=("transformers.models.bert.modeling_bert",))
def bert_classifier_sized(seed: int = 0, vocab_size: int = 64, hidden: int = 32, layers: int = 2,
                          heads: int = 4, intermediate: int = 48, num_labels: int = 3,
                          type_vocab_size: int = 2, max_positions: int = 40):
    """A seeded ``BertForSequenceClassification`` of the given sizes (eager attention), in eval mode."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate,
                        max_position_embeddings=max_positions, type_vocab_size=type_vocab_size,
                        num_labels=num_labels, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        attn_implementation="eager", pad_token_id=0)
    with seeded(seed):
        model = BertForSequenceClassification(config)
    return model.eval()


class BigramLM(nn.Module):
    """A causal LM whose next-token log-probabilities depend on the last token only.

    Called like a ``transformers`` model (``model(ids)``, ``model(input_ids=ids,
    attention_mask=...)``); returns an object with ``.logits`` [B, T, V]. It has
    a parameter (the table), so ``next(model.parameters()).device`` works.
    """

    def __init__(self, log_probs: torch.Tensor):
        super().__init__()
        self.table = nn.Parameter(log_probs.detach().clone(), requires_grad=False)
        self.config = SimpleNamespace(vocab_size=log_probs.size(-1), is_encoder_decoder=False,
                                      eos_token_id=None, pad_token_id=None, bos_token_id=None)

    @property
    def device(self) -> torch.device:
        return self.table.device

    def forward(self, input_ids=None, attention_mask=None, **unused):
        return SimpleNamespace(logits=self.table[input_ids], past_key_values=None)


@register_fixture("bigram_lm")
def bigram_lm(log_probs: torch.Tensor, device: str = "cpu"):
    return on_device(BigramLM(log_probs), device).eval()



# --------------------------------------------------------------------- the prompt tokenizer (exercise 3)
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


@register_fixture("prompt_tokenizer", imports=("transformers.tokenization_utils_fast",))
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


@register_fixture("bert_mlm", imports=("transformers.models.bert.modeling_bert",))
def bert_mlm(seed: int = 0, vocab_size: int = 64, hidden: int = 32, layers: int = 2, heads: int = 4):
    """A seeded ``BertForMaskedLM`` (decoder tied to the word embeddings), in eval mode."""
    from transformers import BertForMaskedLM

    with seeded(seed):
        model = BertForMaskedLM(_bert_config(vocab_size, hidden, layers, heads, tie_word_embeddings=True))
    if model.cls.predictions.decoder.weight is not model.bert.embeddings.word_embeddings.weight:
        raise RuntimeError("bert_mlm: the MLM decoder is not tied to the word embeddings")
    return model.eval()


@register_fixture("bert_bare", imports=("transformers.models.bert.modeling_bert",))
def bert_bare(seed: int = 0, vocab_size: int = 64, hidden: int = 32, layers: int = 2, heads: int = 4,
              pooler: bool = True):
    """A seeded bare ``BertModel`` (with or without its pooler), in eval mode."""
    from transformers import BertModel

    with seeded(seed):
        model = BertModel(_bert_config(vocab_size, hidden, layers, heads), add_pooling_layer=pooler)
    return model.eval()
