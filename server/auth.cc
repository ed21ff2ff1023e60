#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace argen::server {
namespace {

std::array<uint8_t, 32> Sha256(absl::string_view data) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

bool ParseHexDigest(absl::string_view hex, std::array<uint8_t, 32>& out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    int value = 0;
    for (int k = 0; k < 2; ++k) {
      const char c = absl::ascii_tolower(static_cast<unsigned char>(hex[2 * i + k]));
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (digit < 0) return false;
      value = value * 16 + digit;
    }
    out[i] = static_cast<uint8_t>(value);
  }
  return true;
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

absl::StatusOr<uint32_t> ParseRights(absl::string_view list) {
  uint32_t rights = 0;
  for (absl::string_view r : absl::StrSplit(list, ',')) {
    if (r == "generate")
      rights |= static_cast<uint32_t>(Right::kGenerate);
    else if (r == "info")
      rights |= static_cast<uint32_t>(Right::kInfo);
    else if (r == "health")
      rights |= static_cast<uint32_t>(Right::kHealth);
    else if (r == "metrics")
      rights |= static_cast<uint32_t>(Right::kMetrics);
    else if (r == "all")
      rights |= 0xf;
    else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown right \"", std::string(r), "\" (generate, info, health, metrics, all)"));
    }
  }
  return rights;
}

}  // namespace

absl::string_view RightName(Right right) {
  switch (right) {
    case Right::kGenerate:
      return "generate";
    case Right::kInfo:
      return "info";
    case Right::kHealth:
      return "health";
    case Right::kMetrics:
      return "metrics";
  }
  return "?";
}

std::string Sha256Hex(absl::string_view data) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : Sha256(data)) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

absl::StatusOr<ApiKeys> ApiKeys::Parse(absl::string_view text, const std::string& source) {
  ApiKeys out;
  std::set<std::string> names;
  std::set<std::array<uint8_t, 32>> digests;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": ", why));
    };
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() < 2) return bad("want NAME SHA256_HEX [option=value ...]");
    ApiKey key;
    key.name = std::string(fields[0]);
    if (!ValidName(key.name)) return bad(absl::StrCat("name \"", key.name, "\": use 1-64 of A-Z a-z 0-9 _ . -"));
    if (!names.insert(key.name).second) return bad(absl::StrCat("name \"", key.name, "\" appears twice"));
    if (!ParseHexDigest(fields[1], key.sha256)) {
      return bad(absl::StrCat("key \"", key.name,
                              "\": the second field must be the 64 hex digits of the key's SHA-256 "
                              "(printf %s \"$KEY\" | sha256sum), never the key itself"));
    }
    if (!digests.insert(key.sha256).second) {
      return bad(absl::StrCat("key \"", key.name, "\": the same hash as an earlier key"));
    }
    for (size_t i = 2; i < fields.size(); ++i) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(fields[i], absl::MaxSplits('=', 1));
      const std::string option(kv.first);
      const std::string value(kv.second);
      auto count = [&](int32_t& into) -> absl::Status {
        int64_t n = 0;
        if (!absl::SimpleAtoi(value, &n) || n < 0 || n > (1 << 30)) {
          return bad(absl::StrCat(option, "=\"", value, "\": want an integer >= 0 (0: unlimited)"));
        }
        into = static_cast<int32_t>(n);
        return absl::OkStatus();
      };
      if (option == "rights") {
        absl::StatusOr<uint32_t> rights = ParseRights(value);
        if (!rights.ok()) return bad(std::string(rights.status().message()));
        key.rights = *rights;
      } else if (option == "max_priority") {
        absl::StatusOr<scheduler::Priority> p = scheduler::ParsePriority(value);
        if (!p.ok()) return bad(absl::StrCat("max_priority: ", p.status().message()));
        key.max_priority = *p;
      } else if (option == "max_concurrent_requests") {
        if (absl::Status s = count(key.max_concurrent_requests); !s.ok()) return s;
      } else if (option == "max_queued_images") {
        if (absl::Status s = count(key.max_queued_images); !s.ok()) return s;
      } else {
        return bad(absl::StrCat("unknown option \"", option,
                                "\" (rights, max_priority, max_concurrent_requests, max_queued_images)"));
      }
    }
    out.keys_.push_back(std::move(key));
  }
  if (out.keys_.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no keys in it"));
  return out;
}

absl::StatusOr<ApiKeys> ApiKeys::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("key 'auth.api_keys_file': cannot read '", path, "'"));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ApiKeys> keys = Parse(text.str(), path);
  if (!keys.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("key 'auth.api_keys_file': ", keys.status().message()));
  }
  return keys;
}

const ApiKey* ApiKeys::Find(absl::string_view token) const {
  const std::array<uint8_t, 32> digest = Sha256(token);
  const ApiKey* found = nullptr;
  for (const ApiKey& key : keys_) {
    const bool match = CRYPTO_memcmp(key.sha256.data(), digest.data(), digest.size()) == 0;
    // No early exit: the time does not tell which entry matched.
    found = match ? &key : found;
  }
  return found;
}

std::optional<absl::string_view> BearerToken(absl::string_view authorization) {
  authorization = absl::StripAsciiWhitespace(authorization);
  if (authorization.size() < 7 || !absl::EqualsIgnoreCase(authorization.substr(0, 7), "bearer ")) {
    return std::nullopt;
  }
  absl::string_view token = absl::StripAsciiWhitespace(authorization.substr(7));
  if (token.empty()) return std::nullopt;
  return token;
}

absl::StatusOr<const ApiKey*> Authorize(const ApiKeys* keys, absl::string_view authorization, Right right) {
  if (keys == nullptr) return nullptr;
  std::optional<absl::string_view> token = BearerToken(authorization);
  if (!token) {
    return absl::UnauthenticatedError(authorization.empty() ? "missing API key: send 'authorization: Bearer <key>'"
                                                            : "malformed authorization: want 'Bearer <key>'");
  }
  const ApiKey* key = keys->Find(*token);
  if (key == nullptr) return absl::UnauthenticatedError("invalid API key");
  if (!key->has(right)) {
    return absl::PermissionDeniedError(
        absl::StrCat("API key '", key->name, "' lacks the right '", RightName(right), "'"));
  }
  return key;
}

}  // namespace argen::server
