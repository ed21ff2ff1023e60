"""The model shapes torch_janus_loop.py runs, under argen_bench's --model names.

- "7b", "1b": Janus-Pro (config.json's language_config, gen_head, gen_aligner;
  bench/gpu/janus_shapes.cc's JanusSpec): 576 codes at 384 px, 50 prompt tokens a row.
- "llamagen-<size>-<px>": LlamaGen class-conditional (gpt.py's GPT_models,
  engine/families/llamagen/llamagen_config.cc's PublishedLlamaGenConfig): one
  class token (the unconditional class is the last of 1,001 rows), VQ-16 codes
  (16,384) on a (px / 16)^2 grid, 2-D RoPE, RMSNorm 1e-5, SwiGLU of
  find_multiple(int(8 dim / 3), 256) (GPT-XL: 3,584).
- "emu3": Emu3-Gen (BAAI config.json; engine/families/emu3/emu3_shapes.cc's
  PublishedEmu3Gen): Llama 8.5B with 8 KV heads, vocab 184,622 of which the
  32,768 visual codes from id 151,854 are the head's rows, rope theta 1e6;
  720 px is 90 rows of 90 codes and a row end, argen_bench's 90 x 91 - 1 = 8,189
  decode tokens; 52 prompt tokens a row (argen_bench's guidance row, the
  longer of its 50 / 52).

tiny_shape(name) is the same family at a size the CPU runs in milliseconds
(the --tiny --check smoke test).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    family: str  # "janus", "llamagen" or "emu3": which embeddings, head and RoPE the loop uses
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    inter: int
    prompt_vocab: int  # rows the prompt ids index: Janus's text table, LlamaGen's class table, Emu3's vocabulary
    image_vocab: int  # codes a step samples from (the head's rows)
    image_tokens: int  # tokens an image decodes: argen_bench's l_dec
    prompt_len: int  # prompt tokens a row, argen_bench's for the family
    cfg: float  # the family's guidance scale (no effect on cost)
    rms_eps: float
    rope_theta: float
    grid: int = 0  # LlamaGen: the code grid's side, 2-D RoPE; 0: 1-D RoPE
    image_embed: int = 0  # Janus: gen_embed's width, mapped to hidden by the aligner MLP
    head_embed: int = 0  # Janus: gen_head's hidden width
    first_visual: int = 0  # Emu3: visual code k is token first_visual + k

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


JANUS = {
    "7b": Shape("janus", layers=30, hidden=4096, heads=32, kv_heads=32, inter=11008, prompt_vocab=102400,
                image_vocab=16384, image_tokens=576, prompt_len=50, cfg=5.0, rms_eps=1e-6, rope_theta=10000.0,
                image_embed=8, head_embed=4096),
    "1b": Shape("janus", layers=24, hidden=2048, heads=16, kv_heads=16, inter=5632, prompt_vocab=102400,
                image_vocab=16384, image_tokens=576, prompt_len=50, cfg=5.0, rms_eps=1e-6, rope_theta=10000.0,
                image_embed=8, head_embed=2048),
}

# gpt.py's GPT_models: size -> (layers, heads, dim).
LLAMAGEN_GPT = {"B": (12, 12, 768), "L": (24, 16, 1024), "XL": (36, 20, 1280), "XXL": (48, 24, 1536),
                "XXXL": (48, 40, 2560), "1B": (22, 32, 2048), "3B": (24, 32, 3200), "7B": (32, 32, 4096)}

EMU3 = Shape("emu3", layers=32, hidden=4096, heads=32, kv_heads=8, inter=14336, prompt_vocab=184622,
             image_vocab=32768, image_tokens=90 * 91 - 1, prompt_len=52, cfg=3.0, rms_eps=1e-5, rope_theta=1e6,
             first_visual=151854)

TINY = {
    "janus": Shape("janus", layers=2, hidden=64, heads=4, kv_heads=2, inter=96, prompt_vocab=256, image_vocab=64,
                   image_tokens=16, prompt_len=8, cfg=5.0, rms_eps=1e-6, rope_theta=10000.0, image_embed=8,
                   head_embed=48),
    "llamagen": Shape("llamagen", layers=2, hidden=64, heads=4, kv_heads=4, inter=96, prompt_vocab=11, image_vocab=64,
                      image_tokens=16, prompt_len=1, cfg=4.0, rms_eps=1e-5, rope_theta=10000.0, grid=4),
    "emu3": Shape("emu3", layers=2, hidden=64, heads=4, kv_heads=2, inter=96, prompt_vocab=300, image_vocab=64,
                  image_tokens=16, prompt_len=8, cfg=3.0, rms_eps=1e-5, rope_theta=1e6, first_visual=200),
}

NAMES = "7b, 1b, emu3 or llamagen-<B|L|XL|XXL|XXXL|1B|3B|7B>-<px, a multiple of 16>"


def llamagen_ffn(dim: int, multiple_of: int = 256) -> int:
    """FeedForward's hidden width in gpt.py: int(2 * 4 dim / 3) rounded up to multiple_of."""
    hidden = int(2 * 4 * dim / 3)
    return (hidden + multiple_of - 1) // multiple_of * multiple_of


def llamagen_shape(size: str, px: int) -> Shape:
    layers, heads, dim = LLAMAGEN_GPT[size]
    grid = px // 16
    return Shape("llamagen", layers=layers, hidden=dim, heads=heads, kv_heads=heads, inter=llamagen_ffn(dim),
                 prompt_vocab=1001, image_vocab=16384, image_tokens=grid * grid, prompt_len=1, cfg=4.0, rms_eps=1e-5,
                 rope_theta=10000.0, grid=grid)


def shape_for(name: str) -> Shape:
    """The published shape of an argen_bench --model name; ValueError naming the accepted ones."""
    if name in JANUS:
        return JANUS[name]
    if name == "emu3":
        return EMU3
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "llamagen":
        size, px = parts[1].upper(), parts[2]
        if size in LLAMAGEN_GPT and px.isdigit() and int(px) > 0 and int(px) % 16 == 0:
            return llamagen_shape(size, int(px))
    raise ValueError(f"--model: expected {NAMES}, got {name}")


def tiny_shape(name: str) -> Shape:
    """The family of `name` at the CPU smoke test's size."""
    return TINY[shape_for(name).family]
