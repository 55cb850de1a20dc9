#include "arclight/app/cli.hpp"
#include "../../src/app/toml_config.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "arclight/core/error.hpp"

using namespace arclight;
using namespace arclight::app;

namespace arclight {
// Boost.Test prints a mode by its name when a check fails.
template <class Mode, class = decltype(mode_names(Mode{}))>
std::ostream& operator<<(std::ostream& out, Mode mode) {
  return out << name_of(mode);
}
}  // namespace arclight

namespace {
Invocation parse(std::vector<std::string> args) {
  args.insert(args.begin(), "arclight");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// A TOML file that lives for one test.
struct TempToml {
  std::string path;
  explicit TempToml(const std::string& text) {
    char name[] = "/tmp/arclight_cli_XXXXXX";
    int fd = mkstemp(name);
    BOOST_REQUIRE(fd >= 0);
    close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~TempToml() { std::remove(path.c_str()); }
};
const std::string workstation = std::string(ARCLIGHT_SOURCE_DIR) + "/configs/workstation.toml";
}  // namespace

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(config_file_sets_sectioned_keys) {
  Invocation inv = parse({"train", "--config", workstation});
  BOOST_TEST(inv.error == "");
  BOOST_TEST((inv.command == Command::train));
  BOOST_TEST(inv.config.run.dir == "runs/workstation");
  BOOST_TEST(inv.config.run.steps == 300);
  BOOST_TEST(inv.config.layout.trainers == "1");
}

BOOST_AUTO_TEST_CASE(command_line_overrides_the_file) {
  Invocation inv = parse({"train", "--config", workstation, "--run.steps", "7", "--layout.mode", "colocated"});
  BOOST_TEST(inv.error == "");
  BOOST_TEST(inv.config.run.steps == 7);
  BOOST_TEST(inv.config.layout.mode == LayoutMode::colocated);
  BOOST_TEST(inv.config.run.dir == "runs/workstation");  // untouched keys still come from the file
}

BOOST_AUTO_TEST_CASE(effective_config_round_trips) {
  Invocation first = parse({"train", "--config", workstation, "--run.seed", "42"});
  BOOST_TEST(first.effective_config.find("42") != std::string::npos);
  TempToml again(first.effective_config);
  Invocation second = parse({"train", "--config", again.path});
  BOOST_TEST(second.error == "");
  BOOST_TEST(second.config.run.seed == 42u);
  BOOST_TEST(second.config.run.dir == "runs/workstation");
}

// CLI11 2.4 quotes dotted names, 2.1 does not: what a run prints and saves has them bare either way, and values
// (quotes and = in strings included) stay as they are.
BOOST_AUTO_TEST_CASE(dotted_keys_are_written_bare_whatever_cli11_quotes) {
  BOOST_TEST(app::with_bare_keys("\"model.source\"=\"hf\"\n'run.dir'='a=b'\n") ==
             "model.source=\"hf\"\nrun.dir='a=b'\n");
  const std::string plain = "model.source=\"hf\"\nagent.command=[\"a \\\"b\\\"\", \"c=d\"]\n\"=x\n";
  BOOST_TEST(app::with_bare_keys(plain) == plain);
  BOOST_TEST(app::with_bare_keys("\"run.dir\" = \"x\"\n") == "run.dir = \"x\"\n");
  Invocation inv = parse({"train", "--config", workstation});
  std::istringstream lines(inv.effective_config);
  for (std::string line; std::getline(lines, line);)
    BOOST_TEST((line.empty() || (line[0] != '"' && line[0] != '\'')), line);
}

// Values as TOML types them, so that other TOML readers read what arclight reads: CLI11 wrote a list's default as a
// string ("[q,k,v,o]"), one value as a string ('q'), a number in an argv bare, a boolean as 0 or 1, a float as given
// (.5 is no TOML), a string holding ' and " as '...'. Python's tomllib is the reader nobody here wrote; arclight reads
// the file back the same.
BOOST_AUTO_TEST_CASE(effective_config_values_are_typed_as_toml_types_them) {
  const Invocation defaults = parse({"train"});
  for (const char* line : {"model.lora_targets=[\"q\", \"k\", \"v\", \"o\"]\n",
                           "rollout.retry_condition=[\"failed\", \"timeout\", \"unresponsive\"]\n",
                           "agent.command=[]\n", "store.http=false\n", "model.lora_alpha=16.0\n"})
    BOOST_TEST(defaults.effective_config.find(line) != std::string::npos, line << " in " << defaults.effective_config);
  // One value given, a boolean given as 1, an argv of a word with a comma and quotes and of a number, a float written
  // .5, strings with quotes and backslashes.
  const Invocation given = parse({"train", "--model.lora_targets", "q", "--store.http", "1", "--agent.name", "external",
                                  "--agent.command", "say \"hi\", twice", "--agent.command", "10", "--agent.tasks",
                                  "C:\\tasks\\t.jsonl", "--grpo.lr", ".5", "--run.dir", "runs/it's \"x\""});
  BOOST_REQUIRE(given.error == "");
  for (const char* line : {"model.lora_targets=[\"q\"]\n", "store.http=true\n", "grpo.lr=0.5\n"})
    BOOST_TEST(given.effective_config.find(line) != std::string::npos, line << " in " << given.effective_config);
  TempToml file(given.effective_config);
  const Invocation again = parse({"train", "--config", file.path});
  BOOST_REQUIRE(again.error == "");
  BOOST_TEST(again.config.model.lora_targets == std::vector<std::string>{"q"});
  BOOST_TEST(again.config.agent.command == (std::vector<std::string>{"say \"hi\", twice", "10"}));
  BOOST_TEST(again.config.agent.tasks == "C:\\tasks\\t.jsonl");
  BOOST_TEST(again.config.run.dir == "runs/it's \"x\"");
  BOOST_TEST(again.config.grpo.lr == 0.5);
  BOOST_TEST(again.config.store.http);
  BOOST_TEST(again.effective_config == given.effective_config);
  // Python's tomllib reads the same types and values (skipped, saying so, where Python has no tomllib: before 3.11).
  if (std::system("python3 -c 'import tomllib' 2>/dev/null") != 0) {
    BOOST_TEST_MESSAGE("SKIP: python3 has no tomllib (3.11 or later): the effective configuration not read by it");
    return;
  }
  TempToml defaults_file(defaults.effective_config);
  TempToml script(R"PY(import sys, tomllib
def read(path):
    with open(path, 'rb') as f:
        return tomllib.load(f)
d, g = read(sys.argv[1]), read(sys.argv[2])
assert d['model']['lora_targets'] == ['q', 'k', 'v', 'o'] and d['model']['lora_alpha'] == 16.0, d['model']
assert d['rollout']['retry_condition'] == ['failed', 'timeout', 'unresponsive'], d['rollout']
assert d['agent']['command'] == [] and d['store']['http'] is False, (d['agent'], d['store'])
assert g['model']['lora_targets'] == ['q'], g['model']
assert g['agent']['command'] == ['say "hi", twice', '10'] and g['agent']['tasks'] == r'C:\tasks\t.jsonl', g['agent']
assert g['store']['http'] is True and g['run']['steps'] == d['run']['steps'], g['store']
assert g['grpo']['lr'] == 0.5 and g['run']['dir'] == 'runs/it\'s "x"', (g['grpo'], g['run'])
)PY");
  BOOST_TEST(std::system(("python3 " + script.path + " " + defaults_file.path + " " + file.path).c_str()) == 0);
}

BOOST_AUTO_TEST_CASE(an_outside_agent_s_config_round_trips) {
  // A checkpoint saves the effective config and a resume or an export reads it back: the agent's argv included, and
  // an empty one (every built-in agent's).
  Invocation first = parse({"train", "--config", ARCLIGHT_SOURCE_DIR "/configs/workstation_external.toml",
                            "--agent.command", "python3", "my agent.py", "say \"hi\""});
  BOOST_TEST(first.error == "");
  TempToml again(first.effective_config);
  Invocation second = parse({"train", "--config", again.path});
  BOOST_TEST(second.error == "");
  BOOST_TEST(second.config.agent.command == (std::vector<std::string>{"python3", "my agent.py", "say \"hi\""}));
  BOOST_TEST(second.config.agent.vocab_size == 35);
  BOOST_TEST(second.config.agent.tasks == "examples/guess_tasks.jsonl");
  TempToml built_in(parse({"train", "--config", workstation}).effective_config);
  BOOST_TEST(parse({"train", "--config", built_in.path}).config.agent.command.empty());
}

BOOST_AUTO_TEST_CASE(unknown_key_is_an_error) {
  TempToml toml("[run]\nsteps = 3\nstepz = 4\n");
  Invocation inv = parse({"train", "--config", toml.path});
  BOOST_TEST(inv.error.find("unknown key 'run.stepz'") != std::string::npos, inv.error);
  TempToml section("[nosuch]\nx = 1\n");
  BOOST_TEST(parse({"train", "--config", section.path}).error.find("nosuch.x") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(wrong_type_is_an_error) {
  TempToml toml("[run]\nsteps = \"many\"\n");
  Invocation inv = parse({"train", "--config", toml.path});
  BOOST_TEST(inv.error.find("run.steps") != std::string::npos, inv.error);
  BOOST_TEST(parse({"train", "--run.seed", "1.5"}).error != "");
  BOOST_TEST(parse({"train", "--layout.mode", "mixed"}).error != "");
}

BOOST_AUTO_TEST_CASE(modes_are_read_into_enums_and_printed_by_name) {
  TempToml toml("[grpo]\nadvantage = \"trajectory\"\nsamples = \"transition\"\n[model]\npositions = \"learned\"\n");
  Invocation inv = parse({"train", "--config", toml.path, "--comm.compression", "bf16", "--run.progress", "lines",
                          "--layout.mode", "colocated"});
  BOOST_REQUIRE(inv.error == "");
  BOOST_TEST(inv.config.grpo.advantage == Advantage::trajectory);
  BOOST_TEST(inv.config.grpo.samples == SampleUnit::transition);
  BOOST_TEST(inv.config.model.positions == Positions::learned);
  BOOST_TEST(inv.config.comm.compression == Compression::bf16);
  BOOST_TEST(inv.config.run.progress == Progress::lines);
  BOOST_TEST(inv.config.layout.mode == LayoutMode::colocated);
  for (const char* line : {"grpo.advantage=\"trajectory\"", "model.positions=\"learned\"", "comm.compression=\"bf16\"",
                           "run.progress=\"lines\""})
    BOOST_TEST(inv.effective_config.find(line) != std::string::npos, line << " in " << inv.effective_config);
  const Invocation defaults = parse({"train"});
  BOOST_TEST(defaults.config.grpo.advantage == Advantage::per_step);
  BOOST_TEST(defaults.effective_config.find("grpo.samples=\"trajectory\"") != std::string::npos,
             defaults.effective_config);
  for (const char* key : {"--run.progress", "--layout.mode", "--model.positions", "--grpo.advantage", "--grpo.samples",
                          "--comm.compression"}) {
    const std::string error = parse({"train", key, "int4"}).error;
    BOOST_TEST(error.find(std::string(key).substr(2)) != std::string::npos, key << ": " << error);
  }
}

BOOST_AUTO_TEST_CASE(missing_config_file_is_an_error) {
  Invocation inv = parse({"train", "--config", "/nonexistent/arclight.toml"});
  BOOST_TEST(inv.error.find("/nonexistent/arclight.toml") != std::string::npos, inv.error);
}

BOOST_AUTO_TEST_CASE(unknown_flag_is_an_error) {
  BOOST_TEST(parse({"train", "--run.nope", "1"}).error != "");
  BOOST_TEST(parse({"frobnicate"}).error != "");
}

BOOST_AUTO_TEST_CASE(version_names_the_compiled_features) {
  Invocation inv = parse({"--version"});
  BOOST_TEST(inv.error == "");
  BOOST_TEST(inv.text.find("arclight ") == 0u, inv.text);
  BOOST_TEST(inv.text.find("git ") != std::string::npos);
  BOOST_TEST(inv.text.find("nccl: ") != std::string::npos);
  BOOST_TEST(inv.text.find("libtorch cuda: ") != std::string::npos);
  BOOST_TEST(inv.text.find("parallel hdf5: yes") != std::string::npos);
  // This test links no jemalloc (the binary does: mpi_cli_test.sh checks it there).
  BOOST_TEST(inv.text.find("allocator: glibc malloc") != std::string::npos, inv.text);
}

BOOST_AUTO_TEST_CASE(log_level_from_flag_and_environment) {
  BOOST_TEST((parse({"--log-level", "debug", "train"}).log_level == log::Level::debug));
  BOOST_TEST((parse({"train", "--log-level", "warn"}).log_level == log::Level::warn));
  setenv(log::level_env, "error", 1);
  BOOST_TEST((parse({"train"}).log_level == log::Level::error));
  BOOST_TEST((parse({"train", "--log-level", "trace"}).log_level == log::Level::trace));  // the flag wins
  setenv(log::level_env, "loud", 1);
  BOOST_TEST(parse({"train"}).error != "");
  unsetenv(log::level_env);
}

BOOST_AUTO_TEST_CASE(inspect_takes_a_directory) {
  Invocation inv = parse({"inspect", "/tmp"});
  BOOST_TEST((inv.command == Command::inspect));
  BOOST_TEST(inv.inspect_dir == "/tmp");
  BOOST_TEST(parse({"inspect"}).error != "");
}

// --merge-lora merges into a model directory; --peft writes the adapters unmerged: both at once is a contradiction.
BOOST_AUTO_TEST_CASE(export_refuses_merge_lora_with_peft) {
  BOOST_TEST(parse({"export", "/tmp", "--hf", "/tmp/x", "--merge-lora"}).error == "");
  const Invocation both = parse({"export", "/tmp", "--peft", "/tmp/x", "--merge-lora"});
  BOOST_TEST(both.error.find("--merge-lora") != std::string::npos, both.error);
  BOOST_TEST(both.error.find("--peft") != std::string::npos, both.error);
}

// serve's config: CONFIG or the top-level --config (read as train reads it), never a default model in silence; a
// bad file is named, not a temporary copy of it.
BOOST_AUTO_TEST_CASE(serve_reads_its_config_from_either_place) {
  TempToml file("[model]\nd_model = 32\n");
  BOOST_TEST(parse({"serve", file.path}).serve_config == file.path);
  const Invocation top = parse({"--config", file.path, "serve"});
  BOOST_TEST(top.error == "");
  BOOST_TEST(top.serve_config == file.path);
  TempToml other("[model]\nd_model = 16\n");
  BOOST_TEST(parse({"--config", file.path, "serve", other.path}).error.find("two config files") != std::string::npos);
  BOOST_TEST(config_from_file(file.path).model.d_model == 32);
  TempToml bad("[model]\nbogus = 1\n");
  try {
    config_from_file(bad.path);
    BOOST_FAIL("an unknown key read");
  } catch (const UsageError& e) {
    const std::string message = e.what();
    BOOST_TEST(message.find(bad.path) != std::string::npos, message);
    BOOST_TEST(message.find("model.bogus") != std::string::npos, message);
    BOOST_TEST(message.find("checkpoint") == std::string::npos, message);
  }
}

// Issue 17, points 6, 14, 15: operator mistakes refused with one plain sentence.
BOOST_AUTO_TEST_CASE(huge_steps_are_refused) {
  // 2e9 tasks (or rollouts per task) is accepted by the types; rank 0 would grow until it died.
  for (const char* key : {"--grpo.tasks_per_step", "--grpo.group_size"}) {
    const Invocation inv = parse({"train", key, "2000000000"});
    BOOST_TEST(inv.error.find("rollouts per step, more than the 1000000 allowed") != std::string::npos,
               key << ": " << inv.error);
  }
  BOOST_TEST(parse({"train", "--grpo.tasks_per_step", "125000", "--grpo.group_size", "8"}).error == "");
  BOOST_TEST(parse({"train", "--grpo.tasks_per_step", "125001", "--grpo.group_size", "8"}).error != "");
}

BOOST_AUTO_TEST_CASE(empty_resume_is_refused) {
  // An empty variable in a script ($RESUME) must not start a fresh run over the old checkpoints.
  BOOST_TEST(parse({"train", "--resume", ""}).error == "--resume needs auto or a version file");
  BOOST_TEST(parse({"train", "--resume="}).error != "");  // CLI11 refuses this one itself
  BOOST_TEST(parse({"train", "--resume", "auto"}).error == "");
  BOOST_TEST(parse({"train"}).resume == "");
}

BOOST_AUTO_TEST_CASE(range_errors_are_one_plain_sentence) {
  BOOST_TEST(parse({"train", "--grpo.group_size", "0"}).error ==
             "config: grpo.group_size = 0: must be at least 2 (a group of one has no advantage)");
  BOOST_TEST(parse({"train", "--grpo.group_size", "1"}).error ==
             "config: grpo.group_size = 1: must be at least 2 (a group of one has no advantage)");
  BOOST_TEST(parse({"train", "--grpo.kl_coef", "-1"}).error == "config: grpo.kl_coef = -1: must be a number >= 0");
  BOOST_TEST(parse({"train", "--runner.http_timeout_seconds", "1e10"}).error ==
             "config: runner.http_timeout_seconds = 1e10: must be from 0.001 to 604800 seconds (a week)");
  BOOST_TEST(parse({"train", "--runner.http_timeout_seconds", "0.0004"}).error ==
             "config: runner.http_timeout_seconds = 0.0004: must be from 0.001 to 604800 seconds (a week)");
  BOOST_TEST(parse({"train", "--runner.http_timeout_seconds", "0.001"}).error.empty());
  BOOST_TEST(parse({"train", "--runner.reasoning_parser", "qwen3"}).error.empty());
  BOOST_TEST(parse({"train", "--runner.reasoning_parser", "deepseek"}).error.find("runner.reasoning_parser") !=
             std::string::npos);
  // Deadlines on the clock: 1e300 s overflowed them into the past (every store call "timed out" at once).
  BOOST_TEST(parse({"train", "--comm.store_timeout_seconds", "1e300"}).error ==
             "config: comm.store_timeout_seconds = 1e300: must be from 2 to 604800 seconds (a week; rank 0 says every "
             "second that it holds a request)");
  BOOST_TEST(parse({"train", "--runner.span_flush_seconds", "1e300"}).error ==
             "config: runner.span_flush_seconds = 1e300: must be a positive number of seconds up to 604800 (a week)");
  BOOST_TEST(parse({"train", "--comm.store_timeout_seconds", "604800"}).error == "");
  // Past 8 digits a version would be written and never found (--resume auto: "no checkpoint", a fresh start).
  BOOST_TEST(parse({"train", "--run.steps", "100000000"}).error ==
             "config: run.steps = 100000000: must be from 0 to 99999999 (checkpoint versions are named with 8 digits)");
  BOOST_TEST(parse({"train", "--run.steps", "99999999"}).error == "");
  BOOST_TEST(parse({"train", "--grpo.clip_ratio_c", "1"}).error ==
             "config: grpo.clip_ratio_c = 1: must be a number > 1");
  // Sampling is greedy below 1e-5: every rollout of a group alike, nothing to learn from.
  BOOST_TEST(parse({"train", "--grpo.temperature", "1e-6"}).error ==
             "config: grpo.temperature = 1e-6: must be at least 1e-5");
  // CLI::Range let nan through: every return-to-go became nan, every advantage 0, and nothing was learned.
  BOOST_TEST(parse({"train", "--grpo.gamma", "nan"}).error == "config: grpo.gamma = nan: must be from 0 to 1");
  BOOST_TEST(parse({"train", "--grpo.gamma", "1"}).error == "");
  TempToml toml("[model]\nn_heads = -4\n");
  BOOST_TEST(parse({"train", "--config", toml.path}).error == "config: model.n_heads = -4: must be a positive number");
}

BOOST_AUTO_TEST_CASE(toml_syntax_error_names_the_file_and_line) {
  TempToml toml("# a comment\n[run]\nsteps 3\n");
  const std::string error = parse({"train", "--config", toml.path}).error;
  BOOST_TEST(error == "config file " + toml.path + ": TOML syntax error at line 3: expected key = value: steps 3");
  // The last five: keys CLI11 would read as options with no name (found by toml_config_fuzz).
  for (const char* text : {"[run\nsteps = 3\n", "[run]\nsteps =\n", "[run]\ndir = \"runs/x\n", "= 3\n",
                           "[rollout]\nretry_condition = [\"failed\",\n", "[run]\n\v\v = 3\n", "[run]\n.steps = 3\n",
                           "run..steps = 3\n", "[.]\nsteps = 3\n", "[run]\n\"\" = 3\n"}) {
    TempToml bad(text);
    const std::string e = parse({"train", "--config", bad.path}).error;
    BOOST_TEST(e.find("TOML syntax error") != std::string::npos, text << ": " << e);
  }
  // A multi-line string kept two of its quotes: refused, naming the line.
  for (const char* text : {"[run]\ndir = \"\"\"runs/x\"\"\"\n", "[run]\ndir = \'\'\'runs/x\'\'\'\n"}) {
    TempToml bad(text);
    const std::string e = parse({"train", "--config", bad.path}).error;
    BOOST_TEST(e.find("TOML syntax error at line 2") != std::string::npos, text << ": " << e);
  }
  // A backslash in a path reads as written (the effective configuration CLI11 saves reads back so); arrays decode.
  TempToml written("[run]\ndir = \"runs/a\\b\"\n");
  BOOST_TEST(parse({"train", "--config", written.path}).config.run.dir == "runs/a\\b");
  TempToml literal("[run]\ndir = 'runs/a\\b'\n[agent]\ncommand = [\"python3\", \"-c\", \"print(\\\"hi\\\")\"]\n");
  const Invocation kept = parse({"train", "--config", literal.path});
  BOOST_TEST(kept.error == "");
  BOOST_TEST(kept.config.run.dir == "runs/a\\b");
  BOOST_TEST(kept.config.agent.command.back() == "print(\"hi\")");
  TempToml fine("[rollout]\nretry_condition = [\"failed\",\n  \"timeout\"]\n[run]\nsteps = 4  # few\n");
  const Invocation inv = parse({"train", "--config", fine.path});
  BOOST_TEST(inv.error == "");
  BOOST_TEST(inv.config.rollout.retry_condition.size() == 2u);
  BOOST_TEST(inv.config.run.steps == 4);
}

// A key set twice is refused wherever the second one is (CLI11 refused it on the next line only, and otherwise kept the
// first value: a setting appended to a copied configuration was never read).
// `arclight --config FILE` printed the help and exited 0: a job that forgot `train` "succeeded".
BOOST_AUTO_TEST_CASE(a_config_without_a_command_is_refused) {
  TempToml toml("[run]\nsteps = 3\n");
  BOOST_TEST(parse({"--config", toml.path}).error ==
             "--config " + toml.path + " without a command: arclight train --config FILE");
  const Invocation help = parse({});
  BOOST_TEST(help.error == "");
  BOOST_TEST(help.text.find("train") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_key_set_twice_is_refused) {
  for (const char* text :
       {"[run]\nsteps = 3\nseed = 2\nsteps = 4\n", "[run]\nsteps = 3\n[grpo]\nlr = 0.1\n[run]\nsteps = 5\n",
        "run.steps = 3\n[run]\nsteps = 4\n", "[run]\nsteps = 3\n\"steps\" = 4\n"}) {
    TempToml twice(text);
    const std::string e = parse({"train", "--config", twice.path}).error;
    BOOST_TEST(e.find("run.steps is set again (first on line") != std::string::npos, text << ": " << e);
  }
  TempToml once("[run]\nsteps = 3\n[grpo]\nsteps = 4\n");  // another section's key of the same name
  BOOST_TEST(parse({"train", "--config", once.path}).error.find("set again") == std::string::npos);
}

// `key = []` reads as the option's default: refused where that default is not empty (a user who wrote
// retry_condition = [] meant no retries, and got three kinds), kept where it is (agent.command, as the effective
// configuration of a built-in agent prints it).
BOOST_AUTO_TEST_CASE(an_empty_list_that_would_read_as_a_default_is_refused) {
  TempToml retry("[run]\nsteps = 3\n\n[rollout]\nretry_condition = [  ]  # never\n");
  BOOST_TEST(parse({"train", "--config", retry.path}).error ==
             "config file " + retry.path +
                 ": line 5: rollout.retry_condition = [] would be read as its default, [failed,timeout,unresponsive]: "
                 "list at least one value");
  TempToml lora("[model]\nlora_targets = [\n]\n");
  BOOST_TEST(parse({"train", "--config", lora.path}).error.find(": line 2: model.lora_targets = [] would be read") !=
             std::string::npos);
  TempToml command("[agent]\ncommand = []\n[rollout]\nretry_condition = [\"failed\"]\n");
  const Invocation inv = parse({"train", "--config", command.path});
  BOOST_TEST(inv.error == "");
  BOOST_TEST(inv.config.agent.command.empty());
  BOOST_TEST(inv.config.rollout.retry_condition == std::vector<std::string>{"failed"});
}

// A # in a string is no comment (CLI11 cut dir = "runs/#1" to "runs/); comments after a section header and inside an
// array spread over lines, and a comma after its last element, are TOML too.
BOOST_AUTO_TEST_CASE(toml_comments_strings_and_arrays_as_toml_reads_them) {
  TempToml toml(
      "[run]  # the run\ndir = \"runs/#1 'x'\"  # where\n[rollout]\nretry_condition = [\n  \"failed\",  # one\n"
      "  # a line of its own\n  \"timeout\",\n]\n[agent]\nname = 'guess'  # built in\n");
  const Invocation inv = parse({"train", "--config", toml.path});
  BOOST_TEST(inv.error == "");
  BOOST_TEST(inv.config.run.dir == "runs/#1 'x'");
  BOOST_TEST(inv.config.rollout.retry_condition == (std::vector<std::string>{"failed", "timeout"}));
  BOOST_TEST(inv.config.agent.name == "guess");
  TempToml one_line("[rollout]\nretry_condition = [\"failed\", \"timeout\", ]  # a comma after the last\n");
  const Invocation same = parse({"train", "--config", one_line.path});
  BOOST_TEST(same.error == "");
  BOOST_TEST(same.config.rollout.retry_condition == (std::vector<std::string>{"failed", "timeout"}));
}

// CLI11 reads a leading 0 as octal (010 as 8); TOML has no such integers: refused, in the file and on the line.
BOOST_AUTO_TEST_CASE(integers_with_a_leading_zero_are_refused) {
  BOOST_TEST(parse({"train", "--run.steps", "010"}).error ==
             "config: run.steps = 010: an integer is written without leading zeros");
  TempToml toml("[run]\nsteps = 0100\n");
  BOOST_TEST(parse({"train", "--config", toml.path}).error.find("0100") != std::string::npos);
  BOOST_TEST(parse({"train", "--run.steps", "0"}).error == "");
  BOOST_TEST(parse({"train", "--run.steps", "10"}).config.run.steps == 10);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_rollout)

BOOST_AUTO_TEST_CASE(rollout_keys_come_from_the_file_and_are_checked) {
  Invocation inv = parse({"train", "--config", workstation});
  BOOST_TEST(inv.error == "");
  BOOST_TEST(inv.config.rollout.max_attempts == 3);
  BOOST_TEST(inv.config.rollout.retry_condition.size() == 3u);
  TempToml bad("[rollout]\nretry_condition = [\"failed\", \"bored\"]\n");
  BOOST_TEST(parse({"train", "--config", bad.path}).error.find("bored") != std::string::npos);
  BOOST_TEST(parse({"train", "--rollout.max_attempts", "0"}).error != "");
  Invocation list = parse({"train", "--rollout.retry_condition", "timeout"});
  BOOST_TEST(list.config.rollout.retry_condition == (std::vector<std::string>{"timeout"}));
}

BOOST_AUTO_TEST_SUITE_END()
