// The OpenTelemetry JS SDK's OTLP/HTTP protobuf exporter against arclight's POST /v1/traces: spans made by the SDK
// (every attribute type it allows, events, links, parent and child, an error status, two resources, one without
// Agent Lightning's ids) and values only its exporter's encoder makes (a nested map, bytes), sent plain and gzipped;
// then every field of every span the server decoded is compared with what was exported, read from the SDK's own
// ReadableSpan objects, in Agent Lightning's span shape (../shared/agl-v0.3-interfaces.md 1.5).
// The same comparison runs on what the store API answers for each span once stored (the test server's STORED_FILE).
// Usage: node otlp_client.mjs NODE_MODULES URL TOKEN SPANS_FILE STORED_FILE. Prints one line per check; exits 1 on a
// failure.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [modules, url, token, spansFile, storedFile] = process.argv.slice(2);
const require = createRequire(path.join(modules, "package.json"));
const api = require("@opentelemetry/api");
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require("@opentelemetry/sdk-trace-base");
const { resourceFromAttributes } = require("@opentelemetry/resources");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) failures++;
}

// ---- the spans, made by the SDK ----
function provider(attributes) {
  const memory = new InMemorySpanExporter();
  const resource = resourceFromAttributes(attributes, { schemaUrl: "https://opentelemetry.io/schemas/1.21.0" });
  return { memory, tracer: new BasicTracerProvider({ resource, spanProcessors: [new SimpleSpanProcessor(memory)] })
                             .getTracer("arclight-otlp-test", "1.0.0") };
}
const agent = provider({ "service.name": "litagent", "agentlightning.rollout_id": "ro-7",
                         "agentlightning.attempt_id": "at-3", "host.cpus": 16 });
const outsider = provider({ "service.name": "no-ids-here" });

const root = agent.tracer.startSpan("agent.run", {
  attributes: { "text": "héllo ✓", "empty": "", "flag": true, "off": false, "count": 42, "negative": -7,
                "large": 2 ** 40, "ratio": 0.5, "tiny": -1.25e-7, "words": ["a", "b"], "flags": [true, false],
                "ints": [1, 2, 3], "floats": [0.25, 1.5] },
});
const rootContext = api.trace.setSpan(api.ROOT_CONTEXT, root);
const elsewhere = agent.tracer.startSpan("elsewhere");  // another trace, for a link
elsewhere.end();
const call = agent.tracer.startSpan("openai.chat.completion", {
  attributes: { "prompt_token_ids": [151644, 872, 198], "response_token_ids": [9707, 0],
                "gen_ai.response.id": "chatcmpl-1", "agentlightning.span_sequence_id": "5" },
  links: [{ context: elsewhere.spanContext(), attributes: { "why": "retried from", "attempt": 2 } },
          { context: root.spanContext() }],
}, rootContext);
call.addEvent("first token", { "index": 0, "token": "Hel" });
call.addEvent("bare");
call.setStatus({ code: api.SpanStatusCode.ERROR, message: "rate limited" });
call.end();
const reward = agent.tracer.startSpan("agentlightning.annotation", {
  attributes: { "agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.75,
                "agentlightning.reward.1.name": "brevity", "agentlightning.reward.1.value": 1,
                "agentlightning.span_sequence_id": 9 },
}, rootContext);
reward.setStatus({ code: api.SpanStatusCode.OK });
reward.end();
const moved = agent.tracer.startSpan("other rollout", {
  attributes: { "agentlightning.rollout_id": "ro-8", "agentlightning.span_sequence_id": -1 },
}, rootContext);
moved.end();
root.end();
const orphan = outsider.tracer.startSpan("no ids");  // neither it nor its resource names a rollout: dropped
orphan.end();
const owned = outsider.tracer.startSpan("own ids", {
  attributes: { "agentlightning.rollout_id": "ro-9", "agentlightning.attempt_id": "at-1" },
});
owned.end();

const [finished] = [agent.memory.getFinishedSpans()];
const byName = (name) => [...finished, ...outsider.memory.getFinishedSpans()].find((s) => s.name === name);
// What only the exporter's encoder makes: a map and bytes, set on the finished span (the API refuses them).
byName("agent.run").attributes["nested"] = { "a": "b", "n": 1, "list": [1, "x", true], "deeper": { "z": 0.5 } };
byName("agent.run").attributes["raw"] = new Uint8Array([0, 255, 16]);

// ---- export: plain, then gzip (with the other resource in the same request) ----
function exportSpans(spans, compression) {
  const exporter = new OTLPTraceExporter({ url, headers: { Authorization: `Bearer ${token}` }, compression,
                                           timeoutMillis: 30000 });
  return new Promise((resolve) => exporter.export(spans, resolve)).finally(() => exporter.shutdown());
}
const plain = ["agent.run", "elsewhere", "openai.chat.completion"].map(byName);
const zipped = ["agentlightning.annotation", "other rollout", "no ids", "own ids"].map(byName);
const first = await exportSpans(plain, "none");
check(first.code === 0, `a plain export succeeds (${first.error ?? "no error"})`);
const second = await exportSpans(zipped, "gzip");
check(second.code === 0, `a gzipped export with two resources succeeds (${second.error ?? "no error"})`);

// ---- what the server decoded, against what was exported ----
const decoded = fs.readFileSync(spansFile, "utf8").trim().split("\n").filter(Boolean).map((line) => JSON.parse(line));
const sent = [...plain, ...zipped].filter((s) => s.name !== "no ids");
check(!decoded.some((d) => d.name === "no ids"), "the span without ids was dropped");

