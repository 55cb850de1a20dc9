#include "arclight/app/cli.hpp"

#include <CLI/CLI.hpp>

#include <sstream>

#include "arclight/comm/gpu.hpp"
#include "arclight/core/version.hpp"

namespace arclight::app {
namespace {

// TOML sections become dotted option names of the train command: [layout] trainers = "1"
// sets --layout.trainers. CLI11 parses the file; this only renames its items.
class SectionedToml : public CLI::ConfigTOML {
 public:
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> flat;
    for (CLI::ConfigItem& item : CLI::ConfigTOML::from_config(input)) {
      if (item.name == "++" || item.name == "--") continue;  // section open/close markers
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
};

std::string version_text() {
  const BuildInfo& b = build_info();
  std::ostringstream out;
  out << "arclight " << b.version << " (git " << b.git_hash << ")\n"
      << "cuda: " << (b.cuda ? "yes" : "no") << "\n"
      << "nccl: " << (b.nccl ? "yes (" + comm::nccl_version() + ")" : std::string("no")) << "\n"
      << "parallel hdf5: " << (b.parallel_hdf5 ? "yes" : "no");
  return out.str();
}

// Binds each field of the configuration to its option --section.key (and TOML key).
class ConfigBinder {
 public:
  explicit ConfigBinder(CLI::App& train) : train_(train) {}

