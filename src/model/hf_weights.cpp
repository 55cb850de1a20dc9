#include "arclight/model/hf_model.hpp"

#include <filesystem>
#include <map>
#include <set>

#include "arclight/core/crc32c.hpp"
#include "arclight/core/log.hpp"
#include "hf_files.hpp"

// A Hugging Face model's weights: model.safetensors, or the shards model.safetensors.index.json names, each tensor in
// one place; and the check that they are what config.json's architecture holds, name, shape and dtype.
namespace arclight::model {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace hf_files;

constexpr std::string_view single_file = "model.safetensors";
constexpr std::string_view index_file = "model.safetensors.index.json";
constexpr std::size_t max_problems_listed = 10;

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// A tensor's name as the causal LM has it: a multimodal Gemma 3's text model's under the prefixes Google's files and
// transformers 4.52 on write.
std::string causal_lm_name(const std::string& name) {
  static constexpr std::pair<std::string_view, std::string_view> prefixes[] = {{"language_model.model.", "model."},
                                                                               {"language_model.lm_head.", "lm_head."},
                                                                               {"model.language_model.", "model."}};
  for (const auto& [from, to] : prefixes)
    if (starts_with(name, from)) return std::string(to) + name.substr(from.size());
  return name;
}

// A multimodal Gemma 3's vision tower and projector, which its text model does not read.
bool is_vision_tensor(std::string_view name) {
  for (std::string_view prefix :
       {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."})
    if (starts_with(name, prefix)) return true;
  return false;
}

}  // namespace

struct HfWeights::State {
  std::string dir;
  std::vector<std::unique_ptr<SafetensorsFile>> files;  // behind pointers: the entries below point into them
  struct Where {
    const SafetensorsFile* file;
    const TensorEntry* entry;
  };
  std::map<std::string, Where, std::less<>> tensors;

  void add_file(const std::string& path) {
    files.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(path)));
  }
  void add_tensor(const SafetensorsFile& file, const TensorEntry& entry) {
    const auto [it, inserted] = tensors.emplace(causal_lm_name(entry.name), Where{&file, &entry});
    if (!inserted)
      fail_file(file.path(), log::concat("tensor '", entry.name, "' is also in ", it->second.file->path(),
                                         it->first == entry.name ? "" : " as '" + it->first + "'"));
  }
};

HfWeights::HfWeights() : state_(std::make_unique<State>()) {}
HfWeights::HfWeights(HfWeights&&) noexcept = default;
HfWeights& HfWeights::operator=(HfWeights&&) noexcept = default;
HfWeights::~HfWeights() = default;

HfWeights HfWeights::open(const std::string& model_dir) {
  HfWeights weights;
  State& s = *weights.state_;
  s.dir = model_dir;
  const fs::path dir(model_dir);
  // As transformers' from_pretrained: the single file first, the sharded index without it.
  if (fs::exists(dir / single_file)) {
    s.add_file((dir / single_file).string());
    for (const TensorEntry& e : s.files[0]->header().tensors) s.add_tensor(*s.files[0], e);
    return weights;
  }
  const std::string index_path = (dir / index_file).string();
  if (!fs::exists(index_path))
    fail_file(model_dir, log::concat("neither ", single_file, " nor ", index_file, " is there"));
  const json index = parse_json(read_text(index_path), index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail_file(index_path, "expected an object with a \"weight_map\" object");
  const json& map = index["weight_map"];
  if (map.empty()) fail_file(index_path, "\"weight_map\" is empty");

  std::map<std::string, std::size_t> shards;  // shard name -> position in s.files
  for (const auto& [tensor, shard_value] : map.items()) {
    if (!shard_value.is_string())
      fail_file(index_path, log::concat("weight_map: tensor '", tensor, "': expected a shard file name, found ",
                                        excerpt(shard_value)));
    const std::string shard = shard_value.get<std::string>();
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos || shard.find('\0') != std::string::npos)
      fail_file(index_path, log::concat("weight_map: tensor '", tensor, "': shard \"", shard,
                                        "\" is not a plain file name in the model directory"));
    if (shards.count(shard)) continue;
    const fs::path path = dir / shard;
    if (!fs::exists(path))
      fail_file(index_path, log::concat("weight_map: tensor '", tensor, "': shard \"", shard, "\" is missing"));
    shards.emplace(shard, s.files.size());
    s.add_file(path.string());
  }
  // Each tensor in the shard the map names, and each shard's tensors all in the map.
  for (const auto& [tensor, shard_value] : map.items()) {
    const SafetensorsFile& file = *s.files[shards.at(shard_value.get<std::string>())];
    const TensorEntry* entry = file.find(tensor);
    if (!entry)
      fail_file(index_path, log::concat("weight_map: tensor '", tensor, "' is not in its shard ", file.path()));
    s.add_tensor(file, *entry);
  }
  for (const auto& [shard, position] : shards) {
    const SafetensorsFile& file = *s.files[position];
    for (const TensorEntry& e : file.header().tensors) {
      const auto named = map.find(e.name);
      if (named == map.end())
        fail_file(file.path(), log::concat("tensor '", e.name, "' is not in ", index_file, "'s weight_map"));
      if (named->get<std::string>() != shard)  // which copy transformers takes depends on the order it reads shards
        fail_file(file.path(), log::concat("tensor '", e.name, "' is in this shard too, but ", index_file,
                                           "'s weight_map names ", named->get<std::string>()));
    }
  }
  return weights;
}

