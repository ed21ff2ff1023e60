"""Checks FastSampler against transformers' LlamaModel path (JanusGen.generate): same tokens from the
same generator on a random small model, and matching hidden states after prefill (float32, CPU).

  python -m tools.train.check_fast_sampler
"""

import torch

from tools.train.ar_model import JanusGen
from tools.train.fast_sampler import FastSampler


def main():
    torch.manual_seed(0)
    model = JanusGen(text_vocab=64, codebook_size=32, code_dim=8, hidden=64, layers=2, heads=4,
                     intermediate=96).eval()
    fast = FastSampler(model, dtype=torch.float32)
    prompt = torch.randint(0, 64, (3, 7))
    uncond = prompt.clone()
    uncond[:, 1:-1] = 2
    with torch.no_grad():
        ref_hidden = model.llm(inputs_embeds=model.llm.embed_tokens(prompt)).last_hidden_state
        shape = (2, 3, 4, 7, 16)
        k, v = torch.empty(shape), torch.empty(shape)
        got_hidden = fast._forward(model.llm.embed_tokens(prompt), 0, k, v)
    err = (ref_hidden - got_hidden).abs().max().item()
    print(f"prefill hidden max abs diff {err:.2e}")
    assert err < 1e-4, err
    for top_k in (0, 5):
        ref = model.generate(prompt, uncond, 40, cfg_weight=3.0, top_k=top_k,
                             generator=torch.Generator().manual_seed(1))
        got = fast.generate(prompt, uncond, 40, cfg_weight=3.0, top_k=top_k,
                            generator=torch.Generator().manual_seed(1))
        same = (ref == got).float().mean().item()
        print(f"top_k={top_k}: tokens equal fraction {same:.3f}")
        assert same == 1.0
    print("OK")


if __name__ == "__main__":
    main()
