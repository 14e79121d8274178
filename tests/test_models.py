"""The two pre-trained models load offline, with the documented architecture."""
from __future__ import annotations

import time

import pytest
import torch

pytestmark = pytest.mark.slow


def test_encoder_architecture(encoder):
    from week6_helpers import count_parameters

    tokenizer, model = encoder
    config = model.config
    assert type(model).__name__ == "BertModel"
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
    assert (config.intermediate_size, config.max_position_embeddings, config.vocab_size) == (1536, 512, 30522)
    assert len(tokenizer) == 30522
    # 22.7 M as documented for all-MiniLM-L6-v2 (pooler included).
    assert count_parameters(model) == pytest.approx(22.7e6, rel=0.01)
    assert tokenizer.tokenize("Unbelievable!") == ["unbelievable", "!"]


def test_encoder_forward_is_finite(encoder):
    tokenizer, model = encoder
    batch = tokenizer(["The cat sat on the mat.", "Hi"], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    assert hidden.shape == (2, batch["input_ids"].shape[1], 384)
    assert torch.isfinite(hidden).all()


def test_eager_encoder_returns_attention_maps():
    from week6_helpers import load_encoder

    tokenizer, model = load_encoder(attn_implementation="eager")
    batch = tokenizer("The dog barked loudly at the mailman", return_tensors="pt")
    with torch.no_grad():
        attentions = model(**batch, output_attentions=True).attentions
    n = batch["input_ids"].shape[1]
    assert len(attentions) == 6 and attentions[0].shape == (1, 12, n, n)
    torch.testing.assert_close(attentions[0].sum(-1), torch.ones(1, 12, n), atol=1e-5, rtol=0)


def test_classifier_pretrained_and_random_init_share_architecture():
    from week6_helpers import count_parameters, load_encoder_classifier

    _, pretrained = load_encoder_classifier(num_labels=2, seed=0)
    _, scratch = load_encoder_classifier(num_labels=2, pretrained=False, seed=0)
    assert type(pretrained) is type(scratch)
    assert count_parameters(pretrained) == count_parameters(scratch)
    assert pretrained.classifier.out_features == 2
    # Same shapes, different values: the baseline really starts from scratch.
    word_emb = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(pretrained.state_dict()[word_emb], scratch.state_dict()[word_emb])


def test_decoder_architecture_and_forward(decoder):
    from week6_helpers import count_parameters

    tokenizer, model = decoder
    config = model.config
    assert type(model).__name__ == "LlamaForCausalLM"
    assert (config.num_hidden_layers, config.hidden_size) == (30, 576)
    assert (config.num_attention_heads, config.num_key_value_heads, config.vocab_size) == (9, 3, 49152)
    assert config.tie_word_embeddings
    assert count_parameters(model) == pytest.approx(134.5e6, rel=0.005)
    assert model.dtype == torch.float32 and not model.training
    ids = tokenizer("Once upon a", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], 49152)
    assert torch.isfinite(logits).all()
    assert tokenizer.decode(logits[0, -1].argmax()) == " time"


def test_decoder_cache_is_reused(decoder, monkeypatch):
    """The second load reads the safetensors cache: no GGUF conversion happens."""
    from week6_helpers import models

    assert models._decoder_cache_is_valid(models.decoder_cache_path(), models.decoder_gguf())

    def conversion_is_forbidden(*args, **kwargs):
        raise AssertionError("the decoder was converted again although a valid cache exists")

    monkeypatch.setattr(models, "_convert_decoder", conversion_is_forbidden)
    start = time.perf_counter()
    _, model = models.load_decoder()
    assert time.perf_counter() - start < 10, "reading the cache should take about a second"
    torch.testing.assert_close(
        model.model.embed_tokens.weight[:5], decoder[1].model.embed_tokens.weight[:5], rtol=0, atol=0
    )


def test_stale_cache_is_rebuilt(tmp_path, monkeypatch):
    from week6_helpers import models

    monkeypatch.setenv("WEEK6_CACHE", str(tmp_path))
    folder = models.decoder_cache_path()
    folder.mkdir(parents=True)
    (folder / "week6_cache.json").write_text('{"format": 0}')
    (folder / "model.safetensors").write_bytes(b"")
    assert not models._decoder_cache_is_valid(folder, models.decoder_gguf())


def test_missing_package_names_the_fix(monkeypatch):
    from week6_helpers import assets

    with pytest.raises(assets.MissingAssetError) as info:
        assets.package_folder("no_such_model_package_week6", "no-such-model==1.0")
    assert "make setup" in str(info.value) and "pip install no-such-model==1.0" in str(info.value)


def test_hub_name_offline_gives_a_clear_error():
    from week6_helpers import MissingAssetError, load_encoder

    with pytest.raises(MissingAssetError, match="HF_HUB_OFFLINE=0"):
        load_encoder("bert-base-uncased")
