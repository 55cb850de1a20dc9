#include "arclight/model/hf_export.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "arclight/core/files.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/hf_model.hpp"

namespace arclight::model {
namespace {

namespace fs = std::filesystem;

// The files of a model directory besides its weights that a user of the export needs: the architecture, the
// generation defaults and the tokenizer (whichever of them the source has).
constexpr const char* companion_files[] = {"config.json",
                                           "generation_config.json",
                                           "tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "vocab.json",
                                           "merges.txt",
                                           "tokenizer.model",
                                           "added_tokens.json",
                                           "chat_template.jinja",
                                           "chat_template.json"};

std::optional<DType> dtype_named(const std::string& name) {
  if (name.empty() || name == "float32") return DType::f32;
  if (name == "bfloat16") return DType::bf16;
  if (name == "float16") return DType::f16;
  return std::nullopt;
}

DType dtype_of(const HfConfig& config, const std::string& source) {
  if (const auto dtype = dtype_named(config.torch_dtype)) return *dtype;
  throw ModelFileError(log::concat(source, "/config.json: torch_dtype \"", config.torch_dtype,
                                   "\" cannot be exported (float32, bfloat16 or float16)"));
}

struct Placed {
  const NamedWeights* weights;
  std::vector<std::int64_t> shape;
};

// The weights by name, each one the config implies and no other, with the config's element counts; in the order of
// expected_tensors (transformers' order), with their shapes.
// Every layer holds a tensor: checked before expected_tensors lists them all (a config.json of 400,000,000 layers made
// it allocate without bound).
void check_layers_fit(const HfConfig& config, std::size_t tensors, const std::string& source) {
  if (static_cast<std::size_t>(config.num_hidden_layers) > tensors)
    throw ModelFileError(log::concat("export: ", source, "/config.json names ", config.num_hidden_layers,
                                     " layers; the checkpoint holds ", tensors, " tensors"));
}

// Non-finite weights (a run that diverged), or weights past float16's range when written as float16 (inf there), load
// as NaN logits: refused, naming the tensor.
void check_finite(const Placed& w, DType dtype) {
  const float* values = w.weights->data;
  for (std::size_t i = 0; i < w.weights->size; ++i) {
    if (!std::isfinite(values[i]))
      throw ModelFileError(log::concat("export: ", w.weights->name, " holds ", values[i], " at ", i,
                                       ": the run diverged; export an earlier version"));
    if (dtype == DType::f16 && std::fabs(values[i]) >= 65520.0f)
      throw ModelFileError(log::concat("export: ", w.weights->name, " holds ", values[i], " at ", i,
                                       ", past float16's range (inf there): --dtype bfloat16 or float32"));
  }
}

std::vector<Placed> weights_in_order(const HfConfig& config, const std::vector<NamedWeights>& weights,
                                     const std::string& source) {
  check_layers_fit(config, weights.size(), source);
  std::map<std::string, const NamedWeights*> by_name;
  for (const NamedWeights& w : weights) by_name[w.name] = &w;
  std::vector<Placed> out;
  for (const ExpectedTensor& t : expected_tensors(config)) {
    const auto it = by_name.find(t.name);
    if (it == by_name.end())
      throw ModelFileError(log::concat("export: the weights lack ", t.name, ", which ", source, " has"));
    std::size_t elements = 1;
    for (std::int64_t d : t.shape) elements *= static_cast<std::size_t>(d);
    if (it->second->size != elements)
      throw ModelFileError(
          log::concat("export: ", t.name, " holds ", it->second->size, " values; ", source, " gives it ", elements));
    out.push_back({it->second, t.shape});
    by_name.erase(it);
  }
  if (!by_name.empty())
    throw ModelFileError(log::concat("export: ", by_name.begin()->first, " is not a tensor of ", source));
  return out;
}

// A tensor to write as `dtype`: float32 from where the weights are, 16-bit types converted piece by piece as written.
TensorToWrite to_write(const Placed& w, DType dtype) {
  TensorToWrite t{w.weights->name, dtype, w.shape, nullptr, w.weights->size * element_size(dtype), {}};
  if (dtype == DType::f32) {
    t.data = w.weights->data;
    return t;
  }
  const float* values = w.weights->data;
  t.fill = [values, dtype](std::size_t offset, std::size_t size, void* out) {
    auto* bits = static_cast<std::uint16_t*>(out);
    const float* from = values + offset / sizeof(std::uint16_t);
    for (std::size_t i = 0; i < size / sizeof(std::uint16_t); ++i)
      bits[i] = dtype == DType::bf16 ? to_bfloat16(from[i]) : to_float16(from[i]);
  };
  return t;
}

// Consecutive runs of tensors of at most max_bytes each (a larger tensor alone), as transformers shards.
std::vector<std::vector<Placed>> shards_of(const std::vector<Placed>& weights, DType dtype, std::uint64_t max_bytes) {
  std::vector<std::vector<Placed>> shards(1);
  std::uint64_t bytes = 0;
  for (const Placed& w : weights) {
    const std::uint64_t size = w.weights->size * element_size(dtype);
    if (!shards.back().empty() && bytes + size > max_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(w);
    bytes += size;
  }
  return shards;
}

std::string shard_name(std::size_t index, std::size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

void write_text(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out.flush()) throw Error(log::concat("export: cannot write ", path.string()));
  }
  sync_to_disk(path.string());
}

// The source's config.json for the export. With another weight type (`dtype` not empty): in the keys it has
// (transformers 5 writes dtype, and calls torch_dtype deprecated at each load), torch_dtype where it has neither. A
// multimodal Gemma 3's (`text_model_only`): its text model's, a Gemma3ForCausalLM with the end tokens and dtype beside
// text_config, since only the text model's weights are written.
void write_config(const fs::path& from, const fs::path& to, const std::string& dtype, bool text_model_only) {
  std::ifstream in(from, std::ios::binary);
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in, nullptr, false);
  if (!config.is_object()) throw ModelFileError(from.string() + ": not a JSON object");
  if (text_model_only) {
    nlohmann::ordered_json text = config["text_config"];  // an object: read_hf_config checked it
    text["architectures"] = nlohmann::ordered_json::array({"Gemma3ForCausalLM"});
    text["model_type"] = "gemma3_text";
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "dtype", "torch_dtype"})
      if (config.contains(key) && !text.contains(key)) text[key] = config[key];
    config = std::move(text);
  }
  if (!dtype.empty() && config.contains("dtype")) config["dtype"] = dtype;
  if (!dtype.empty() && (config.contains("torch_dtype") || !config.contains("dtype"))) config["torch_dtype"] = dtype;
  write_text(to, config.dump(2) + "\n");
}

