// Rank 0 at a resume: whether a version continues the model this run is configured with (its model.* settings, and
// a Hugging Face model's directory by the files that define it), before anything changes.
#include <filesystem>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "arclight/app/cli.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/hf_model.hpp"
#include "coordinator.hpp"
#include "toml_config.hpp"

namespace arclight::app {

// A version continues only the model that saved it: every model.* setting the same, compared by value (16 and 16.0,
// two spellings of one directory: the same), the trainers check the tensors' shapes too. Bad input otherwise, before
// anything changes. A Hugging Face model's directory is compared by the files that define it where the version
// says what they were: a copy elsewhere (staged to a node's own disk) goes on where they are alike, the same
// directory with a warning where they changed; else by its path.
void Coordinator::check_same_model(const std::string& path, const ckpt::Checkpoint& version) const {
  const std::string& saved_config = version.config_toml;
  const auto model_lines = [](const std::string& toml) {  // only these: the rest of a saved config is not ours to read
    std::string lines;
    std::istringstream in(with_bare_keys(toml));  // saved by a binary built with another CLI11
    for (std::string line; std::getline(in, line);)
      if (line.rfind("model.", 0) == 0) lines += line + "\n";
    return lines;
  };
  ModelConfig saved;
  try {
    saved = config_from_toml(model_lines(saved_config)).model;
  } catch (const Error&) {  // lines an older or newer arclight wrote: as text
    if (model_lines(saved_config) == model_lines(effective_config_)) return;
    throw UsageError(path + " holds another model (its model.* settings differ from this run's, and do not read): " +
                     "resume with the configuration that saved it");
  }
  const ModelConfig& mine = config_.model;
  const auto directory = [](const std::string& p) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(p, ec);
    return ec || p.empty() ? p : canonical.string();
  };
  std::string differ;
  const auto compare = [&](const char* key, const auto& a, const auto& b) {
    if (a == b) return;
    std::ostringstream line;
    line << (differ.empty() ? "" : ", ") << "model." << key << " = ";
    if constexpr (std::is_same_v<std::decay_t<decltype(a)>, std::vector<std::string>>) {
      for (std::size_t i = 0; i < a.size(); ++i) line << (i ? "," : "[") << a[i];
      line << (a.empty() ? "[]" : "]");
    } else {
      line << a;
    }
    differ += line.str();
  };
  compare("source", std::string(name_of(saved.source)), std::string(name_of(mine.source)));
  const bool by_definition =
      saved.source == ModelSource::hf && mine.source == ModelSource::hf && !version.model_definition.empty();
  // A scratch model's path and chat template never mattered (they are refused now; a version may still hold them).
  const bool scratch = saved.source == ModelSource::scratch && mine.source == ModelSource::scratch;
  if (!by_definition && !scratch) compare("path", directory(saved.path), directory(mine.path));
  std::string files;
  if (by_definition) {
    std::vector<std::string> differences;
    try {
      differences = model::definition_differences(version.model_definition, model_definition_);
    } catch (const model::ModelFileError& e) {
      throw ckpt::CorruptCheckpoint(path + ": /meta/model_definition: " + e.what());
    }
    for (const std::string& d : differences) files += (files.empty() ? "" : ", ") + d;
    const bool same_directory = directory(saved.path) == directory(mine.path);
    if (!files.empty() && same_directory) {  // the user's own edit (a template fixed): theirs to make, as before
      log::warn("model.path ", mine.path, ": ", files, " since ", path, " was saved; going on with them");
      files.clear();
    } else if (files.empty() && !same_directory) {
      log::info("model.path ", mine.path, " is not the directory the version was saved with (", saved.path,
                "), but its config and tokenizer files are alike: going on");
    }
  }
  compare("dtype", std::string(name_of(saved.dtype)), std::string(name_of(mine.dtype)));
  if (!scratch) compare("chat_template", saved.chat_template, mine.chat_template);
  compare("lora_rank", saved.lora_rank, mine.lora_rank);
  compare("lora_alpha", saved.lora_alpha, mine.lora_alpha);
  compare("lora_targets", saved.lora_targets, mine.lora_targets);
  compare("d_model", saved.d_model, mine.d_model);
  compare("n_layers", saved.n_layers, mine.n_layers);
  compare("n_heads", saved.n_heads, mine.n_heads);
  compare("d_ff", saved.d_ff, mine.d_ff);
  compare("max_seq", saved.max_seq, mine.max_seq);
  compare("positions", std::string(name_of(saved.positions)), std::string(name_of(mine.positions)));
  // gradient_checkpointing is not compared: how a step keeps its activations, not the model (a resume may change it).
  // A tripwire, not a rule: a new ModelConfig field changes its size, and must be compared above (the size is
  // libstdc++'s with its C++11 strings; other standard libraries skip it).
#if defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
  static_assert(sizeof(ModelConfig) == 152, "a new model.* setting: compare it in check_same_model, then update this");
#endif
  if (!differ.empty() || !files.empty())
    throw UsageError(path + " holds another model (" + (differ.empty() ? "" : "saved with " + differ) +
                     (differ.empty() || files.empty() ? "" : "; ") +
                     (files.empty() ? "" : "model.path " + mine.path + ": " + files + " since the version was saved") +
                     "): resume with the configuration and model directory that saved it");
}

}  // namespace arclight::app
