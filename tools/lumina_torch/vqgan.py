"""Meta's Chameleon VQGAN (the image tokenizer Lumina-mGPT uses), restated in PyTorch.

Written for argen's tooling (goldens, training a small tokenizer of the same
architecture). Module names, shapes and arithmetic follow
facebookresearch/chameleon chameleon/inference/vqgan.py (a trimmed copy of
taming-transformers' VQModel), so its vqgan.ckpt `state_dict` loads here and
ours loads there; `python -m tools.lumina_torch.check_vqgan --reference <chameleon
checkout>` compares the two module by module. Widths are constructor
parameters so small models share the code. docs/lumina-mgpt.md lists the facts.

Decoder (what engine/vqgan/ reimplements):
  codes [h, w] (raster order) -> quantize.embedding rows -> NCHW latent (embed_dim)
  -> post_quant_conv (1x1, embed_dim -> z_channels)
  -> decoder.conv_in (3x3, z_channels -> ch * ch_mult[-1])
  -> decoder.mid.block_1, decoder.mid.attn_1, decoder.mid.block_2
  -> for level = L-1 .. 0: decoder.up[level].block[0..num_res_blocks] (ResnetBlocks to
     ch * ch_mult[level]), each followed by decoder.up[level].attn[j] when the level's
     resolution (resolution / 2**level) is in attn_resolutions; then, except at level 0,
     decoder.up[level].upsample.conv after nearest x2
  -> decoder.norm_out (GroupNorm 32) -> swish -> decoder.conv_out (3x3 -> out_ch)
  (-> tanh when tanh_out). Pixels: clamp to [-1, 1], (x + 1) / 2 * 255, truncated to uint8.
ResnetBlock: norm1-swish-conv1-norm2-swish-dropout-conv2 (+ 1x1 nin_shortcut when widths
differ); no timestep projection (temb_channels 0). AttnBlock: single head over the h*w
positions, width = channels, scale channels**-0.5, residual. GroupNorm: 32 groups, eps 1e-6.
"""

from __future__ import annotations

from typing import Dict, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

GROUP_NORM_GROUPS = 32
GROUP_NORM_EPS = 1e-6


def swish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


def normalize(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(GROUP_NORM_GROUPS, channels, eps=GROUP_NORM_EPS, affine=True)


class ResnetBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, dropout: float = 0.0):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.norm1 = normalize(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, 1, 1)
        self.norm2 = normalize(out_channels)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1)
        if in_channels != out_channels:
            self.nin_shortcut = nn.Conv2d(in_channels, out_channels, 1, 1, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(swish(self.norm1(x)))
        h = self.conv2(self.dropout(swish(self.norm2(h))))
        return (self.nin_shortcut(x) if self.in_channels != self.out_channels else x) + h


class AttnBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.norm = normalize(channels)
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)
        self.proj_out = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        b, c, hh, ww = x.shape
        q = self.q(h).reshape(b, c, hh * ww).transpose(1, 2)   # [b, n, c]
        k = self.k(h).reshape(b, c, hh * ww)                    # [b, c, n]
        v = self.v(h).reshape(b, c, hh * ww)                    # [b, c, n]
        weights = torch.softmax(torch.bmm(q, k) * (c ** -0.5), dim=2)  # [b, n_query, n_key]
        out = torch.bmm(v, weights.transpose(1, 2)).reshape(b, c, hh, ww)
        return x + self.proj_out(out)


