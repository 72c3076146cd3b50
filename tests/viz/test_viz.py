"""Plots are written as PNG files from a run's metrics."""

import json

import pytest

from transformer.viz.curves import plot_training_curves, read_metrics


@pytest.fixture
def closed_figures(monkeypatch):
    """The matplotlib figures the code under test closes, kept for inspection."""
    plt = pytest.importorskip("matplotlib.pyplot")
    figures, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig))[1])
    return figures


def test_training_curves_png(tmp_path, closed_figures):
    import numpy as np
    from matplotlib.image import imread

    records = [{"step": s, "split": "train", "loss": 9 - s / 20, "elapsed_s": 6.0 * s, "tokens": 100, "tokens_per_s": 50}
               for s in range(1, 101)]
    records += [{"step": s, "split": "valid", "valid_loss": 8 - s / 25, "valid_bleu": s / 10} for s in (25, 50, 100)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    train, valid = read_metrics(tmp_path)
    assert len(train) == 100 and len(valid) == 3
    out = plot_training_curves(tmp_path, tmp_path / "plots" / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = imread(out)
    assert image.shape == (540, 960, 4)  # 8 x 4.5 inches at 120 dpi
    assert len(np.unique(image.reshape(-1, 4), axis=0)) > 20  # not blank: lines, text, several colours
    # what is drawn is the metrics: loss against minutes (100 points: no smoothing), validation loss, BLEU
    (fig,) = closed_figures
    ax, bleu_ax = fig.axes
    train_line, valid_line = ax.get_lines()
    assert train_line.get_xdata().tolist() == pytest.approx([s / 10 for s in range(1, 101)])
    assert train_line.get_ydata().tolist() == pytest.approx([9 - s / 20 for s in range(1, 101)])
    assert valid_line.get_xdata().tolist() == pytest.approx([2.5, 5.0, 10.0])
    assert valid_line.get_ydata().tolist() == pytest.approx([7.0, 6.0, 4.0])
    (bleu_line,) = bleu_ax.get_lines()
    assert bleu_line.get_xdata().tolist() == pytest.approx([2.5, 5.0, 10.0])
    assert bleu_line.get_ydata().tolist() == pytest.approx([2.5, 5.0, 10.0])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "train loss (label-smoothed)", "validation loss", "validation BLEU (greedy)"]


def test_missing_metrics_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl not found"):
        read_metrics(tmp_path)


# Attention heatmaps: a tiny random model with a tokenizer trained on a few lines.

TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "los pájaros cantan"] * 10
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    """{"encoder-decoder": dir, "decoder": dir}: cpu_tiny models (2 layers, 4 heads) with a shared BPE."""
    import torch

    import transformer
    from transformer.config import DecodeConfig, cpu_tiny
    from transformer.data.tokenizer import train_bpe

    tok = train_bpe(TEXT, vocab_size=300)
    root = tmp_path_factory.mktemp("models")
    dirs = {}
    for arch in ("encoder-decoder", "decoder"):
        torch.manual_seed(0)
        model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size, arch=arch, max_positions=64))
        dirs[arch] = transformer.save_model(model, root / arch, tokenizer=tok,
                                            decode=DecodeConfig(beam_size=1, max_len_b=6, min_len=3, max_new_tokens=5))
    return dirs


