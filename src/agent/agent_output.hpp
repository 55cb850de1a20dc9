#pragma once
// A line of an agent's output as the job's log takes it (agent_processes.cpp forwards them): what a terminal would
// show of it, and nothing that moves a terminal's cursor over the log's prefix or over other lines.
#include <cstddef>
#include <string>
#include <string_view>

namespace arclight::agent {

// Where the text a terminal shows of `line` begins: after its last carriage return that some text follows (the carriage
// returns at its end may be a CRLF's, or a pty's CRCRLF). A progress bar's line shows its last state.
std::size_t shown_from(std::string_view line);

// The line as the log takes it: from shown_from(), without the carriage returns at its end, without terminal escape
// sequences (ECMA-48: CSI, OSC/DCS/PM/APC up to BEL or ESC \, ESC intermediates final), then arclight::printable
// (other C0 controls, DEL, C1 controls and bytes that are not well-formed UTF-8 as '?').
std::string printable(std::string_view line);

// Where a line too long to wait for its end is cut: not inside a UTF-8 character, nor inside an escape sequence begun
// in its last 256 bytes (the rest goes with the next piece). Never nothing.
std::size_t piece_end(std::string_view pending);

}  // namespace arclight::agent
