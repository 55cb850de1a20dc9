#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "arclight/core/config.hpp"
#include "arclight/core/log.hpp"

namespace arclight::app {

enum class Command { none, train, inspect, export_model, tokenize, serve };

// export: a checkpoint's model as a Hugging Face directory.
struct ExportRequest {
  std::string checkpoint;  // a checkpoint directory (its newest valid version) or one version file
  std::string hf_dir;      // the Hugging Face model directory to write, or
  std::string peft_dir;    // the PEFT adapter directory to write (a LoRA run's adapters, not merged)
  std::string source_dir;  // the Hugging Face directory the run started from; empty: the run's model.path
  std::uint64_t max_shard_bytes = 5'000'000'000;
  bool merge_lora = false;  // a LoRA run: the adapters merged into the model's weights
  std::string dtype;        // --dtype: the weights' type; empty: the source model's torch_dtype
};

// What the command line (and the config file it names) asked for.
struct Invocation {
  Command command = Command::none;
  Config config;
  bool dry_run = false;
  std::string resume;  // train --resume: "auto", a version file, or empty (a fresh run)
  std::string inspect_dir;
  bool inspect_trained = false;   // inspect --trained: the store's ledger of trained rollouts, by task
  std::string tokenize_model;     // tokenize --model: a model directory or a tokenizer.json
  bool tokenize_chat = false;     // tokenize --chat: stdin holds chat messages (JSON), rendered by the chat template
  std::string tokenize_template;  // tokenize --template: the chat template by name, not recognised
  bool tokenize_generation_prompt = false;       // tokenize --add-generation-prompt
  bool tokenize_no_special_tokens = false;       // tokenize --no-special-tokens: text without the post-processor's
  std::optional<bool> tokenize_enable_thinking;  // tokenize --enable-thinking true|false (Qwen3)
  ExportRequest export_request;
  std::string serve_config;  // serve: a config file (its model, seed, runner.http_*); empty: the defaults
  std::string serve_host;    // serve --host: else runner.http_host
  int serve_port = -1;       // serve --port: else runner.http_port
  log::Level log_level = log::Level::info;
  std::string effective_config;  // the TOML of every key's value, for --dry-run
  std::string text;              // --help or --version text; print it and exit 0
  std::string error;             // bad input; report it once and exit 2
};

// Parses argv and the TOML file given by --config. Never throws: bad input
// comes back in `error`.
Invocation parse_command_line(int argc, const char* const* argv);

// A config file read as `arclight train --config PATH` reads it; UsageError naming the file if it does not.
Config config_from_file(const std::string& path);

// The configuration a checkpoint saved (its effective TOML), read as a config file is; UsageError if it does not.
Config config_from_toml(const std::string& toml);

}  // namespace arclight::app
