#include "arclight/app/cli.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/comm/gpu.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/version.hpp"
#include "arclight/model/policy.hpp"
#include "arclight/text/chat_template.hpp"
#include "toml_config.hpp"

namespace arclight::app {
namespace {

// The malloc this process runs on: jemalloc's when malloc comes from the library that defines
// jemalloc's mallctl (the build links it; LD_PRELOAD would do too), glibc's when from libc, else
// the library it comes from.
std::string allocator_in_use() {
  using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  auto mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  Dl_info of_mallctl{}, of_malloc{};
  if (!::dladdr(::dlsym(RTLD_DEFAULT, "malloc"), &of_malloc) || !of_malloc.dli_fname) return "unknown";
  const char* version = nullptr;
  std::size_t size = sizeof version;
  if (mallctl && ::dladdr(reinterpret_cast<void*>(mallctl), &of_mallctl) &&
      of_mallctl.dli_fbase == of_malloc.dli_fbase && mallctl("version", &version, &size, nullptr, 0) == 0 && version)
    return std::string("jemalloc ") + version;
  const std::string library = std::filesystem::path(of_malloc.dli_fname).filename().string();
  return library.rfind("libc.so", 0) == 0 ? "glibc malloc" : "malloc of " + library;
}

std::string version_text() {
  const BuildInfo& b = build_info();
  std::ostringstream out;
  out << "arclight " << b.version << " (git " << b.git_hash << ")\n"
      << "cuda: " << (b.cuda ? "yes" : "no") << "\n"
      << "libtorch cuda: " << (b.torch_cuda ? "yes" : "no (the policy computes on CPUs)") << "\n"
      << "nccl: " << (b.nccl ? "yes (" + comm::nccl_version() + ")" : std::string("no")) << "\n"
      << "parallel hdf5: " << (b.parallel_hdf5 ? "yes" : "no") << "\n"
      << "allocator: " << allocator_in_use();
  return out.str();
}

// CLI11's PositiveNumber and NonNegativeNumber print their range up to the largest double (300
// digits); these say it plainly. The message starts "= VALUE: " so user_message can write "key = VALUE: why".
CLI::Validator number_at_least(double low, bool inclusive, const std::string& what,
                               double high = std::numeric_limits<double>::max()) {
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        double x = 0;
        if (CLI::detail::lexical_cast(value, x) && (inclusive ? x >= low : x > low) && x <= high) return "";
        return "= " + value + ": must be " + what;
      },
      what);
}
const CLI::Validator positive = number_at_least(0, false, "a positive number");
// CLI11 reads an integer with a leading 0 as octal (010 as 8); TOML has no such integers.
const CLI::Validator decimal_integer(
    [](std::string& value) -> std::string {
      const std::size_t digits = value.find_first_not_of("+-");
      if (digits == std::string::npos || value[digits] != '0' || digits + 1 >= value.size() ||
          value[digits + 1] == 'x' || value[digits + 1] == 'X')  // 0x10 is 16, in TOML as in CLI11
        return "";
      return "= " + value + ": an integer is written without leading zeros";
    },
    "a decimal integer");
const CLI::Validator non_negative = number_at_least(0, true, "a number >= 0");
// The bound of timeouts that become clock deadlines: 1e300 s (meant as "never") overflowed them into the past.
constexpr double a_week = 7 * 86400.0;

// Binds each field of the configuration to its option --section.key (and TOML key).
class ConfigBinder {
 public:
  ConfigBinder(CLI::App& train, ListDefaults& list_defaults) : train_(train), list_defaults_(list_defaults) {}

  template <class Field>
  CLI::Option* opt(const std::string& key, Field& field, const std::string& help) {
    CLI::Option* o = train_.add_option("--" + key, field, help)->capture_default_str()->group("Configuration");
    if constexpr (std::is_integral_v<Field> && !std::is_same_v<Field, bool>) o->check(decimal_integer);
    if constexpr (std::is_same_v<Field, std::vector<std::string>>)
      if (!field.empty()) list_defaults_[key] = o->get_default_str();
    return o;
  }

