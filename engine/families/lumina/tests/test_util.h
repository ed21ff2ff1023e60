// Small helpers of the Lumina family tests: the shared golden helpers.
#pragma once

#include "tests/support/golden_files.h"

namespace argen::lumina::testing {

using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

}  // namespace argen::lumina::testing
