// The official `openai` npm client against `arclight serve`: what a user's Node agent does, parsed by a client nobody
// here wrote. Usage: node openai_client.mjs NODE_MODULES BASE_URL API_KEY. Prints one line per check; exits 1 on a
// failure.
import { createRequire } from "node:module";
import path from "node:path";

const [modules, baseURL, apiKey] = process.argv.slice(2);
const require = createRequire(path.join(modules, "package.json"));
const OpenAI = require("openai").default ?? require("openai");
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) failures++;
}
const ids = (xs) => Array.isArray(xs) && xs.length > 0 && xs.every((x) => Number.isInteger(x) && x >= 0);

const models = await client.models.list();
const model = models.data[0]?.id;
check(typeof model === "string", `models.list names the model (${model})`);

// Chat: the answer, its token ids beside the standard fields, usage that counts them.
const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Say hi." }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
const choice = chat.choices[0];
check(choice.message.role === "assistant" && typeof choice.message.content === "string", "chat answers a message");
check(ids(chat.prompt_token_ids) && ids(choice.token_ids), "chat carries prompt_token_ids and choices[].token_ids");
check(chat.usage.completion_tokens === choice.token_ids.length &&
      chat.usage.prompt_tokens === chat.prompt_token_ids.length, "usage counts the token ids");
check(["stop", "length"].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);

// Streaming: the same greedy answer, in pieces, ending the stream.
const stream = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, stream: true });
let streamed = "", finish = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  streamed += chunk.choices[0]?.delta?.content ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
check(chunks >= 2 && streamed === choice.message.content, `streamed chat equals the whole answer (${chunks} chunks)`);
check(finish === choice.finish_reason, "the stream ends with the same finish_reason");

// Seeded sampling answers the same twice; n choices come back indexed.
const sampled = { model, messages, max_tokens: 8, temperature: 1, seed: 42 };
const [a, b] = [await client.chat.completions.create(sampled), await client.chat.completions.create(sampled)];
check(JSON.stringify(a.choices[0].token_ids) === JSON.stringify(b.choices[0].token_ids), "the same seed, the same tokens");
const several = await client.chat.completions.create({ ...sampled, n: 3, seed: undefined });
check(several.choices.length === 3 && several.choices.every((c, i) => c.index === i && ids(c.token_ids)), "n = 3");

// Logprobs: one entry per token, top alternatives sorted.
const withLogprobs = await client.chat.completions.create({ model, messages, max_tokens: 5, logprobs: true,
                                                            top_logprobs: 3, temperature: 0 });
const content = withLogprobs.choices[0].logprobs?.content ?? [];
check(content.length === withLogprobs.choices[0].token_ids.length &&
      content.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3 &&
                           t.top_logprobs[0].logprob >= t.top_logprobs[2].logprob), "chat logprobs, top 3 each");

// Tools: offered, and a conversation holding an earlier tool call and its result is rendered and answered.
const tools = [{ type: "function", function: { name: "calculator", description: "Arithmetic.",
                 parameters: { type: "object", properties: { expression: { type: "string" } } } } }];
const toolTurns = [...messages,
  { role: "assistant", content: null,
    tool_calls: [{ id: "call_1", type: "function", function: { name: "calculator", arguments: "{\"expression\":\"2+3\"}" } }] },
  { role: "tool", tool_call_id: "call_1", content: "5" }];
const withTools = await client.chat.completions.create({ model, messages: toolTurns, tools, max_tokens: 16 });
const plain = await client.chat.completions.create({ model, messages, max_tokens: 1 });
const toolChoice = withTools.choices[0];
check(withTools.prompt_token_ids.length > plain.prompt_token_ids.length + 40, "tools and tool turns are in the prompt");
check(toolChoice.finish_reason === "tool_calls"
        ? toolChoice.message.tool_calls.every((c) => c.type === "function" && typeof c.function.arguments === "string")
        : typeof toolChoice.message.content === "string", `a tool-call answer parses (${toolChoice.finish_reason})`);
const none = await client.chat.completions.create({ model, messages, tools, tool_choice: "none", max_tokens: 1 });
check(none.prompt_token_ids.length === plain.prompt_token_ids.length, "tool_choice none leaves the tools out");

// Completions with a prompt of token ids (what a token-level agent sends), and with text.
const prompt = chat.prompt_token_ids.slice(0, 6);
const completion = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0, logprobs: 2 });
check(JSON.stringify(completion.choices[0].prompt_token_ids ?? completion.prompt_token_ids) === JSON.stringify(prompt),
      "completions take token ids and echo them");
check(completion.choices[0].token_ids.length <= 4 && completion.choices[0].logprobs.token_logprobs.length ===
      completion.choices[0].token_ids.length, "completion token ids and their logprobs");
const text = await client.completions.create({ model, prompt: "Once upon", max_tokens: 3, temperature: 0 });
check(typeof text.choices[0].text === "string" && ids(text.choices[0].token_ids), "completions take text");

// Mistakes come back as the client's typed errors.
try {
  await client.chat.completions.create({ model, messages: "not a list", max_tokens: 1 });
  check(false, "a malformed request is refused");
} catch (e) {
  check(e.status === 400 && typeof e.message === "string", `a malformed request: ${e.status} ${e.constructor.name}`);
}
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  check(false, "a wrong key is refused");
} catch (e) {
  check(e.status === 401, `a wrong key: ${e.status} ${e.constructor.name}`);
}
console.log(`${failures} failed`);
process.exit(failures ? 1 : 0);
