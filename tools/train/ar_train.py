"""Trains the Janus-layout AR model on (prompt, image tokens) sequences with CFG dropout."""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from tools.train.ar_model import JanusGen
from tools.train.text_tokenizer import PromptEncoder


def build_sequences(captions: list[str], codes: torch.Tensor, enc: PromptEncoder, text_vocab: int):
    """-> (combined [N, Pmax + T] int64 right-padded with pad, prompt lengths [N]).
    Image tokens are stored offset by text_vocab (see JanusGen.embed)."""
    prompts = [enc.encode(c) for c in captions]
    lengths = np.array([len(p) for p in prompts])
    n, t = codes.shape
    seq = np.full((n, lengths.max() + t), enc.pad_id, dtype=np.int64)
    codes_np = codes.cpu().numpy().astype(np.int64) + text_vocab
    for i, p in enumerate(prompts):
        seq[i, :len(p)] = p
        seq[i, len(p):len(p) + t] = codes_np[i]
    return torch.from_numpy(seq), torch.from_numpy(lengths)


def apply_cfg_dropout(batch: torch.Tensor, lengths: torch.Tensor, pad_id: int, p: float) -> torch.Tensor:
    """Rows chosen with probability p get the official unconditional prompt: every prompt token
    except the first (BOS) and the last (<begin_of_image>) becomes the pad token."""
    b, l = batch.shape
    drop = torch.rand(b, device=batch.device) < p
    pos = torch.arange(l, device=batch.device)[None, :]
    inner = (pos >= 1) & (pos < (lengths[:, None] - 1))
    return torch.where(drop[:, None] & inner, torch.full_like(batch, pad_id), batch)


def train_ar(model: JanusGen, seqs: torch.Tensor, lengths: torch.Tensor, pad_id: int, seconds: float,
             batch: int = 128, lr: float = 1e-3, cfg_dropout: float = 0.1, weight_decay: float = 0.05,
             max_steps: int | None = None, log=print, seed: int = 0) -> dict:
    device = seqs.device
    torch.manual_seed(seed)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    n = seqs.shape[0]
    use_amp = device.type == "cuda"
    t0 = time.time()
    step, ema = 0, None
    history = []
    while True:
        elapsed = time.time() - t0
        if elapsed > seconds or (max_steps is not None and step >= max_steps):
            break
        frac = min(elapsed / seconds, 1.0)
        warm = min(1.0, (step + 1) / 300)
        for g in opt.param_groups:  # linear warmup, cosine decay to 5% on the clock
            g["lr"] = lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        idx = torch.randint(0, n, (batch,), device=device)
        b, bl = seqs[idx], lengths[idx]
        b = apply_cfg_dropout(b, bl, pad_id, cfg_dropout)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            loss = model.loss(b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        v = loss.item() if step % 50 == 0 else None
        if v is not None:
            ema = v if ema is None else 0.7 * ema + 0.3 * v
            history.append((step, round(elapsed, 1), round(v, 4)))
            if step % 250 == 0:
                log(f"ar step {step} t={elapsed:.0f}s loss={v:.4f} ema={ema:.4f} lr={opt.param_groups[0]['lr']:.2e}")
        step += 1
    model.eval()
    log(f"ar done: {step} steps in {time.time() - t0:.0f}s, last loss ema {ema}")
    return {"steps": step, "seconds": time.time() - t0, "history": history}
