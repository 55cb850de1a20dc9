#pragma once
// A checkpoint directory's names, private to src/ckpt (the public part is in checkpoint.hpp).
#include <cstdint>
#include <string>
#include <vector>

namespace arclight::ckpt {

// The versions whose files `dir` holds (v<NNNNNNNN>.h5), oldest first.
std::vector<std::int64_t> versions_in(const std::string& dir);

// A token that makes a name its own (a write's segment files, a superseded version).
std::string unique_token();

}  // namespace arclight::ckpt