class Upsample(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Downsample(nn.Module):
    """Stride-2 3x3 conv after zero padding one row / column at the bottom / right."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, 2, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 0, 1), mode="constant", value=0.0))


class Encoder(nn.Module):
    def __init__(self, *, ch: int, ch_mult: Sequence[int], num_res_blocks: int, attn_resolutions: Sequence[int],
                 in_channels: int, resolution: int, z_channels: int, double_z: bool = False, dropout: float = 0.0,
                 **_ignored):
        super().__init__()
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        self.conv_in = nn.Conv2d(in_channels, ch, 3, 1, 1)
        in_mult = (1,) + tuple(ch_mult)
        res = resolution
        self.down = nn.ModuleList()
        for level in range(self.num_resolutions):
            level_module = nn.Module()
            level_module.block, level_module.attn = nn.ModuleList(), nn.ModuleList()
            width_in, width = ch * in_mult[level], ch * ch_mult[level]
            for _ in range(num_res_blocks):
                level_module.block.append(ResnetBlock(width_in, width, dropout))
                width_in = width
                if res in attn_resolutions:
                    level_module.attn.append(AttnBlock(width))
            if level != self.num_resolutions - 1:
                level_module.downsample = Downsample(width)
                res //= 2
            self.down.append(level_module)
        self.mid = nn.Module()
        self.mid.block_1 = ResnetBlock(width, width, dropout)
        self.mid.attn_1 = AttnBlock(width)
        self.mid.block_2 = ResnetBlock(width, width, dropout)
        self.norm_out = normalize(width)
        self.conv_out = nn.Conv2d(width, 2 * z_channels if double_z else z_channels, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for level in range(self.num_resolutions):
            down = self.down[level]
            for j in range(self.num_res_blocks):
                h = down.block[j](h)
                if len(down.attn) > 0:
                    h = down.attn[j](h)
            if level != self.num_resolutions - 1:
                h = down.downsample(h)
        h = self.mid.block_2(self.mid.attn_1(self.mid.block_1(h)))
        return self.conv_out(swish(self.norm_out(h)))


class Decoder(nn.Module):
    def __init__(self, *, ch: int, out_ch: int, ch_mult: Sequence[int], num_res_blocks: int,
                 attn_resolutions: Sequence[int], resolution: int, z_channels: int, dropout: float = 0.0,
                 tanh_out: bool = False, **_ignored):
        super().__init__()
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        self.tanh_out = tanh_out
        width = ch * ch_mult[-1]
        res = resolution // 2 ** (self.num_resolutions - 1)
        self.conv_in = nn.Conv2d(z_channels, width, 3, 1, 1)
        self.mid = nn.Module()
        self.mid.block_1 = ResnetBlock(width, width, dropout)
        self.mid.attn_1 = AttnBlock(width)
        self.mid.block_2 = ResnetBlock(width, width, dropout)
        levels = [None] * self.num_resolutions
        for level in reversed(range(self.num_resolutions)):
            level_module = nn.Module()
            level_module.block, level_module.attn = nn.ModuleList(), nn.ModuleList()
            out = ch * ch_mult[level]
            for _ in range(num_res_blocks + 1):
                level_module.block.append(ResnetBlock(width, out, dropout))
                width = out
                if res in attn_resolutions:
                    level_module.attn.append(AttnBlock(width))
            if level != 0:
                level_module.upsample = Upsample(width)
                res *= 2
            levels[level] = level_module
        self.up = nn.ModuleList(levels)  # indexed by level: up[0] is the full-resolution one
        self.norm_out = normalize(width)
        self.conv_out = nn.Conv2d(width, out_ch, 3, 1, 1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.mid.block_2(self.mid.attn_1(self.mid.block_1(self.conv_in(z))))
        for level in reversed(range(self.num_resolutions)):
            up = self.up[level]
            for j in range(self.num_res_blocks + 1):
                h = up.block[j](h)
                if len(up.attn) > 0:
                    h = up.attn[j](h)
            if level != 0:
                h = up.upsample(h)
        h = self.conv_out(swish(self.norm_out(h)))
        return torch.tanh(h) if self.tanh_out else h


class VectorQuantizer(nn.Module):
    """Nearest-codebook-row quantizer (no normalisation), straight-through gradients and the
    'legacy' loss of taming's VectorQuantizer2: mean((zq.detach() - z)^2) + beta * mean((zq - z.detach())^2)."""

    def __init__(self, n_e: int, e_dim: int, beta: float = 0.25):
        super().__init__()
        self.n_e, self.e_dim, self.beta = n_e, e_dim, beta
        self.embedding = nn.Embedding(n_e, e_dim)
        self.embedding.weight.data.uniform_(-1.0 / n_e, 1.0 / n_e)

    def forward(self, z: torch.Tensor):
        """z [b, e, h, w] -> (z_q [b, e, h, w], loss, codes [b, h, w])."""
        zf = z.permute(0, 2, 3, 1).reshape(-1, self.e_dim)
        w = self.embedding.weight
        d = zf.pow(2).sum(1, keepdim=True) + w.pow(2).sum(1) - 2 * zf @ w.t()
        codes = d.argmin(1)
        zq = self.embedding(codes).view(z.shape[0], z.shape[2], z.shape[3], self.e_dim).permute(0, 3, 1, 2)
        loss = torch.mean((zq.detach() - z) ** 2) + self.beta * torch.mean((zq - z.detach()) ** 2)
        zq = z + (zq - z).detach()
        return zq, loss, codes.view(z.shape[0], z.shape[2], z.shape[3])

    def get_codebook_entry(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [b, h, w] -> latents [b, e, h, w]."""
        return self.embedding(codes).permute(0, 3, 1, 2).contiguous()


class VQModel(nn.Module):
    def __init__(self, ddconfig: Dict, n_embed: int, embed_dim: int, **_ignored):
        super().__init__()
        self.ddconfig = dict(ddconfig)
        self.encoder = Encoder(**ddconfig)
        self.decoder = Decoder(**ddconfig)
        self.quantize = VectorQuantizer(n_embed, embed_dim, beta=0.25)
        self.quant_conv = nn.Conv2d(ddconfig["z_channels"], embed_dim, 1)
        self.post_quant_conv = nn.Conv2d(embed_dim, ddconfig["z_channels"], 1)

    @property
    def downsample(self) -> int:
        return 2 ** (len(self.ddconfig["ch_mult"]) - 1)

    def encode(self, x: torch.Tensor):
        """images [b, 3, H, W] in [-1, 1] -> (z_q, codebook loss, codes [b, H/16, W/16])."""
        return self.quantize(self.quant_conv(self.encoder(x)))

    def decode(self, zq: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.post_quant_conv(zq))

    def decode_code(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [b, h, w] (int64) -> pixels [b, out_ch, 16h, 16w], nominally in [-1, 1]."""
        return self.decode(self.quantize.get_codebook_entry(codes))

    def forward(self, x: torch.Tensor):
        zq, loss, codes = self.encode(x)
        return self.decode(zq), loss, codes


def to_uint8(pixels: torch.Tensor) -> torch.Tensor:
    """[b, 3, H, W] floats -> [b, H, W, 3] uint8 as Chameleon's _pil_from_chw_tensor:
    clamp to [-1, 1], (x + 1) / 2, times 255, truncated (numpy astype)."""
    x = (torch.clamp(pixels.detach().float(), -1.0, 1.0) + 1.0) / 2.0
    return (x.permute(0, 2, 3, 1) * 255.0).to(torch.uint8)


# --- vqgan.yaml and the Lightning checkpoint --------------------------------------------

DDCONFIG_KEYS = ("double_z", "z_channels", "resolution", "in_channels", "out_ch", "ch", "ch_mult",
                 "num_res_blocks", "attn_resolutions", "dropout")


def chameleon_params(embed_dim=256, n_embed=8192, z_channels=256, resolution=512, ch=128, ch_mult=(1, 1, 2, 2, 4),
                     num_res_blocks=2, attn_resolutions=(), dropout=0.0) -> Dict:
    """model.params of a vqgan.yaml; the defaults are the published Chameleon tokenizer's."""
    return {
        "embed_dim": embed_dim, "n_embed": n_embed,
        "ddconfig": {"double_z": False, "z_channels": z_channels, "resolution": resolution, "in_channels": 3,
                     "out_ch": 3, "ch": ch, "ch_mult": list(ch_mult), "num_res_blocks": num_res_blocks,
                     "attn_resolutions": list(attn_resolutions), "dropout": dropout},
    }


def write_yaml(path: str, params: Dict, ckpt_name: str = "vqgan.ckpt") -> None:
    """A vqgan.yaml in taming's layout (model.target / model.params with ddconfig); the loss
    section is a placeholder: inference code (Chameleon's ImageTokenizer, HF's converter) drops it."""
    import yaml
    doc = {"model": {"base_learning_rate": 4.5e-06, "target": "taming.models.vqgan.VQModel",
                     "params": dict(params, ckpt_path=ckpt_name, lossconfig={"target": "torch.nn.Identity"})}}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f, sort_keys=False)


def read_yaml(path: str) -> Dict:
    import yaml
    with open(path, encoding="utf-8") as f:
        params = dict(yaml.safe_load(f)["model"]["params"])
    params.pop("lossconfig", None)
    params.pop("ckpt_path", None)
    return params


def save_lightning_ckpt(path: str, model: VQModel, global_step: int = 0) -> None:
    """torch.save of a PyTorch-Lightning-style checkpoint dict: the weights under 'state_dict'
    with the module names above (float32), plus the bookkeeping keys Lightning writes."""
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    torch.save({"epoch": 0, "global_step": global_step, "pytorch-lightning_version": "1.9.0",
                "state_dict": state, "optimizer_states": [], "lr_schedulers": []}, path)


def load(yaml_path: str, ckpt_path: str, device: str = "cpu") -> VQModel:
    """vqgan.yaml + vqgan.ckpt -> VQModel (float32). Keys outside the model (a training loss's
    discriminator, 'loss.*') are ignored as Chameleon's loader does; missing model keys are errors."""
    params = read_yaml(yaml_path)
    model = VQModel(**params)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=True)["state_dict"]
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    if missing:
        raise RuntimeError(f"{ckpt_path}: missing tensors {missing[:8]}{'...' if len(missing) > 8 else ''}")
    model.load_state_dict({k: state[k].float() for k in own}, strict=True)
    return model.to(device).eval()
