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

void bind_config(CLI::App& train, Config& c) {
  auto opt = [&train](const std::string& key, auto& field, const std::string& help) {
    return train.add_option("--" + key, field, help)->capture_default_str()->group("Configuration");
  };
  opt("run.dir", c.run.dir, "run directory: metrics, logs, checkpoints");
  opt("run.seed", c.run.seed, "random seed");
  opt("run.steps", c.run.steps, "training steps")->check(CLI::NonNegativeNumber);

  opt("layout.mode", c.layout.mode, "split (runners and trainers apart) or colocated (every worker does both)")
      ->check(CLI::IsMember({"split", "colocated"}));
  opt("layout.trainers", c.layout.trainers, "trainer ranks: a count or a fraction of the worker ranks");
  opt("layout.runners", c.layout.runners, "runner ranks: a count, a fraction, or \"rest\"");

  opt("rollout.timeout_seconds", c.rollout.timeout_seconds, "an attempt's time limit from its start; 0: none")
      ->check(CLI::NonNegativeNumber);
  opt("rollout.unresponsive_seconds", c.rollout.unresponsive_seconds,
      "an attempt without a heartbeat this long is unresponsive; 0: never")
      ->check(CLI::NonNegativeNumber);
  opt("rollout.max_attempts", c.rollout.max_attempts, "attempts per rollout, the first included")->check(CLI::PositiveNumber);
  opt("rollout.retry_condition", c.rollout.retry_condition, "attempt endings that requeue the rollout")
      ->check(CLI::IsMember({"failed", "timeout", "unresponsive"}));

  opt("runner.span_batch", c.runner.span_batch, "spans per batch sent to the store")->check(CLI::PositiveNumber);
  opt("runner.span_flush_seconds", c.runner.span_flush_seconds, "longest a span waits before its batch goes")
      ->check(CLI::PositiveNumber);

  opt("faults.fatal_rank", c.faults.fatal_rank, "(drills) this rank fails fatally after start-up; -1: none");
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
  train->add_flag("--dry-run", inv.dry_run, "print the effective configuration and every rank's role, then exit")
      ->configurable(false);

  CLI::App* inspect = app.add_subcommand("inspect", "describe the checkpoints in a directory");
  inspect->fallthrough();
  inspect->add_option("DIR", inv.inspect_dir, "checkpoint directory")->required();

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
