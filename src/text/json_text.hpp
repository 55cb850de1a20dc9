#pragma once
// JSON serialized as Hugging Face's templates' tojson writes it (Python's json.dumps, ensure_ascii false).
#include <string>

#include <nlohmann/json.hpp>

namespace arclight::text {

std::string tojson(const nlohmann::ordered_json& value);
// tojson(indent=N): Python's json.dumps with an indent, each item on a line of its own (",", ": ").
std::string tojson_indented(const nlohmann::ordered_json& value, int indent);

}  // namespace arclight::text
