"""Trains the small Lumina-format model on the scenes, on the clock, in one process:

  scenes (192 px, upscaled 2x) -> caption tokenizer -> VQGAN (Chameleon architecture) -> codes
  -> Chameleon LM (HF ChameleonForConditionalGeneration, Lumina-mGPT sequence layout, CFG dropout)
  -> export in the published layouts -> reload with transformers / the Lightning ckpt
  -> checks (HF logits = training model's, our sampler = HF) -> scorer on VQ round trips and CFG samples.

  python -m tools.train_lumina.pipeline --work /tmp/lumina-train --model-dir /tmp/lumina-train/argen-lumina-scenes-v1

Tiny CPU smoke run (minutes): see tools/train_lumina/smoke.sh. Device run: tools/train_lumina/device_train.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from tokenizers import Tokenizer

from tools.lumina_torch.vqgan import chameleon_params
from tools.scenes.generate import generate
from tools.scenes.grammar import spec_from_metadata
from tools.scenes.layout import scene_from_spec
from tools.scenes.render import render_scene
from tools.scorer.geneval import format_table
from tools.scorer.validate import BENCHMARK, load_metadata
from tools.train.pipeline import pack
from tools.train.sample import grid_png, score_images, spread
from tools.train_lumina import text_tokenizer
from tools.train_lumina.ar_train import build_sequences, train_ar
from tools.train_lumina.export import export, load
from tools.train_lumina.model import build_config, build_model, hidden_logits
from tools.train_lumina.sampler import max_abs_diff_vs_hf, sample_prompts
from tools.train_lumina.vq_train import codebook_usage, decode_codes, encode_all, train_vq

T0 = time.time()


def log(msg: str):
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


@torch.no_grad()
def check_hf_logits(trained, model_dir: str, ids: torch.Tensor) -> dict:
    """The exported LM through transformers' own loader against the (bf16-rounded) training model."""
    from transformers import ChameleonForConditionalGeneration
    hf = ChameleonForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    ref = hidden_logits(trained.float().cpu(), ids.cpu())
    got = hidden_logits(hf, ids.cpu())
    masked = hf(input_ids=ids.cpu(), use_cache=False).logits  # HF's forward masks the image-token columns
    image_ids = sorted(v for k, v in hf.config.vocabulary_map.items() if k.startswith("IMGIMG"))
    keep = torch.ones(masked.shape[-1], dtype=torch.bool)
    keep[image_ids] = False
    rel = float((got - ref).abs().max() / max(1.0, float(ref.abs().max())))
    rel_masked = float((masked[..., keep] - ref[..., keep]).abs().max() / max(1.0, float(ref.abs().max())))
    return {"hf_vs_training_rel": rel, "hf_forward_vs_training_rel_non_image": rel_masked,
            "sampler_vs_hf_rel": max_abs_diff_vs_hf(hf, ids.cpu(), split=ids.shape[1] // 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--scenes", type=int, default=60000)
    ap.add_argument("--scene-seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=330, help="seconds for everything")
    ap.add_argument("--reserve", type=float, default=60, help="seconds kept for export + checks + evaluation")
    ap.add_argument("--scale", type=int, default=2, help="upscaling of the 192 px scenes (2: 384 px images)")
    ap.add_argument("--vq-seconds", type=float, default=90)
    ap.add_argument("--vq-steps", type=int, default=None)
    ap.add_argument("--vq-batch", type=int, default=32)
    ap.add_argument("--vq-crop", type=int, default=192, help="training crop (px) of the upscaled images")
    ap.add_argument("--vq-ch", type=int, default=32)
    ap.add_argument("--vq-ch-mult", default="1,1,2,2,2")
    ap.add_argument("--vq-res-blocks", type=int, default=2)
    ap.add_argument("--vq-z", type=int, default=64)
    ap.add_argument("--vq-embed", type=int, default=8)
    ap.add_argument("--codebook", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--text-vocab", type=int, default=384, help="BPE text tokens after the specials")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--ar-steps", type=int, default=None)
    ap.add_argument("--eval-every", type=int, default=1, help="benchmark subsample: every k-th prompt")
    ap.add_argument("--eval-per-prompt", type=int, default=2)
    ap.add_argument("--sampling", default="4:1:0,3:1:0", help="cfg:temperature:top_k variants, while time lasts")
    ap.add_argument("--pack-to", default=None, help="write the model as a tar split in 15 MiB parts here")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    log(f"device {device} torch {torch.__version__} args {vars(args)}")

    images, scenes = generate(args.scenes, base_seed=args.scene_seed, workers=args.workers,
                              images_path=os.path.join(args.work, "images.u8"))
    captions = [s["caption"] for s in scenes]
    image_size = images.shape[1] * args.scale
    log(f"scenes: {len(scenes)} at {image_size} px; e.g. {captions[:3]}")
    images_t = torch.from_numpy(np.array(images)).to(device)

    units = image_size // text_tokenizer.PATCH_PIXELS
    tok = text_tokenizer.train_tokenizer(captions, args.codebook, max(units, 16), image_size, args.text_vocab)
    tok_dir = os.path.join(args.work, "tokenizer")
    text_tokenizer.save(tok, tok_dir)
    enc = text_tokenizer.PromptEncoder(Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json")))
    vocab_size = (tok.get_vocab_size() + 63) // 64 * 64
    log(f"tokenizer: {tok.get_vocab_size()} tokens (embedding rows {vocab_size}); prompt of '{captions[0]}': "
        f"{enc.encode(captions[0], image_size, image_size)} header {enc.header(image_size, image_size)}")

    ch_mult = tuple(int(v) for v in args.vq_ch_mult.split(","))
    vq_params = chameleon_params(embed_dim=args.vq_embed, n_embed=args.codebook, z_channels=args.vq_z,
                                 resolution=image_size, ch=args.vq_ch, ch_mult=ch_mult,
                                 num_res_blocks=args.vq_res_blocks, attn_resolutions=())
    vq = train_vq(images_t, vq_params, args.vq_seconds, args.scale, min(args.vq_crop, image_size),
                  batch=args.vq_batch, max_steps=args.vq_steps, log=log)
    codes = encode_all(vq, images_t, args.scale, batch=128 if device.type == "cuda" else 8)
    grid = codes.shape[1]
    log(f"tokenized {tuple(codes.shape)}, codebook usage {codebook_usage(codes, args.codebook):.3f}")
    recon = decode_codes(vq, codes[:8].to(device)).cpu().numpy()
    truth = torch.nn.functional.interpolate(images_t[:8].permute(0, 3, 1, 2).float(), scale_factor=args.scale,
                                            mode="nearest").permute(0, 2, 3, 1).to(torch.uint8).cpu().numpy()
    grid_png(np.concatenate([truth, recon]), 8, os.path.join(args.work, "vq_recon.png"))
    mse = float(((recon.astype(np.float32) - truth.astype(np.float32)) ** 2).mean())
    log(f"vq reconstruction PSNR on 8 training images: {10 * np.log10(255 ** 2 / max(mse, 1e-9)):.2f} dB")
    del images_t

    prompts, lengths, responses = build_sequences(captions, codes, enc, image_size)
    log(f"sequences: prompts {int(lengths.min())}..{int(lengths.max())} tokens, response {responses.shape[1]}")
    config = build_config(vocab_size, tok.get_vocab(), vq_params, args.hidden, args.layers, args.heads,
                          args.intermediate, max_positions=max(1024, int(lengths.max()) + responses.shape[1]))
    model = build_model(config).to(device)
    n_params = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("model.vqmodel."))
    log(f"LM params (without model.vqmodel): {n_params / 1e6:.2f} M")
    ar_seconds = args.deadline - (time.time() - T0) - args.reserve
    log(f"AR budget {ar_seconds:.0f}s")
    stats = train_ar(model, prompts.to(device), lengths.to(device), responses.to(device), enc.pad, ar_seconds,
                     batch=args.batch, lr=args.lr, max_steps=args.ar_steps, log=log)
    with open(os.path.join(args.work, "ar_history.json"), "w") as f:
        json.dump(stats, f)

    info = export(args.model_dir, model, vq, vq_params, tok_dir, [(image_size, image_size)])
    log(f"exported {info['files']} ({info['tensor_bytes'] / 1e6:.1f} MB of LM tensors, "
        f"{info['dir_bytes'] / 1e6:.1f} MB in all) -> {args.model_dir}")
    if info["dir_bytes"] > 40 * 1000 * 1000:
        log("WARNING: the model directory is over the 40 MB budget")
    if args.pack_to:
        log(f"packed model into {pack(args.model_dir, args.pack_to)}")

    sample_ids = torch.tensor([enc.encode(captions[0], image_size, image_size) + enc.header(image_size, image_size)
                               + responses[0, 3:3 + grid + 4].tolist()])
    checks = check_hf_logits(model, args.model_dir, sample_ids)
    log(f"published-layout checks: {checks}")
    if checks["hf_vs_training_rel"] > 1e-4 or checks["sampler_vs_hf_rel"] > 1e-4:
        raise SystemExit("the exported LM does not reproduce the training model's logits")
    model, vq, _ = load(args.model_dir, args.device)

    metas = load_metadata(BENCHMARK)[::args.eval_every]
    gt = np.stack([render_scene(scene_from_spec(spec_from_metadata(m), seed=7 + i)) for i, m in enumerate(metas)])
    gt_codes = encode_all(vq, torch.from_numpy(gt).to(device), args.scale, batch=128 if device.type == "cuda" else 8)
    summary, _ = score_images(metas, decode_codes(vq, gt_codes).cpu().numpy(), 1)
    log("scorer on VQ round trips of ground-truth scenes:\n" + format_table(summary))
    results = {"checks": checks, "vq_roundtrip": summary, "samples": {}, "ar": {"steps": stats["steps"]}}
    last = 0.0
    for variant in args.sampling.split(","):
        cfg, temp, top_k = variant.split(":")
        if results["samples"] and time.time() - T0 + last > args.deadline:
            log(f"skipping sampling variant {variant}: no time left")
            continue
        t = time.time()
        imgs = sample_prompts(model, vq, enc, [m["prompt"] for m in metas], args.eval_per_prompt, image_size, grid,
                              float(cfg), float(temp), int(top_k))
        summary, _ = score_images(metas, imgs, args.eval_per_prompt)
        last = time.time() - t
        results["samples"][variant] = dict(summary, images=len(imgs), seconds=round(last, 1))
        log(f"sampling cfg={cfg} temperature={temp} top_k={top_k}: {len(imgs)} images in {last:.0f}s\n"
            + format_table(summary))
        pick = spread(len(imgs), 64)
        grid_png(imgs[pick], 8, os.path.join(args.work, f"samples_{variant.replace(':', '_')}.png"))
        with open(os.path.join(args.work, f"samples_{variant.replace(':', '_')}.txt"), "w") as f:
            f.write("\n".join(metas[i // args.eval_per_prompt]["prompt"] for i in pick) + "\n")
    with open(os.path.join(args.work, "eval.json"), "w") as f:
        json.dump(results, f, indent=1)
    log("done")


if __name__ == "__main__":
    sys.exit(main())
