#!/usr/bin/env python3
"""Writes the tiny NextStep-1 checkpoint and its goldens from the OFFICIAL code.

    .venv/bin/python tools/goldens/make_nextstep_goldens.py /path/to/stepfun-ai/NextStep-1

The NextStep-1 repository (github.com/stepfun-ai/NextStep-1) is imported from
the path given; nothing of it is committed. Its own classes build the models:
nextstep/models/modeling_nextstep.py's NextStep (a tiny NextStepConfig: Qwen2-
style decoder with q/k/v biases, the flow-matching head of
modeling_fm_head.py) and modeling_flux_vae.py's AutoencoderKL (a tiny
AutoEncoderParams). Random weights, seed 0 (the official init zeroes the
head's adaLN and output layers, which would make its goldens vacuous).
The official code needs its own pins (pyproject.toml: transformers 4.49,
diffusers 0.32, huggingface-hub < 1): install them apart and put them first,
e.g. pip install --no-deps --target /tmp/ns-deps transformers==4.49.0
"tokenizers<0.22" "huggingface-hub<1" diffusers==0.32.2 loguru pendulum
omegaconf tabulate einops, then PYTHONPATH=/tmp/ns-deps.

Writes tests/goldens/tiny/tiny-nextstep/:
  config.json          NextStepConfig (model_type "nextstep", the tiny shapes)
  model.safetensors    the NextStep state dict as save_pretrained names it (no prefix)
  vae/config.json      AutoEncoderParams
  vae/checkpoint.pt    torch.save(AutoencoderKL state dict less the encoder), as the hub's VAE ships
  tokenizer.json, tokenizer_config.json, special_tokens_map.json
                       a Qwen2-style byte-level BPE (NFC, Qwen's split) learnt on the benchmark
                       prompts, NextStep's added tokens at config.json's ids
  goldens.json         shapes, sampling settings, file names; "prompts": the cond / uncond ids of
                       NextStepPipeline's _build_captions + tokenizer + _add_prefix_ids
  head_velocity.f32    image_head.net(x, t, c) of VELOCITY_ROWS rows: x, c, t in goldens.json's
                       velocity_* files, out [rows][token_dim]
  head_sample_*.f32    FlowMatchingHead.sample(c = [cond; uncond], cfg, timesteps_shift,
                       num_sampling_steps) with its randn draws recorded (noise [draw][pair][token_dim]),
                       then the pipeline's layer_norm (use_norm): tokens [pair][token_dim]
  vae_tokens.f32       [L][token_dim] tokens of one image (VAE_GRID x VAE_GRID)
  vae_pixels.f32       vae.decode(unpatchify(tokens) / scaling_factor + shift_factor), [3][H][W]
  vae_rgb8             the pipeline's to_pil: ((x / 2 + 0.5).clamp(0, 1) * 255).round() uint8, [H][W][3]
  generate_*           NextStepPipeline.generate_image of CAPTIONS[0] (GENERATE_GRID^2 tokens, cfg,
                       shift, steps, seed in goldens.json "generate"), recorded as it runs: hidden
                       [token][cond, uncond][hidden] (the final-normed last hidden states handed to
                       image_out_projector), noise [token * steps + draw][token_dim] (the head's randn
                       draws), tokens [token][token_dim] (after use_norm), pixels [3][H][W] (the VAE's
                       output) and rgb8 (the returned PIL image)
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "goldens" / "tiny" / "tiny-nextstep"

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS = 64, 128, 2, 4, 2
VOCAB = 320
LATENT_CHANNELS, PATCH = 4, 2
FM_DIM, FM_LAYERS = 32, 2
VAE_CH, VAE_CH_MULT, VAE_RES_BLOCKS = 32, [1, 2], 1
VAE_SCALE, VAE_SHIFT = 0.75, 0.125
VELOCITY_ROWS = 3
SAMPLE_PAIRS, SAMPLE_STEPS, SAMPLE_CFG, SAMPLE_SHIFT = 2, 6, 3.0, 2.0
VAE_GRID = 3
GENERATE_GRID, GENERATE_CFG, GENERATE_SHIFT, GENERATE_STEPS, GENERATE_SEED = 3, 3.0, 1.0, 4, 42
# Qwen2's pre-tokenizer split (its tokenizer.json's Split regex).
QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
# example.py's text-to-image prompts.
POSITIVE = "masterpiece, film grained, best quality."
NEGATIVE = ("lowres, bad anatomy, bad hands, error, missing fingers, extra digit, fewer digits, cropped, worst "
            "quality, low quality, normal quality, jpeg artifacts, signature, watermark, username, blurry.")
CAPTIONS = ["a photo of a red circle", "Two dogs, one café sign (42%) and 7 cats!"]
# Added tokens at fixed ids after the byte-level BPE (as Qwen2's: <|endoftext|> first), NextStep's
# image tokens at the ids config.json names.
SPECIALS = {"<|endoftext|>": VOCAB - 6, "<|image_area|>": VOCAB - 5, "<|begin_of_image|>": VOCAB - 4,
            "<|end_of_image|>": VOCAB - 3, "<|image_placeholder|>": VOCAB - 2, "[PAD]": VOCAB - 1}


def import_official(repo: Path):
    sys.path.insert(0, str(repo))
    # Eager: compile_utils.smart_compile compiles by default, which records nothing of our hooks reliably.
    os.environ["ENABLE_TORCH_COMPILE"] = "false"
    from nextstep.models import modeling_flux_vae, modeling_fm_head
    from nextstep.models.configuration_nextstep import NextStepConfig
    from nextstep.models.modeling_nextstep import NextStep

    # pipeline_nextstep imports torchvision.transforms for its image-editing inputs only: a
    # stand-in, installed after everything that probes for the real package.
    if "torchvision" not in sys.modules:
        tv = types.ModuleType("torchvision")
        tv.__spec__ = importlib.machinery.ModuleSpec("torchvision", None)
        tv.transforms = types.ModuleType("torchvision.transforms")
        tv.transforms.__spec__ = importlib.machinery.ModuleSpec("torchvision.transforms", None)
        for name in ("Compose", "ToTensor", "Normalize"):
            setattr(tv.transforms, name, lambda *args, **kwargs: None)
        sys.modules["torchvision"] = tv
        sys.modules["torchvision.transforms"] = tv.transforms
    from nextstep.models import pipeline_nextstep
    return modeling_fm_head, modeling_flux_vae, pipeline_nextstep, NextStepConfig, NextStep


def write_tokenizer(out: Path) -> None:
    """A Qwen2-style tokenizer.json: NFC, Qwen's Split then ByteLevel, a byte-level BPE learnt on the
    benchmark prompts (VOCAB - 6 tokens), then the added tokens, saved the way transformers saves a
    PreTrainedTokenizerFast (tokenizer_config.json, special_tokens_map.json)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [json.loads(line)["prompt"] for line in (ROOT / "tools" / "sweep" / "benchmark_prompts.jsonl").open()]
    corpus += [POSITIVE, NEGATIVE] + CAPTIONS
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    assert tok.get_vocab_size() == VOCAB - len(SPECIALS), tok.get_vocab_size()
    for content in sorted(SPECIALS, key=SPECIALS.get):
        tok.add_special_tokens([content])
        assert tok.token_to_id(content) == SPECIALS[content], content
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", eos_token="<|endoftext|>",
                                   additional_special_tokens=[t for t in SPECIALS if t.startswith("<|") and
                                                              t != "<|endoftext|>"])
    fast.save_pretrained(str(out))