// The weights as safetensors in `dir`, sharded with an index past max_bytes; returns the file names.
std::vector<std::string> write_weights(const fs::path& dir, const std::vector<Placed>& weights, DType dtype,
                                       std::uint64_t max_bytes, std::uint64_t& total) {
  const auto shards = shards_of(weights, dtype, max_bytes);
  std::vector<std::string> files;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shards.size() == 1 ? "model.safetensors" : shard_name(s, shards.size());
    std::vector<TensorToWrite> tensors;
    for (const Placed& w : shards[s]) {
      tensors.push_back(to_write(w, dtype));
      weight_map[w.weights->name] = name;
      total += tensors.back().bytes;
    }
    write_safetensors((dir / name).string(), tensors, {{"format", "pt"}});
    files.push_back(name);
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");
    files.push_back("model.safetensors.index.json");
  }
  return files;
}

// The directory an export fills: a fresh one beside the target, renamed to it once complete (publish), and removed
// with what it holds when the export fails before that, so that a failure leaves neither a half model nor its
// pieces. The target is checked first: a new or empty directory, named (not ".", "..", "/"), not a symbolic link
// (the rename would replace the link, not fill what it names). An empty directory that exists is filled, not replaced
// (its owner, mode and ACLs stay; a mount point cannot be renamed over): staged inside it, its files moved in at the
// end, config.json last, so that a model loader never takes a half one for a model.
class Staging {
 public:
  explicit Staging(const std::string& out_dir) : out_(target_of(out_dir)) {
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(out_, ec);
    if (fs::is_symlink(status))
      throw UsageError(log::concat("export: ", out_.string(), " is a symbolic link; name the directory itself"));
    in_place_ = fs::is_directory(status);
    remove_stale_staging(out_.has_parent_path() ? out_.parent_path() : fs::path("."),
                         out_.filename().string() + staging_infix());
    if (in_place_) remove_stale_staging(out_, staging_infix());
    if (fs::exists(status) && (!in_place_ || !fs::is_empty(out_, ec)))
      throw UsageError(log::concat("export: ", out_.string(), " exists and is not an empty directory"));
    const std::string owner = staging_infix() + std::to_string(::getpid());
    partial_ = in_place_ ? out_ / owner : fs::path(out_.string() + owner);
    try {
      fs::remove_all(partial_);
      fs::create_directories(partial_);
    } catch (const fs::filesystem_error& e) {
      throw Error(log::concat("export: cannot create ", partial_.string(), in_place_ ? " in " : " beside ",
                              out_.string(), ": ", e.code().message()));
    }
    // Held while this export lives: a later one tells a dead owner from a live one in another PID namespace.
    lock_ = ::open((partial_ / lock_name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_ >= 0) ::flock(lock_, LOCK_EX | LOCK_NB);
  }
  ~Staging() {
    std::error_code ec;
    if (!published_) fs::remove_all(partial_, ec);
    if (lock_ >= 0) ::close(lock_);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  const fs::path& dir() const { return partial_; }

  void publish() {
    if (in_place_) {
      sync_to_disk(partial_.string(), true);
      move_into_target();
    } else {
      ::unlink((partial_ / lock_name).c_str());  // not part of the export; the lock stays on its file till the end
      sync_to_disk(partial_.string(), true);
      std::error_code ec;
      fs::rename(partial_, out_, ec);  // rename(2) replaces an empty directory
      if (ec)
        throw Error(
            log::concat("export: cannot rename ", partial_.string(), " to ", out_.string(), ": ", ec.message()));
    }
    published_ = true;
    try {  // published: a directory that cannot be synced (not readable, a file system that refuses) is a warning
      sync_to_disk(in_place_                ? out_.string()
                   : out_.has_parent_path() ? out_.parent_path().string()
                                            : std::string("."),
                   true);
    } catch (const Error& e) {
      log::warn(e.what(), ": ", out_.string(), " is complete, but its entry may not survive a crash yet");
    }
  }

 private:
  // `out_dir` without a trailing separator (the staging directory is a sibling, not a child).
  static fs::path target_of(const std::string& out_dir) {
    fs::path out = fs::path(out_dir).lexically_normal();
    if (!out.has_filename()) out = out.parent_path();
    const std::string name = out.filename().string();
    if (name.empty() || name == "." || name == ".." || out == out.root_path())
      throw UsageError(log::concat("export: '", out_dir, "' names no new directory; give one, such as ", out_dir,
                                   out_dir.empty() || out_dir.back() == '/' ? "" : "/", "exported"));
    return out;
  }

  // Staging directories are named by host and process: <out>.partial-<host>-<pid>.
  static std::string staging_infix() {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    return ".partial-" + std::string(host) + "-";
  }

  // The staged files into the existing target, config.json last (never over a file another export put there since);
  // then the lock (held till here: a later export leaves this staging alone) and the staging directory go.
  void move_into_target() {
    std::vector<fs::path> names;
    for (const fs::directory_entry& e : fs::directory_iterator(partial_))
      if (e.path().filename() != lock_name) names.push_back(e.path().filename());
    std::stable_partition(names.begin(), names.end(), [](const fs::path& name) { return name != "config.json"; });
    for (const fs::path& name : names) {
      const std::string from = (partial_ / name).string(), to = (out_ / name).string();
      int rc = ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
      if (rc != 0 && errno == EINVAL) rc = ::rename(from.c_str(), to.c_str());  // a file system without NOREPLACE
      if (rc != 0)
        throw Error(log::concat("export: cannot move ", from, " into ", out_.string(), ": ", std::strerror(errno), " (",
                                out_.string(), " holds part of the export, without config.json)"));
    }
    ::unlink((partial_ / lock_name).c_str());
    std::error_code ec;
    fs::remove(partial_, ec);
  }

  // A staging directory in `dir` named `prefix` and a pid that an export of this host left when it was killed (Ctrl-C,
  // SIGTERM: the export ends at once, with no unwinding): its process is gone and its lock free (a process of another
  // PID namespace on this host holds its own). Another host's (a shared file system) is never touched.
  static void remove_stale_staging(const fs::path& dir, const std::string& prefix) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      long pid = 0;
      const char* digits = name.c_str() + prefix.size();
      const auto [end, error] = std::from_chars(digits, name.c_str() + name.size(), pid);
      if (error != std::errc() || *end != '\0' || pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 ||
          errno != ESRCH || !owner_gone(e.path()))
        continue;
      std::error_code removed;
      fs::remove_all(e.path(), removed);
      if (!removed) log::info("export: removed ", e.path().string(), ", left by an export that was killed");
    }
  }

