"""The LlamaGen VQ-16 image tokenizer as Janus-Pro uses it (gen_vision_model).

Written for argen's development tooling (goldens, training our own tokenizer):
the architecture and the state_dict names match janus/models/vq_model.py of
deepseek-ai/Janus (= LlamaGen tokenizer/tokenizer_image/vq_model.py), so the
official weights load with `strict=True` once the `gen_vision_model.` prefix
is stripped (see `load_from_janus_state_dict`). Unlike the official class, the
widths are constructor parameters so tiny models share the code.

Layout (decoder, which the C++ engine reimplements in engine/vq/):
  indices -> codebook row (l2-normalised when codebook_l2_norm) -> NCHW
  -> post_quant_conv (1x1, embed_dim -> z_channels)
  -> decoder.conv_in (3x3, z_channels -> ch*ch_mult[-1])
  -> decoder.mid = [ResnetBlock, AttnBlock, ResnetBlock]
  -> decoder.conv_blocks[i] for i_level = last..0: num_res_blocks+1 ResnetBlocks
     (each followed by an AttnBlock at the lowest resolution, i.e. the first
     conv_block), then an Upsample (nearest x2 + 3x3 conv) except after the last
  -> norm_out (GroupNorm) -> swish -> conv_out (3x3 -> 3): pixels in about [-1, 1].
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

# The official quantizer registers a usage counter of this fixed length as a
# buffer; it is part of the state_dict (quantize.codebook_used).
CODEBOOK_USED_LEN = 65536
GROUP_NORM_EPS = 1e-6


def swish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


def group_norm(channels: int, num_groups: int = 32) -> nn.GroupNorm:
    return nn.GroupNorm(num_groups=num_groups, num_channels=channels, eps=GROUP_NORM_EPS, affine=True)


def conv3x3(cin: int, cout: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=1, padding=1)


def conv1x1(cin: int, cout: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, stride=1, padding=0)


class ResnetBlock(nn.Module):
    """norm1-swish-conv1-norm2-swish-dropout-conv2 plus a 1x1 nin_shortcut when widths differ."""

    def __init__(self, in_channels: int, out_channels: int, dropout: float = 0.0, num_groups: int = 32):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.norm1 = group_norm(in_channels, num_groups)
        self.conv1 = conv3x3(in_channels, out_channels)
        self.norm2 = group_norm(out_channels, num_groups)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = conv3x3(out_channels, out_channels)
        if in_channels != out_channels:
            self.nin_shortcut = conv1x1(in_channels, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(swish(self.norm1(x)))
        h = self.conv2(self.dropout(swish(self.norm2(h))))
        skip = self.nin_shortcut(x) if self.in_channels != self.out_channels else x
        return skip + h


class AttnBlock(nn.Module):
    """Single-head self-attention over the h*w positions, width = channels, residual."""

    def __init__(self, channels: int, num_groups: int = 32):
        super().__init__()
        self.norm = group_norm(channels, num_groups)
        self.q = conv1x1(channels, channels)
        self.k = conv1x1(channels, channels)
        self.v = conv1x1(channels, channels)
        self.proj_out = conv1x1(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, hh, ww = x.shape
        n = self.norm(x)
        q = self.q(n).reshape(b, c, hh * ww).transpose(1, 2)  # b, hw, c
        k = self.k(n).reshape(b, c, hh * ww)                  # b, c, hw
        v = self.v(n).reshape(b, c, hh * ww)                  # b, c, hw
        scores = torch.softmax(torch.bmm(q, k) * (float(c) ** -0.5), dim=2)  # [query, key]
        out = torch.bmm(v, scores.transpose(1, 2)).reshape(b, c, hh, ww)
        return x + self.proj_out(out)


class Upsample(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = conv3x3(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Downsample(nn.Module):
    """Stride-2 3x3 conv after padding one zero row/column at the bottom/right."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, stride=2, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 0, 1), mode="constant", value=0.0))


