#!/usr/bin/env bash
# Agent Lightning's runner as the outside agent (agent.name = "agl") on 3 ranks (coordinator, trainer, runner):
# tests/app/agl_runner.py behaves as Agent Lightning v0.3's runner (LightningStoreClient at
# http://{AGL_SERVER_HOST}:{AGL_SERVER_PORT}, ProxyLLM resources, reward spans) and plays the guess game.
#   - every step trains on its episodes; the policy versions read as a proxy_llm resource naming the runner's
#     endpoint, with the job's secret as its api_key;
#   - the API on the runner needs the secret (basic auth from the host's user info); the policy resources cannot
#     be overwritten through it;
#   - a config without agent.command is refused (exit 2 on every rank).
# Usage: agl_runner_test.sh BIN SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$(realpath "$2")
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d)
marker="agl-of-$work"  # every agent's argv ends with it
cleanup() { pkill -9 -f "python3[^ ]* [^ ]+\.py $marker$" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
source "$src/tests/app/ranks.sh"
cd "$src"

for s in $(seq 1 7); do echo "{\"secret\": $s, \"n\": 7, \"max_turns\": 5}"; done >"$work/tasks.jsonl"
agl=(--agent.name agl --agent.tasks "$work/tasks.jsonl" --agent.command python3
     --agent.command tests/app/agl_runner.py --agent.command "$marker" --agent.workers 4
     --agent.vocab_size 11 --agent.episode_timeout_seconds 30 --grpo.tasks_per_step 8 --grpo.group_size 4)
export AGL_TEST_LOG=$work/seen AGL_TEST_POLL_INTERVAL=0.2

# 1. Training through Agent Lightning's runner; the API checked with curl while the job runs.
before=$failures
ranks_timeout=240 run_ranks train --config configs/tiny.toml "${agl[@]}" --run.steps 12 --run.dir "$work/run" &
job=$!
deadline=$((SECONDS + 120))
until ls "$work"/seen.* >/dev/null 2>&1 || [ $SECONDS -ge $deadline ]; do sleep 0.2; done
seen=$(ls "$work"/seen.* 2>/dev/null | head -1)
if [ -z "$seen" ]; then
  fail "no agent reached the store: $(tail -5 "$work/err")"
else
  root=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["root"])' "$seen")
  bare=$(python3 -c 'import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(f"http://{p.hostname}:{p.port}")' "$root")
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$bare/v1/agl/statistics")" = 401 ] ||
    fail "the runner's store API answered without the secret"
  curl -sf "$root/v1/agl/statistics" | grep -q '"name":"arclight"' || fail "statistics with the secret failed"
  status=$(curl -s -o "$work/overwrite" -w '%{http_code}' -H 'Content-Type: application/json' -d '{}' \
    "$root/v1/agl/resources/policy")
  [ "$status" = 409 ] || fail "overwriting the policy resources: $status $(cat "$work/overwrite")"
  # The store's routes beside the runner's task routes: a succeeded rollout's attempts and spans, OTLP ones included.
  for _ in $(seq 100); do
    done_id=$(curl -s -H 'Content-Type: application/json' -d '{"status_in": ["succeeded"], "limit": 1}' \
      "$root/v1/agl/rollouts/search" | python3 -c 'import json,sys; i=json.load(sys.stdin)["items"]; print(i[0]["rollout_id"] if i else "")')
    [ -n "$done_id" ] && break
    sleep 0.2
  done
  curl -s -H 'Content-Type: application/json' -d '{}' "$root/v1/agl/rollouts/$done_id/attempts/search" |
    grep -q '"sequence_id":1' || fail "attempts/search of $done_id on the runner's endpoint"
  curl -s -H 'Content-Type: application/json' -d "{\"rollout_id\": \"$done_id\", \"limit\": -1}" \
    "$root/v1/agl/spans/search" >"$work/spans"
  python3 - "$work/spans" <<'PY' || fail "the spans of $done_id: $(head -c 300 "$work/spans")"
import json, sys
names = [s["name"] for s in json.load(open(sys.argv[1]))["items"]]
assert "agent.rollout" in names and "agentlightning.annotation" in names, names  # OTLP and JSON
assert names.count("llm") >= 1, names  # the calls the endpoint traced
PY
  python3 - "$seen" <<'PY' || fail "the resources an agent saw"
