"""ModelConfig validation: errors name the field, the value and what is valid."""

import pytest

from transformer.config import ConfigError, DecodeConfig, ModelConfig, paper_base, paper_big


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(arch="gpt"), "arch='gpt' is not valid: choose one of 'encoder-decoder', 'encoder', 'decoder'"),
        (dict(d_model=100, n_heads=8), "d_model=100 is not divisible by n_heads=8"),
        (dict(n_kv_heads=3), "n_kv_heads=3 does not divide n_heads=8"),
        (dict(dropout=1.5), "dropout=1.5 is not valid: it must be a number in [0, 1)"),
        (dict(norm="batchnorm"), "norm='batchnorm' is not valid"),
        (dict(positional="alibi"), "positional='alibi' is not valid"),
        (dict(vocab_size=0), "vocab_size=0 is not valid: it must be an integer > 0"),
        (dict(eos_id=40000), "eos_id=40000 is outside the vocabulary (vocab_size=37000)"),
        (dict(arch="decoder", tgt_vocab_size=10), "tgt_vocab_size=10 is only for arch='encoder-decoder'"),
        (dict(n_classes=2), "n_classes=2 is for arch='encoder' classifiers"),
        (dict(arch="encoder", pooling="max"), "pooling='max' is not valid"),
        (dict(relative_bias={"buckets": 32}), "model.relative_bias is set but positional='sinusoidal'"),
        (dict(positional="t5_bias", relative_bias={"buckets": 2}), "model.relative_bias.buckets=2 is too few"),
        (dict(positional="t5_bias", relative_bias={"bucket": 8}), "unknown key model.relative_bias.bucket"),
        (dict(positional="t5_bias", relative_bias={"buckets": 32, "max_distance": 8}),
         "model.relative_bias.max_distance=8 must exceed buckets / 4 = 8"),
        (dict(share_embeddings=True, tgt_vocab_size=100), "share_embeddings=true needs one vocabulary"),
        (dict(activation="reglu"), "activation='reglu' is not valid"),
        (dict(scale_attention="no"), "scale_attention='no' is not valid"),
    ],
)
def test_invalid_values_are_named(changes, message):
    with pytest.raises(ConfigError) as e:
        ModelConfig(**changes)
    assert message in str(e.value)


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"unknown key model.n_head \(did you mean 'n_heads'\?\)"):
        ModelConfig.from_dict({"n_head": 4})


def test_presets_and_derived_values():
    base, big = paper_base(), paper_big()
    assert (base.d_model, base.d_ff, base.n_heads, base.dropout) == (512, 2048, 8, 0.1)
    assert (big.d_model, big.d_ff, big.n_heads, big.dropout) == (1024, 4096, 16, 0.3)
    assert base.use_final_norm is False and base.replace(norm_position="pre").use_final_norm is True
    assert ModelConfig(n_kv_heads=2).kv_heads == 2 and base.head_dim == 64
    assert ModelConfig.from_dict(base.to_dict()) == base
    t5 = ModelConfig(positional="t5_bias", n_heads=6, d_k=64, d_v=64, tie_embeddings=False, share_embeddings=True)
    assert t5.relative_bias.buckets == 32 and t5.relative_bias.max_distance == 128  # T5's defaults
    assert (t5.head_dim, t5.qk_dim, t5.shares_embeddings) == (64, 64, True)  # 6 x 64 heads in a 512 model
    assert ModelConfig.from_dict(t5.to_dict()) == t5
    assert base.shares_embeddings and not base.replace(tie_embeddings=False).shares_embeddings


def test_decode_config_checks():
    with pytest.raises(ConfigError, match="length_penalty_kind='exp'"):
        DecodeConfig(length_penalty_kind="exp")
    with pytest.raises(ConfigError, match="top_p=0 is not valid"):
        DecodeConfig(top_p=0)


def test_set_reaches_a_nested_table(tmp_path):
    from transformer.config import load_config

    file = tmp_path / "vit.toml"
    file.write_text('[model]\narch = "encoder"\nd_model = 64\n[model.vision]\nimage_size = 28\npatch_size = 4\n'
                    '[data]\ntrain_images = "x.safetensors"\n')
    config = load_config(file, ["model.vision.patch_size=7", "model.vision.positions=\"none\""])
    assert config.model.vision.patch_size == 7 and config.model.vision.positions == "none"
    assert config.model.vision.image_size == 28  # the rest of the table stays
    with pytest.raises(ConfigError, match="unknown key model.vision.patch .*did you mean 'patch_size'"):
        load_config(file, ["model.vision.patch=7"])
    with pytest.raises(ConfigError, match="model.d_model is not a table"):
        load_config(file, ["model.d_model.x=7"])
