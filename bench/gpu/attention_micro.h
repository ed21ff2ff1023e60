// Decode attention alone, at the last decode step: dense (L_p + L_dec keys)
// against a sparse slot list (L_p + n_att keys), with bytes moved compared to
// a device-to-device copy measured in the same run.
#pragma once

#include <cstdint>
#include <string>

namespace argen::bench {

struct AttentionMicroResult {
  double copy_gbs = 0;                   // cudaMemcpy D2D, bytes read + written per second
  double dense_us = 0, sparse_us = 0;    // the two-pass kernel
  double dense_gbs = 0, sparse_gbs = 0;  // KV (+ index) bytes read per second
  // The sparse launch with the staged kernel forced (kernels::AttentionVariant::kStaged);
  // staged_ran is false (and these 0) when it does not fit and the two-pass kernel would run.
  bool staged_ran = false;
  double staged_us = 0, staged_gbs = 0;
  // What kAuto picks for the sparse launch (true: staged).
  bool auto_staged = false;
};

// rows: CFG rows; heads/head_dim: the model's; n_att: attended decode keys.
bool RunAttentionMicro(int rows, int heads, int head_dim, int prompt_len, int l_dec, int n_att, int n_slots,
                       AttentionMicroResult* out, std::string* error);

}  // namespace argen::bench