  // A mode binds as its name (so the effective configuration prints names) and is read into its enum.
  template <class Mode>
  CLI::Option* mode(const std::string& key, Mode& field, const std::string& help) {
    std::vector<std::string> names;
    for (const auto& n : mode_names(Mode{})) names.push_back(n.name);
    std::string choices;
    for (std::size_t i = 0; i < names.size(); ++i)
      choices += (i ? (i + 1 == names.size() ? " or " : ", ") : "") + names[i];
    return train_
        .add_option_function<std::string>(
            "--" + key, [&field](const std::string& name) { field = *parse_mode<Mode>(name); }, help + ": " + choices)
        ->default_str(name_of(field))
        ->check(CLI::IsMember(names))
        ->group("Configuration");
  }

 private:
  CLI::App& train_;
  ListDefaults& list_defaults_;
};

void bind_run(ConfigBinder& b, Config& c) {
  b.opt("run.dir", c.run.dir, "run directory: metrics, logs, checkpoints");
  b.opt("run.seed", c.run.seed, "random seed");
  b.opt("run.steps", c.run.steps, "training steps")
      ->check(number_at_least(
          0, true, "from 0 to " + std::to_string(ckpt::max_step) + " (checkpoint versions are named with 8 digits)",
          ckpt::max_step));
  b.mode("run.progress", c.run.progress, "auto is a progress bar when stderr is a terminal");
  b.opt("run.hung_rank_seconds", c.run.hung_rank_seconds,
        "a rank silent this long, or a runner taking no new weights this long, hangs: a runner is fenced, a "
        "trainer ends the job")
      ->check(number_at_least(2, true, "from 2 to 604800 seconds (a week)", a_week));
  b.opt("run.lock_wait_seconds", c.run.lock_wait_seconds,
        "a run.dir or checkpoint.dir another job holds is waited for this long before the job is refused (a failed "
        "node's lock on a parallel file system outlives the node until the file system lets it go)")
      ->check(number_at_least(0, true, "from 0 to 604800 seconds (a week)", a_week));
}

void bind_layout(ConfigBinder& b, Config& c) {
  b.mode("layout.mode", c.layout.mode, "runners and trainers apart, or every worker does both");
  b.opt("layout.trainers", c.layout.trainers, "trainer ranks: a count or a fraction of the worker ranks");
  b.opt("layout.runners", c.layout.runners, "runner ranks: a count, a fraction, or \"rest\"");
}

void bind_model(ConfigBinder& b, Config& c) {
  b.mode("model.source", c.model.source, "scratch: a transformer initialised here; hf: a Hugging Face model directory");
  b.opt("model.path", c.model.path, "source = hf: the model directory (config.json, *.safetensors)");
  b.mode("model.dtype", c.model.dtype, "the forward's compute type (parameters stay float32)");
  b.opt("model.chat_template", c.model.chat_template,
        "source = hf: " + std::string(text::known_templates) + "; empty: recognised from tokenizer_config.json");
  b.opt("model.lora_rank", c.model.lora_rank, "source = hf: train LoRA adapters of this rank only; 0: every weight")
      ->check(CLI::Range(0, 4096));
  b.opt("model.lora_alpha", c.model.lora_alpha, "LoRA: the adapters' output is scaled by lora_alpha / lora_rank")
      ->check(positive);
  b.opt("model.lora_targets", c.model.lora_targets, "LoRA: the projections with adapters: q, k, v, o, gate, up, down")
      ->check(CLI::IsMember({"q", "k", "v", "o", "gate", "up", "down"}));
  b.opt("model.gradient_checkpointing", c.model.gradient_checkpointing,
        "training keeps each layer's input only and recomputes the layer in the backward");
  b.opt("model.d_model", c.model.d_model, "width of the transformer")->check(positive);
  b.opt("model.n_layers", c.model.n_layers, "transformer blocks")->check(positive);
  b.opt("model.n_heads", c.model.n_heads, "attention heads")->check(positive);
  b.opt("model.d_ff", c.model.d_ff, "width of the MLP")->check(positive);
  b.opt("model.max_seq", c.model.max_seq, "longest token sequence")->check(positive);
  b.mode("model.positions", c.model.positions, "position encoding");
}

