"""The whole training run, on the clock, in one process (made for one 10-minute device call):

  scenes -> caption tokenizer -> VQ training -> tokenizing -> AR training (CFG dropout)
  -> export (official layout) -> reload from disk -> CFG sampling on the benchmark -> scorer.

  python -m tools.train.pipeline --work /tmp/argen-train --model-dir models/argen-scenes-v1 \
      --scenes 80000 --vq-seconds 110 --deadline 540

Every phase has a time budget; AR training gets whatever the deadline leaves after reserving
time for export and evaluation. Tiny CPU smoke test: see docs/model.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tarfile
import time

import numpy as np
import torch
from tokenizers import Tokenizer

from tools.scenes.generate import generate
from tools.scenes.grammar import spec_from_metadata
from tools.scenes.layout import scene_from_spec
from tools.scenes.render import render_scene
from tools.scorer.geneval import format_table
from tools.scorer.validate import BENCHMARK, load_metadata
from tools.train.ar_model import JanusGen
from tools.train.ar_train import build_sequences, train_ar
from tools.train.export import export, load, load_vq
from tools.train.sample import grid_png, sample_prompts, score_images, spread
from tools.train.text_tokenizer import JANUS_SYSTEM_PROMPT, SYSTEM_PROMPT_KEY, PromptEncoder, train_tokenizer
from tools.train.vq_train import codebook_usage, decode_codes, encode_all, train_vq

T0 = time.time()


def log(msg: str):
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def pack(model_dir: str, out_dir: str, part_bytes: int = 15 * 1024 * 1024) -> list[str]:
    """Tar of model_dir split into parts (reassemble: cat model.tar.part* | tar -x)."""
    os.makedirs(out_dir, exist_ok=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(model_dir, arcname=os.path.basename(os.path.normpath(model_dir)))
    data = buf.getvalue()
    names = []
    for k in range(0, len(data), part_bytes):
        name = os.path.join(out_dir, f"model.tar.part{k // part_bytes:02d}")
        with open(name, "wb") as f:
            f.write(data[k:k + part_bytes])
        names.append(name)
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="scratch folder (images memmap, logs)")
    ap.add_argument("--model-dir", required=True, help="where the exported checkpoint goes")
    ap.add_argument("--scenes", type=int, default=80000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=540, help="seconds for everything")
    ap.add_argument("--vq-seconds", type=float, default=110)
    ap.add_argument("--vq-steps", type=int, default=None)
    ap.add_argument("--vq-batch", type=int, default=64)
    ap.add_argument("--ar-steps", type=int, default=None)
    ap.add_argument("--reserve", type=float, default=100, help="seconds kept for export + evaluation")
    ap.add_argument("--vq-ch", type=int, default=32)
    ap.add_argument("--vq-ch-mult", default="1,2,2,4")
    ap.add_argument("--vq-z", type=int, default=64)
    ap.add_argument("--vq-res-blocks", type=int, default=1)
    ap.add_argument("--codebook", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--text-vocab", type=int, default=512, help="BPE vocabulary (embed rows rounded up to 64)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=1, help="benchmark subsample: every k-th prompt")
    ap.add_argument("--eval-per-prompt", type=int, default=2)
    ap.add_argument("--sampling", default="5:1:0",
                    help="comma-separated cfg:temperature:top_k variants to evaluate, in order, while time lasts")
    ap.add_argument("--init-from", default=None,
                    help="continue from an exported model: reuse its tokenizer.json and VQ (token ids unchanged), "
                         "start the AR model from its weights, skip VQ training")
    ap.add_argument("--vq-from", default=None,
                    help="reuse the VQ of an exported model (or a tools.train.vq_only extract): image token ids "
                         "unchanged, no VQ training; the tokenizer and the AR model are trained anew")
    ap.add_argument("--janus-system-prompt", action="store_true",
                    help="train and export with Janus' VLChatProcessor system prompt in the template "
                         "(config.json argen_system_prompt; the engine prompts with it)")
    ap.add_argument("--rich-captions", type=float, default=0.0,
                    help="fraction of captions that specify every object (tools/scenes/rich_caption.py)")
    ap.add_argument("--weight-decay", type=float, default=0.05, help="AdamW weight decay on the AR matrices")
    ap.add_argument("--default-cfg", type=float, default=None,
                    help="write argen_sampling_defaults.cfg_weight into config.json")
    ap.add_argument("--scene-seed", type=int, default=1, help="base seed of the scenes (a new one = new data)")
    ap.add_argument("--pack-to", default=None,
                    help="right after export, write the model as a tar split in 15 MiB parts here")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if args.init_from and args.vq_from:
        ap.error("--init-from already reuses its VQ; give --vq-from only to train a new AR model")
    os.makedirs(args.work, exist_ok=True)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    log(f"device {device} torch {torch.__version__} args {vars(args)}")

    # 1. Scenes.
    images, scenes = generate(args.scenes, base_seed=args.scene_seed, workers=args.workers,
                              images_path=os.path.join(args.work, "images.u8"), rich_fraction=args.rich_captions)
    captions = [s["caption"] for s in scenes]
    log(f"scenes: {len(scenes)} ({sum(1 for s in scenes if s.get('rich'))} rich captions); e.g. {captions[:3]}")
    images_t = torch.from_numpy(np.array(images)).to(device)

    # 2. Caption tokenizer.
    tok_path = os.path.join(args.work, "tokenizer.json")
    init = load(args.init_from, args.device) if args.init_from else None
    system_prompt = JANUS_SYSTEM_PROMPT if args.janus_system_prompt else ""
    if init:
        # A continued model keeps its template (its token positions are what it learned).
        inherited = init[2].get(SYSTEM_PROMPT_KEY, "")
        if args.janus_system_prompt and inherited != system_prompt:
            raise SystemExit(f"--janus-system-prompt: {args.init_from} was trained with system prompt "
                             f"'{inherited}'; a continued model keeps its own")
        system_prompt = inherited
        tok = Tokenizer.from_file(os.path.join(args.init_from, "tokenizer.json"))
    else:
        tok = train_tokenizer(captions, vocab_size=args.text_vocab, system_prompt=system_prompt)
    tok.save(tok_path)
    enc = PromptEncoder(Tokenizer.from_file(tok_path), system_prompt)
    text_vocab = (tok.get_vocab_size() + 63) // 64 * 64
    if init:
        text_vocab = init[2]["language_config"]["vocab_size"]
    log(f"tokenizer: {tok.get_vocab_size()} tokens (embed rows {text_vocab}); "
        f"prompt ids of '{captions[0]}': {enc.encode(captions[0])}")

    # 3. VQ.
    ch_mult = [int(v) for v in args.vq_ch_mult.split(",")]
    vq_cfg = {"codebook_size": args.codebook, "codebook_embed_dim": 8, "codebook_l2_norm": True, "ch": args.vq_ch,
              "ch_mult": ch_mult, "z_channels": args.vq_z, "num_res_blocks": args.vq_res_blocks}
    if init:
        vq = init[1]
        vp = init[2]["gen_vision_config"]["params"]
        vq_cfg = {k: vp[k] for k in vq_cfg}
        ch_mult = vq_cfg["ch_mult"]
        log(f"VQ and tokenizer from {args.init_from}")
    elif args.vq_from:
        vq, vq_src_cfg = load_vq(args.vq_from, args.device)
        vp = vq_src_cfg["gen_vision_config"]["params"]
        vq_cfg = {k: vp[k] for k in vq_cfg}
        ch_mult = vq_cfg["ch_mult"]
        log(f"VQ from {args.vq_from} (no VQ training)")
    else:
        vq = train_vq(images_t, vq_cfg, args.vq_seconds, batch=args.vq_batch, max_steps=args.vq_steps, log=log)
    image_size = images.shape[1]
    grid = image_size // 2 ** (len(ch_mult) - 1)
    codes = encode_all(vq, images_t, batch=512 if device.type == "cuda" else 16)
    log(f"tokenized {codes.shape}, codebook usage {codebook_usage(codes, args.codebook):.3f}")
    recon = decode_codes(vq, codes[:8], grid).cpu().numpy()
    grid_png(np.concatenate([np.asarray(images[:8]), recon]), 8, os.path.join(args.work, "vq_recon.png"))
    mse = float(((recon.astype(np.float32) - np.asarray(images[:8], dtype=np.float32)) ** 2).mean())
    log(f"vq reconstruction PSNR on 8 training images: {10 * np.log10(255 ** 2 / max(mse, 1e-9)):.2f} dB")
    del images_t

    # 4. AR model.
    seqs, lengths = build_sequences(captions, codes, enc, text_vocab)
    log(f"sequences {tuple(seqs.shape)}, prompt lengths {int(lengths.min())}..{int(lengths.max())}")
    model = JanusGen(text_vocab=text_vocab, codebook_size=args.codebook, code_dim=8, hidden=args.hidden,
                     layers=args.layers, heads=args.heads, intermediate=args.intermediate).to(device)
    if init:
        model = init[0].train()
        log(f"AR model from {args.init_from}")
    log(f"AR params: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M")
    ar_seconds = args.deadline - (time.time() - T0) - args.reserve
    log(f"AR budget {ar_seconds:.0f}s")
    stats = train_ar(model, seqs.to(device), lengths.to(device), enc.pad_id, ar_seconds, batch=args.batch,
                     lr=args.lr, weight_decay=args.weight_decay, max_steps=args.ar_steps, log=log)
    with open(os.path.join(args.work, "ar_history.json"), "w") as f:
        json.dump(stats, f)

    # 5. Export and reload (the evaluation below uses the reloaded bf16 weights).
    vq_cfg_out = dict(vq_cfg, image_size=image_size)
    extra = {SYSTEM_PROMPT_KEY: system_prompt} if system_prompt else {}
    if args.default_cfg is not None:
        extra["argen_sampling_defaults"] = {"cfg_weight": args.default_cfg}
    elif init and "argen_sampling_defaults" in init[2]:
        extra["argen_sampling_defaults"] = init[2]["argen_sampling_defaults"]
    info = export(args.model_dir, model, vq, vq_cfg_out, tok_path, extra_config=extra)
    log(f"exported {info['files']} ({info['bytes'] / 1e6:.1f} MB of tensors) -> {args.model_dir}")
    if args.pack_to:
        parts = pack(args.model_dir, args.pack_to)
        log(f"packed model into {parts}")
    model, vq, _ = load(args.model_dir, args.device)

    # 6. Evaluate: VQ round trip of ground-truth scenes (the ceiling), then CFG samples.
    metas = load_metadata(BENCHMARK)[::args.eval_every]
    gt = np.stack([render_scene(scene_from_spec(spec_from_metadata(m), seed=7 + i)) for i, m in enumerate(metas)])
    gt_codes = encode_all(vq, torch.from_numpy(gt).to(device), batch=512 if device.type == "cuda" else 16)
    gt_rt = decode_codes(vq, gt_codes, grid).cpu().numpy()
    summary, _ = score_images(metas, gt_rt, 1)
    log("scorer on VQ round trips of ground-truth scenes:\n" + format_table(summary))
    results = {"vq_roundtrip": summary, "samples": {}, "ar": {k: stats[k] for k in ("steps", "seconds")},
               "prompt_lengths": [int(lengths.min()), int(lengths.max())], "system_prompt": system_prompt,
               "rich_captions": sum(1 for s in scenes if s.get("rich")), "scenes": len(scenes)}
    last = 0.0
    for variant in args.sampling.split(","):
        cfg, temp, top_k = variant.split(":")
        cfg, temp, top_k = float(cfg), float(temp), int(top_k)
        if results["samples"] and time.time() - T0 + last > args.deadline:
            log(f"skipping sampling variant {variant}: no time left")
            continue
        t = time.time()
        imgs = sample_prompts(model, vq, enc, [m["prompt"] for m in metas], args.eval_per_prompt, grid, cfg=cfg,
                              temperature=temp, top_k=top_k)
        summary, _ = score_images(metas, imgs, args.eval_per_prompt)
        last = time.time() - t
        results["samples"][variant] = summary
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