  // Whether nobody holds the staging directory's lock (its owner ended); false where the lock cannot be tried.
  static bool owner_gone(const fs::path& staging) {
    const int fd = ::open((staging / lock_name).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    const bool taken = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    return taken;
  }

  static constexpr const char* lock_name = ".export.lock";
  fs::path out_, partial_;
  bool in_place_ = false;  // the target is an existing empty directory: staged inside it
  int lock_ = -1;
  bool published_ = false;
};

// PEFT's module name of a LoRA target (model.lora_targets).
std::string peft_module_of(const std::string& target) { return target + "_proj"; }

// The adapters in the order of the source's tensors, each checked: exactly lora_A and lora_B of every targeted
// projection, A rank x in and B out x rank.
std::vector<Placed> adapters_in_order(const HfConfig& config, const LoraSpec& lora,
                                      const std::vector<NamedWeights>& adapters, const std::string& source) {
  check_layers_fit(config, adapters.size(), source);
  std::map<std::string, const NamedWeights*> by_name;
  for (const NamedWeights& w : adapters) by_name[w.name] = &w;
  std::vector<Placed> out;
  auto take = [&](const std::string& name, std::vector<std::int64_t> shape) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw ModelFileError(log::concat("export: the adapters lack ", name));
    if (it->second->size != static_cast<std::size_t>(shape[0] * shape[1]))
      throw ModelFileError(log::concat("export: ", name, " holds ", it->second->size, " values; rank ", lora.rank,
                                       " of ", source, " gives it ", shape[0] * shape[1]));
    out.push_back({it->second, std::move(shape)});
    by_name.erase(it);
  };
  const std::string suffix = ".weight";
  for (const ExpectedTensor& t : expected_tensors(config)) {
    if (t.shape.size() != 2 || t.name.size() <= suffix.size()) continue;
    const std::string module = t.name.substr(0, t.name.size() - suffix.size());
    const std::string leaf = module.substr(module.rfind('.') + 1);
    bool targeted = false;
    for (const std::string& target : lora.targets) targeted = targeted || leaf == peft_module_of(target);
    if (!targeted) continue;
    take(module + ".lora_A.weight", {lora.rank, t.shape[1]});
    take(module + ".lora_B.weight", {t.shape[0], lora.rank});
  }
  if (!by_name.empty())
    throw ModelFileError(
        log::concat("export: ", by_name.begin()->first, " is not an adapter of ", source, " with these targets"));
  return out;
}