void bind_agent(ConfigBinder& b, Config& c) {
  b.opt("agent.name", c.agent.name,
        "the agent to train: guess or arith (built in), external (agent.command), or agl (Agent Lightning's runner as "
        "agent.command)");
  b.opt("agent.guess_max", c.agent.guess_max, "guess: the secret is in 1..guess_max")->check(CLI::Range(2, 1000));
  b.opt("agent.max_turns", c.agent.max_turns, "guess: turn limit")->check(positive);
  b.opt("agent.arith_digits", c.agent.arith_digits, "arith: digits per operand")->check(CLI::Range(1, 9));
  b.opt("agent.max_policy_calls", c.agent.max_policy_calls, "an episode making more policy calls fails")
      ->check(positive);
  b.opt("agent.episode_timeout_seconds", c.agent.episode_timeout_seconds, "an episode running longer fails")
      ->check(positive);
  b.opt("agent.command", c.agent.command, "external: the agent's command line (argv), run on every runner rank");
  b.opt("agent.workers", c.agent.workers, "external: agent processes per runner rank")->check(CLI::Range(1, 4096));
  b.opt("agent.tasks", c.agent.tasks, "external: training tasks, a JSON Lines file (one task per line)");
  b.opt("agent.validation_tasks", c.agent.validation_tasks, "external: validation tasks, a JSON Lines file");
  b.opt("agent.vocab_size", c.agent.vocab_size,
        "external, from scratch: the model's vocabulary for an agent of token ids; 0: bytes and ChatML (text works)")
      ->check(CLI::Range(0, 1 << 20));
}

void bind_grpo(ConfigBinder& b, Config& c) {
  b.opt("grpo.tasks_per_step", c.grpo.tasks_per_step, "tasks per step")->check(positive);
  // A group of one has nothing to compare with: every advantage 0, no gradient, a run that learns nothing silently.
  b.opt("grpo.group_size", c.grpo.group_size, "rollouts per task (a GRPO group)")
      ->check(number_at_least(2, true, "at least 2 (a group of one has no advantage)"));
  b.mode("grpo.advantage", c.grpo.advantage, "returns-to-go normalized per step, or one per trajectory");
  b.mode("grpo.samples", c.grpo.samples, "one sequence per episode, or one per policy call");
  b.opt("grpo.gamma", c.grpo.gamma, "discount of later rewards (per_step)")
      ->check(number_at_least(0, true, "from 0 to 1", 1));  // CLI::Range let nan through
  b.opt("grpo.clip_eps", c.grpo.clip_eps, "PPO clip range")->check(non_negative);
  b.opt("grpo.clip_ratio_c", c.grpo.clip_ratio_c, "dual clip: a negative advantage's loss bound, in |advantage|")
      ->check(number_at_least(1, false, "a number > 1"));
  b.opt("grpo.kl_coef", c.grpo.kl_coef, "KL penalty to the initial policy")->check(non_negative);
  b.opt("grpo.entropy_coef", c.grpo.entropy_coef, "entropy bonus")->check(non_negative);
  b.opt("grpo.lr", c.grpo.lr, "AdamW learning rate")->check(positive);
  b.opt("grpo.weight_decay", c.grpo.weight_decay, "AdamW weight decay")->check(non_negative);
  b.opt("grpo.grad_clip", c.grpo.grad_clip, "gradient norm clip; 0: none")->check(non_negative);
  b.opt("grpo.micro_batch", c.grpo.micro_batch, "sequences per forward/backward")->check(positive);
  b.opt("grpo.micro_batch_tokens", c.grpo.micro_batch_tokens,
        "tokens per forward/backward too (rows x longest, shortest samples first); 0: micro_batch alone")
      ->check(non_negative);
  b.opt("grpo.ppo_epochs", c.grpo.ppo_epochs, "optimizer steps on each batch")->check(positive);
  b.opt("grpo.max_staleness", c.grpo.max_staleness, "policy versions a rollout may lag; 0: on-policy")
      ->check(non_negative);
  // Below model::greedy_below sampling is greedy: every rollout of a group the same, nothing to learn from.
  b.opt("grpo.temperature", c.grpo.temperature,
        "sampling temperature of training rollouts (built-in agents; the one Agent Lightning agents are told)")
      ->check(number_at_least(model::greedy_below, true, "at least 1e-5"));
  b.opt("grpo.validate_every", c.grpo.validate_every, "steps between validations; 0: never")->check(non_negative);
  b.opt(
       "grpo.train_blocks", c.grpo.train_blocks,
       "0: the whole model trains; N: only the last N blocks, the final norm and the output layer (the rest is frozen; "
       "an output layer tied to the embeddings too)")
      ->check(non_negative);
}

