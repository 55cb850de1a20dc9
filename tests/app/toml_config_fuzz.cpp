// libFuzzer target for the train command's config file reader (SectionedToml: our line checks, then CLI11's TOML
// parser) and for with_bare_keys. A config file is the operator's input: whatever it holds ends in items or in one
// CLI11::ParseError, never a crash. What the reader accepts keeps its promise: every item is an option of the train
// command with a name and at least one value (an empty list is left to the option's default); with_bare_keys keeps
// the lines and never lengthens one.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "toml_config.hpp"

using arclight::app::SectionedToml;

namespace {

void check_items(const std::vector<CLI::ConfigItem>& items) {
  for (const CLI::ConfigItem& item : items) {
    if (item.parents.size() != 1 || item.parents[0] != "train" || item.name.empty() || item.inputs.empty())
      std::abort();
    if (item.inputs.size() == 1 && item.inputs[0] == "[]") std::abort();
  }
}

void check_bare_keys(const std::string& text) {
  std::istringstream before(text), after(arclight::app::with_bare_keys(text));
  std::string a, b;
  while (std::getline(before, a)) {
    if (!std::getline(after, b) || b.size() > a.size()) std::abort();
  }
  if (std::getline(after, b)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  SectionedToml reader;
  reader.list_defaults()["rollout.retry_condition"] = "[\"timeout\", \"unresponsive\"]";
  std::istringstream in(text);
  try {
    check_items(reader.from_config(in));
  } catch (const CLI::ParseError&) {
    // refused with a message, as it should be; any other exception escapes and libFuzzer reports it
  }
  check_bare_keys(text);
  return 0;
}