def official_prompt_rows(pipeline, tokenizer, config, down_factor: int, caption: str, negative: str,
                         hw: tuple[int, int]) -> tuple[list[int], list[int]]:
    """generate_image's steps 2 and 4 (_build_captions, the batch tokenization, _add_prefix_ids) on the
    official pipeline's own methods; each row without its left padding."""
    pipe = types.SimpleNamespace(tokenizer=tokenizer, down_factor=down_factor, boi=config.boi,
                                 model=types.SimpleNamespace(config=config))
    cls = pipeline.NextStepPipeline
    captions, _ = cls._build_captions(pipe, caption, None, 1, POSITIVE, negative, 7.5, 1.0)
    out = tokenizer(captions, padding="longest", truncation=False, add_special_tokens=True, return_tensors="pt")
    ids, mask = cls._add_prefix_ids(pipe, hw, out.input_ids, out.attention_mask)
    return tuple(ids[r][mask[r].bool()].tolist() for r in range(2))


def official_generation(pipeline, fm_head, model, vae, tokenizer, down_factor: int) -> dict:
    """NextStepPipeline.generate_image end to end on the tiny model, recording what it computes per image
    token: the final-normed last hidden states it hands image_out_projector (cond, uncond), the head's
    randn draws and its token (after use_norm), and the VAE's float output."""
    pipe = pipeline.NextStepPipeline(model=model, tokenizer=tokenizer, vae=vae)
    hidden: list[torch.Tensor] = []
    draws: list[torch.Tensor] = []
    tokens: list[torch.Tensor] = []
    pixels: list[torch.Tensor] = []
    projector, in_projector, decode, official_randn = (model.image_out_projector.forward,
                                                        model.image_in_projector.forward, vae.decode,
                                                        fm_head.randn_tensor)

    def record_projector(h):
        hidden.append(h.detach().clone().reshape(h.shape[0], -1))
        return projector(h)

    def record_token(t):  # decoding() feeds each sampled token back through image_in_projector
        tokens.append(t.detach().clone().reshape(-1))
        return in_projector(t)

    def record_randn(shape, noise_repeat, device, dtype=torch.float32):
        out = official_randn(shape, noise_repeat, device, dtype)
        draws.append(out.clone())
        return out

    def record_decode(z, return_dict=True):
        out = decode(z, return_dict)
        pixels.append(out.sample.detach().clone())
        return out

    model.image_out_projector.forward = record_projector
    model.image_in_projector.forward = record_token
    fm_head.randn_tensor = record_randn
    vae.decode = record_decode
    hw = (GENERATE_GRID * down_factor, GENERATE_GRID * down_factor)
    with torch.no_grad():
        images = pipe.generate_image(captions=CAPTIONS[0], num_images_per_caption=1, positive_prompt=POSITIVE,
                                     negative_prompt=NEGATIVE, hw=hw, use_norm=True, cfg=GENERATE_CFG,
                                     timesteps_shift=GENERATE_SHIFT, num_sampling_steps=GENERATE_STEPS,
                                     seed=GENERATE_SEED, progress=False)
    fm_head.randn_tensor = official_randn
    del model.image_out_projector.forward, model.image_in_projector.forward, vae.decode  # the classes' methods again
    steps = GENERATE_GRID * GENERATE_GRID
    assert len(hidden) == steps and len(tokens) == steps, (len(hidden), len(tokens))
    assert len(draws) == steps * GENERATE_STEPS and len(pixels) == 1, (len(draws), len(pixels))
    write_f32(OUT / "generate_tokens.f32", torch.stack(tokens))  # [token][token_dim], after use_norm
    write_f32(OUT / "generate_hidden.f32", torch.stack(hidden))  # [token][row (cond, uncond)][hidden]
    write_f32(OUT / "generate_noise.f32", torch.stack(draws))  # [token * steps + draw][1][token_dim]
    write_f32(OUT / "generate_pixels.f32", pixels[0][0])
    rgb = np.asarray(images[0], dtype=np.uint8)
    (OUT / "generate_rgb8").write_bytes(rgb.tobytes())
    return {"caption": CAPTIONS[0], "negative_prompt": NEGATIVE, "grid": GENERATE_GRID, "cfg": GENERATE_CFG,
            "timesteps_shift": GENERATE_SHIFT, "steps": GENERATE_STEPS, "seed": GENERATE_SEED,
            "hidden": "generate_hidden.f32", "noise": "generate_noise.f32", "tokens": "generate_tokens.f32",
            "pixels": "generate_pixels.f32", "rgb8": "generate_rgb8", "height": rgb.shape[0], "width": rgb.shape[1]}