class Encoder(nn.Module):
    def __init__(self, in_channels: int = 3, ch: int = 128, ch_mult: Sequence[int] = (1, 1, 2, 2, 4),
                 num_res_blocks: int = 2, dropout: float = 0.0, z_channels: int = 256, num_groups: int = 32):
        super().__init__()
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        self.conv_in = conv3x3(in_channels, ch)
        self.conv_blocks = nn.ModuleList()
        width = ch
        for level, mult in enumerate(ch_mult):
            block = nn.Module()
            block.res = nn.ModuleList()
            block.attn = nn.ModuleList()
            for _ in range(num_res_blocks):
                block.res.append(ResnetBlock(width, ch * mult, dropout, num_groups))
                width = ch * mult
                if level == self.num_resolutions - 1:
                    block.attn.append(AttnBlock(width, num_groups))
            if level != self.num_resolutions - 1:
                block.downsample = Downsample(width)
            self.conv_blocks.append(block)
        self.mid = nn.ModuleList([
            ResnetBlock(width, width, dropout, num_groups),
            AttnBlock(width, num_groups),
            ResnetBlock(width, width, dropout, num_groups),
        ])
        self.norm_out = group_norm(width, num_groups)
        self.conv_out = conv3x3(width, z_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for level, block in enumerate(self.conv_blocks):
            for i in range(self.num_res_blocks):
                h = block.res[i](h)
                if len(block.attn) > 0:
                    h = block.attn[i](h)
            if level != self.num_resolutions - 1:
                h = block.downsample(h)
        for layer in self.mid:
            h = layer(h)
        return self.conv_out(swish(self.norm_out(h)))


class Decoder(nn.Module):
    def __init__(self, z_channels: int = 256, ch: int = 128, ch_mult: Sequence[int] = (1, 1, 2, 2, 4),
                 num_res_blocks: int = 2, dropout: float = 0.0, out_channels: int = 3, num_groups: int = 32):
        super().__init__()
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        width = ch * ch_mult[-1]
        self.conv_in = conv3x3(z_channels, width)
        self.mid = nn.ModuleList([
            ResnetBlock(width, width, dropout, num_groups),
            AttnBlock(width, num_groups),
            ResnetBlock(width, width, dropout, num_groups),
        ])
        self.conv_blocks = nn.ModuleList()
        # conv_blocks[0] is the lowest resolution (ch_mult[-1]); the attention
        # blocks live there, like the official code.
        for level in reversed(range(self.num_resolutions)):
            block = nn.Module()
            block.res = nn.ModuleList()
            block.attn = nn.ModuleList()
            for _ in range(num_res_blocks + 1):
                block.res.append(ResnetBlock(width, ch * ch_mult[level], dropout, num_groups))
                width = ch * ch_mult[level]
                if level == self.num_resolutions - 1:
                    block.attn.append(AttnBlock(width, num_groups))
            if level != 0:
                block.upsample = Upsample(width)
            self.conv_blocks.append(block)
        self.norm_out = group_norm(width, num_groups)
        self.conv_out = conv3x3(width, out_channels)

    @property
    def last_layer(self) -> torch.Tensor:
        return self.conv_out.weight

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(z)
        for layer in self.mid:
            h = layer(h)
        for i_block, block in enumerate(self.conv_blocks):
            for i in range(self.num_res_blocks + 1):
                h = block.res[i](h)
                if len(block.attn) > 0:
                    h = block.attn[i](h)
            if i_block != self.num_resolutions - 1:
                h = block.upsample(h)
        return self.conv_out(swish(self.norm_out(h)))


def entropy_loss(affinity: torch.Tensor, temperature: float = 0.01) -> torch.Tensor:
    """Per-sample entropy minus batch-average entropy of softmax(affinity / T) (LlamaGen's codebook-usage term)."""
    logits = affinity.reshape(-1, affinity.shape[-1]) / temperature
    probs = torch.softmax(logits, dim=-1)
    log_probs = torch.log_softmax(logits + 1e-5, dim=-1)
    mean_probs = probs.mean(dim=0)
    avg_entropy = -(mean_probs * torch.log(mean_probs + 1e-5)).sum()
    sample_entropy = -(probs * log_probs).sum(dim=-1).mean()
    return sample_entropy - avg_entropy


class VectorQuantizer(nn.Module):
    def __init__(self, n_e: int, e_dim: int, beta: float = 0.25, entropy_loss_ratio: float = 0.0,
                 l2_norm: bool = True, show_usage: bool = True):
        super().__init__()
        self.n_e = n_e
        self.e_dim = e_dim
        self.beta = beta
        self.entropy_loss_ratio = entropy_loss_ratio
        self.l2_norm = l2_norm
        self.show_usage = show_usage
        self.embedding = nn.Embedding(n_e, e_dim)
        with torch.no_grad():
            self.embedding.weight.uniform_(-1.0 / n_e, 1.0 / n_e)
            if l2_norm:
                self.embedding.weight.copy_(F.normalize(self.embedding.weight, p=2, dim=-1))
        if show_usage:
            self.register_buffer("codebook_used", torch.zeros(CODEBOOK_USED_LEN))

    def codebook(self) -> torch.Tensor:
        """The lookup table as used: rows l2-normalised when l2_norm."""
        w = self.embedding.weight
        return F.normalize(w, p=2, dim=-1) if self.l2_norm else w

    def forward(self, z: torch.Tensor):
        """z: (b, e_dim, h, w). Returns (z_q straight-through, (vq, commit, entropy) losses or Nones, indices (b*h*w,))."""
        # Nearest-code search in float32 even under autocast: bf16 distances
        # would pick wrong codes. (Identical to the official code in float32.)
        with torch.autocast(device_type=z.device.type, enabled=False):
            z = z.float().permute(0, 2, 3, 1).contiguous()  # b h w c
            flat = z.reshape(-1, self.e_dim)
            table = self.codebook().float()
            if self.l2_norm:
                z = F.normalize(z, p=2, dim=-1)
                flat = F.normalize(flat, p=2, dim=-1)
            dist = (flat.pow(2).sum(dim=1, keepdim=True) + table.pow(2).sum(dim=1)
                    - 2.0 * flat @ table.t())
        indices = torch.argmin(dist, dim=1)
        z_q = table[indices].view(z.shape)
        vq_loss = commit_loss = ent_loss = None
        if self.training:
            vq_loss = torch.mean((z_q - z.detach()) ** 2)
            commit_loss = self.beta * torch.mean((z_q.detach() - z) ** 2)
            ent_loss = self.entropy_loss_ratio * entropy_loss(-dist)
        z_q = z + (z_q - z).detach()
        return z_q.permute(0, 3, 1, 2), (vq_loss, commit_loss, ent_loss), indices

    def get_codebook_entry(self, indices: torch.Tensor, shape: Optional[Sequence[int]] = None,
                           channel_first: bool = True) -> torch.Tensor:
        """indices (any shape) -> rows; with shape (b, c, h, w) (channel_first) returns NCHW."""
        z_q = self.codebook()[indices.reshape(-1)]
        if shape is None:
            return z_q.reshape(*indices.shape, self.e_dim)
        if channel_first:
            b, c, hh, ww = shape
            return z_q.reshape(b, hh, ww, c).permute(0, 3, 1, 2).contiguous()
        return z_q.view(*shape)


class VQModel(nn.Module):
    """VQ-16 with configurable widths. Defaults are the official Janus-Pro gen_vision_model."""

    def __init__(self, codebook_size: int = 16384, codebook_embed_dim: int = 8, codebook_l2_norm: bool = True,
                 ch: int = 128, ch_mult: Sequence[int] = (1, 1, 2, 2, 4), z_channels: int = 256,
                 num_res_blocks: int = 2, dropout: float = 0.0, codebook_show_usage: bool = True,
                 commit_loss_beta: float = 0.25, entropy_loss_ratio: float = 0.0, num_groups: int = 32):
        super().__init__()
        self.codebook_size = codebook_size
        self.codebook_embed_dim = codebook_embed_dim
        self.ch_mult = list(ch_mult)
        self.downsample = 2 ** (len(self.ch_mult) - 1)
        self.encoder = Encoder(3, ch, ch_mult, num_res_blocks, dropout, z_channels, num_groups)
        self.decoder = Decoder(z_channels, ch, ch_mult, num_res_blocks, dropout, 3, num_groups)
        self.quantize = VectorQuantizer(codebook_size, codebook_embed_dim, commit_loss_beta,
                                        entropy_loss_ratio, codebook_l2_norm, codebook_show_usage)
        self.quant_conv = conv1x1(z_channels, codebook_embed_dim)
        self.post_quant_conv = conv1x1(codebook_embed_dim, z_channels)

    # --- encoding -----------------------------------------------------------
    def encode_with_losses(self, images: torch.Tensor):
        """images (b, 3, H, W) in [-1, 1] -> (quant NCHW, (vq, commit, entropy) losses, indices (b, h, w))."""
        h = self.quant_conv(self.encoder(images))
        quant, losses, indices = self.quantize(h)
        b, _, hh, ww = h.shape
        return quant, losses, indices.view(b, hh, ww)

    def encode(self, images: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """images (b, 3, H, W) in [-1, 1] -> (quant (b, e_dim, h, w), indices (b, h, w) int64)."""
        quant, _, indices = self.encode_with_losses(images)
        return quant, indices

    # --- decoding -----------------------------------------------------------
    def decode(self, quant: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.post_quant_conv(quant))

    def decode_code(self, indices: torch.Tensor, shape: Optional[Sequence[int]] = None) -> torch.Tensor:
        """indices (b, h, w) or flat with shape=(b, e_dim, h, w) -> images (b, 3, 16h, 16w), nominally in [-1, 1].

        Not clamped (the official decoder isn't either); see `to_uint8` for the official pixel conversion.
        """
        if shape is None:
            if indices.dim() != 3:
                raise ValueError("decode_code: indices must be (b, h, w) when shape is not given")
            b, hh, ww = indices.shape
            shape = (b, self.codebook_embed_dim, hh, ww)
        return self.decode(self.quantize.get_codebook_entry(indices, shape, channel_first=True))

    def forward(self, images: torch.Tensor):
        """Reconstruction for training: (decoded images, (vq, commit, entropy) losses)."""
        quant, losses, _ = self.encode_with_losses(images)
        return self.decode(quant), losses


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """(b, 3, H, W) floats -> (b, H, W, 3) uint8 as the official Janus script does:
    clip((x + 1) / 2 * 255, 0, 255) then truncation toward zero (numpy float -> uint8 assignment)."""
    x = images.detach().float().permute(0, 2, 3, 1)
    return torch.clamp((x + 1.0) / 2.0 * 255.0, 0.0, 255.0).to(torch.uint8)


JANUS_PREFIX = "gen_vision_model."


def strip_janus_prefix(state: Dict[str, torch.Tensor], prefix: str = JANUS_PREFIX) -> Dict[str, torch.Tensor]:
    """Keeps the tensors under `prefix` (the Janus checkpoint's gen_vision_model.) with the prefix removed."""
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def load_from_janus_state_dict(model: VQModel, state: Dict[str, torch.Tensor], strict: bool = True):
    """Loads gen_vision_model.* tensors (any dtype) into `model` as float32."""
    sub = {k: v.float() for k, v in strip_janus_prefix(state).items()}
    return model.load_state_dict(sub, strict=strict)


def vq16_official(**overrides) -> VQModel:
    """The Janus-Pro gen_vision_model configuration (VQ-16, 16384 x 8 codebook)."""
    return VQModel(**overrides)


__all__: List[str] = [
    "AttnBlock", "Decoder", "Downsample", "Encoder", "ResnetBlock", "Upsample", "VQModel", "VectorQuantizer",
    "JANUS_PREFIX", "load_from_janus_state_dict", "strip_janus_prefix", "to_uint8", "vq16_official",
]
