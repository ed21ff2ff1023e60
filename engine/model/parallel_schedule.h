// ZipAR-style parallel decoding (arXiv 2412.04062; docs/serving.md): which
// decode queries one image's rows feed at each step when several image rows
// are in flight. The same for every image of a request and both rows of a
// CFG pair (it depends on positions only, never on token values), so the
// generic engine keeps one per request.
//
// The decode sequence is image rows of `period` tokens (the grid's width
// plus its row-break tokens; the last row may be shorter). Query q (input:
// token q, at decode index q) samples token q + 1, so image row r owns the
// queries that sample its tokens: its chain [r * period - 1, (r + 1) *
// period - 2] (row 0: from 0; at most l_dec - 2). Each started row feeds
// the next query of its chain every step:
//   * Row r + 1 starts once row r has `window` tokens (and row 1, for a
//     model without row-break tokens, once row 0 is complete: see below).
//   * Its first query, at index (r + 1) * period - 1, needs token (r + 1) *
//     period - 1 as input: the last token of row r. With row-break tokens
//     (Lumina-mGPT) that token is forced, hence known: an ordinary query.
//     Without (Janus-Pro, LlamaGen) it is not generated yet: as in ZipAR's
//     LlamaGen port, a *provisional* query (step_plan.h) feeds the newest
//     token of row r - 1 in its place (at the true position), samples row r +
//     1's first token and writes nothing; once row r has made that token, a
//     *fill* query at the same index with the real token writes its K/V
//     (its output is not recorded: the token after it is made already).
//     Row 1 has no row above row 0 to stand in, so it waits for row 0.
// Forced tokens (row breaks, a family's fixed tokens) are known from the
// start; a query whose next token is known records nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace argen::model {

class ParallelSchedule {
 public:
  struct Query {
    int32_t index = 0;        // decode index
    int32_t input_token = 0;  // the token whose id is the input (index itself unless provisional)
    bool provisional = false;
    bool records = false;   // its output, token index + 1, is made by this query
    int32_t image_row = 0;  // whose chain (or fill) it is
  };

  // l_dec tokens in rows of `period`, image row r + 1 starting once row r has
  // `window` (>= 1) tokens; forced[t] >= 0 (or forced empty: none) marks token
  // t forced. Token 0 is made by the prefill: call Made(0) first.
  ParallelSchedule(int32_t l_dec, int32_t period, int32_t window, std::span<const int32_t> forced);

  // Token k is made (sampled or forced).
  void Made(int32_t k);
  bool known(int32_t k) const { return known_[k] != 0; }
  // Tokens 0 .. leading() - 1 are all made.
  int32_t leading() const { return leading_; }
  bool done() const { return leading_ == l_dec_; }

  // The next step's queries in increasing index order (empty once done).
  // Stable until Commit().
  const std::vector<Query>& Next();
  // The step of Next() ran: the recording queries' tokens are made; advances.
  void Commit();

  int32_t rows_in_flight() const;

 private:
  int32_t ChainStart(int32_t r) const { return r == 0 ? 0 : r * period_ - 1; }
  int32_t ChainEnd(int32_t r) const;
  int32_t RowKnown(int32_t r) const;  // leading made tokens of image row r
  void StartRows();

  int32_t l_dec_, period_, window_, rows_;
  std::vector<uint8_t> known_;
  int32_t leading_ = 0;
  std::vector<int32_t> cursor_;  // per image row: its next chain query; -1: not started
  std::vector<int32_t> fill_;    // per image row: the index a fill query must write, or -1
  std::vector<Query> next_;
  bool planned_ = false;
};

}  // namespace argen::model