// The double nearest ns / 1e9 (Agent Lightning divides Python ints: one rounding), checked exactly with BigInt: a
// double is m * 2^e, so |m * 1e9 * 2^e - ns| compares as integers once both sides are scaled by 2^-e.
function distance(seconds, ns) {
  const bits = new BigUint64Array(new Float64Array([seconds]).buffer)[0];
  const exponent = Number((bits >> 52n) & 0x7ffn) - 1075;
  const mantissa = (bits & ((1n << 52n) - 1n)) | (1n << 52n);
  const scaled = mantissa * 1000000000n, target = ns << BigInt(-exponent);
  return scaled > target ? scaled - target : target - scaled;
}
function nearestSeconds(hrTime) {
  const ns = BigInt(hrTime[0]) * 1000000000n + BigInt(hrTime[1]);
  if (ns === 0n) return null;
  const naive = Number(ns) / 1e9;
  const step = (x, up) => {
    const view = new BigInt64Array(new Float64Array([x]).buffer);
    view[0] += up ? 1n : -1n;
    return new Float64Array(view.buffer)[0];
  };
  let best = naive;
  for (const c of [step(naive, false), step(naive, true)]) if (distance(c, ns) < distance(best, ns)) best = c;
  return best;
}

// An attribute value as Agent Lightning's decoder gives it: bytes as hex, maps as objects.
const expectedValue = (v) => v instanceof Uint8Array ? Buffer.from(v).toString("hex")
  : Array.isArray(v) ? v.map(expectedValue)
  : v !== null && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, expectedValue(x)]))
  : v;
const expectedAttributes = (attributes) => expectedValue(attributes ?? {});
const context = (ctx) => ({ trace_id: ctx.traceId, span_id: ctx.spanId, is_remote: false, trace_state: {} });
const statusNames = ["UNSET", "OK", "ERROR"];
const sameJson = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const sortedKeys = (value) => Array.isArray(value) ? value.map(sortedKeys)
  : value !== null && typeof value === "object"
    ? Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortedKeys(value[k])])) : value;
const equal = (a, b) => sameJson(sortedKeys(a), sortedKeys(b));

const keyOrder = ["rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "parent_id", "name", "status",
                  "attributes", "events", "links", "start_time", "end_time", "context", "parent", "resource"];
// `stored`: the answers of the store API, where a span without a sequence id has 0 (no store issued one here).
function compare(file, stored) {
  const answers = fs.readFileSync(file, "utf8").trim().split("\n").filter(Boolean).map((line) => JSON.parse(line));
  const what = stored ? "stored" : "decoded";
  check(answers.length === sent.length, `${what}: ${answers.length} spans of ${sent.length} with ids`);
  for (const span of sent) {
    const ctx = span.spanContext();
    const got = answers.find((d) => d.span_id === ctx.spanId);
    if (!got) {
      check(false, `${what} ${span.name}: there`);
      continue;
    }
    const attributes = span.attributes;
    const resource = span.resource.attributes;
    const rollout = attributes["agentlightning.rollout_id"] ?? resource["agentlightning.rollout_id"];
    const attempt = attributes["agentlightning.attempt_id"] ?? resource["agentlightning.attempt_id"];
    const givenSequence = attributes["agentlightning.span_sequence_id"];
    const sequence = givenSequence === undefined || Number(givenSequence) < 0 ? undefined : Number(givenSequence);
    const expected = {
      rollout_id: rollout, attempt_id: attempt, sequence_id: sequence ?? (stored ? 0 : undefined),
      trace_id: ctx.traceId, span_id: ctx.spanId, parent_id: span.parentSpanContext?.spanId ?? null,
      name: span.name,
      status: { status_code: statusNames[span.status.code], description: span.status.message || null },
      attributes: expectedAttributes(attributes),
      events: span.events.map((e) => ({ name: e.name, attributes: expectedAttributes(e.attributes),
                                        timestamp: nearestSeconds(e.time) })),
      links: span.links.map((l) => ({ context: context(l.context),
                                      attributes: Object.keys(l.attributes ?? {}).length ? expectedValue(l.attributes)
                                                                                         : null })),
      start_time: nearestSeconds(span.startTime), end_time: nearestSeconds(span.endTime),
      context: context(ctx), parent: null,
      resource: { attributes: expectedAttributes(resource), schema_url: span.resource.schemaUrl ?? "" },
    };
    for (const key of keyOrder) {
      if (key === "sequence_id" && expected.sequence_id === undefined) {
        check(!("sequence_id" in got), `${what} ${span.name}: no sequence_id (the store issues one)`);
        continue;
      }
      check(equal(got[key], expected[key]), `${what} ${span.name}: ${key} ${JSON.stringify(got[key])}`);
    }
    check(sameJson(Object.keys(got), keyOrder.filter((k) => k in got)), `${what} ${span.name}: keys in Span's order`);
  }
  // The integers stay integers and the floats floats in the JSON text (2 ** 40 is no float; 0.5 no int).
  const rawRoot = fs.readFileSync(file, "utf8").split("\n").find((l) => l.includes('"agent.run"'));
  check(/"large":1099511627776[,}]/.test(rawRoot) && /"ratio":0\.5[,}]/.test(rawRoot) &&
        /"ints":\[1,2,3\]/.test(rawRoot) && /"count":42[,}]/.test(rawRoot),
        `${what}: ints and floats keep their kinds in the JSON text`);
}
compare(spansFile, false);
compare(storedFile, true);
process.exit(failures ? 1 : 0);
