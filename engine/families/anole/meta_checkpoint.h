// Meta's Chameleon consolidated.pth seen under the HF names the Chameleon
// tensor map reads (engine/families/lumina/lumina_spec.h), so Meta's layout
// and the -hf conversion serve through one ModelSpec. The renames and the two
// reorderings are those transformers' convert_chameleon_weights_to_hf.py
// documents:
//   tok_embeddings -> model.embed_tokens, norm -> model.norm, output -> lm_head,
//   layers.{i}.attention.w{q,k,v,o} -> self_attn.{q,k,v,o}_proj,
//   feed_forward.w1 / w3 / w2 -> mlp.gate_proj / up_proj / down_proj,
//   attention_norm / ffn_norm -> input_layernorm / post_attention_layernorm;
//   wq and wk rows are permuted per head from Meta's interleaved rotary pairs
//   (2i, 2i + 1) to HF's rotate-half halves (i, i + head_dim / 2), and the
//   q/k LayerNorm's [head_dim] weight and bias the same way, shown as one row
//   [1, head_dim] that the map repeats over the heads.
// Every tensor is checked against params.json when the view is made: a
// missing tensor or a wrong shape is an error naming consolidated.pth and
// Meta's tensor name. Renamed tensors keep their mapped bytes (rows read
// lazily); reordered ones are converted when loaded, and their TensorInfo
// carries no data pointer (nothing may read them raw).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/lumina/lumina_config.h"

namespace argen::anole {

// `path`: consolidated.pth (a torch.save zip, read by engine/checkpoint's torch reader).
absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> OpenMetaChameleon(const std::string& path,
                                                                          const lumina::LuminaConfig& config);

// HF row r of a permuted q/k projection <- Meta row MetaRowOfHfRow(r) (per
// head of head_dim rows): exposed for the test of the permutation.
int64_t MetaRowOfHfRow(int64_t hf_row, int32_t head_dim);

}  // namespace argen::anole
