// Byte-pair encoding as HF tokenizers' BPE model: characters (with optional
// continuing-subword prefix / end-of-word suffix, byte fallback, unk fusing)
// merged by merge rank, lowest first and leftmost on ties.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "engine/tokenizer/model.h"

namespace argen::tokenizer {

class BpeModel final : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Parse(const nlohmann::json& config, const std::string& where);
  absl::Status Tokenize(std::u32string_view piece, std::vector<int32_t>& ids) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void MergeAll(std::vector<int32_t>& symbols) const;
  absl::Status AddMerge(const std::string& a, const std::string& b, int32_t rank, const std::string& where);

  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  std::string unk_token_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

}  // namespace argen::tokenizer
