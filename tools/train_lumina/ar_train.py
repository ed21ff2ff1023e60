"""Lumina-mGPT training sequences and the AR training loop (CFG dropout, loss on the response).

A conditional sequence is  <s> prompt <reserved08706> | <racm3:break> H W (codes of a row, <reserved08799>) x h
<eoss> <reserved08706>; the part after '|' is the response. With probability cfg_dropout a sequence is
replaced by the response alone, which is how Lumina-mGPT's unconditional context looks at inference
(it starts at <racm3:break>). The loss covers every response token (forced ones are learned trivially).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from tools.train_lumina.model import response_loss
from tools.train_lumina.text_tokenizer import PromptEncoder


def build_sequences(captions, codes: torch.Tensor, enc: PromptEncoder, image_size: int):
    """-> prompts [N, Pmax] (right-padded), prompt lengths [N], responses [N, R]."""
    n, h, w = codes.shape
    prompts = [enc.encode(c, image_size, image_size) for c in captions]
    lengths = np.array([len(p) for p in prompts])
    prompt_arr = np.full((n, lengths.max()), enc.pad, dtype=np.int64)
    for i, p in enumerate(prompts):
        prompt_arr[i, :len(p)] = p
    body = codes.cpu().numpy().astype(np.int64) + enc.image_offset
    rows = np.concatenate([body, np.full((n, h, 1), enc.new_line, dtype=np.int64)], axis=2).reshape(n, -1)
    header = np.tile(np.array(enc.header(image_size, image_size), dtype=np.int64), (n, 1))
    tail = np.tile(np.array([enc.eoi, enc.eot], dtype=np.int64), (n, 1))
    responses = np.concatenate([header, rows, tail], axis=1)
    return torch.from_numpy(prompt_arr), torch.from_numpy(lengths), torch.from_numpy(responses)


def make_batch(prompts, lengths, responses, pad: int, drop: torch.Tensor):
    """Rows [prompt[:P_i] response pad...]; dropped rows have P_i = 0. -> (ids, loss_mask)."""
    b, pmax = prompts.shape
    r = responses.shape[1]
    p = torch.where(drop, torch.zeros_like(lengths), lengths)[:, None]
    j = torch.arange(pmax + r, device=prompts.device)[None, :]
    in_prompt = j < p
    in_resp = (j >= p) & (j < p + r)
    prompt_part = torch.gather(prompts, 1, j.clamp(max=pmax - 1).expand(b, -1))
    resp_part = torch.gather(responses, 1, (j - p).clamp(0, r - 1))
    ids = torch.where(in_prompt, prompt_part, torch.where(in_resp, resp_part, torch.full_like(prompt_part, pad)))
    # targets: every response token that has a predecessor (a dropped row's first token has none)
    loss_mask = in_resp & (j >= torch.clamp(p, min=1))
    return ids, loss_mask


def train_ar(model, prompts, lengths, responses, pad: int, seconds: float, batch: int = 64, lr: float = 1e-3,
             cfg_dropout: float = 0.1, max_steps: int | None = None, log=print, seed: int = 0) -> dict:
    device = prompts.device
    torch.manual_seed(seed)
    model.train()
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in params if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in params if not (p.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    n = prompts.shape[0]
    use_amp = device.type == "cuda"
    t0, step, ema, history = time.time(), 0, None, []
    while True:
        elapsed = time.time() - t0
        if elapsed > seconds or (max_steps is not None and step >= max_steps):
            break
        frac = min(elapsed / seconds, 1.0)
        warm = min(1.0, (step + 1) / 200)
        for g in opt.param_groups:
            g["lr"] = lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        idx = torch.randint(0, n, (batch,), device=device)
        drop = torch.rand(batch, device=device) < cfg_dropout
        ids, mask = make_batch(prompts[idx], lengths[idx], responses[idx], pad, drop)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            loss = response_loss(model, ids, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
        opt.step()
        if step % 50 == 0:
            v = loss.item()
            ema = v if ema is None else 0.7 * ema + 0.3 * v
            history.append((step, round(elapsed, 1), round(v, 4)))
            if step % 250 == 0:
                log(f"ar step {step} t={elapsed:.0f}s loss={v:.4f} ema={ema:.4f} lr={opt.param_groups[0]['lr']:.2e}")
        step += 1
    model.eval()
    log(f"ar done: {step} steps in {time.time() - t0:.0f}s, last loss ema {ema}")
    return {"steps": step, "seconds": time.time() - t0, "history": history}