void bind_comm(ConfigBinder& b, Config& c) {
  b.opt("comm.bucket_mb", c.comm.bucket_mb, "gradient all-reduce bucket size (MB)")->check(positive);
  b.opt("comm.first_bucket_mb", c.comm.first_bucket_mb, "the first, small bucket (MB)")->check(positive);
  b.mode("comm.compression", c.comm.compression, "gradients and weights in transit (16-bit: half the bytes)");
  b.opt("comm.store_timeout_seconds", c.comm.store_timeout_seconds,
        "seconds a rank waits for rank 0's store before ending the job")
      ->check(number_at_least(
          2, true, "from 2 to 604800 seconds (a week; rank 0 says every second that it holds a request)", a_week));
}

void bind_rollout(ConfigBinder& b, Config& c) {
  b.opt("rollout.timeout_seconds", c.rollout.timeout_seconds, "an attempt's time limit from its start; 0: none")
      ->check(non_negative);
  b.opt("rollout.unresponsive_seconds", c.rollout.unresponsive_seconds,
        "an attempt without a heartbeat this long is unresponsive; 0: never")
      ->check(non_negative);
  b.opt("rollout.max_attempts", c.rollout.max_attempts, "attempts per rollout, the first included")->check(positive);
  b.opt("rollout.retry_condition", c.rollout.retry_condition, "attempt endings that requeue the rollout")
      ->check(CLI::IsMember({"failed", "timeout", "unresponsive"}));
}

void bind_runner(ConfigBinder& b, Config& c) {
  b.opt("runner.episodes_in_flight", c.runner.episodes_in_flight, "episodes a runner runs at once, batched")
      ->check(positive);
  b.opt("runner.span_batch", c.runner.span_batch, "spans per batch sent to the store")->check(positive);
  b.opt("runner.span_flush_seconds", c.runner.span_flush_seconds, "longest a span waits before its batch goes")
      ->check(number_at_least(0, false, "a positive number of seconds up to 604800 (a week)", a_week));
  b.opt("runner.http_host", c.runner.http_host, "external agents: the address the runner's endpoint binds to");
  b.opt("runner.http_port", c.runner.http_port, "external agents: the endpoint's port; 0: any free port")
      ->check(CLI::Range(0, 65535));
  b.opt("runner.http_max_body_bytes", c.runner.http_max_body_bytes, "a larger request body is refused (413)")
      ->check(CLI::Range(std::size_t(1024), std::size_t(1) << 32));
  // Whole milliseconds: less than one was no time at all (every read timed out, and the endpoint answered nothing).
  b.opt("runner.http_timeout_seconds", c.runner.http_timeout_seconds, "idle or half-sent connections close after this")
      ->check(number_at_least(0.001, true, "from 0.001 to 604800 seconds (a week)", a_week));
  b.opt("runner.decode_rows", c.runner.decode_rows, "sequences a runner's endpoint decodes together")
      ->check(CLI::Range(1, 4096));
  b.opt("runner.reasoning_parser", c.runner.reasoning_parser,
        "qwen3 or deepseek_r1 (vLLM's parsers): chat answers give their <think> reasoning apart; none")
      ->check(CLI::IsMember({"none", "qwen3", "deepseek_r1"}));
}

void bind_store(ConfigBinder& b, Config& c) {
  b.opt("store.http", c.store.http, "serve the store to HTTP clients on rank 0 (Agent Lightning's API, OTLP traces)");
  b.opt("store.http_host", c.store.http_host, "the address rank 0's store API binds to");
  b.opt("store.http_port", c.store.http_port, "the store API's port; 0: any free port")->check(CLI::Range(0, 65535));
}

constexpr const char* direct_reads_help =
    "auto: reads of versions take the tensors straight from the disk (O_DIRECT) unless the page cache holds more "
    "than half of them; always; never: through the page cache (a file system where direct reads are slow, such as "
    "NFS)";

