// Helpers for fuzz targets whose parser reads files: a private scratch
// directory (in /dev/shm when it exists, so no disk I/O per input) and writing
// fuzz bytes into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace argen::fuzz {

// A directory only this process uses, created on first call, removed at exit.
const std::string& ScratchDir();

// Writes `size` bytes to ScratchDir()/name (replacing it); returns the path.
std::string WriteScratchFile(const std::string& name, const uint8_t* data, size_t size);
std::string WriteScratchFile(const std::string& name, const std::string& text);

// The repository root (ARGEN_SOURCE_DIR, else the compiled-in path).
std::string SourceDir();

}  // namespace argen::fuzz
