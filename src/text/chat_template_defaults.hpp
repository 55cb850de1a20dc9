#pragma once
// The default system prompts of Qwen's templates, word for word: what ChatTemplate::named writes and what recognize
// reads in a template's text. Private to the text module.
#include <string_view>

namespace arclight::text {

inline constexpr std::string_view qwen25_system =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
inline constexpr std::string_view qwen2_system = "You are a helpful assistant.";  // Qwen2-Instruct's
inline constexpr std::string_view qwen15_system = "You are a helpful assistant";  // Qwen1.5-Chat's, no full stop
// Qwen2.5-Math's (base and instruct), the model most GRPO recipes start from.
inline constexpr std::string_view qwen25_math_system =
    "Please reason step by step, and put your final answer within \\boxed{}.";

}  // namespace arclight::text
