"""Trains the scaled-down VQ-16 tokenizer on scene images: MSE reconstruction + codebook and
commitment losses (l2-normalised 8-d codebook), no perceptual or GAN terms (flat-colored scenes)."""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from tools.janus_torch.vq16 import VQModel


def to_model_range(batch_u8: torch.Tensor) -> torch.Tensor:
    """uint8 [B, H, W, 3] -> float [B, 3, H, W] in [-1, 1]."""
    return batch_u8.permute(0, 3, 1, 2).float() / 127.5 - 1.0


def train_vq(images_u8: torch.Tensor, vq_cfg: dict, seconds: float, batch: int = 64, lr: float = 4e-4,
             max_steps: int | None = None, log=print, seed: int = 0) -> VQModel:
    """images_u8: [N, H, W, 3] uint8 on the training device. Stops on the clock (or max_steps)."""
    device = images_u8.device
    torch.manual_seed(seed)
    vq = VQModel(**vq_cfg, commit_loss_beta=0.25).to(device).train()
    opt = torch.optim.AdamW(vq.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    n = images_u8.shape[0]
    t0 = time.time()
    step = 0
    use_amp = device.type == "cuda"
    while True:
        elapsed = time.time() - t0
        if elapsed > seconds or (max_steps is not None and step >= max_steps):
            break
        frac = min(elapsed / seconds, 1.0)
        for g in opt.param_groups:  # warmup 2%, cosine to 10% on the clock
            g["lr"] = lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        idx = torch.randint(0, n, (batch,), device=device)
        x = to_model_range(images_u8[idx])
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            rec, (vq_loss, commit_loss, _) = vq(x)
        rec_loss = F.mse_loss(rec.float(), x)
        loss = rec_loss + vq_loss + commit_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vq.parameters(), 1.0)
        opt.step()
        if step % 200 == 0:
            log(f"vq step {step} t={elapsed:.0f}s rec_mse={rec_loss.item():.5f} vq={vq_loss.item():.4f} "
                f"commit={commit_loss.item():.4f}")
        step += 1
    log(f"vq done: {step} steps in {time.time() - t0:.0f}s")
    return vq.eval()


@torch.no_grad()
def encode_all(vq: VQModel, images_u8: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """-> codes [N, h*w] int16 (row-major, as the AR model emits them)."""
    out = []
    use_amp = images_u8.device.type == "cuda"
    for i in range(0, images_u8.shape[0], batch):
        x = to_model_range(images_u8[i:i + batch])
        with torch.autocast(images_u8.device.type, dtype=torch.bfloat16, enabled=use_amp):
            _, idx = vq.encode(x)
        out.append(idx.reshape(idx.shape[0], -1).to(torch.int16))
    return torch.cat(out)


@torch.no_grad()
def decode_codes(vq: VQModel, codes: torch.Tensor, grid: int) -> torch.Tensor:
    """codes [B, grid*grid] -> uint8 [B, H, W, 3] (official pixel conversion)."""
    from tools.janus_torch.vq16 import to_uint8
    return to_uint8(vq.decode_code(codes.long().reshape(-1, grid, grid)).float())


def codebook_usage(codes: torch.Tensor, codebook_size: int) -> float:
    return torch.unique(codes.long()).numel() / codebook_size