import json, sys, urllib.parse
seen = json.load(open(sys.argv[1]))
root, update = urllib.parse.urlsplit(seen["root"]), seen["resources"]
llm = update["resources"]["main_llm"]
assert update["name"] == "policy" and update["resources_id"].startswith("rs-"), update
assert llm["resource_type"] == "proxy_llm", llm
assert llm["endpoint"] == f"http://{root.hostname}:{root.port}/v1", (llm["endpoint"], root)
assert llm["api_key"] == root.password and len(root.password) == 32, "the api_key is not the job's secret"
assert llm["model"] == "arclight-scratch", llm["model"]
assert llm["sampling_parameters"]["temperature"] == 1.0, llm
PY
fi
wait "$job"
[ "$(codes)" = "3x0" ] || fail "exit codes '$(codes)': $(tail -5 "$work/err")"
steps=$(wc -l <"$work/run/metrics.jsonl" 2>/dev/null || echo 0)
[ "$steps" = 12 ] || fail "$steps steps in metrics.jsonl, want 12"
python3 - "$work/run/metrics.jsonl" <<'PY' || fail "the steps did not train on the agents' rewards"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rewards = [r["reward"] for r in rows]
print("agl runner: mean reward per step", " ".join(f"{x:.2f}" for x in rewards))
assert all(x > 0 for x in rewards), rewards  # a vocabulary of 11: most random guesses are in 1..7 and earn bits
assert len(set(rewards)) > 1, rewards
assert all(r["rollouts"] == 32 and r["failed"] == 0 for r in rows), [(r["rollouts"], r["failed"]) for r in rows]
assert all(r["tokens_per_s"] > 0 and r["grad_norm"] > 0 for r in rows), "no traced call, or no gradient"
PY
[ "$(ls "$work"/seen.* | wc -l)" = 4 ] || fail "$(ls "$work"/seen.* | wc -l) of 4 agent processes took rollouts"
grep -q "rollout .* failed" "$work/err" && fail "rollouts failed in the agents: $(grep 'failed' "$work/err" | head -3)"
[ $failures = "$before" ] && passed=$((passed + 1))

# 2. Faults, where every Agent Lightning runner calls itself Worker-0 and only its credentials (the worker id as
# AGL_SERVER_HOST's user) tell the processes apart: the one that hangs on its first rollout is killed at the episode
# timeout and restarted, the one that crashes fails its attempt at once; training goes on.
before=$failures
mkdir "$work/faults"
faulty=(--agent.name agl --agent.tasks "$work/tasks.jsonl" --agent.command python3
        --agent.command tests/app/agl_runner.py --agent.command "$marker" --agent.workers 3
        --agent.vocab_size 11 --agent.episode_timeout_seconds 8 --grpo.tasks_per_step 4 --grpo.group_size 4)
AGL_TEST_FAULTS=$work/faults ranks_timeout=120 run_ranks train --config configs/tiny.toml "${faulty[@]}" \
  --run.steps 3 --run.dir "$work/faulty"
[ "$(codes)" = "3x0" ] || fail "faults: exit codes '$(codes)': $(tail -5 "$work/err")"
steps=$(wc -l <"$work/faulty/metrics.jsonl" 2>/dev/null || echo 0)
[ "$steps" = 3 ] || fail "faults: $steps steps in metrics.jsonl, want 3"
[ -e "$work/faults/hang" ] && [ -e "$work/faults/crash" ] || fail "faults: not both played: $(ls "$work/faults" | xargs)"
grep -q "agent runner-[0-9]*-w[0-9] held rollout .* longer than 8 s; restarting it" "$work/err" ||
  fail "faults: the agent that hung was not restarted: $(grep -m3 'held rollout' "$work/err")"
grep -q "agent runner-[0-9]*-w[0-9] exited with code 3 holding 1 attempt, which fails" "$work/err" ||
  fail "faults: the attempt of the agent that crashed did not fail at once"
grep -q "no process of this runner has that worker id" "$work/err" && fail "faults: a rollout held by no known process"
[ $failures = "$before" ] && passed=$((passed + 1))

# 3. A mistake in the config: refused before anything starts.
check_refused "no agent.command" 'agent.name = "agl" needs agent.command' --agent.name agl \
  --agent.tasks "$work/tasks.jsonl"

echo "$passed passed, $failures failed"
[ $failures = 0 ]
