#pragma once
// What the readers of a Hugging Face model directory share (private to the model module): config.json's reader in
// hf_model.cpp and the weights' reader in hf_weights.cpp (defined in hf_files.cpp). Every failure is a ModelFileError
// naming the file.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace arclight::model::hf_files {

[[noreturn]] void fail_file(const std::string& file, const std::string& what);

// The whole file; one that is not a regular file (a FIFO would block) is refused.
std::string read_text(const std::string& path);

nlohmann::json parse_json(std::string_view text, const std::string& file);

// A value as an error message shows it: a list or an object only by its size (dump recurses once per level of
// nesting: a config.json nested 100,000 deep overflowed the stack), a long scalar cut.
std::string excerpt(const nlohmann::json& v);

}  // namespace arclight::model::hf_files
