#include "toml_config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <map>
#include <iterator>
#include <sstream>

namespace arclight::app {
namespace {

// Blanks as CLI11 trims them (std::isspace): a key of vertical tabs is no key to it either.
std::string trimmed(const std::string& line) {
  constexpr const char* blanks = " \t\r\n\v\f";
  const auto first = line.find_first_not_of(blanks);
  return first == std::string::npos ? "" : line.substr(first, line.find_last_not_of(blanks) - first + 1);
}

[[noreturn]] void toml_error(int line, const std::string& why, const std::string& text) {
  throw TomlSyntaxError("TOML syntax error at line " + std::to_string(line) + ": " + why + ": " + text);
}

// One logical line of a TOML file, as CLI11 is given it: its comment taken off, an array spread over several lines
// joined into one. `number`: its first line in the file.
struct TomlLine {
  int number;
  std::string text;
};

// Takes the comment (a # outside quotes) off `line` and counts the brackets outside quotes into `depth`; a quote
// left open is an error.
std::string without_comment(const std::string& line, int number, int& depth) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == '\\' && quote == '"')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return trimmed(line.substr(0, i));
    } else if (c == '[' || c == ']') {
      depth += c == '[' ? 1 : -1;
    }
  }
  if (quote) toml_error(number, "unterminated string", trimmed(line));
  return trimmed(line);
}

// CLI11 (Debian's 2.1) cuts a value at any #, even inside a string (dir = "runs/#1" read as "runs/), and reads no
// comment after a section header nor an array over several lines: this gives it lines it reads right.
std::vector<TomlLine> toml_lines(const std::string& text) {
  // TOML allows a comma after an array's last element; CLI11 would read an empty one.
  const auto drop_trailing_comma = [](std::string& t) {
    const std::size_t close = t.find_last_not_of(" ]");
    if (!t.empty() && t.back() == ']' && close != std::string::npos && t[close] == ',') t.erase(close, 1);
  };
  std::vector<TomlLine> out;
  std::istringstream lines(text);
  std::string raw;
  int depth = 0;  // brackets of an array still open
  for (int n = 1; std::getline(lines, raw); ++n) {
    if (depth > 0) {  // an array goes on
      const std::string more = without_comment(raw, n, depth);
      if (!more.empty()) out.back().text += (more.front() == ']' ? "" : " ") + more;
      if (depth == 0) drop_trailing_comma(out.back().text);
      continue;
    }
    std::string line = without_comment(raw, n, depth);
    if (line.empty()) continue;
    if (line.front() == '[') depth = 0;  // a section header, not an array
    if (depth == 0) drop_trailing_comma(line);
    out.push_back({n, line});
  }
  if (depth > 0) toml_error(out.back().number, "an array is not closed with ] by the end of the file", out.back().text);
  return out;
}

// A key's or a section's dotted parts, none of them empty (".x", "a..b", "[.]", "" = 1), which CLI11 would read as
// options with no name. Every option's name is bare words: a part that is only quotes and blanks names none.
void check_dotted_parts(std::string key, int number, const std::string& line) {
  key.erase(std::remove_if(key.begin(), key.end(), [](char c) { return c == '"' || c == '\''; }), key.end());
  std::istringstream parts(key + ".");  // the last part too, empty or not
  for (std::string part; std::getline(parts, part, '.');)
    if (trimmed(part).empty()) toml_error(number, "an empty part in a dotted name", line);
}

// CLI11 reads a line it cannot parse (say "steps 3") as a flag named by the whole line, which
// then reads as an unknown key; find such lines first.
void check_toml_lines(const std::vector<TomlLine>& lines) {
  for (const TomlLine& l : lines) {
    const std::string& line = l.text;
    if (line[0] == '[') {
      if (line.back() != ']') toml_error(l.number, "a section header must end with ]", line);
      check_dotted_parts(line.substr(1, line.size() - 2), l.number, line);
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) toml_error(l.number, "expected key = value", line);
    if (trimmed(line.substr(0, eq)).empty()) toml_error(l.number, "no key before =", line);
    const std::string value = trimmed(line.substr(eq + 1));
    if (value.empty()) toml_error(l.number, "no value after =", line);
    check_dotted_parts(line.substr(0, eq), l.number, line);
    // CLI11 takes a string value's text between its quotes as it is (it writes the effective configuration so, and a
    // backslash in a path reads back): a multi-line string kept two of its quotes. Said, not a path other than meant.
    if (value.rfind("\"\"\"", 0) == 0 || value.rfind("\'\'\'", 0) == 0)
      toml_error(l.number, "multi-line strings are not supported: one line, in \"...\" or '...'", line);
  }
}

// `key = []` reads as the option's default (CLI11 has no empty list, and the effective configuration of a built-in
// agent says `command = []`): where that default is not empty, the user meant something else, and is told.
void check_empty_lists(const std::vector<TomlLine>& lines, const ListDefaults& list_defaults) {
  std::string section;
  for (const TomlLine& l : lines) {
    if (l.text[0] == '[') {
      section = trimmed(l.text.substr(1, l.text.size() - 2)) + ".";
      continue;
    }
    const auto eq = l.text.find('=');
    std::string value = l.text.substr(eq + 1);
    value.erase(std::remove_if(value.begin(), value.end(), [](char c) { return c == ' ' || c == '\t'; }), value.end());
    if (value != "[]") continue;
    const auto list = list_defaults.find(section + trimmed(l.text.substr(0, eq)));
    if (list != list_defaults.end())
      throw TomlSyntaxError("line " + std::to_string(l.number) + ": " + list->first +
                            " = [] would be read as its default, " + list->second + ": list at least one value");
  }
}

