#include "engine/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {

absl::Status BpeModel::AddMerge(const std::string& a, const std::string& b, int32_t rank, const std::string& where) {
  const std::string field = absl::StrCat("merges[", rank, "]");
  auto a_id = TokenToId(a);
  auto b_id = TokenToId(b);
  if (!a_id || !b_id) {
    return FieldError(where, field, absl::StrCat("token \"", !a_id ? a : b, "\" is not in the vocab"));
  }
  // As HF: the merged token drops b's continuing-subword prefix length.
  const size_t skip = std::min(continuing_subword_prefix_.size(), b.size());
  const std::string merged = a + b.substr(skip);
  auto merged_id = TokenToId(merged);
  if (!merged_id) return FieldError(where, field, absl::StrCat("merged token \"", merged, "\" is not in the vocab"));
  merges_.insert_or_assign(PairKey(*a_id, *b_id),
                           Merge{rank, *merged_id});  // as HF: a repeated pair keeps its last rank
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> BpeModel::Parse(const nlohmann::json& config, const std::string& where) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  if (absl::Status s = model->LoadVocab(config, where); !s.ok()) return s;
  if (auto d = config.find("dropout"); d != config.end() && !d->is_null()) {
    if (!d->is_number()) return FieldError(where, "dropout", "expected a number or null");
    if (d->get<double>() > 0) return FieldError(where, "dropout", "BPE dropout is not supported for inference");
  }
  auto unk = OptionalString(config, "unk_token", where);
  auto prefix = OptionalString(config, "continuing_subword_prefix", where);
  auto suffix = OptionalString(config, "end_of_word_suffix", where);
  auto fuse = OptionalBool(config, "fuse_unk", false, where);
  auto fallback = OptionalBool(config, "byte_fallback", false, where);
  auto ignore = OptionalBool(config, "ignore_merges", false, where);
  for (const absl::Status& s :
       {unk.status(), prefix.status(), suffix.status(), fuse.status(), fallback.status(), ignore.status()}) {
    if (!s.ok()) return s;
  }
  model->unk_token_ = *unk;
  if (!unk->empty()) model->unk_id_ = model->TokenToId(*unk);
  model->continuing_subword_prefix_ = *prefix;
  model->end_of_word_suffix_ = *suffix;
  model->fuse_unk_ = *fuse;
  model->byte_fallback_ = *fallback;
  model->ignore_merges_ = *ignore;

  auto merges = config.find("merges");
  if (merges == config.end() || merges->is_null()) return FieldError(where, "merges", "missing");
  if (!merges->is_array()) return FieldError(where, "merges", "expected an array");
  model->merges_.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const nlohmann::json& m = (*merges)[i];
    const int32_t rank = static_cast<int32_t>(i);
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return FieldError(where, absl::StrCat("merges[", i, "]"), "expected \"a b\" with exactly one space");
      }
      a = s.substr(0, space), b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      return FieldError(where, absl::StrCat("merges[", i, "]"), "expected \"a b\" or [\"a\", \"b\"]");
    }
    if (absl::Status s = model->AddMerge(a, b, rank, where); !s.ok()) return s;
  }
  return model;
}

// HF's Word::merge_all: a priority queue of candidate merges (lowest rank,
// then leftmost) over a linked list of symbols; O(n log n) per piece, so a long
// run of letters cannot stall Encode.
void BpeModel::MergeAll(std::vector<int32_t>& symbols) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1: none
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, merged_id;
    bool operator<(const Candidate& o) const {  // max-heap: lower rank, then lower pos, on top
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int32_t n = static_cast<int32_t>(symbols.size());
  if (n < 2) return;
  std::vector<Symbol> list(n);
  for (int32_t i = 0; i < n; ++i) list[i] = {symbols[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Candidate> queue;
  const auto push_pair = [&](int32_t left) {
    const int32_t right = list[left].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(list[left].id, list[right].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.merged_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = list[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = list[left.next];
    // Skip entries made stale by earlier merges.
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.merged_id != top.merged_id) continue;
    left.id = top.merged_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) list[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  symbols.clear();
  for (int32_t i = 0; i >= 0; i = list[i].next) symbols.push_back(list[i].id);
}

absl::Status BpeModel::Tokenize(std::u32string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return absl::OkStatus();
  std::string text;
  for (char32_t c : piece) AppendUtf8(c, text);
  if (ignore_merges_) {
    if (auto id = TokenToId(text)) {
      ids.push_back(*id);
      return absl::OkStatus();
    }
  }

  // Initial symbols: one per character, unknown ones replaced by unk (fused if asked).
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  bool pending_unk = false;
  std::string s;
  char hex[8];
  for (size_t i = 0; i < piece.size(); ++i) {
    s.clear();
    if (i > 0) s += continuing_subword_prefix_;
    AppendUtf8(piece[i], s);
    if (i + 1 == piece.size()) s += end_of_word_suffix_;
    if (auto id = TokenToId(s)) {
      if (pending_unk) symbols.push_back(*unk_id_), pending_unk = false;
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (unsigned char b : s) {
        std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
        auto id = TokenToId(hex);
        if (!id) break;
        bytes.push_back(*id);
      }
      if (bytes.size() == s.size()) {
        if (pending_unk) symbols.push_back(*unk_id_), pending_unk = false;
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_token_.empty()) continue;  // as HF: a character without unk token is dropped
    if (!unk_id_) {
      return absl::InvalidArgumentError(absl::StrCat("BPE unk_token \"", unk_token_, "\" is not in the vocab"));
    }
    if (pending_unk && !fuse_unk_) symbols.push_back(*unk_id_);
    pending_unk = true;
  }
  if (pending_unk) symbols.push_back(*unk_id_);

  MergeAll(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  return absl::OkStatus();
}

}  // namespace argen::tokenizer
