"""Our pre-norm encoder-decoder as Hugging Face's M2M100ForConditionalGeneration, for timing `generate`.

Not an export: M2M100 is the Hugging Face class whose layout is ours for the Bible recipe's model
(pre-norm, a final LayerNorm after each stack, biases, ReLU, embeddings scaled by sqrt(d_model),
tied shared vocabulary, no output bias), but it computes its own sinusoids (sin/cos halves, and
frequencies spaced by 1/(d/2 - 1) instead of the paper's 2/d) and keeps them in a buffer that is
not saved. For benchmarking, the buffer is replaced by our table, shifted by the class's position
offset (positions start at pad_id + 1), so that the two models compute the same function. `check`
asserts that on real lines before any timing. `transformer export --to hf` does not do this: a saved
M2M100 checkpoint would lose the table.
"""

from __future__ import annotations

import torch

from transformer.model.positional import sinusoidal_table


def to_m2m100(model):
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    cfg = model.config
    layout = dict(arch="encoder-decoder", norm_position="pre", norm="layernorm", positional="sinusoidal",
                  activation="relu", bias=True, output_bias=False, tie_embeddings=True, scale_embedding=True,
                  embedding_norm=False, tgt_vocab_size=None, n_kv_heads=None)
    wrong = {k: getattr(cfg, k) for k, v in layout.items() if getattr(cfg, k) != v}
    if wrong or cfg.final_norm is False:
        raise ValueError(f"M2M100 has no equivalent for {wrong or {'final_norm': False}}")
    start = cfg.decoder_start_id if cfg.decoder_start_id is not None else cfg.bos_id
    hf_cfg = M2M100Config(
        vocab_size=cfg.vocab_size, d_model=cfg.d_model, encoder_layers=cfg.n_encoder_layers,
        decoder_layers=cfg.n_decoder_layers, encoder_attention_heads=cfg.n_heads, decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff, decoder_ffn_dim=cfg.d_ff, activation_function="relu",
        max_position_embeddings=cfg.max_positions, scale_embedding=True, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
        pad_token_id=cfg.pad_id, bos_token_id=cfg.bos_id, eos_token_id=cfg.eos_id, decoder_start_token_id=start,
        tie_word_embeddings=True)
    hf = M2M100ForConditionalGeneration(hf_cfg).eval()
    ours = model.state_dict()
    state = {"model.shared.weight": ours["encoder.embed.tokens.weight"]}
    for side in ("encoder", "decoder"):
        n_layers = cfg.n_encoder_layers if side == "encoder" else cfg.n_decoder_layers
        names = {"self_attn": "self_attn", "norm1": "self_attn_layer_norm", "feed_forward.w1": "fc1",
                 "feed_forward.w2": "fc2"}
        names.update({"norm2": "final_layer_norm"} if side == "encoder" else
                     {"cross_attn": "encoder_attn", "norm2": "encoder_attn_layer_norm", "norm3": "final_layer_norm"})
        for i in range(n_layers):
            for key, value in ours.items():
                prefix = f"{side}.layers.{i}."
                if not key.startswith(prefix):
                    continue
                rest = key[len(prefix):]
                mine = next(m for m in names if rest.startswith(m + "."))
                state[f"model.{side}.layers.{i}.{names[mine]}{rest[len(mine):]}"] = value
        for p in ("weight", "bias"):
            state[f"model.{side}.layer_norm.{p}"] = ours[f"{side}.final_norm.{p}"]
    missing, unexpected = hf.load_state_dict(state, strict=False)
    missing = [k for k in missing if k not in ("lm_head.weight", "model.encoder.embed_tokens.weight",
                                               "model.decoder.embed_tokens.weight")]
    if missing or unexpected:
        raise ValueError(f"mapping incomplete: missing {missing}, unexpected {unexpected}")
    table = sinusoidal_table(cfg.max_positions, cfg.d_model, cfg.sinusoidal_layout)
    for stack in (hf.model.encoder, hf.model.decoder):
        positions = stack.embed_positions
        shifted = torch.zeros(cfg.pad_id + 1 + cfg.max_positions, cfg.d_model)
        shifted[cfg.pad_id + 1:] = table
        positions.weights = shifted  # a buffer: stays one, and stays unsaved
    return hf


@torch.inference_mode()
def check(model, hf, batch: list[list[int]], atol: float = 1e-4) -> float:
    """Teacher-forced logits of both models on a padded batch; returns the largest difference."""
    cfg = model.config
    width = max(map(len, batch))
    src = torch.tensor([ids + [cfg.pad_id] * (width - len(ids)) for ids in batch])
    mask = src != cfg.pad_id
    start = cfg.decoder_start_id if cfg.decoder_start_id is not None else cfg.bos_id
    tgt = torch.cat([torch.full((len(batch), 1), start), src[:, :8].clamp(min=4)], dim=1)
    ours = model(src, tgt, src_mask=mask)
    theirs = hf(input_ids=src, attention_mask=mask.long(), decoder_input_ids=tgt).logits
    diff = (ours - theirs).abs().max().item()
    if diff > atol:
        raise AssertionError(f"M2M100 copy differs from our model by {diff:.2e} (> {atol})")
    return diff
