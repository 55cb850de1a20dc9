// What the readers of a Hugging Face model directory share (hf_files.hpp), and the digest of the files beside the
// weights that define the model.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "arclight/core/crc32c.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/hf_model.hpp"
#include "hf_files.hpp"

namespace arclight::model {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace hf_files {

void fail_file(const std::string& file, const std::string& what) {
  throw ModelFileError(log::concat(file, ": ", what));
}

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) fail_file(path, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_file(path, "cannot be opened");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail_file(path, "cannot be read");
  return text;
}

json parse_json(std::string_view text, const std::string& file) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail_file(file, log::concat("not JSON: ", e.what()));
  }
}

std::string excerpt(const json& v) {
  if (v.is_array()) return log::concat("a list of ", v.size());
  if (v.is_object()) return log::concat("an object of ", v.size(), " keys");
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

}  // namespace hf_files

std::string definition_digest(const std::string& model_dir) {
  std::string digest;
  for (const std::string_view name : definition_files) {
    const fs::path file = fs::path(model_dir) / name;
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    const std::string bytes = hf_files::read_text(file.string());
    char line[16];
    std::snprintf(line, sizeof line, " %08x\n", crc32c(bytes.data(), bytes.size()));
    digest.append(name).append(line);
  }
  return digest;
}

std::vector<std::string> definition_differences(const std::string& saved, const std::string& now) {
  const auto files = [](const std::string& digest) {
    std::map<std::string, std::string> crcs;
    std::istringstream in(digest);
    for (std::string line; std::getline(in, line);) {
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || space == 0 || line.size() - space != 9)
        throw ModelFileError("a model definition digest's line is not a file name and a CRC-32C: " + line);
      crcs[line.substr(0, space)] = line.substr(space + 1);
    }
    return crcs;
  };
  const std::map<std::string, std::string> before = files(saved), after = files(now);
  std::vector<std::string> out;
  for (const std::string_view name_view : definition_files) {
    const std::string name(name_view);
    const auto was = before.find(name), is = after.find(name);
    if (was == before.end() && is == after.end()) continue;
    if (was == before.end()) {
      out.push_back(name + " was not there");
    } else if (is == after.end()) {
      out.push_back(name + " is not there now");
    } else if (was->second != is->second) {
      out.push_back(name + " differs");
    }
  }
  return out;
}

}  // namespace arclight::model