  template <class Field>
  CLI::Option* opt(const std::string& key, Field& field, const std::string& help) {
    return train_.add_option("--" + key, field, help)->capture_default_str()->group("Configuration");
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
};

void bind_run(ConfigBinder& b, Config& c) {
  b.opt("run.dir", c.run.dir, "run directory: metrics, logs, checkpoints");
  b.opt("run.seed", c.run.seed, "random seed");
  b.opt("run.steps", c.run.steps, "training steps")->check(CLI::NonNegativeNumber);
  b.mode("run.progress", c.run.progress, "auto is a progress bar when stderr is a terminal");
}

void bind_layout(ConfigBinder& b, Config& c) {
  b.mode("layout.mode", c.layout.mode, "runners and trainers apart, or every worker does both");
  b.opt("layout.trainers", c.layout.trainers, "trainer ranks: a count or a fraction of the worker ranks");
  b.opt("layout.runners", c.layout.runners, "runner ranks: a count, a fraction, or \"rest\"");
}

void bind_model(ConfigBinder& b, Config& c) {
  b.opt("model.d_model", c.model.d_model, "width of the transformer")->check(CLI::PositiveNumber);
  b.opt("model.n_layers", c.model.n_layers, "transformer blocks")->check(CLI::PositiveNumber);
  b.opt("model.n_heads", c.model.n_heads, "attention heads")->check(CLI::PositiveNumber);
  b.opt("model.d_ff", c.model.d_ff, "width of the MLP")->check(CLI::PositiveNumber);
  b.opt("model.max_seq", c.model.max_seq, "longest token sequence")->check(CLI::PositiveNumber);
  b.mode("model.positions", c.model.positions, "position encoding");
}

void bind_agent(ConfigBinder& b, Config& c) {
  b.opt("agent.name", c.agent.name, "the built-in agent to train: guess or arith");
  b.opt("agent.guess_max", c.agent.guess_max, "guess: the secret is in 1..guess_max")->check(CLI::Range(2, 1000));
  b.opt("agent.max_turns", c.agent.max_turns, "guess: turn limit")->check(CLI::PositiveNumber);
  b.opt("agent.arith_digits", c.agent.arith_digits, "arith: digits per operand")->check(CLI::Range(1, 9));
  b.opt("agent.max_policy_calls", c.agent.max_policy_calls, "an episode making more policy calls fails")
      ->check(CLI::PositiveNumber);
  b.opt("agent.episode_timeout_seconds", c.agent.episode_timeout_seconds, "an episode running longer fails")
      ->check(CLI::PositiveNumber);
}

void bind_grpo(ConfigBinder& b, Config& c) {
  b.opt("grpo.tasks_per_step", c.grpo.tasks_per_step, "tasks per step")->check(CLI::PositiveNumber);
  b.opt("grpo.group_size", c.grpo.group_size, "rollouts per task (a GRPO group)")->check(CLI::PositiveNumber);
  b.mode("grpo.advantage", c.grpo.advantage, "returns-to-go normalized per step, or one per trajectory");
  b.mode("grpo.samples", c.grpo.samples, "one sequence per episode, or one per policy call");
  b.opt("grpo.gamma", c.grpo.gamma, "discount of later rewards (per_step)")->check(CLI::Range(0.0, 1.0));
  b.opt("grpo.clip_eps", c.grpo.clip_eps, "PPO clip range")->check(CLI::NonNegativeNumber);
  b.opt("grpo.kl_coef", c.grpo.kl_coef, "KL penalty to the initial policy")->check(CLI::NonNegativeNumber);
  b.opt("grpo.entropy_coef", c.grpo.entropy_coef, "entropy bonus")->check(CLI::NonNegativeNumber);
  b.opt("grpo.lr", c.grpo.lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  b.opt("grpo.weight_decay", c.grpo.weight_decay, "AdamW weight decay")->check(CLI::NonNegativeNumber);
  b.opt("grpo.grad_clip", c.grpo.grad_clip, "gradient norm clip; 0: none")->check(CLI::NonNegativeNumber);
  b.opt("grpo.micro_batch", c.grpo.micro_batch, "sequences per forward/backward")->check(CLI::PositiveNumber);
  b.opt("grpo.ppo_epochs", c.grpo.ppo_epochs, "optimizer steps on each batch")->check(CLI::PositiveNumber);
  b.opt("grpo.max_staleness", c.grpo.max_staleness, "policy versions a rollout may lag; 0: on-policy")
      ->check(CLI::NonNegativeNumber);
  b.opt("grpo.temperature", c.grpo.temperature, "sampling temperature of training rollouts")
      ->check(CLI::PositiveNumber);
  b.opt("grpo.validate_every", c.grpo.validate_every, "steps between validations; 0: never")
      ->check(CLI::NonNegativeNumber);
  b.opt("grpo.train_blocks", c.grpo.train_blocks,
        "0: the whole model trains; N: only the last N blocks and the final norm (the rest is frozen)")
      ->check(CLI::NonNegativeNumber);
}

void bind_comm(ConfigBinder& b, Config& c) {
  b.opt("comm.bucket_mb", c.comm.bucket_mb, "gradient all-reduce bucket size (MB)")->check(CLI::PositiveNumber);
  b.opt("comm.first_bucket_mb", c.comm.first_bucket_mb, "the first, small bucket (MB)")->check(CLI::PositiveNumber);
  b.mode("comm.compression", c.comm.compression, "gradients in transit");
}

void bind_rollout(ConfigBinder& b, Config& c) {
  b.opt("rollout.timeout_seconds", c.rollout.timeout_seconds, "an attempt's time limit from its start; 0: none")
      ->check(CLI::NonNegativeNumber);
  b.opt("rollout.unresponsive_seconds", c.rollout.unresponsive_seconds,
        "an attempt without a heartbeat this long is unresponsive; 0: never")
      ->check(CLI::NonNegativeNumber);
  b.opt("rollout.max_attempts", c.rollout.max_attempts, "attempts per rollout, the first included")
      ->check(CLI::PositiveNumber);
  b.opt("rollout.retry_condition", c.rollout.retry_condition, "attempt endings that requeue the rollout")
      ->check(CLI::IsMember({"failed", "timeout", "unresponsive"}));
}

void bind_runner(ConfigBinder& b, Config& c) {
  b.opt("runner.episodes_in_flight", c.runner.episodes_in_flight, "episodes a runner runs at once, batched")
      ->check(CLI::PositiveNumber);
  b.opt("runner.span_batch", c.runner.span_batch, "spans per batch sent to the store")->check(CLI::PositiveNumber);
  b.opt("runner.span_flush_seconds", c.runner.span_flush_seconds, "longest a span waits before its batch goes")
      ->check(CLI::PositiveNumber);
}

void bind_checkpoint(ConfigBinder& b, Config& c) {
  b.opt("checkpoint.dir", c.checkpoint.dir, "where versions go; empty: <run.dir>/checkpoints");
  b.opt("checkpoint.every_steps", c.checkpoint.every_steps, "a checkpoint every N steps; 0: not by steps")
      ->check(CLI::NonNegativeNumber);
  b.opt("checkpoint.every_minutes", c.checkpoint.every_minutes, "a checkpoint every T minutes; 0: not by time")
      ->check(CLI::NonNegativeNumber);
  b.opt("checkpoint.keep", c.checkpoint.keep, "newest versions kept (and what they link to); 0: all")
      ->check(CLI::NonNegativeNumber);
  b.opt("checkpoint.full_every", c.checkpoint.full_every,
        "every K-th version is full; the others link to their parent's unchanged datasets; 1: all full")
      ->check(CLI::PositiveNumber);
}

void bind_faults(ConfigBinder& b, Config& c) {
  b.opt("faults.fatal_rank", c.faults.fatal_rank, "(drills) this rank fails fatally after start-up; -1: none");
  b.opt("faults.kill_in_checkpoint", c.faults.kill_in_checkpoint,
        "(drills) rank 0 is killed (SIGKILL) in the middle of writing this step's version; 0: never")
      ->check(CLI::NonNegativeNumber);
}

void bind_config(CLI::App& train, Config& c) {
  ConfigBinder b(train);
  bind_run(b, c);
  bind_layout(b, c);
  bind_model(b, c);
  bind_agent(b, c);
  bind_grpo(b, c);
  bind_comm(b, c);
  bind_rollout(b, c);
  bind_runner(b, c);
  bind_checkpoint(b, c);
  bind_faults(b, c);
}

// CLI11's messages for config-file problems name the internal section; say it the user's way.
std::string user_message(const CLI::ParseError& e) {
  std::string what = e.what();
  const std::string extras = "INI was not able to parse train.";
  if (what.rfind(extras, 0) == 0) return "config: unknown key '" + what.substr(extras.size()) + "'";
  return "config: " + what;
}

}  // namespace

Invocation parse_command_line(int argc, const char* const* argv) {
  Invocation inv;
  CLI::App app{"arclight: reinforcement learning for tool-using agents on HPC clusters", "arclight"};
  app.config_formatter(std::make_shared<SectionedToml>());
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
  bind_config(*train, inv.config);
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help or --version
    std::ostringstream out;
    app.exit(e, out, out);
    inv.text = out.str();
    return inv;
  } catch (const CLI::ParseError& e) {
    inv.error = user_message(e);
    return inv;
  }
  inv.log_level = *log::parse_level(level_name);
  if (train->parsed()) {
    inv.command = Command::train;
    inv.effective_config = train->config_to_str(true, false);
  } else if (inspect->parsed()) {
    inv.command = Command::inspect;
  } else {
    inv.text = app.help();
  }
  return inv;
}

}  // namespace arclight::app
