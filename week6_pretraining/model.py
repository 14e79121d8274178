"""A small BERT and a small GPT-2 with the same body, built from random weights.

Both are stock ``transformers`` classes, so the checkpoints load with
``from_pretrained`` like any hub model. They share every size that matters
(layers, width, heads, feed-forward width, context, vocabulary) and both tie
the output layer to the input embeddings; what differs is the objective and
the attention mask (bidirectional vs causal), plus small architectural habits
of each family (BERT: post-LayerNorm, token-type embeddings, an extra dense
layer in the MLM head; GPT-2: pre-LayerNorm).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .data import CONTEXT


@dataclass
class Size:
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    ffn: int = 1024
    context: int = CONTEXT
    # No dropout: a few passes over the data leave a model this size under-fitted,
    # not over-fitted, and dropout would only slow it down.
    dropout: float = 0.0
    init_std: float = 0.02  # standard deviation of the random initial weights (BERT's and GPT-2's default)


def build_model(objective: str, tokenizer, size: Size = Size()):
    """A freshly initialised ``BertForMaskedLM`` (mlm) or ``GPT2LMHeadModel`` (clm) for ``tokenizer``."""
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    vocab_size, pad_id = len(tokenizer), tokenizer.pad_token_id

    if objective == "mlm":
        config = BertConfig(
            vocab_size=vocab_size,
            hidden_size=size.hidden,
            num_hidden_layers=size.layers,
            num_attention_heads=size.heads,
            intermediate_size=size.ffn,
            max_position_embeddings=size.context,
            hidden_dropout_prob=size.dropout,
            attention_probs_dropout_prob=size.dropout,
            pad_token_id=pad_id,
            type_vocab_size=2,
            initializer_range=size.init_std,
            tie_word_embeddings=True,
        )
        return BertForMaskedLM(config)
    if objective == "clm":
        config = GPT2Config(
            vocab_size=vocab_size,
            n_embd=size.hidden,
            n_layer=size.layers,
            n_head=size.heads,
            n_inner=size.ffn,
            n_positions=size.context,
            resid_pdrop=size.dropout,
            embd_pdrop=size.dropout,
            attn_pdrop=size.dropout,
            pad_token_id=pad_id,
            # GPT reads [CLS] as its beginning-of-text token and learns to emit [SEP]
            # at the end of a paragraph (see data.py).
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            initializer_range=size.init_std,
            tie_word_embeddings=True,
        )
        return GPT2LMHeadModel(config)
    raise ValueError(f"objective must be 'mlm' or 'clm', got {objective!r}")


def size_dict(size: Size) -> dict:
    return asdict(size)
