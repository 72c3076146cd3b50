"""The two sides whose training steps benchmarks/gpu_train.py times: ours (the loop's step, with
the utilisation levers, LEVERS) and Hugging Face's MarianMTModel of the same size."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import torch.nn.functional as F
from gpu_profile import OPTIMIZER  # benchmarks/gpu_profile.py
from torch.autograd.graph import increment_version
from torch.profiler import record_function

from transformer.config import load_config
from transformer.data.batching import collate
from transformer.model.attention import MultiHeadAttention
from transformer.model.build import build_model
from transformer.training.loss import loss_and_backward
from transformer.training.objectives import base as objective_base
from transformer.training.objectives import seq2seq

ROOT = Path(__file__).resolve().parent.parent
SMOKE = dict(d_model=64, n_heads=4, d_ff=128, n_encoder_layers=2, n_decoder_layers=2)


def run_config(name: str, precision: str, smoke: bool):
    """configs/<name>.toml through the config loader; tf32 trains as fp32 (with TF32 matmuls)."""
    run = load_config(
        str(ROOT / "configs" / f"{name}.toml"),
        [f"train.precision={'fp32' if precision == 'tf32' else precision}"],
    )
    if smoke:
        run = dataclasses.replace(run, model=run.model.replace(**SMOKE, vocab_size=1000))
    return run


LEVERS = ("fold", "bf16w", "compile", "graphs")
"""fold: the loss's backward scale folded into its gradient (training/loss.py loss_and_backward, as
the loop does); bf16w: the model's weights kept in bf16 for the forward and backward, fp32 master
copies in the optimizer (no per-step casts of the weights under autocast; the grads are copied up
and the masters down once a step, in foreach kernels; the embeddings, and so the residual stream,
are then bf16 too: a measurement of speed, not a recipe whose quality was checked); compile: the model through torch.compile
(train.compile); graphs: torch.compile(mode="reduce-overhead"), CUDA graphs over the compiled
forward and backward (static shapes)."""


def parse_levers(spec: str) -> frozenset[str]:
    """ "fold+graphs" -> {"fold", "graphs"}; "plain": none (the step before the levers)."""
    names = frozenset() if spec == "plain" else frozenset(spec.split("+"))
    unknown = names - set(LEVERS)
    if unknown:
        raise ValueError(f"unknown lever {sorted(unknown)} in {spec!r}: use plain or {LEVERS}")
    return names


class Ours:
    """Our model, its objective and fused AdamW; `step(examples)` is one step of the loop, with the
    levers asked for (LEVERS)."""

    def __init__(self, run, device, clip: float, levers: frozenset[str]):
        torch.manual_seed(0)
        self.model = build_model(run.model).to(device).train()
        for module in self.model.modules():
            if isinstance(module, MultiHeadAttention):
                module.impl = "fused"  # what the trainer picks on a GPU (runtime/precision.py)
        self.objective = seq2seq.Seq2Seq(run, data=None)
        self.objective.bind(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.masters = None
        if "bf16w" in levers:  # fp32 masters for the optimizer, the model itself in bf16
            self.masters = [p.detach().float().clone() for p in self.params]
            for m in self.masters:
                m.grad = torch.zeros_like(m)
            self.model.to(torch.bfloat16)
        self.optimizer = adamw(self.masters or self.params, run.train)
        self.net = self.model
        if "graphs" in levers:
            self.net = torch.compile(self.model, mode="reduce-overhead")
        elif "compile" in levers:
            self.net = torch.compile(self.model)
        self.levers, self.device, self.clip, self.cfg = levers, device, clip, run.model
        self.unscaled = torch.amp.GradScaler(device.type, enabled=False)

    def prepare(self, examples):
        c = self.cfg
        return collate(examples, c.pad_id, c.start_id, c.eos_id).to(self.device)

    def step(self, examples) -> int:
        batch = examples if hasattr(examples, "tgt_out") else self.prepare(examples)
        if "graphs" in self.levers:
            torch.compiler.cudagraph_mark_step_begin()  # the last step's outputs may be reused
        args = (self.net, self.model, batch, self.device)
        if "fold" in self.levers:
            out = loss_and_backward(self.objective.loss, args, 1 / batch.n_tokens, self.unscaled)
        else:
            out = self.objective.loss(*args)
            (out.loss / batch.n_tokens).backward()
        with record_function(OPTIMIZER):
            if self.masters is None:
                torch.nn.utils.clip_grad_norm_(self.params, self.clip)
                self.optimizer.step()
                increment_version(self.params)  # as the loop does after a fused step
                self.optimizer.zero_grad(set_to_none=True)
            else:
                self.master_step()  # the masters' grads are overwritten, not freed
        float(out.loss.detach()), float(out.nll)  # the loop reads the step's sums back (a sync)
        return batch.n_tokens

    @torch.no_grad()
    def master_step(self) -> None:
        """bf16w: the bf16 grads copied into the fp32 masters' grads, clip and AdamW there, the
        masters copied back into the bf16 weights (foreach kernels: a few launches each)."""
        pairs = [
            (m, p) for m, p in zip(self.masters, self.params, strict=True) if p.grad is not None
        ]
        torch._foreach_copy_([m.grad for m, _ in pairs], [p.grad for _, p in pairs])
        torch.nn.utils.clip_grad_norm_(self.masters, self.clip)
        self.optimizer.step()
        torch._foreach_copy_(self.params, self.masters)
        increment_version(self.params)
        for p in self.params:
            p.grad = None


def adamw(params, t) -> torch.optim.AdamW:
    """The loop's optimizer for the train config t (fused; the rate is immaterial to the timing)."""
    betas, eps, decay = (t.adam_beta1, t.adam_beta2), t.adam_eps, t.weight_decay
    return torch.optim.AdamW(params, lr=1e-4, betas=betas, eps=eps, weight_decay=decay, fused=True)