void bind_checkpoint(ConfigBinder& b, Config& c) {
  b.opt("checkpoint.dir", c.checkpoint.dir, "where versions go; empty: <run.dir>/checkpoints");
  b.opt("checkpoint.every_steps", c.checkpoint.every_steps, "a checkpoint every N steps; 0: not by steps")
      ->check(non_negative);
  b.opt("checkpoint.every_minutes", c.checkpoint.every_minutes, "a checkpoint every T minutes; 0: not by time")
      ->check(non_negative);
  b.opt("checkpoint.keep", c.checkpoint.keep, "newest versions kept (and what they link to); 0: all")
      ->check(non_negative);
  b.opt("checkpoint.full_every", c.checkpoint.full_every,
        "every K-th version is full; the others link to their parent's unchanged datasets; 1: all full")
      ->check(positive);
  b.opt("checkpoint.span_log", c.checkpoint.span_log,
        "all: versions keep every span, and rank 0's memory only those no version holds yet; none: spans are "
        "dropped once trained on")
      ->check(CLI::IsMember({"all", "none"}));
  b.opt("checkpoint.direct_reads", c.checkpoint.direct_reads, direct_reads_help)
      ->check(CLI::IsMember({"auto", "always", "never"}));
  b.opt("checkpoint.write_timeout_seconds", c.checkpoint.write_timeout_seconds,
        "a version still being written this long when the job needs it done: the file system stalls, and the job "
        "ends to be requeued (exit 3); 0: no limit")
      ->check(non_negative);
  b.opt("checkpoint.read_timeout_seconds", c.checkpoint.read_timeout_seconds,
        "a resume still loading its version this long: the file system stalls, and the job ends to be requeued (exit "
        "3); 0: no limit")
      ->check(non_negative);
}

void bind_faults(ConfigBinder& b, Config& c) {
  b.opt("faults.fatal_rank", c.faults.fatal_rank, "(drills) this rank fails fatally after start-up; -1: none");
  b.opt("faults.kill_in_checkpoint", c.faults.kill_in_checkpoint,
        "(drills) rank 0 is killed (SIGKILL) in the middle of writing this step's version; 0: never")
      ->check(non_negative);
  b.opt("faults.hang_at_startup_rank", c.faults.hang_at_startup_rank,
        "(drills) this rank stops itself (SIGSTOP) as start-up begins, as a frozen node would; -1: none")
      ->check(CLI::Range(-1, 1 << 20));
  b.opt("faults.slow_restore_seconds", c.faults.slow_restore_seconds,
        "(drills) rank 0 takes this many seconds longer to load the version it resumes from")
      ->check(non_negative);
  b.opt("faults.slow_checkpoint_seconds", c.faults.slow_checkpoint_seconds,
        "(drills) rank 0's checkpoint writer begins each version this many seconds late, as on a slow file system: "
        "the steps go on meanwhile")
      ->check(non_negative);
  b.opt("faults.store_unreadable_step", c.faults.store_unreadable_step,
        "(drills) rank 0 finds that the store of this step's version does not read back (its model does): the "
        "version before is tried; 0: never")
      ->check(non_negative);
}

void bind_config(CLI::App& train, Config& c, ListDefaults& list_defaults) {
  ConfigBinder b(train, list_defaults);
  bind_run(b, c);
  bind_layout(b, c);
  bind_model(b, c);
  bind_agent(b, c);
  bind_grpo(b, c);
  bind_comm(b, c);
  bind_rollout(b, c);
  bind_runner(b, c);
  bind_store(b, c);
  bind_checkpoint(b, c);
  bind_faults(b, c);
}

// CLI11's messages for config-file problems name the internal section; say it the user's way.
std::string user_message(const CLI::ParseError& e) {
  std::string what = e.what();
  const std::string extras = "INI was not able to parse train.";
  if (what.rfind(extras, 0) == 0) return "config: unknown key '" + what.substr(extras.size()) + "'";
  if (dynamic_cast<const CLI::ValidationError*>(&e) && what.rfind("--", 0) == 0) {
    what.erase(0, 2);  // "--key: = VALUE: why" (ours) or "--key: why" (CLI11's): the key as the file spells it
    const auto colon = what.find(": ");
    if (colon != std::string::npos && what.compare(colon, 4, ": = ") == 0) what.erase(colon, 1);
  }
  return "config: " + what;
}

// Rollouts of one step live in rank 0's store until trained on (about a kilobyte each, more with
// spans): a million is 10x a 128-GPU job's step yet fits in memory; 2e9 tasks grows rank 0 until it dies.
constexpr std::int64_t max_rollouts_per_step = 1'000'000;