def randomize(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Every parameter random: norm weights near 1, biases small, the rest N(0, 0.15^2)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if ("norm" in name or "in_ln" in name) and p.dim() == 1 and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.05 * noise)
            else:
                p.copy_(0.15 * noise)


def write_f32(path: Path, t: torch.Tensor) -> None:
    path.write_bytes(t.detach().to(torch.float32).contiguous().numpy().tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path, help="a checkout of github.com/stepfun-ai/NextStep-1")
    args = parser.parse_args()
    fm_head, flux_vae, pipeline, NextStepConfig, NextStep = import_official(args.repo.resolve())
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "vae").mkdir(exist_ok=True)
    write_tokenizer(OUT)

    config = NextStepConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=256, rms_norm_eps=1e-6,
        rope_theta=10000.0, attention_bias=True, o_attention_bias=False, tie_word_embeddings=False,
        latent_channels=LATENT_CHANNELS, latent_patch_size=PATCH, latent_size=VAE_GRID,
        boi=SPECIALS["<|begin_of_image|>"], eoi=SPECIALS["<|end_of_image|>"],
        image_placeholder_id=SPECIALS["<|image_placeholder|>"], pad_token_id=SPECIALS["[PAD]"],
        fm_head_dim=FM_DIM, fm_head_layers=FM_LAYERS, vae_name_or_path="vae", architectures=["NextStep"])
    config._attn_implementation = "eager"
    model = NextStep(config).eval()
    randomize(model, gen)
    config_dict = config.to_dict()
    config_dict.pop("_attn_implementation_autoset", None)
    (OUT / "config.json").write_text(json.dumps(config_dict, indent=2, sort_keys=True) + "\n")
    from safetensors.torch import save_file
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(OUT / "model.safetensors"), metadata={"format": "pt"})

    # The prompt rows, by the official pipeline's code and the tokenizer as it loads it.
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(str(OUT), local_files_only=True, model_max_length=512,
                                              padding_side="left", use_fast=True)
    tokenizer.add_eos_token = False
    down_factor = 2 ** (len(VAE_CH_MULT) - 1) * PATCH
    prompts = []
    for caption, negative, hw in ((CAPTIONS[0], NEGATIVE, (12, 12)), (CAPTIONS[1], "blurry", (8, 12))):
        cond, uncond = official_prompt_rows(pipeline, tokenizer, config, down_factor, caption, negative, hw)
        prompts.append({"caption": caption, "negative_prompt": negative, "grid_h": hw[0] // down_factor,
                        "grid_w": hw[1] // down_factor, "cond": cond, "uncond": uncond})

    head = model.image_head
    token_dim = LATENT_CHANNELS * PATCH * PATCH
    goldens: dict = {"token_dim": token_dim, "cond_dim": HIDDEN, "width": FM_DIM, "blocks": FM_LAYERS,
                     "prompts": prompts}

    # The velocity net alone.
    x = torch.randn(VELOCITY_ROWS, token_dim, generator=gen)
    c = torch.randn(VELOCITY_ROWS, HIDDEN, generator=gen)
    t = 0.37
    with torch.no_grad():
        v = head.net(x, torch.full((VELOCITY_ROWS,), t), c)
    write_f32(OUT / "velocity_x.f32", x)
    write_f32(OUT / "velocity_c.f32", c)
    write_f32(OUT / "head_velocity.f32", v)
    goldens["velocity"] = {"rows": VELOCITY_ROWS, "t": t, "x": "velocity_x.f32", "c": "velocity_c.f32",
                           "out": "head_velocity.f32"}

    # A whole sampled token per pair, the official sampler's randn draws recorded.
    draws: list[torch.Tensor] = []
    official_randn = fm_head.randn_tensor

    def recording_randn(shape, noise_repeat, device, dtype=torch.float32):
        out = official_randn(shape, noise_repeat, device, dtype)
        draws.append(out.clone())
        return out

    fm_head.randn_tensor = recording_randn
    cond = torch.randn(SAMPLE_PAIRS, HIDDEN, generator=gen)
    uncond = torch.randn(SAMPLE_PAIRS, HIDDEN, generator=gen)
    with torch.no_grad():
        tokens = head.sample(c=torch.cat([cond, uncond]), cfg=SAMPLE_CFG, timesteps_shift=SAMPLE_SHIFT,
                             num_sampling_steps=SAMPLE_STEPS, noise_repeat=SAMPLE_PAIRS)
        # pipeline_nextstep.py's use_norm: its layer_norm (no affine, eps 1e-6); the module itself
        # is not imported (its image utilities pull in packages the head does not need).
        normed = torch.nn.functional.layer_norm(tokens, tokens.size()[1:], None, None, 1e-6)
    fm_head.randn_tensor = official_randn
    assert len(draws) == SAMPLE_STEPS, len(draws)
    write_f32(OUT / "head_sample_cond.f32", cond)
    write_f32(OUT / "head_sample_uncond.f32", uncond)
    write_f32(OUT / "head_sample_noise.f32", torch.stack(draws))
    write_f32(OUT / "head_sample_tokens.f32", normed)
    goldens["sample"] = {"pairs": SAMPLE_PAIRS, "steps": SAMPLE_STEPS, "cfg": SAMPLE_CFG,
                         "timesteps_shift": SAMPLE_SHIFT, "last_step_size": 0.04, "normalize": True,
                         "cond": "head_sample_cond.f32", "uncond": "head_sample_uncond.f32",
                         "noise": "head_sample_noise.f32", "tokens": "head_sample_tokens.f32"}

    # The VAE decoder on one image's tokens.
    params = flux_vae.AutoEncoderParams(resolution=VAE_GRID * PATCH * 2 ** (len(VAE_CH_MULT) - 1), ch=VAE_CH,
                                        ch_mult=VAE_CH_MULT, num_res_blocks=VAE_RES_BLOCKS,
                                        z_channels=LATENT_CHANNELS, scaling_factor=VAE_SCALE, shift_factor=VAE_SHIFT)
    vae = flux_vae.AutoencoderKL(params).eval()
    randomize(vae, gen)
    vae_config = {k: getattr(params, k) for k in ("resolution", "in_channels", "ch", "out_ch", "ch_mult",
                                                  "num_res_blocks", "z_channels", "scaling_factor", "shift_factor",
                                                  "deterministic", "encoder_norm", "psz")}
    (OUT / "vae" / "config.json").write_text(json.dumps(vae_config, indent=2, sort_keys=True) + "\n")
    # The decode path only (the hub file also holds the encoder, which argen never reads).
    torch.save({k: v for k, v in vae.state_dict().items() if not k.startswith("encoder.")},
               OUT / "vae" / "checkpoint.pt")
    vae_tokens = torch.randn(1, VAE_GRID * VAE_GRID, token_dim, generator=gen)
    with torch.no_grad():
        latents = model.unpatchify(vae_tokens)
        latents = latents / VAE_SCALE + VAE_SHIFT
        pixels = vae.decode(latents).sample[0]
    rgb = ((pixels / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0)
    write_f32(OUT / "vae_tokens.f32", vae_tokens[0])
    write_f32(OUT / "vae_pixels.f32", pixels)
    (OUT / "vae_rgb8").write_bytes(rgb.contiguous().numpy().tobytes())
    goldens["vae"] = {"grid": VAE_GRID, "height": pixels.shape[1], "width": pixels.shape[2],
                      "tokens": "vae_tokens.f32", "pixels": "vae_pixels.f32", "rgb8": "vae_rgb8"}
    goldens["generate"] = official_generation(pipeline, fm_head, model, vae, tokenizer, down_factor)
    (OUT / "goldens.json").write_text(json.dumps(goldens, indent=2, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
