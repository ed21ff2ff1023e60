// Query groups of a dense decode pass (kernels/query_groups.h): a row's
// several queries (a dense row decoding t, t+1, ... in one pass, or
// parallel decoding's rows in flight) attend nested key sets (a query's keys
// are a prefix of its row's later queries' keys), so one attention launch
// reads the row's K/V once for a group of them instead of once a query.
#include <algorithm>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/pool_sizing.h"
#include "engine/cuda/query_group_plan.h"
#include "kernels/attention.h"

namespace argen::cuda {

CudaBackend::QueryGroups CudaBackend::StageQueryGroups(std::span<const DecodeQuery> queries,
                                                       const kernels::TokenMeta* meta) {
  const model::StackConfig& d = spec_.stack;
  const int32_t n_pairs = static_cast<int32_t>(queries.size());
  QueryGroups none;
  none.plain_rows = 2 * n_pairs;
  // The common pass (a query a row) stops here: every step takes this path.
  bool several = false;
  for (int32_t i = 1; i < n_pairs && !several; ++i) several = queries[i].cond == queries[i - 1].cond;
  if (!several) return none;
  // Group sizes the attention kernels take (the grouped heads a KV head has: size * G).
  const int32_t G = d.num_heads / d.num_kv_heads;
  std::vector<int32_t> sizes;
  for (int32_t size : {1, 2, 4, 8}) {
    if (kernels::AttentionShapeSupported(d.num_kv_heads * size * G, d.num_kv_heads, d.head_dim)) sizes.push_back(size);
  }
  // Whether queries [first, last) (one row pair's, in increasing index order)
  // attend nested key sets: in order (slots [0, t]) alike, or out of order
  // with each list a prefix of the last one's.
  const auto nested = [&](int32_t first, int32_t last) {
    const DecodeQuery& leader = queries[last - 1];
    for (int32_t i = first; i < last; ++i) {
      const DecodeQuery& q = queries[i];
      if ((q.list >= 0) != (leader.list >= 0)) return false;
      if (q.list < 0) continue;
      if (q.list_len > leader.list_len ||
          !std::equal(lists_.begin() + q.list, lists_.begin() + q.list + q.list_len, lists_.begin() + leader.list))
        return false;
    }
    return true;
  };
  // The runs of a row's queries, and which can group.
  std::vector<QueryRun> runs;
  for (int32_t i = 0; i < n_pairs;) {
    int32_t j = i + 1;
    while (j < n_pairs && queries[j].cond == queries[i].cond) ++j;
    const DecodeQuery& q = queries[i];
    runs.push_back({i, j - i, j - i > 1 && !q.cond->sparse && !q.uncond->sparse && nested(i, j)});
    i = j;
  }
  const QueryGroupPlan plan = PlanQueryGroups(runs, sizes);
  const std::vector<PlannedGroup>& groups = plan.groups;
  if (groups.empty()) return none;
  int64_t slots = 0;
  for (const PlannedGroup& g : groups) slots += g.size;
  // Room: the staging (slots, groups <= max_tokens_), the grouped queries in
  // qkv_ (f32) and their outputs in gate_up_ (bf16), both free at attention time.
  const int64_t q_dim = int64_t{d.num_heads} * d.head_dim;
  if (slots > max_tokens_ || static_cast<int64_t>(groups.size()) > max_tokens_ ||
      slots * q_dim > int64_t{max_tokens_} * (q_dim + 2 * int64_t{d.num_kv_heads} * d.head_dim) ||
      slots * q_dim * 2 > int64_t{max_tokens_} * 2 * d.intermediate_size * 4)
    return none;
  const StagingLayout layout(max_tokens_, options_.max_batch_rows);
  char* host = host_in_.as<char>();
  auto* group_meta = reinterpret_cast<kernels::TokenMeta*>(host + layout.group_meta);
  auto* members = reinterpret_cast<int32_t*>(host + layout.group_members);
  auto* limits = reinterpret_cast<int32_t*>(host + layout.group_limits);
  QueryGroups out;
  out.plain_rows = 2 * plan.plain_pairs;
  int32_t slot = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const PlannedGroup& g = groups[i];
    if (out.classes.empty() || out.classes.back().size != g.size) {
      out.classes.push_back({g.size, static_cast<int32_t>(i), 0, slot});
    }
    ++out.classes.back().groups;
    for (int32_t p = 0; p < g.size; ++p, ++slot) {
      const int32_t row = p < g.pairs ? 2 * (g.first_pair + p) + g.side : -1;
      members[slot] = row;
      limits[slot] = row < 0 ? 0 : meta[row].prefix_len + meta[row].decode_count;
    }
    group_meta[i] = meta[2 * (g.first_pair + g.pairs - 1) + g.side];  // the most keys: the last query's
  }
  return out;
}

}  // namespace argen::cuda
