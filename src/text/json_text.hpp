#pragma once
// JSON serialized as Hugging Face's templates' tojson writes it (Python's json.dumps, ensure_ascii false).
#include <string>

#include <nlohmann/json.hpp>

namespace arclight::text {

std::string tojson(const nlohmann::ordered_json& value);

}  // namespace arclight::text
