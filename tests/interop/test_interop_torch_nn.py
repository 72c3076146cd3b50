"""torch.nn.Transformer parity: its stack weights loaded into our encoder-decoder give its outputs."""

import pytest
import torch
from torch import nn

from transformer.interop.torch_nn import from_torch_nn


@pytest.mark.parametrize(
    "norm_first, activation, bias",
    [(False, "relu", True), (True, "relu", True), (False, "gelu", False), (True, "gelu", True)],
)
def test_outputs_match_nn_transformer(norm_first, activation, bias):
    torch.manual_seed(0)
    ref = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=48,
                         dropout=0.1, activation=activation, batch_first=True, norm_first=norm_first, bias=bias).eval()
    vocab = 50
    model = from_torch_nn(ref, vocab, positional="none", scale_embedding=False).eval()
    assert model.config.norm_position == ("pre" if norm_first else "post")
    assert model.config.activation == activation and model.config.bias == bias

    src = torch.randint(4, vocab, (3, 7))
    src[1, 5:] = 0  # padding
    src[2, 3:] = 0
    tgt = torch.randint(4, vocab, (3, 6))
    src_mask = src != 0
    emb = model.encoder.embed.tokens.weight  # shared, unscaled, no positions: plain lookup
    with torch.no_grad():
        theirs = ref(emb[src], emb[tgt],
                     tgt_mask=nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.bool),
                     src_key_padding_mask=~src_mask, memory_key_padding_mask=~src_mask, tgt_is_causal=True)
        ours = model(src, tgt, src_mask=src_mask)
    expected = model.lm_head(theirs)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_unsupported_activation_is_a_clear_error():
    ref = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16,
                         activation=torch.tanh, batch_first=True)
    with pytest.raises(ValueError, match="activation"):
        from_torch_nn(ref, 20)