// PEFT resolves a relative base_model_name_or_path against the loading process's directory (or takes it for a hub
// name): the adapter names the base by its absolute path.
std::string absolute_directory(const std::string& dir) {
  std::string path = fs::absolute(dir).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

std::uint16_t to_bfloat16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);  // quiet, sign kept
  return static_cast<std::uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

std::uint16_t to_float16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const std::uint32_t sign = (bits >> 16) & 0x8000, magnitude = bits & 0x7FFFFFFF;
  if (magnitude >= 0x7F800000) return static_cast<std::uint16_t>(sign | (magnitude > 0x7F800000 ? 0x7E00 : 0x7C00));
  if (magnitude >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds to 65536 or more: inf
  std::uint32_t result, remainder, half;
  if (magnitude < 0x38800000) {  // below float16's smallest normal: a subnormal
    if (magnitude < 0x33000000) return static_cast<std::uint16_t>(sign);  // at most half the smallest subnormal
    const std::uint32_t mantissa = (magnitude & 0x7FFFFF) | 0x800000;
    const int shift = 126 - static_cast<int>(magnitude >> 23);
    result = mantissa >> shift;
    remainder = mantissa & ((1u << shift) - 1);
    half = 1u << (shift - 1);
  } else {
    const std::uint32_t rebiased = magnitude - 0x38000000;  // exponent bias 127 -> 15
    result = rebiased >> 13;
    remainder = rebiased & 0x1FFF;
    half = 0x1000;
  }
  if (remainder > half || (remainder == half && (result & 1))) ++result;  // a carry moves into the exponent
  return static_cast<std::uint16_t>(sign | result);
}

