#pragma once
#include "arclight/app/cli.hpp"

namespace arclight::app {

// `arclight tokenize`: stdin (text, or chat messages with --chat) to token ids, printed as JSON on stdout. Text:
// [ids]. Chat: {"template": name, "ids": [...], "stop_ids": [...]}. Throws TokenizerFileError or UsageError.
int tokenize(const Invocation& inv);

}  // namespace arclight::app
