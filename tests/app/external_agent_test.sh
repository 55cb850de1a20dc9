#!/usr/bin/env bash
# Outside agents (agent.name = "external") on 3 ranks (coordinator, trainer, runner): the runner starts the agent
# processes, which play through its OpenAI-compatible endpoint and its task interface.
#   - examples/guess_agent.py learns (guess 1..7, the tiny model): the reward rises, as with the built-in agent;
#     it samples at temperature 1 whatever grpo.temperature says, and the loss compares log-probs at the temperature
#     each call recorded: on-policy (max_staleness 0), hardly a ratio is clipped;
#   - agents that crash, hang, send garbage or never ask for work: every step still trains, the job ends 0;
#   - examples/calculator_agent.py (tool calls over chat completions) runs end to end;
#   - no agent process outlives the job, even when its runner is killed with SIGKILL;
#   - a config without agent.command or with a command that does not exist is refused (exit 2 on every rank);
#   - colocated ranks whose agent keeps dying end the job with the runner's message.
# Usage: external_agent_test.sh BIN SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$(realpath "$2")
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d)
cleanup() { pkill -9 -f "python3[^ ]* [^ ]+\.py agent-of-$work$" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
source "$src/tests/app/ranks.sh"
cd "$src"
marker="agent-of-$work"  # every agent's argv ends with it: pgrep finds exactly this test's agents
export FAULT_AGENT_STATE=$work  # where tests/app/fault_agent.py counts its faults across restarts

for s in $(seq 1 7); do echo "{\"secret\": $s, \"n\": 7, \"max_turns\": 5}"; done >"$work/tasks.jsonl"
# configs/tiny.toml with the guess agent outside.
external=(--agent.name external --agent.tasks "$work/tasks.jsonl" --agent.command python3
          --agent.command examples/guess_agent.py --agent.command "$marker" --agent.episode_timeout_seconds 20)

# The agents themselves, not the ranks, mpirun or the agents' guards, whose command lines hold the marker too.
agents_left() { pgrep -f "^python3[^ ]* [^ ]+\.py $marker$" | xargs; }
# Waits up to $1 seconds for every agent process to be gone.
agents_gone_within() {
  local deadline=$((SECONDS + $1))
  while [ -n "$(agents_left)" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}
metric_lines() { wc -l <"$1/metrics.jsonl" 2>/dev/null || echo 0; }

# 1. The guess agent learns through the endpoint.
ranks_timeout=240 run_ranks train --config configs/tiny.toml "${external[@]}" --grpo.temperature 0.5 \
  --run.dir "$work/learn"
before=$failures
[ "$(codes)" = "3x0" ] || fail "guess: exit codes '$(codes)': $(tail -5 "$work/err")"
[ "$(metric_lines "$work/learn")" = 25 ] || fail "guess: $(metric_lines "$work/learn") steps in metrics.jsonl, want 25"
read -r first last clipped < <(python3 - "$work/learn/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])] or [{"reward": 0, "clip_fraction": 1}]
r = [row["reward"] for row in rows]
print(sum(r[:5]) / 5, sum(r[-5:]) / 5, max(row["clip_fraction"] for row in rows))
PY
)
echo "guess through the endpoint: mean reward of the first 5 steps $first, of the last 5 $last; most clipped $clipped"
python3 -c "import sys; sys.exit(0 if $last > $first + 0.2 else 1)" || fail "guess: reward did not rise ($first -> $last)"
python3 -c "import sys; sys.exit(0 if $clipped < 0.02 else 1)" || fail "guess: on-policy, yet $clipped of a step clipped"
agents_gone_within 5 || fail "guess: agents left after the job: $(agents_left)"
[ $failures = "$before" ] && passed=$((passed + 1))

# 2. Faulty agents: crashes, hangs, garbage, idleness. Every step trains all the same.
before=$failures
faulty=(--agent.name external --agent.tasks "$work/tasks.jsonl" --agent.command python3
        --agent.command tests/app/fault_agent.py --agent.command "$marker" --agent.workers 3
        --agent.episode_timeout_seconds 5)
ranks_timeout=300 run_ranks train --config configs/tiny.toml "${faulty[@]}" --run.steps 8 --rollout.max_attempts 5 \
  --run.dir "$work/faults"
[ "$(codes)" = "3x0" ] || fail "faults: exit codes '$(codes)': $(tail -5 "$work/err")"
[ "$(metric_lines "$work/faults")" = 8 ] || fail "faults: $(metric_lines "$work/faults") steps, want 8"
grep -q "UNEXPECTED" "$work/err" && fail "faults: an agent got an unexpected answer: $(grep UNEXPECTED "$work/err" | head -3)"
grep -q "agent 0.*exited with code 3\|runner-2-w0.*exited with code 3" "$work/err" ||
  fail "faults: no crash of worker 0 was reported: $(grep -i agent "$work/err" | head -5)"
grep -q "longer than 5 s; restarting it" "$work/err" || fail "faults: the hung worker was not restarted"
grep -q "succeeded rollouts made no episode and were not trained on (rollout [0-9]*: no policy call was traced" \
  "$work/err" || fail "faults: the episode without a policy call was not left out"
agents_gone_within 5 || fail "faults: agents left after the job: $(agents_left)"
[ $failures = "$before" ] && passed=$((passed + 1))

# 3. The tool-using agent over chat completions, end to end.
before=$failures
ranks_timeout=240 run_ranks train --config configs/calculator_external.toml --run.dir "$work/calculator" \
  --agent.command python3 --agent.command examples/calculator_agent.py --agent.command "$marker"
[ "$(codes)" = "3x0" ] || fail "calculator: exit codes '$(codes)': $(tail -5 "$work/err")"
[ "$(metric_lines "$work/calculator")" = 3 ] || fail "calculator: $(metric_lines "$work/calculator") steps, want 3"
agents_gone_within 5 || fail "calculator: agents left after the job: $(agents_left)"
[ $failures = "$before" ] && passed=$((passed + 1))

# 4. The runner killed with SIGKILL: its agents die with it.
before=$failures
timeout 120 "$mpirun" --oversubscribe --allow-run-as-root -np 3 "$bin" train --config configs/tiny.toml \
  "${external[@]}" --run.steps 100000 --run.dir "$work/killed" >"$work/out" 2>"$work/err" &
job=$!
deadline=$((SECONDS + 60))
until [ -n "$(agents_left)" ] || [ $SECONDS -ge $deadline ]; do sleep 0.2; done
[ -n "$(agents_left)" ] || fail "kill: the agents never started: $(tail -5 "$work/err")"
sleep 2
guard=$(ps -o ppid= -p "$(agents_left | cut -d' ' -f1)" | xargs)  # an agent's parent: its guard
# comm: the name's first 15 characters
[ "$(ps -o comm= -p "$guard")" = arclight-agent- ] || fail "kill: an agent's parent is $(ps -o comm= -p "$guard")"
runner=$(ps -o ppid= -p "$guard" | xargs)  # the guard's parent: the runner rank
[ "$(ps -o comm= -p "$runner")" = arclight ] || fail "kill: the guard's parent is $(ps -o comm= -p "$runner"), not a rank"
kill -9 "$runner" 2>/dev/null
agents_gone_within 5 || fail "kill: agents outlived their runner (SIGKILL): $(agents_left)"
{ kill -9 "$job"; pkill -9 -f "$work/killed"; wait "$job"; } 2>/dev/null
[ $failures = "$before" ] && passed=$((passed + 1))

# 5. Mistakes in the config: refused before anything starts.
check_refused "no agent.command" "needs agent.command" --agent.name external --agent.tasks "$work/tasks.jsonl"
check_refused "no tasks" "needs agent.tasks" --agent.name external --agent.command python3
check_refused "a command not on PATH" "no-such-agent-command" --agent.name external --agent.tasks "$work/tasks.jsonl" \
  --agent.command no-such-agent-command
# One fixed port, two runners on this host (colocated: both workers run agents): the second could not listen.
check_refused "a fixed port for two runners of one host" "runner.http_port = 18123 is one port, but runners 1 and 2" \
  --agent.name external --agent.tasks "$work/tasks.jsonl" --agent.command python3 --layout.mode colocated \
  --runner.http_port 18123

# 6. Colocated ranks (a trainer and a runner thread each) whose agent command keeps dying: the runner's error ends the
#    job at once with its message, not unwound under the trainer thread that still uses the rank's communicators.
before=$failures
ranks_timeout=120 run_ranks train --config configs/tiny.toml --layout.mode colocated --agent.name external \
  --agent.tasks "$work/tasks.jsonl" --agent.command sh --agent.command -c --agent.command "exit 3 # $marker" \
  --run.dir "$work/dying"
rc=$?
grep -q "was restarted 5 times within 60 s and ended again (exited with code 3)" "$work/err" ||
  fail "dying: no restart-limit message: $(tail -5 "$work/err")"
[ $rc = 1 ] || fail "dying: mpirun ended $rc, want 1 (the runner's MPI_Abort with the error's code)"
! grep -qiE "MPI_ERR|segmentation|terminate called|core dumped|unexpected" "$work/err" ||
  fail "dying: $(grep -iE "MPI_ERR|segmentation|terminate called|core dumped|unexpected" "$work/err" | head -3)"
[ $failures = "$before" ] && passed=$((passed + 1))

echo "$passed passed, $failures failed"
[ $failures = 0 ]
