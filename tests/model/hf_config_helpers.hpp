#pragma once
// What the Hugging Face config tests share: tiny model directories written here (config.json and zero weights, in
// one file or in shards with an index), and checks that a config is refused with an error naming the key.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "../temp_dir.hpp"
#include "arclight/model/architecture.hpp"
#include "arclight/model/hf_model.hpp"

namespace hf_test {

using namespace arclight;
using namespace arclight::model;

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

using Tensors = std::vector<ExpectedTensor>;

// Writes `tensors` (zeros, of `dtype`, or I32 for those named in `int_tensors`) as model.safetensors, or in `shards`
// files with an index.
inline void write_weights(const TempDir& dir, const Tensors& tensors, int shards = 1, DType dtype = DType::bf16,
                          const std::vector<std::string>& int_tensors = {}) {
  std::size_t largest = 0;
  for (const auto& t : tensors) largest = std::max<std::size_t>(largest, tensor_bytes(DType::f64, t.shape).value());
  const std::vector<char> zeros(largest);
  std::vector<std::vector<TensorToWrite>> files(shards);
  std::string map;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const bool is_int = std::find(int_tensors.begin(), int_tensors.end(), t.name) != int_tensors.end();
    const DType d = is_int ? DType::i32 : dtype;
    files[i % shards].push_back({t.name, d, t.shape, zeros.data(), tensor_bytes(d, t.shape).value()});
    map += (map.empty() ? "" : ",") + ("\"" + t.name + "\":\"model-0000" + std::to_string(i % shards + 1) + "-of-0000" +
                                       std::to_string(shards) + ".safetensors\"");
  }
  if (shards == 1) {
    write_safetensors(dir.file("model.safetensors"), files[0]);
    return;
  }
  for (int s = 0; s < shards; ++s)
    write_safetensors(
        dir.file("model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors"),
        files[s]);
  write_text(dir.file("model.safetensors.index.json"),
             R"({"metadata": {"total_size": 0}, "weight_map": {)" + map + "}}");
}

inline bool mentions(const ModelFileError& e, const std::vector<std::string>& fragments) {
  const std::string what = e.what();
  bool ok = e.exit_code() == exit_usage;
  for (const auto& f : fragments) ok = ok && what.find(f) != std::string::npos;
  if (!ok) BOOST_TEST_MESSAGE("error \"" << what << "\" lacks one of the fragments");
  return ok;
}

inline void expect_config_refused(const std::string& text, const std::vector<std::string>& fragments) {
  BOOST_TEST_CONTEXT("expecting \"" << fragments.front() << "\"") {
    BOOST_CHECK_EXCEPTION(parse_hf_config(text, "x/config.json"), ModelFileError, [&](const ModelFileError& e) {
      return mentions(e, {"x/config.json: "}) && mentions(e, fragments);
    });
  }
}

// A Hugging Face model of `config_json` with these tensors written into `dir`, as model.source = "hf" names it.
inline ModelConfig hf_model_in(const TempDir& dir, const std::string& config_json, const Tensors& tensors) {
  write_text(dir.file("config.json"), config_json);
  write_weights(dir, tensors);
  ModelConfig model;
  model.source = ModelSource::hf;
  model.path = dir.dir();
  return model;
}

inline const ExpectedTensor& find(const Tensors& tensors, const std::string& name) {
  const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const auto& t) { return t.name == name; });
  BOOST_REQUIRE(it != tensors.end());
  return *it;
}

inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  BOOST_REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace hf_test
