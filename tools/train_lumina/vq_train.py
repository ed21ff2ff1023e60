"""Trains a small VQGAN of the Chameleon architecture (tools/lumina_torch/vqgan.py) on scene
images: MSE reconstruction + the codebook / commitment terms, no perceptual or GAN losses (flat
colored scenes). Trained on random crops (the model is convolutional; only the middle block
attends, over all positions), with unused codes restarted from encoder outputs.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from tools.lumina_torch.vqgan import VQModel, to_uint8


def to_model_range(batch_u8: torch.Tensor, scale: int) -> torch.Tensor:
    """uint8 [B, H, W, 3] -> float [B, 3, scale*H, scale*W] in [-1, 1] (nearest upsampling)."""
    x = batch_u8.permute(0, 3, 1, 2).float() / 127.5 - 1.0
    return F.interpolate(x, scale_factor=scale, mode="nearest") if scale != 1 else x


def train_vq(images_u8: torch.Tensor, params: dict, seconds: float, scale: int, crop: int, batch: int = 32,
             lr: float = 4e-4, max_steps: int | None = None, restart_every: int = 100, log=print,
             seed: int = 0) -> VQModel:
    device = images_u8.device
    torch.manual_seed(seed)
    vq = VQModel(**params).to(device).train()
    if device.type == "cuda":
        vq = vq.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(vq.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    n, size = images_u8.shape[0], images_u8.shape[1] * scale
    use_amp = device.type == "cuda"
    n_e = params["n_embed"]
    usage = torch.zeros(n_e, device=device)
    t0, step = time.time(), 0
    while True:
        elapsed = time.time() - t0
        if elapsed > seconds or (max_steps is not None and step >= max_steps):
            break
        frac = min(elapsed / seconds, 1.0)
        for g in opt.param_groups:  # warm-up, cosine to 10% on the clock
            g["lr"] = lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        idx = torch.randint(0, n, (batch,), device=device)
        x = to_model_range(images_u8[idx], scale)
        if crop < size:
            oy, ox = (int(v) for v in torch.randint(0, (size - crop) // 16 + 1, (2,)) * 16)
            x = x[:, :, oy:oy + crop, ox:ox + crop]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            rec, q_loss, codes = vq(x.contiguous(memory_format=torch.channels_last) if use_amp else x)
        rec_loss = F.mse_loss(rec.float(), x)
        loss = rec_loss + q_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vq.parameters(), 1.0)
        opt.step()
        usage += torch.bincount(codes.flatten(), minlength=n_e).float()
        if restart_every and step % restart_every == restart_every - 1 and frac < 0.8:
            dead = (usage == 0).nonzero().flatten()
            if dead.numel():
                with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                    z = vq.quant_conv(vq.encoder(x)).float().permute(0, 2, 3, 1).reshape(-1, params["embed_dim"])
                pick = torch.randint(0, z.shape[0], (dead.numel(),), device=device)
                vq.quantize.embedding.weight.data[dead] = z[pick] + 0.01 * torch.randn_like(z[pick])
            usage.zero_()
        if step % 200 == 0:
            log(f"vq step {step} t={elapsed:.0f}s rec_mse={rec_loss.item():.5f} q={q_loss.item():.4f}")
        step += 1
    log(f"vq done: {step} steps in {time.time() - t0:.0f}s")
    return vq.eval()


@torch.no_grad()
def encode_all(vq: VQModel, images_u8: torch.Tensor, scale: int, batch: int = 64) -> torch.Tensor:
    """-> codes [N, h, w] int16 (row-major)."""
    out = []
    use_amp = images_u8.device.type == "cuda"
    for i in range(0, images_u8.shape[0], batch):
        x = to_model_range(images_u8[i:i + batch], scale)
        with torch.autocast(images_u8.device.type, dtype=torch.bfloat16, enabled=use_amp):
            _, _, codes = vq.encode(x)
        out.append(codes.to(torch.int16))
    return torch.cat(out)


@torch.no_grad()
def decode_codes(vq: VQModel, codes: torch.Tensor, batch: int = 64) -> torch.Tensor:
    """codes [B, h, w] -> uint8 [B, 16h, 16w, 3] (Chameleon's pixel conversion)."""
    out = []
    use_amp = codes.device.type == "cuda"
    for i in range(0, codes.shape[0], batch):
        with torch.autocast(codes.device.type, dtype=torch.bfloat16, enabled=use_amp):
            px = vq.decode_code(codes[i:i + batch].long())
        out.append(to_uint8(px.float()))
    return torch.cat(out)


def codebook_usage(codes: torch.Tensor, n_e: int) -> float:
    return torch.unique(codes.long()).numel() / n_e
