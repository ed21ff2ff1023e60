#!/usr/bin/env python3
"""Writes the tiny LlamaGen c2i checkpoint and its goldens from the OFFICIAL code.

    .venv/bin/python tools/goldens/make_llamagen_goldens.py /path/to/FoundationVision/LlamaGen

The LlamaGen repository (github.com/FoundationVision/LlamaGen) is imported from
the path given; nothing of it is committed. Its own classes build the models:
autoregressive/models/gpt.py's Transformer (ModelArgs: a tiny GPT, 2-D RoPE on
a 5x5 grid, 10 classes + the unconditional row) and
tokenizer/tokenizer_image/vq_model.py's VQModel with a small Encoder/Decoder
(ch 32, ch_mult [1, 1, 2]: downsample 4, so 20x20 px). Random weights, seed 0.

Writes tests/goldens/tiny/tiny-llamagen-c2i/:
  c2i_tiny.pt        torch.save({"model": gpt state dict, "steps", "args": argparse.Namespace}),
                     as train_c2i.py saves (sample_c2i.py reads checkpoint["model"])
  vq_ds16_c2i.pt     torch.save({"model": VQModel state dict without the encoder})
  config.json        model_type "llamagen" and the tiny shapes (the published c2i_<size>_<px>.pt
                     names carry them instead)
  goldens.json       class, greedy tokens, file names
  logits.f32         [step][row (cond, uncond)][vocab] float32: the official prefill
                     (class token) and KV-cache decode calls, as generate.py makes them,
                     teacher-forced on the greedy tokens
  pixels.f32         VQModel.decode_code of the greedy tokens, [3][20][20] float32
  rgb8               clip((x + 1) / 2 * 255, 0, 255) truncated to uint8, [20][20][3]
The greedy tokens are generate.py's generate() with cfg_scale 4.0, top_k 1 (argmax
of the guided logits, what argen's temperature 0 samples).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "goldens" / "tiny" / "tiny-llamagen-c2i"

DIM, LAYERS, HEADS, MULTIPLE_OF = 64, 2, 4, 32
CLASSES, VOCAB, EMBED_DIM = 10, 64, 8
GRID, DOWNSAMPLE = 5, 4
VQ_CH, VQ_CH_MULT, VQ_Z, VQ_RES = 32, [1, 1, 2], 32, 1
CLASS_ID, CFG = 3, 4.0


def randomize(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Every parameter random (the official init zeroes `output`): norms near 1, the rest N(0, 0.15^2)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if "norm" in name and p.dim() == 1 and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.05 * noise)
            else:
                p.copy_(0.15 * noise)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("llamagen", type=Path, help="a checkout of FoundationVision/LlamaGen")
    args = parser.parse_args()
    sys.path.insert(0, str(args.llamagen.resolve()))
    from autoregressive.models.gpt import ModelArgs, Transformer  # noqa: E402
    from autoregressive.models.generate import generate  # noqa: E402
    from tokenizer.tokenizer_image import vq_model  # noqa: E402

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    gpt_args = ModelArgs(dim=DIM, n_layer=LAYERS, n_head=HEADS, multiple_of=MULTIPLE_OF, vocab_size=VOCAB,
                         block_size=GRID * GRID, num_classes=CLASSES, cls_token_num=1, model_type="c2i",
                         class_dropout_prob=0.1)
    gpt = Transformer(gpt_args)
    randomize(gpt, gen)
    gpt.eval()

    vq = vq_model.VQModel(vq_model.ModelArgs(codebook_size=VOCAB, codebook_embed_dim=EMBED_DIM,
                                             encoder_ch_mult=VQ_CH_MULT, decoder_ch_mult=VQ_CH_MULT, z_channels=VQ_Z))
    # The official Encoder/Decoder classes at a smaller width (VQModel fixes ch = 128).
    vq.encoder = vq_model.Encoder(ch=VQ_CH, ch_mult=VQ_CH_MULT, num_res_blocks=VQ_RES, z_channels=VQ_Z)
    vq.decoder = vq_model.Decoder(ch=VQ_CH, ch_mult=VQ_CH_MULT, num_res_blocks=VQ_RES, z_channels=VQ_Z)
    randomize(vq, gen)
    vq.eval()

    OUT.mkdir(parents=True, exist_ok=True)
    namespace = argparse.Namespace(gpt_model="tiny", gpt_type="c2i", image_size=GRID * DOWNSAMPLE,
                                   num_classes=CLASSES, vocab_size=VOCAB, cls_token_num=1)
    torch.save({"model": gpt.state_dict(), "steps": 0, "args": namespace}, OUT / "c2i_tiny.pt")
    # The encoder (image -> codes), which serving never reads, is left out to keep the file small.
    vq_state = {k: v for k, v in vq.state_dict().items() if not k.startswith("encoder.")}
    torch.save({"model": vq_state}, OUT / "vq_ds16_c2i.pt")
    config = {
        "model_type": "llamagen", "gpt_type": "c2i", "gpt_ckpt": "c2i_tiny.pt", "vq_ckpt": "vq_ds16_c2i.pt",
        "dim": DIM, "n_layer": LAYERS, "n_head": HEADS, "multiple_of": MULTIPLE_OF, "num_classes": CLASSES,
        "class_dropout_prob": 0.1, "image_size": GRID * DOWNSAMPLE, "downsample_size": DOWNSAMPLE,
        "codebook_size": VOCAB, "codebook_embed_dim": EMBED_DIM, "vq_ch": VQ_CH, "vq_ch_mult": VQ_CH_MULT,
        "vq_z_channels": VQ_Z, "vq_num_res_blocks": VQ_RES,
    }
    (OUT / "config.json").write_text(json.dumps(config, indent=1) + "\n")

    tokens = GRID * GRID
    with torch.no_grad():
        cond = torch.tensor([CLASS_ID])
        greedy = generate(gpt, cond, tokens, cfg_scale=CFG, cfg_interval=-1, temperature=1.0, top_k=1,
                          top_p=1.0, sample_logits=True)[0].tolist()
        # The same calls generate() makes (prefill of [class, uncond], then one token a step
        # for both rows), teacher-forced on the greedy tokens, keeping every logit.
        gpt.setup_caches(max_batch_size=2, max_seq_length=1 + tokens, dtype=torch.float32)
        steps = []
        logits, _ = gpt(None, torch.tensor([CLASS_ID, CLASSES]), input_pos=torch.arange(0, 1))
        steps.append(logits[:, -1, :])
        for t in range(tokens - 1):
            x = torch.tensor([[greedy[t]], [greedy[t]]])
            logits, _ = gpt(x, cond_idx=None, input_pos=torch.tensor([1 + t], dtype=torch.int))
            steps.append(logits[:, -1, :])
        all_logits = torch.stack(steps).float().contiguous()  # [tokens][2][vocab]
        guided = all_logits[:, 1] + CFG * (all_logits[:, 0] - all_logits[:, 1])
        assert guided.argmax(-1).tolist() == greedy, "teacher-forced logits disagree with generate()"
        pixels = vq.decode_code(torch.tensor([greedy]), [1, EMBED_DIM, GRID, GRID])[0].float().contiguous()
    rgb8 = torch.clamp((pixels.permute(1, 2, 0) + 1.0) / 2.0 * 255.0, 0.0, 255.0).to(torch.uint8)
    (OUT / "logits.f32").write_bytes(all_logits.numpy().astype("<f4").tobytes())
    (OUT / "pixels.f32").write_bytes(pixels.numpy().astype("<f4").tobytes())
    (OUT / "rgb8").write_bytes(rgb8.numpy().tobytes())
    golden = {
        "class_id": CLASS_ID, "uncond_class": CLASSES, "cfg": CFG, "grid": GRID,
        "image_size": GRID * DOWNSAMPLE, "vocab": VOCAB, "greedy_tokens": greedy,
        "logits_file": "logits.f32", "pixels_file": "pixels.f32", "rgb8_file": "rgb8",
        "logits_sum": float(all_logits.double().sum()), "pixels_sum": float(pixels.double().sum()),
    }
    (OUT / "goldens.json").write_text(json.dumps(golden, indent=1) + "\n")
    print("wrote", OUT, "greedy", greedy)


if __name__ == "__main__":
    main()
