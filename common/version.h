// The version of this build, for --version, logs, metrics and image metadata.
// Defined in a file generated at build time (common/write_version.cmake).
#pragma once

#include <string>
#include <string_view>

namespace argen {

std::string_view ProjectVersion();  // CMake project(VERSION), e.g. "0.1.0"
std::string_view GitDescribe();     // `git describe --always --dirty`; "unknown" outside git
std::string_view BuildType();       // CMAKE_BUILD_TYPE, e.g. "Release"

// "0.1.0+5cf72f1-dirty": the project version, then (semver build metadata)
// the git description; just "0.1.0" outside a git checkout.
inline std::string Version() {
  std::string v(ProjectVersion());
  if (GitDescribe() != "unknown") {
    v.push_back('+');
    v.append(GitDescribe());
  }
  return v;
}

// "<program> 0.1.0+5cf72f1-dirty (Release build)".
inline std::string VersionLine(std::string_view program) {
  std::string line(program);
  line.push_back(' ');
  line.append(Version()).append(" (").append(BuildType()).append(" build)");
  return line;
}

}  // namespace argen