class Peer:
    """Hugging Face's MarianMTModel of the same size, trained on the same batches."""

    def __init__(self, run, device, clip: float):
        from transformers import MarianConfig, MarianMTModel

        m = run.model
        torch.manual_seed(0)
        self.model = (
            MarianMTModel(
                MarianConfig(
                    vocab_size=m.vocab_size,
                    d_model=m.d_model,
                    encoder_layers=m.n_encoder_layers,
                    decoder_layers=m.n_decoder_layers,
                    encoder_attention_heads=m.n_heads,
                    decoder_attention_heads=m.n_heads,
                    encoder_ffn_dim=m.d_ff,
                    decoder_ffn_dim=m.d_ff,
                    dropout=m.dropout,
                    attention_dropout=m.attention_dropout,
                    activation_dropout=m.activation_dropout,
                    activation_function="relu",
                    max_position_embeddings=m.max_positions,
                    scale_embedding=True,
                    pad_token_id=m.pad_id,
                    eos_token_id=m.eos_id,
                    decoder_start_token_id=m.start_id,
                    share_encoder_decoder_embeddings=True,
                    attn_implementation="sdpa",
                )
            )
            .to(device)
            .train()
        )
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = adamw(self.params, run.train)
        self.device, self.clip, self.cfg = device, clip, m
        self.precision, self.eps = run.train.precision, run.train.label_smoothing

    def prepare(self, examples):
        c = self.cfg
        return collate(examples, c.pad_id, c.start_id, c.eos_id).to(self.device)

    def step(self, examples) -> int:
        b = examples if hasattr(examples, "tgt_out") else self.prepare(examples)
        labels = b.tgt_out.masked_fill(b.tgt_out == self.cfg.pad_id, -100)  # (B, T)
        with objective_base.autocast(self.device, self.precision):
            logits = self.model(
                input_ids=b.src, attention_mask=b.src_mask.long(), decoder_input_ids=b.tgt_in
            ).logits  # (B, T, V)
        loss = F.cross_entropy(
            logits.float().view(-1, logits.size(-1)),
            labels.view(-1),
            ignore_index=-100,
            label_smoothing=self.eps,
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        float(loss.detach())
        return b.n_tokens