ExportReport export_hf(const std::string& source_model_dir, const std::vector<NamedWeights>& weights,
                       const std::string& out_dir, const ExportOptions& options) {
  const HfConfig config = read_hf_config(source_model_dir);
  const auto ordered = weights_in_order(config, weights, source_model_dir);
  ExportReport report;
  if (!options.dtype.empty() && !dtype_named(options.dtype))
    throw UsageError("export: --dtype " + options.dtype + ": float32, bfloat16 or float16");
  report.dtype = options.dtype.empty() ? dtype_of(config, source_model_dir) : *dtype_named(options.dtype);
  for (const Placed& w : ordered) check_finite(w, report.dtype);
  Staging staging(out_dir);
  const fs::path& partial = staging.dir();
  report.files = write_weights(partial, ordered, report.dtype, options.max_shard_bytes, report.weight_bytes);
  for (const char* name : companion_files) {
    const fs::path from = fs::path(source_model_dir) / name;
    if (!fs::is_regular_file(from)) continue;
    if (std::string(name) == "config.json" && (!options.dtype.empty() || config.text_of_multimodal)) {
      write_config(from, partial / name, options.dtype, config.text_of_multimodal);
      report.files.push_back(name);
      continue;
    }
    std::error_code ec;
    fs::copy_file(from, partial / name, ec);
    if (ec) throw Error(log::concat("export: cannot copy ", from.string(), ": ", ec.message()));
    sync_to_disk((partial / name).string());
    report.files.push_back(name);
  }
  // No generation_config.json where the source has none: transformers and vLLM derive it from config.json then, as
  // for the source (one made up here kept only the end tokens, and dropped pad_token_id).
  staging.publish();
  return report;
}

ExportReport export_peft_adapter(const std::string& source_model_dir, const LoraSpec& lora,
                                 const std::vector<NamedWeights>& adapters, const std::string& out_dir) {
  if (lora.rank <= 0) throw UsageError("export: a PEFT adapter needs a LoRA run (model.lora_rank > 0)");
  const HfConfig config = read_hf_config(source_model_dir);
  // Its base names the text model's modules model.language_model.* and has q/k/v projections in its vision tower too:
  // an adapter named as a causal LM's would attach to none of the first and to the others.
  if (config.text_of_multimodal)
    throw UsageError("export: a PEFT adapter on " + config.architecture +
                     " would not attach to its text model: export with --hf and --merge-lora (a Gemma3ForCausalLM)");
  const auto ordered = adapters_in_order(config, lora, adapters, source_model_dir);
  for (const Placed& w : ordered) check_finite(w, DType::f32);
  Staging staging(out_dir);
  const fs::path& partial = staging.dir();
  ExportReport report;
  std::vector<TensorToWrite> tensors;
  for (const Placed& w : ordered) {
    tensors.push_back(
        {"base_model.model." + w.weights->name, DType::f32, w.shape, w.weights->data, w.weights->size * sizeof(float)});
    report.weight_bytes += tensors.back().bytes;
  }
  write_safetensors((partial / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  for (const std::string& target : lora.targets) modules.push_back(peft_module_of(target));
  const nlohmann::ordered_json adapter_config{{"peft_type", "LORA"},
                                              {"task_type", "CAUSAL_LM"},
                                              {"base_model_name_or_path", absolute_directory(source_model_dir)},
                                              {"r", lora.rank},
                                              {"lora_alpha", lora.alpha},
                                              {"lora_dropout", 0.0},
                                              {"target_modules", modules},
                                              {"bias", "none"},
                                              {"fan_in_fan_out", false},
                                              {"use_rslora", false},
                                              {"use_dora", false},
                                              {"modules_to_save", nullptr},
                                              {"inference_mode", true}};
  write_text(partial / "adapter_config.json", adapter_config.dump(2) + "\n");
  report.files = {"adapter_model.safetensors", "adapter_config.json"};
  staging.publish();
  return report;
}

}  // namespace arclight::model