// Checks across keys, after every key is read; "" when the configuration is fine.
std::string check_invocation(const Invocation& inv, bool resume_given) {
  if (resume_given && inv.resume.empty()) return "--resume needs auto or a version file";
  const std::int64_t rollouts = std::int64_t{inv.config.grpo.tasks_per_step} * inv.config.grpo.group_size;
  if (rollouts > max_rollouts_per_step)
    return "config: grpo.tasks_per_step = " + std::to_string(inv.config.grpo.tasks_per_step) +
           " times grpo.group_size = " + std::to_string(inv.config.grpo.group_size) + " is " +
           std::to_string(rollouts) + " rollouts per step, more than the " + std::to_string(max_rollouts_per_step) +
           " allowed";
  return "";
}

}  // namespace

Invocation parse_command_line(int argc, const char* const* argv) {
  Invocation inv;
  CLI::App app{"arclight: reinforcement learning for tool-using agents on HPC clusters", "arclight"};
  const auto toml = std::make_shared<SectionedToml>();
  app.config_formatter(toml);
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.set_config("--config", "", "TOML configuration file; every key can be overridden as --section.key");
  app.set_version_flag("--version", version_text(), "print version, git hash and compiled-in features");
  std::string level_name = "info";
  app.add_option("--log-level", level_name, "trace, debug, info, warn, error or off")
      ->envname(log::level_env)
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.require_subcommand(0, 1);

  CLI::App* train = app.add_subcommand("train", "run the training job (rank 0 coordinates, the others run and train)");
  train->fallthrough();
  bind_config(*train, inv.config, toml->list_defaults());
  train->add_option("--resume", inv.resume, "continue from the latest checkpoint (auto) or from a version file")
      ->configurable(false);
  train->add_flag("--dry-run", inv.dry_run, "print the effective configuration and every rank's role, then exit")
      ->configurable(false);

  CLI::App* inspect = app.add_subcommand("inspect", "describe the checkpoints in a directory");
  inspect->fallthrough();
  inspect->add_option("DIR", inv.inspect_dir, "checkpoint directory, or one version file with --trained")->required();
  inspect->add_flag(
      "--trained", inv.inspect_trained,
      "how often each task was trained on, from the store in a version (the directory's newest valid one)");

  CLI::App* exporter = app.add_subcommand("export", "write a checkpoint's model as a Hugging Face model directory");
  exporter->fallthrough();
  ExportRequest& request = inv.export_request;
  exporter
      ->add_option("CHECKPOINT", request.checkpoint, "checkpoint directory (its newest valid version) or version file")
      ->required();
  CLI::Option* hf =
      exporter->add_option("--hf", request.hf_dir, "the model directory to write; must not exist or be empty");
  exporter
      ->add_option("--peft", request.peft_dir,
                   "a LoRA run: write its adapters as a PEFT adapter directory instead (adapter_config.json, "
                   "adapter_model.safetensors); must not exist or be empty")
      ->excludes(hf);
  exporter->add_option("--model", request.source_dir,
                       "the Hugging Face directory the run started from (its config and tokenizer files are copied); "
                       "default: the run's model.path");
  exporter
      ->add_flag("--merge-lora", request.merge_lora,
                 "a LoRA run: merge the adapters into the model's weights (--hf; --peft writes them unmerged)")
      ->excludes("--peft");
  exporter
      ->add_option("--dtype", request.dtype,
                   "the weights' type (default: the source's torch_dtype; a float32 run on a bfloat16 model is "
                   "rounded unless float32)")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}))
      ->excludes("--peft");  // a PEFT adapter is written in float32
  exporter->add_option("--max-shard-bytes", request.max_shard_bytes, "larger weights go into shards with an index")
      ->check(positive)
      ->capture_default_str();
  for (CLI::App* reader : {inspect, exporter})  // train's comes with its configuration
    reader->add_option("--checkpoint.direct_reads", inv.config.checkpoint.direct_reads, direct_reads_help)
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
  CLI::App* tokenize = app.add_subcommand("tokenize", "print the token ids of the text on stdin, as JSON");
  tokenize->add_option("--model", inv.tokenize_model, "model directory (tokenizer.json, tokenizer_config.json)")
      ->required();
  tokenize->add_flag("--chat", inv.tokenize_chat,
                     "stdin is a JSON list of chat messages (or {\"messages\", \"tools\"}), put in the chat template");
  tokenize->add_option("--template", inv.tokenize_template, "chat template: " + std::string(text::known_templates));
  tokenize->add_flag("--no-special-tokens", inv.tokenize_no_special_tokens,
                     "text without the special tokens tokenizer.json's post-processor puts around it (Llama's BOS)");
  tokenize->add_flag("--add-generation-prompt", inv.tokenize_generation_prompt,
                     "with --chat: end with the assistant's header, as for generation");
  tokenize->add_option("--enable-thinking", inv.tokenize_enable_thinking,
                       "with --chat: Qwen3's enable_thinking (false: an empty <think></think> after the header)");

  CLI::App* serve =
      app.add_subcommand("serve", "serve a config's policy on the OpenAI-compatible endpoint, no training");
  serve->add_option("CONFIG", inv.serve_config, "config file (model, run.seed, runner.http_*)");
  serve->add_option("--host", inv.serve_host, "the address to bind (default: runner.http_host, loopback)");
  serve->add_option("--port", inv.serve_port, "the port; 0: any free port (default: runner.http_port)")
      ->check(CLI::Range(0, 65535));

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help or --version
    std::ostringstream out;
    app.exit(e, out, out);
    inv.text = out.str();
    return inv;
  } catch (const TomlSyntaxError& e) {
    inv.error = "config file " + app.get_config_ptr()->as<std::string>() + ": " + e.what();
    return inv;
  } catch (const CLI::ParseError& e) {
    inv.error = user_message(e);
    return inv;
  }
  inv.log_level = *log::parse_level(level_name);
  if (train->parsed()) {
    inv.command = Command::train;
    inv.error = check_invocation(inv, train->count("--resume") > 0);
    if (!inv.error.empty()) return inv;
    inv.effective_config = with_toml_values(with_bare_keys(train->config_to_str(true, false)), *train);
  } else if (inspect->parsed()) {
    inv.command = Command::inspect;
  } else if (exporter->parsed()) {
    inv.command = Command::export_model;
    if (request.hf_dir.empty() && request.peft_dir.empty())
      inv.error = "export: say where to write: --hf DIR (a model directory) or --peft DIR (a LoRA run's adapters)";
  } else if (tokenize->parsed()) {
    inv.command = Command::tokenize;
  } else if (serve->parsed()) {
    inv.command = Command::serve;
    // `arclight --config FILE serve` means FILE too (it was read for train's keys and ignored: a default model)
    const std::string given = app.get_config_ptr()->as<std::string>();
    std::error_code unknown;
    if (!given.empty() && !inv.serve_config.empty() && !std::filesystem::equivalent(given, inv.serve_config, unknown))
      inv.error = "serve: two config files (--config " + given + " and " + inv.serve_config + "): give one";
    else if (!given.empty())
      inv.serve_config = given;
  } else if (!app.get_config_ptr()->as<std::string>().empty()) {  // under mpirun it "succeeded", having trained nothing
    inv.error =
        "--config " + app.get_config_ptr()->as<std::string>() + " without a command: arclight train --config FILE";
  } else {
    inv.text = app.help();
  }
  return inv;
}

Config config_from_file(const std::string& path) {
  const char* argv[] = {"arclight", "train", "--config", path.c_str()};
  const Invocation inv = parse_command_line(4, argv);
  if (inv.error.empty()) return inv.config;
  throw UsageError(inv.error.find(path) == std::string::npos ? "config file " + path + ": " + inv.error : inv.error);
}

Config config_from_toml(const std::string& toml) {
  char path[] = "/tmp/arclight_config.XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) throw Error("cannot create a temporary file for the checkpoint's configuration");
  const bool written = ::write(fd, toml.data(), toml.size()) == static_cast<ssize_t>(toml.size());
  ::close(fd);
  struct Unlink {
    const char* path;
    ~Unlink() { ::unlink(path); }
  } unlink_at_end{path};
  if (!written) throw Error("cannot write a temporary file for the checkpoint's configuration");
  try {
    return config_from_file(path);
  } catch (const UsageError& e) {
    throw UsageError(std::string("the checkpoint's configuration does not read: ") + e.what());
  }
}

}  // namespace arclight::app