def test_cross_attention_is_the_decodings_for_the_layer_and_head(model_dirs):
    import torch

    import transformer
    from transformer.decoding.pipeline import Pipeline
    from transformer.viz.attention import attention_map, token_pieces

    pipe = Pipeline.load(model_dirs["encoder-decoder"])
    text = "the cat sat"
    src = pipe.source_tokenizer.encode(text)
    ids, att = transformer.greedy_search(pipe.model, [src], max_len_b=6, min_len=3, return_attention=True)
    m = attention_map(pipe, text, head="all")
    assert m.kind == "cross" and m.layer == 1 and m.weights.shape == (4, ids.shape[1], len(src))
    assert torch.equal(m.weights, att["cross"][0, -1])
    assert torch.equal(attention_map(pipe, text, layer=0, head=2).weights, att["cross"][0, 0, 2])
    assert torch.equal(attention_map(pipe, text).weights, att["cross"][0, 1].mean(0))  # default: last layer, mean
    assert torch.allclose(m.weights.sum(-1), torch.tensor(1.0), atol=1e-5)  # each query: a distribution over the source
    assert len(m.rows) == len(m.output) == ids.shape[1] and m.columns == m.source and len(m.columns) == len(src)
    assert m.output_text == pipe.translate([text])[0]
    # the labels are the tokens: the source's words, and each output id's piece in order
    assert m.columns == m.source == ["the", "cat", "sat"] == [pipe.source_tokenizer.decode([i]).strip() for i in src]
    assert m.rows == m.output == token_pieces(pipe.target_tokenizer, ids[0].tolist())

    out, att_b = transformer.beam_search(pipe.model, [src], beam_size=3, length_penalty=0.6, max_len_b=6, min_len=3,
                                         return_attention=True)
    b = attention_map(pipe, text, beam_size=3, head="all")
    assert torch.equal(b.weights, att_b["cross"][0, -1]) and len(b.rows) == out.shape[1]


def test_self_attention_columns_are_the_decoder_inputs(model_dirs):
    import torch

    import transformer
    from transformer.decoding.pipeline import Pipeline
    from transformer.viz.attention import attention_map, token_pieces

    pipe = Pipeline.load(model_dirs["encoder-decoder"])
    m = attention_map(pipe, "a dog ran", kind="self", head=0)
    t = len(m.rows)
    assert m.weights.shape == (t, t) and m.columns == ["<s>"] + m.output[:-1]
    assert torch.allclose(m.weights.sum(-1), torch.tensor(1.0), atol=1e-5)
    assert (m.weights.triu(1) == 0).all()  # causal: a query sees <s> and the tokens before it

    enc = attention_map(pipe, "a dog ran", kind="encoder", layer=0, head="all")
    src = torch.tensor([pipe.source_tokenizer.encode("a dog ran")])
    with torch.inference_mode():
        expected = pipe.model.eval().encode(src, need_weights=True)[2][0][0]
    assert torch.equal(enc.weights, expected) and enc.rows == enc.columns == enc.source == ["a", "dog", "ran"]

    lm = Pipeline.load(model_dirs["decoder"])
    prompt = lm.prompt_ids("the cat")
    ids, att = transformer.greedy_search(lm.model, [prompt], max_len_a=0, max_len_b=5, return_attention=True)
    g = attention_map(lm, "the cat", head="all")  # a language model: self-attention, greedy by default
    assert g.kind == "self" and g.source == ["<s>", "the", "cat"] and len(g.source) == len(prompt)
    assert g.rows == g.output == token_pieces(lm.target_tokenizer, ids[0].tolist())
    assert g.columns == g.source + g.output[:-1] and len(g.rows) == ids.shape[1] == 5
    assert torch.equal(g.weights, att["self"][0, -1])
    assert torch.allclose(g.weights.sum(-1), torch.tensor(1.0), atol=1e-5)


def test_token_pieces_are_readable():
    from transformer.data.tokenizer import train_bpe
    from transformer.viz.attention import token_pieces

    tok = train_bpe(TEXT, vocab_size=300)
    text = "the cat sat  on 日"
    ids = tok.encode(text)
    pieces = token_pieces(tok, ids)
    assert not any("Ġ" in p or "\ufffd" in p for p in pieces)
    assert pieces[:3] == ["the", "cat", "sat"] and "␣" in pieces  # the leading space dropped; a lone space shown
    assert " ".join(p for p in pieces[:-3] if p != "␣") == "the cat sat on"
    assert pieces[-3:] == ["\\xe6", "\\x97", "\\xa5"]  # an unseen character: its UTF-8 bytes, one per token
    assert token_pieces(tok, [2, 3]) == ["<s>", "</s>"]


