#!/usr/bin/env python3
"""Writes the tiny LlamaGen text-to-image checkpoint and its goldens from the OFFICIAL code.

    .venv/bin/python tools/goldens/make_llamagen_t2i_goldens.py /path/to/FoundationVision/LlamaGen

(needs ftfy and beautifulsoup4 in the venv: language/t5.py imports them.)

The LlamaGen repository (github.com/FoundationVision/LlamaGen) is imported from
the path given; nothing of it is committed. Its own code builds and runs the
models: autoregressive/models/gpt.py's Transformer (model_type "t2i": a tiny
GPT, caption_dim = the tiny T5's d_model, 120 caption slots, 2-D RoPE on a 5x5
grid), autoregressive/models/generate.py's generate() with the caption mask,
language/t5.py's caption cleaning, and tokenizer/tokenizer_image/vq_model.py's
VQModel (ch 32, ch_mult [1, 1]: downsample 2, so 10x10 px). The text encoder is
transformers' T5EncoderModel (a tiny random gated-GELU config) with a tiny
SentencePiece unigram model trained here (T5's special ids: pad 0, eos 1,
unk 2), loaded through AutoTokenizer as language/t5.py does. Random weights,
seed 0.

Writes tests/goldens/tiny/tiny-llamagen-t2i/:
  t2i_tiny.pt        torch.save({"model": gpt state dict, "steps", "args"}) as train_t2i.py saves
  vq_ds16_t2i.pt     torch.save({"model": VQModel state dict without the encoder})
  flan-t5-tiny/      config.json, model.safetensors, spiece.model, tokenizer_config.json
                     (the hub layout of google/flan-t5-xl, tiny)
  config.json        model_type "llamagen", gpt_type "t2i" and the tiny shapes
  goldens.json       prompt, cleaned caption (and more captions' cleaning), T5 ids, greedy tokens, file names
  t5_features.f32    [n][t5 d_model] the caption's last hidden state (its real tokens)
  prefix_cond.f32    [n][dim] cap_proj of those features
  prefix_uncond.f32  [n][dim] cap_proj of uncond_embedding's last n rows
  logits.f32         [step][row (cond, uncond)][vocab]: every call generate() makes (prefill
                     of the 120 left-padded slots under the caption mask, then one token a
                     step for both rows), greedy: top_k 1 at cfg 7.5
  rgb8               VQModel.decode_code of the greedy tokens, clip((x + 1) / 2 * 255) as uint8 [10][10][3]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import sentencepiece as spm
import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "goldens" / "tiny" / "tiny-llamagen-t2i"
T5_DIR = "flan-t5-tiny"

DIM, LAYERS, HEADS, MULTIPLE_OF = 64, 2, 4, 32
VOCAB, EMBED_DIM = 64, 8
GRID, DOWNSAMPLE = 5, 2
VQ_CH, VQ_CH_MULT, VQ_Z, VQ_RES = 32, [1, 1], 32, 1
SLOTS = 120  # sample_t2i.py's cls_token_num and t5_feature_max_len; CaptionEmbedder's token_num
T5_D, T5_KV, T5_HEADS, T5_FF, T5_LAYERS = 32, 8, 4, 48, 2
CFG = 7.5  # sample_t2i.py's --cfg-scale default
PROMPT = ("A  Photo of a RED-and-blue kangaroo wearing sunglasses, standing on the grass in front of "
          "the Sydney Opera House; holding a sign that says Welcome Friends!")
# Captions for the cleaning golden (language/t5.py's text_preprocessing), one per rule family.
CLEANING = [
    PROMPT,
    "A blue Porsche 356 parked in front of a yellow brick wall.",
    "Check https://example.com/cat.png for a CAT+dog  picture!!",
    "\u201cQuoted\u201d text \u2014 with \u2018fancy\u2019 dashes \u2013 and \u4e2d\u6587 characters",
    "this-is-my-cute-cat_photo",
    "@someone posted #12 a 1920x1080 image, page 3: free shipping worldwide",
    "a photo... of (a) [cat] {dog} | stuff * here",
    "'a red car'",
    "ip 192.168.1.1 and id jc6640 and 6640vc231 here %21",
    "  -A cat , sitting . on a mat:  yes_",
]
WORDS = ("a photo of the red blue green kangaroo cat dog wearing sunglasses hoodie standing sitting on grass "
         "in front back sydney opera house holding sign that says welcome friends astronaut riding horse "
         "forest river water lilies map united states made out sushi table next to glass wine porsche "
         "parked yellow brick wall portrait orange chest , . ! ; and with under above").split()


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


def train_spiece(gen: torch.Generator) -> bytes:
    """A tiny unigram SentencePiece model with T5's special ids, from random sentences of WORDS."""
    sentences = []
    for _ in range(2000):
        n = int(torch.randint(4, 14, (1,), generator=gen))
        idx = torch.randint(0, len(WORDS), (n,), generator=gen).tolist()
        sentences.append(" ".join(WORDS[i] for i in idx))
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, vocab_size=90,
                                   model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("llamagen", type=Path, help="a checkout of FoundationVision/LlamaGen")
    args = parser.parse_args()
    sys.path.insert(0, str(args.llamagen.resolve()))
    from autoregressive.models.gpt import ModelArgs, Transformer  # noqa: E402
    from autoregressive.models.generate import generate  # noqa: E402
    from language.t5 import T5Embedder  # noqa: E402
    from tokenizer.tokenizer_image import vq_model  # noqa: E402
    from transformers import AutoTokenizer, T5Config, T5EncoderModel  # noqa: E402

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    t5_dir = OUT / T5_DIR
    t5_dir.mkdir(exist_ok=True)

    # The tiny T5 in the hub layout: spiece.model + tokenizer_config.json + config.json + model.safetensors.
    (t5_dir / "spiece.model").write_bytes(train_spiece(gen))
    sp = spm.SentencePieceProcessor(model_file=str(t5_dir / "spiece.model"))
    (t5_dir / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "T5Tokenizer", "extra_ids": 0, "model_max_length": 512, "eos_token": "</s>",
         "pad_token": "<pad>", "unk_token": "<unk>"}, indent=1) + "\n")
    t5_config = T5Config(vocab_size=sp.get_piece_size(), d_model=T5_D, d_kv=T5_KV, num_heads=T5_HEADS, d_ff=T5_FF,
                         num_layers=T5_LAYERS, num_decoder_layers=T5_LAYERS, relative_attention_num_buckets=32,
                         relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
                         layer_norm_epsilon=1e-6, tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
                         decoder_start_token_id=0)
    t5 = T5EncoderModel(t5_config)
    randomize(t5, gen)
    t5.eval()
    t5.save_pretrained(t5_dir, safe_serialization=True)

    gpt_args = ModelArgs(dim=DIM, n_layer=LAYERS, n_head=HEADS, multiple_of=MULTIPLE_OF, vocab_size=VOCAB,
                         block_size=GRID * GRID, cls_token_num=SLOTS, model_type="t2i", caption_dim=T5_D,
                         class_dropout_prob=0.1)
    gpt = Transformer(gpt_args)
    randomize(gpt, gen)
    with torch.no_grad():
        # A buffer, not a parameter: randomize() skips it.
        gpt.cls_embedding.uncond_embedding.copy_(torch.randn(SLOTS, T5_D, generator=gen))
        # Larger image-token embeddings, so the fed-back token moves the next logits (a varied greedy sequence).
        gpt.tok_embeddings.weight.mul_(6.0)
    gpt.eval()

    vq = vq_model.VQModel(vq_model.ModelArgs(codebook_size=VOCAB, codebook_embed_dim=EMBED_DIM,
                                             encoder_ch_mult=VQ_CH_MULT, decoder_ch_mult=VQ_CH_MULT, z_channels=VQ_Z))
    vq.encoder = vq_model.Encoder(ch=VQ_CH, ch_mult=VQ_CH_MULT, num_res_blocks=VQ_RES, z_channels=VQ_Z)
    vq.decoder = vq_model.Decoder(ch=VQ_CH, ch_mult=VQ_CH_MULT, num_res_blocks=VQ_RES, z_channels=VQ_Z)
    randomize(vq, gen)
    vq.eval()

    namespace = argparse.Namespace(gpt_model="tiny", gpt_type="t2i", image_size=GRID * DOWNSAMPLE,
                                   vocab_size=VOCAB, cls_token_num=SLOTS)
    torch.save({"model": gpt.state_dict(), "steps": 0, "args": namespace}, OUT / "t2i_tiny.pt")
    vq_state = {k: v for k, v in vq.state_dict().items() if not k.startswith("encoder.")}
    torch.save({"model": vq_state}, OUT / "vq_ds16_t2i.pt")
    config = {
        "model_type": "llamagen", "gpt_type": "t2i", "gpt_ckpt": "t2i_tiny.pt", "vq_ckpt": "vq_ds16_t2i.pt",
        "t5_dir": T5_DIR, "dim": DIM, "n_layer": LAYERS, "n_head": HEADS, "multiple_of": MULTIPLE_OF,
        "caption_dim": T5_D, "cls_token_num": SLOTS, "image_size": GRID * DOWNSAMPLE,
        "downsample_size": DOWNSAMPLE, "codebook_size": VOCAB, "codebook_embed_dim": EMBED_DIM, "vq_ch": VQ_CH,
        "vq_ch_mult": VQ_CH_MULT, "vq_z_channels": VQ_Z, "vq_num_res_blocks": VQ_RES,
    }
    (OUT / "config.json").write_text(json.dumps(config, indent=1) + "\n")

    # language/t5.py's get_text_embeddings, with its cleaning (clean_caption twice) and tokenizer call.
    embedder = T5Embedder.__new__(T5Embedder)
    embedder.use_text_preprocessing = True
    caption = embedder.text_preprocessing(PROMPT)
    cleaning = [[raw, embedder.text_preprocessing(raw)] for raw in CLEANING]
    tokenizer = AutoTokenizer.from_pretrained(str(t5_dir))
    batch = tokenizer([caption], max_length=SLOTS, padding="max_length", truncation=True,
                      return_attention_mask=True, add_special_tokens=True, return_tensors="pt")
    tokens = GRID * GRID
    with torch.no_grad():
        features = t5(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])["last_hidden_state"]
        mask = batch["attention_mask"]
        n = int(mask.sum())
        ids = batch["input_ids"][0, :n].tolist()
        # sample_t2i.py's left padding, then the zeroed padded slots.
        padded = torch.cat([features[0, n:], features[0, :n]])[None]
        emb_masks = torch.flip(mask, dims=[-1])
        c_indices = padded * emb_masks[:, :, None]

        # Every forward call generate() makes, recorded: the prefill and each decode step.
        recorded = []
        forward = gpt.forward

        def record(*a, **k):
            logits, loss = forward(*a, **k)
            recorded.append(logits[:, -1, :].clone())
            return logits, loss

        gpt.forward = record
        greedy = generate(gpt, c_indices, tokens, emb_masks, cfg_scale=CFG, temperature=1.0, top_k=1, top_p=1.0,
                          sample_logits=True)[0].tolist()
        gpt.forward = forward
        all_logits = torch.stack(recorded).float().contiguous()  # [tokens][2][vocab]
        guided = all_logits[:, 1] + CFG * (all_logits[:, 0] - all_logits[:, 1])
        assert guided.argmax(-1).tolist() == greedy, "recorded logits disagree with generate()"

        real = features[0, :n].float().contiguous()
        prefix_cond = gpt.cls_embedding.cap_proj(real).float().contiguous()
        prefix_uncond = gpt.cls_embedding.cap_proj(gpt.cls_embedding.uncond_embedding[SLOTS - n:]).float()
        pixels = vq.decode_code(torch.tensor([greedy]), [1, EMBED_DIM, GRID, GRID])[0].float()
    rgb8 = torch.clamp((pixels.permute(1, 2, 0) + 1.0) / 2.0 * 255.0, 0.0, 255.0).to(torch.uint8)
    for name, t in [("t5_features.f32", real), ("prefix_cond.f32", prefix_cond),
                    ("prefix_uncond.f32", prefix_uncond.contiguous()), ("logits.f32", all_logits)]:
        (OUT / name).write_bytes(t.numpy().astype("<f4").tobytes())
    (OUT / "rgb8").write_bytes(rgb8.contiguous().numpy().tobytes())
    golden = {
        "prompt": PROMPT, "caption": caption, "cleaning": cleaning, "t5_ids": ids, "tokens": n, "t5_d_model": T5_D, "dim": DIM,
        "cfg": CFG, "grid": GRID, "image_size": GRID * DOWNSAMPLE, "vocab": VOCAB, "greedy_tokens": greedy,
        "t5_features_file": "t5_features.f32", "prefix_cond_file": "prefix_cond.f32",
        "prefix_uncond_file": "prefix_uncond.f32", "logits_file": "logits.f32", "rgb8_file": "rgb8",
    }
    (OUT / "goldens.json").write_text(json.dumps(golden, indent=1) + "\n")
    print("wrote", OUT, "caption", repr(caption), "ids", ids, "greedy", greedy)


if __name__ == "__main__":
    main()
