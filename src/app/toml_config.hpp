#pragma once
// The train command's config file (app-private): TOML read by CLI11, checked line by line first for what CLI11
// would misread, its sections turned into dotted option names.
#include <CLI/CLI.hpp>

#include <istream>
#include <map>
#include <string>
#include <vector>

namespace arclight::app {

// A line of the config file that is not TOML, or not what it seems; parse_command_line names the file.
class TomlSyntaxError : public CLI::ParseError {
 public:
  explicit TomlSyntaxError(const std::string& msg)
      : CLI::ParseError("TomlSyntaxError", msg, CLI::ExitCodes::BaseClass) {}
};

// A list option whose default is not empty, by its dotted name (rollout.retry_condition), and that default as the
// effective configuration prints it.
using ListDefaults = std::map<std::string, std::string>;

// CLI11 from 2.4 on writes a dotted option name quoted ("model.source"="hf", which TOML reads as one key), 2.1 bare
// (model.source="hf", a dotted key): the configuration a run prints and saves, with every such key bare, whatever CLI11
// the binary was built with (a resume compares the saved model.* lines).
std::string with_bare_keys(const std::string& toml);

// The effective configuration's values written as TOML types them, for `train`'s options: lists as arrays of strings
// (CLI11 wrote a list's default "[q,k,v,o]", one value 'q', numbers bare), booleans true or false (CLI11: 0, 1, on),
// floats in TOML's syntax (CLI11: .5, NaN as given), strings as TOML strings that arclight reads back unchanged
// (CLI11 quoted with ' a value holding ", whatever else it held; one holding both ' and a backslash stays so).
// arclight read CLI11's text; other TOML readers (Python's tomllib) read other types, or refused the file.
std::string with_toml_values(const std::string& toml, const CLI::App& train);

// TOML sections become dotted option names of the train command: [layout] trainers = "1"
// sets --layout.trainers. CLI11 parses the file; this only renames its items.
class SectionedToml : public CLI::ConfigTOML {
 public:
  // Filled as the options are bound, before any file is read.
  ListDefaults& list_defaults() { return list_defaults_; }

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  ListDefaults list_defaults_;
};

}  // namespace arclight::app