bool HfWeights::has(std::string_view name) const { return state_->tensors.find(name) != state_->tensors.end(); }

const TensorEntry& HfWeights::entry(std::string_view name) const {
  const auto it = state_->tensors.find(name);
  if (it == state_->tensors.end()) fail_file(state_->dir, log::concat("no tensor '", name, "' in the weights"));
  return *it->second.entry;
}

std::string_view HfWeights::bytes(std::string_view name) const {
  const TensorEntry& e = entry(name);
  return state_->tensors.find(name)->second.file->bytes(e);
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, where] : state_->tensors) out.push_back(name);
  return out;
}

std::size_t HfWeights::file_count() const { return state_->files.size(); }

void HfWeights::check_against(const HfConfig& config) const {
  // Far more layers than the weights' tensors can hold (each layer has nine or more) are refused before the list of
  // what is expected is built: that list grows with the layer count (2^31 layers would not fit in memory, and a header
  // of a million empty tensors with as many layers took gigabytes to list as missing). Short of that, what is missing
  // is listed.
  constexpr std::uint64_t tensors_per_layer = 9, few = 64;
  if (std::uint64_t(config.num_hidden_layers) * tensors_per_layer > 2 * state_->tensors.size() + few)
    throw ModelFileError(log::concat(state_->dir, ": the weights do not match config.json: num_hidden_layers ",
                                     config.num_hidden_layers, " needs far more than the ", state_->tensors.size(),
                                     " tensors the weights hold (each layer has nine or more)"));
  std::vector<std::string> problems;  // the first max_problems_listed, of problem_count
  std::size_t problem_count = 0;
  const auto problem = [&](std::string text) {
    if (problem_count++ < max_problems_listed) problems.push_back(std::move(text));
  };
  const auto check = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
    const TensorEntry& e = *state_->tensors.find(name)->second.entry;
    if (e.shape != shape)
      problem(log::concat("tensor '", name, "' has shape ", shape_text(e.shape), ", expected ", shape_text(shape)));
    if (e.dtype != DType::f32 && e.dtype != DType::f16 && e.dtype != DType::bf16)
      problem(log::concat("tensor '", name, "' has dtype ", dtype_name(e.dtype), ", expected F32, F16 or BF16"));
  };
  std::set<std::string, std::less<>> expected;
  for (const ExpectedTensor& t : expected_tensors(config)) {
    expected.insert(t.name);
    if (!has(t.name))
      problem(log::concat("tensor '", t.name, "' is missing"));
    else
      check(t.name, t.shape);
  }
  for (const auto& [name, where] : state_->tensors) {
    if (expected.count(name) || ends_with(name, ".rotary_emb.inv_freq")) continue;
    if (config.text_of_multimodal && is_vision_tensor(name)) continue;
    if (name == "lm_head.weight" && config.tie_word_embeddings) {
      check(name, {config.vocab_size, config.hidden_size});
      continue;
    }
    problem(log::concat("tensor '", name, "' is not one a ", config.architecture, " of this config has"));
  }
  if (problem_count == 0) return;
  std::string message = log::concat(state_->dir, ": the weights do not match config.json (", problem_count,
                                    problem_count == 1 ? " problem):" : " problems):");
  for (const std::string& p : problems) message += "\n  " + p;
  if (problem_count > problems.size()) message += log::concat("\n  and ", problem_count - problems.size(), " more");
  throw ModelFileError(message);
}

std::uint32_t combined_crc32c(const std::map<std::string, std::uint32_t>& tensor_crcs) {
  std::uint32_t crc = 0;
  for (const auto& [name, tensor_crc] : tensor_crcs) {
    crc = crc32c_extend(crc, name.data(), name.size());
    crc = crc32c_extend(crc, &tensor_crc, sizeof tensor_crc);
  }
  return crc;
}

std::uint32_t base_weights_crc32c(const HfWeights& weights, const HfConfig& config) {
  constexpr std::size_t slice_bytes = std::size_t{8} << 20;
  std::map<std::string, std::uint32_t> crcs;
  for (const ExpectedTensor& t : expected_tensors(config)) {
    const std::string_view bytes = weights.bytes(t.name);
    std::uint32_t crc = 0;
    for (std::size_t at = 0; at < bytes.size(); at += slice_bytes) {
      const std::string_view slice = bytes.substr(at, slice_bytes);
      crc = crc32c_extend(crc, slice.data(), slice.size());
      SafetensorsFile::release(slice);
    }
    crcs[t.name] = crc;
  }
  return combined_crc32c(crcs);
}

}  // namespace arclight::model