// TOML sets a key once. CLI11 refused a key set again only on the next line, and otherwise kept the first value
// without a word: `steps = 500` appended to a copied configuration was never read.
void check_keys_set_once(const std::vector<TomlLine>& lines) {
  std::map<std::string, int> first_line;
  std::string section;
  const auto bare = [](std::string key) {  // "run" . steps and run.steps are one key
    key.erase(
        std::remove_if(key.begin(), key.end(), [](char c) { return c == ' ' || c == '\t' || c == '"' || c == '\''; }),
        key.end());
    return key;
  };
  for (const TomlLine& l : lines) {
    if (l.text[0] == '[') {
      section = bare(l.text.substr(1, l.text.size() - 2)) + ".";
      continue;
    }
    const std::string key = section + bare(l.text.substr(0, l.text.find('=')));
    const auto [it, first] = first_line.emplace(key, l.number);
    if (!first)
      throw TomlSyntaxError("line " + std::to_string(l.number) + ": " + key + " is set again (first on line " +
                            std::to_string(it->second) + "); TOML sets a key once");
  }
}

}  // namespace

std::string with_bare_keys(const std::string& toml) {
  std::istringstream in(toml);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    const char quote = line.empty() ? 0 : line[0];
    const std::size_t close = quote == '"' || quote == '\'' ? line.find(quote, 1) : std::string::npos;
    const std::size_t after = close == std::string::npos ? close : line.find_first_not_of(" \t", close + 1);
    if (after != std::string::npos && line[after] == '=' && line.find('=', 1) > close)
      line = line.substr(1, close - 1) + line.substr(close + 1);
    out += line + "\n";
  }
  return out;
}

namespace {

// `value` as a TOML string that arclight's reader (CLI11's) reads back as it is: a basic string ("...", quotes
// escaped), or where it holds a backslash a literal one ('...': CLI11 takes no escape but \" in a basic string, and
// would double the backslash at every round). None for a value with a backslash and a ' or a control character.
std::optional<std::string> toml_string(const std::string& value) {
  const bool control =
      std::any_of(value.begin(), value.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (control) return std::nullopt;
  if (value.find('\\') == std::string::npos) {
    std::string out = "\"";
    for (const char c : value) out += c == '"' ? std::string("\\\"") : std::string(1, c);
    return out + "\"";
  }
  if (value.find('\'') != std::string::npos) return std::nullopt;
  return "'" + value + "'";
}

// The values `option` holds: those given, else its default (a list's written "[a,b]": arclight's own, no commas in
// its values).
std::vector<std::string> values_of(const CLI::Option& option) {
  if (option.count() > 0) return option.results();
  std::string text = option.get_default_str();
  if (option.get_items_expected_max() <= 1) return {text};
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  std::vector<std::string> values;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) values.push_back(trimmed(item));
  return values;
}

// A float as TOML writes one (CLI11 wrote what it was given: .5, 1E3, NaN).
std::string toml_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, x).ptr;
  std::string out(text, end);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

// `option`'s value in TOML's own type; `written` is CLI11's text of it. Integers stay as written (decimal, checked).
std::string toml_value(const CLI::Option& option, const std::string& written) {
  const std::vector<std::string> values = values_of(option);
  if (option.get_items_expected_max() > 1) {
    std::string array = "[";
    for (const std::string& v : values) {
      const std::optional<std::string> item = toml_string(v);
      if (!item) return written;
      array += (array.size() > 1 ? ", " : "") + *item;
    }
    return array + "]";
  }
  const std::string type = option.get_type_name();
  if (type.rfind("BOOLEAN", 0) == 0) return option.as<bool>() ? "true" : "false";
  if (type.rfind("FLOAT", 0) == 0) return toml_float(option.as<double>());
  if (!values.empty() && !written.empty() && (written.front() == '"' || written.front() == '\''))
    return toml_string(values.back()).value_or(written);
  return written;
}

}  // namespace

std::string with_toml_values(const std::string& toml, const CLI::App& train) {
  std::istringstream in(toml);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    const std::size_t eq = line.find('=');
    const CLI::Option* option = eq == std::string::npos || line[0] == '#'
                                    ? nullptr
                                    : train.get_option_no_throw("--" + trimmed(line.substr(0, eq)));
    if (option != nullptr) line = line.substr(0, eq + 1) + toml_value(*option, trimmed(line.substr(eq + 1)));
    out += line + "\n";
  }
  return out;
}

std::vector<CLI::ConfigItem> SectionedToml::from_config(std::istream& input) const {
  const std::string text{std::istreambuf_iterator<char>(input), std::istreambuf_iterator<char>()};
  const std::vector<TomlLine> lines = toml_lines(text);
  check_toml_lines(lines);
  check_keys_set_once(lines);
  check_empty_lists(lines, list_defaults_);
  std::string cleaned;
  for (const TomlLine& l : lines) cleaned += l.text + "\n";
  std::istringstream again(cleaned);
  CLI::ConfigTOML parser;  // the comments are gone: a # left is in a string
  parser.comment('\x01');
  std::vector<CLI::ConfigItem> flat;
  for (CLI::ConfigItem& item : parser.from_config(again)) {
    if (item.name == "++" || item.name == "--") continue;  // section open/close markers
    // An empty list (`command = []`, as the effective config of every built-in agent has it) is the default.
    if (item.inputs.empty() || (item.inputs.size() == 1 && item.inputs[0] == "[]")) continue;
    std::string name;
    for (const std::string& parent : item.parents) name += parent + ".";
    CLI::ConfigItem renamed;
    renamed.parents = {"train"};
    renamed.name = name + item.name;
    renamed.inputs = std::move(item.inputs);
    flat.push_back(std::move(renamed));
  }
  return flat;
}

}  // namespace arclight::app
