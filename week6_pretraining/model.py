"""A small BERT, GPT-2 and T5 with the same body sizes, built from random weights.

Both are stock ``transformers`` classes, so the checkpoints load with
``from_pretrained`` like any hub model. They share every size that matters
(layers, width, heads, feed-forward width, context, vocabulary) and both tie
the output layer to the input embeddings; what differs is the objective and
the attention mask (bidirectional vs causal), plus small architectural habits
of each family (BERT: post-LayerNorm, token-type embeddings, an extra dense
layer in the MLM head; GPT-2: pre-LayerNorm).

The T5 (span corruption) has an encoder *and* a decoder of that size, as T5-base
has two stacks of BERT-base's size (Raffel et al., 2020): about 1.5 times the
BERT's parameters, while each row costs it less than the BERT, since the encoder
reads the row without its dropped spans and the decoder only those spans.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    """A freshly initialised ``BertForMaskedLM`` (mlm), ``GPT2LMHeadModel`` (clm) or
    ``T5ForConditionalGeneration`` (span; ``tokenizer`` with its sentinels) for ``tokenizer``."""
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
    if objective == "span":
        from transformers import T5Config, T5ForConditionalGeneration

        config = T5Config(
            vocab_size=vocab_size,
            d_model=size.hidden,
            d_kv=size.hidden // size.heads,
            d_ff=size.ffn,
            num_layers=size.layers,
            num_decoder_layers=size.layers,
            num_heads=size.heads,
            relative_attention_max_distance=size.context,
            dropout_rate=size.dropout,
            feed_forward_proj="relu",
            pad_token_id=pad_id,
            # The decoder starts from the padding id, as in T5; the targets end with a
            # sentinel (span_corrupt's final one), so no end-of-sequence token is needed.
            decoder_start_token_id=pad_id,
            eos_token_id=tokenizer.sep_token_id,
            initializer_factor=1.0,
            tie_word_embeddings=True,
        )
        return T5ForConditionalGeneration(config)
    raise ValueError(f"objective must be 'mlm', 'clm' or 'span', got {objective!r}")