def test_plot_attention_writes_png_for_one_matrix_and_for_heads(tmp_path, closed_figures):
    import torch

    from transformer.viz.attention import plot_attention

    w = torch.softmax(torch.randn(3, 4, 5), dim=-1)  # (H, T, S)
    xs, ys = ["¿De", "▁quién", "▁es", "?", "</s>"], ["Who", "▁is", "▁it", "?"]
    for weights, name in ((w[0], "one.png"), (w, "heads.png")):
        out = plot_attention(weights, xs, ys, tmp_path / "plots" / name, title="test")
        data = out.read_bytes()
        assert data[:8] == PNG and len(data) > 2000
    # each panel draws its head's weights, columns labelled by xs and rows by ys
    one, heads = closed_figures
    panels = [ax for ax in heads.axes if ax.images]
    assert len(panels) == 3 and [ax.get_title() for ax in panels] == ["head 0", "head 1", "head 2"]
    for ax, expected in [(one.axes[0], w[0]), *zip(panels, w, strict=True)]:
        assert [t.get_text() for t in ax.get_xticklabels()] == xs
        assert [t.get_text() for t in ax.get_yticklabels()] == ys
        assert torch.equal(torch.as_tensor(ax.images[0].get_array().data), expected)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["heads.png", "one.png"]  # no temp files left
    with pytest.raises(ValueError, match="x_labels has 4 labels but the weights have 5 columns"):
        plot_attention(w, xs[:4], ys, tmp_path / "x.png")
    with pytest.raises(ValueError, match="y_labels has 5 labels but the weights have 4 rows"):
        plot_attention(w[0], xs, ys + ["!"], tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"\(T, S\) matrix or \(H, T, S\)"):
        plot_attention(w[0, 0], xs, ys, tmp_path / "x.png")
    with pytest.raises(ValueError, match="empty"):
        plot_attention(torch.zeros(0, 5), xs, [], tmp_path / "x.png")
    with pytest.raises(ValueError, match=".png, .svg or .pdf"):
        plot_attention(w[0], xs, ys, tmp_path / "x.jpg")
    assert not (tmp_path / "x.png").exists()


def test_attention_map_errors_name_the_valid_range(model_dirs):
    from transformer.decoding.inputs import PipelineError
    from transformer.decoding.pipeline import Pipeline
    from transformer.viz.attention import attention_map

    pipe = Pipeline.load(model_dirs["encoder-decoder"])
    with pytest.raises(PipelineError, match=r"layer 2 is out of range: the decoder has 2 layers \(0 to 1, or -1"):
        attention_map(pipe, "the cat", layer=2)
    with pytest.raises(PipelineError, match=r"head 4 is out of range: the model has 4 heads \(0 to 3.*'mean' or 'all'"):
        attention_map(pipe, "the cat", head=4)
    with pytest.raises(PipelineError, match="kind='both' is not one of cross, self, encoder"):
        attention_map(pipe, "the cat", kind="both")
    with pytest.raises(PipelineError, match="the text is empty"):
        attention_map(pipe, "")
    with pytest.raises(PipelineError, match="only decoder self-attention"):
        attention_map(Pipeline.load(model_dirs["decoder"]), "the cat", kind="cross")


def test_cli_attention(model_dirs, tmp_path, capsys):
    from transformer.cli import main

    out = tmp_path / "attention.png"
    assert main(["attention", str(model_dirs["encoder-decoder"]), "--text", "the cat sat", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "cross-attention, layer 1 of 0-1, mean of 4 heads" in printed and "output:" in printed
    assert out.read_bytes()[:8] == PNG
    lm = str(model_dirs["decoder"])
    assert main(["attention", lm, "--text", "the cat", "--out", str(out), "--head", "all", "--layer", "0"]) == 0
    assert "decoder self-attention, layer 0 of 0-1, 4 heads" in capsys.readouterr().out
    for args, message in ((["--layer", "-3"], "layer -3 is out of range"), (["--head", "first"], "--head first"),
                          (["--kind", "cross"], "only decoder self-attention")):
        assert main(["attention", lm, "--text", "x", "--out", str(out), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
