// Decode attention alone, at the last decode step: dense (L_p + L_dec keys)
// against a sparse slot list (L_p + n_att keys), with bytes moved compared to
// a device-to-device copy measured in the same run.
#pragma once

#include <cstdint>
#include <string>

namespace argen::bench {

struct AttentionMicroResult {
  double copy_gbs = 0;  // cudaMemcpy D2D, bytes read + written per second
  double dense_us = 0, sparse_us = 0;
  double dense_gbs = 0, sparse_gbs = 0;  // KV (+ index) bytes read per second
};

// rows: CFG rows; heads/head_dim: the model's; n_att: attended decode keys.
bool RunAttentionMicro(int rows, int heads, int head_dim, int prompt_len, int l_dec, int n_att,
                       int n_slots, AttentionMicroResult* out, std::string* error);

}  // namespace argen::bench
