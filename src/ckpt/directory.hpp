#pragma once
// A checkpoint directory's names, private to src/ckpt (the public part is in checkpoint.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace arclight::ckpt {

// The versions whose files `dir` holds (v<NNNNNNNN>.h5), oldest first.
std::vector<std::int64_t> versions_in(const std::string& dir);

// At most `limit` bytes of a regular file, read without blocking; nullopt when there is none.
std::optional<std::string> read_small_file(const std::string& path, std::size_t limit);

// A token that makes a name its own (a write's segment files, a superseded version).
std::string unique_token();

}  // namespace arclight::ckpt
