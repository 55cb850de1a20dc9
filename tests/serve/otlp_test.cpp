// OTLP/HTTP trace ingest: the decoder's span JSON, field by field, and its refusals; then the route over real HTTP
// (answers in protobuf, gzip both ways, errors as google.rpc.Status). The independent check against the
// OpenTelemetry JS SDK is otlp_client_test.sh.
#include "otlp.hpp"

#include <httplib.h>

#include <boost/test/unit_test.hpp>
#include <mutex>

#include "otlp_trace.pb.h"

namespace arclight::serve {
namespace {

const std::string protobuf = "application/x-protobuf";

void set(otlp::KeyValue* pair, const std::string& key, const std::string& value) {
  pair->set_key(key);
  pair->mutable_value()->set_string_value(value);
}

otlp::KeyValue* add_string(google::protobuf::RepeatedPtrField<otlp::KeyValue>* pairs, const std::string& key,
                           const std::string& value) {
  otlp::KeyValue* pair = pairs->Add();
  set(pair, key, value);
  return pair;
}

// One resource (rollout ro-1, attempt at-1 unless told otherwise) with one scope.
struct Export {
  otlp::ExportTraceServiceRequest request;
  otlp::ResourceSpans* group = request.add_resource_spans();
  otlp::ScopeSpans* scope = group->add_scope_spans();

  explicit Export(bool with_ids = true) {
    add_string(group->mutable_resource()->mutable_attributes(), "service.name", "agent");
    if (with_ids) {
      add_string(group->mutable_resource()->mutable_attributes(), "agentlightning.rollout_id", "ro-1");
      add_string(group->mutable_resource()->mutable_attributes(), "agentlightning.attempt_id", "at-1");
    }
  }
  otlp::Span* span(const std::string& name) {
    otlp::Span* s = scope->add_spans();
    s->set_name(name);
    s->set_trace_id(std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16));
    s->set_span_id(std::string("\xa0\xa1\xa2\xa3\xa4\xa5\xa6\xa7", 8));
    return s;
  }
  std::string bytes() const { return request.SerializeAsString(); }
  std::vector<Json> decoded() const { return decode_otlp_traces(bytes(), protobuf, ""); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(otlp_decoder)

BOOST_AUTO_TEST_CASE(a_span_becomes_agent_lightnings_span_json_field_by_field) {
  Export e;
  e.group->set_schema_url("https://opentelemetry.io/schemas/1.21.0");
  otlp::Span* s = e.span("openai.chat.completion");
  s->set_parent_span_id(std::string("\x00\x00\x00\x00\x00\x00\x00\x07", 8));
  s->set_start_time_unix_nano(1700000000000000000ull);
  s->set_end_time_unix_nano(1700000001500000000ull);
  s->mutable_status()->set_code(otlp::Status::STATUS_CODE_ERROR);
  s->mutable_status()->set_message("it broke");
  auto* attributes = s->mutable_attributes();
  add_string(attributes, "text", "héllo");
  otlp::KeyValue* flag = attributes->Add();
  flag->set_key("flag");
  flag->mutable_value()->set_bool_value(true);
  otlp::KeyValue* count = attributes->Add();
  count->set_key("count");
  count->mutable_value()->set_int_value(-9007199254740993);  // past a double's integers: kept exact
  otlp::KeyValue* ratio = attributes->Add();
  ratio->set_key("ratio");
  ratio->mutable_value()->set_double_value(0.25);
  otlp::KeyValue* raw = attributes->Add();
  raw->set_key("raw");
  raw->mutable_value()->set_bytes_value(std::string("\x00\xff\x10", 3));
  otlp::KeyValue* list = attributes->Add();
  list->set_key("ids");
  for (int id : {3, 1, 4}) list->mutable_value()->mutable_array_value()->add_values()->set_int_value(id);
  otlp::KeyValue* nested = attributes->Add();
  nested->set_key("nested");
  add_string(nested->mutable_value()->mutable_kvlist_value()->mutable_values(), "a", "b");
  nested->mutable_value()->mutable_kvlist_value()->add_values()->set_key("empty");
  attributes->Add()->set_key("unset");
  otlp::Span::Event* event = s->add_events();
  event->set_name("exception");
  event->set_time_unix_nano(1700000000250000000ull);
  add_string(event->mutable_attributes(), "exception.message", "boom");
  otlp::Span::Link* link = s->add_links();
  link->set_trace_id(std::string(16, '\x11'));
  link->set_span_id(std::string(8, '\x22'));
  add_string(link->mutable_attributes(), "why", "caused by");
  otlp::Span::Link* bare_link = s->add_links();
  bare_link->set_trace_id(std::string(16, '\x33'));
  bare_link->set_span_id(std::string(8, '\x44'));

  const std::vector<Json> spans = e.decoded();
  BOOST_REQUIRE(spans.size() == 1u);
  const Json expected = Json::parse(R"({
    "rollout_id": "ro-1", "attempt_id": "at-1",
    "trace_id": "0102030405060708090a0b0c0d0e0f10", "span_id": "a0a1a2a3a4a5a6a7", "parent_id": "0000000000000007",
    "name": "openai.chat.completion",
    "status": {"status_code": "ERROR", "description": "it broke"},
    "attributes": {"text": "héllo", "flag": true, "count": -9007199254740993, "ratio": 0.25, "raw": "00ff10",
                   "ids": [3, 1, 4], "nested": {"a": "b", "empty": null}, "unset": null},
    "events": [{"name": "exception", "attributes": {"exception.message": "boom"}, "timestamp": 1700000000.25}],
    "links": [{"context": {"trace_id": "11111111111111111111111111111111", "span_id": "2222222222222222",
                           "is_remote": false, "trace_state": {}},
               "attributes": {"why": "caused by"}},
              {"context": {"trace_id": "33333333333333333333333333333333", "span_id": "4444444444444444",
                           "is_remote": false, "trace_state": {}},
               "attributes": null}],
    "start_time": 1700000000.0, "end_time": 1700000001.5,
    "context": {"trace_id": "0102030405060708090a0b0c0d0e0f10", "span_id": "a0a1a2a3a4a5a6a7",
                "is_remote": false, "trace_state": {}},
    "parent": null,
    "resource": {"attributes": {"service.name": "agent", "agentlightning.rollout_id": "ro-1",
                                "agentlightning.attempt_id": "at-1"},
                 "schema_url": "https://opentelemetry.io/schemas/1.21.0"}})");
  BOOST_TEST(spans[0].dump() == expected.dump());  // the keys in Span's field order, too
  BOOST_TEST(!spans[0].contains("sequence_id"));   // none given: the store issues it
  BOOST_TEST(spans[0]["attributes"]["count"].is_number_integer());
}

BOOST_AUTO_TEST_CASE(ids_and_times_default_as_agent_lightning_does) {
  Export e;
  otlp::Span* s = e.scope->add_spans();  // no ids, no times, no status: all zero
  s->set_name("bare");
  otlp::Span* small = e.span("seconds already");
  small->set_start_time_unix_nano(1500);                                        // not past 1e12: taken as it is
  small->mutable_status()->set_code(static_cast<otlp::Status::StatusCode>(7));  // unknown: UNSET
  otlp::Span* precise = e.span("precise");
  precise->set_start_time_unix_nano(1618189305743064004ull);  // divided as an exact quotient, rounded once
  otlp::Span* ok = e.span("ok");
  ok->mutable_status()->set_code(otlp::Status::STATUS_CODE_OK);
  const std::vector<Json> spans = e.decoded();
  BOOST_REQUIRE(spans.size() == 4u);
  BOOST_TEST(spans[0]["trace_id"] == std::string(32, '0'));
  BOOST_TEST(spans[0]["span_id"] == std::string(16, '0'));
  BOOST_TEST(spans[0]["parent_id"].is_null());
  BOOST_TEST(spans[0]["start_time"].is_null());
  BOOST_TEST(spans[0]["end_time"].is_null());
  BOOST_TEST(spans[0]["status"].dump() == R"({"status_code":"UNSET","description":null})");
  BOOST_TEST(spans[1]["start_time"].get<double>() == 1500.0);
  BOOST_TEST(spans[1]["status"]["status_code"] == "UNSET");
  BOOST_TEST(spans[2]["start_time"].get<double>() == 1618189305.743064);  // Python: 1618189305743064004 / 10**9
  BOOST_TEST(spans[3]["status"]["status_code"] == "OK");
}

BOOST_AUTO_TEST_CASE(span_attributes_name_the_ids_before_the_resource) {
  Export e;
  otlp::Span* own = e.span("own ids");
  add_string(own->mutable_attributes(), "agentlightning.rollout_id", "ro-2");
  otlp::Span* half = e.span("own attempt only");
  add_string(half->mutable_attributes(), "agentlightning.attempt_id", "at-9");
  otlp::Span* number = e.span("a number as id");
  otlp::KeyValue* rollout = number->add_attributes();
  rollout->set_key("agentlightning.rollout_id");
  rollout->mutable_value()->set_int_value(12);
  otlp::KeyValue* flag = number->add_attributes();
  flag->set_key("agentlightning.attempt_id");
  flag->mutable_value()->set_bool_value(false);
  const std::vector<Json> spans = e.decoded();
  BOOST_REQUIRE(spans.size() == 3u);
  BOOST_TEST(spans[0]["rollout_id"] == "ro-2");
  BOOST_TEST(spans[0]["attempt_id"] == "at-1");
  BOOST_TEST(spans[1]["rollout_id"] == "ro-1");
  BOOST_TEST(spans[1]["attempt_id"] == "at-9");
  BOOST_TEST(spans[2]["rollout_id"] == "12");     // Python's str() of the value
  BOOST_TEST(spans[2]["attempt_id"] == "False");  // (the store then finds no such attempt)
}

BOOST_AUTO_TEST_CASE(spans_without_a_rollout_or_an_attempt_are_dropped_and_the_rest_kept) {
  Export e(false);
  e.span("nothing");
  otlp::Span* rollout_only = e.span("rollout only");
  add_string(rollout_only->mutable_attributes(), "agentlightning.rollout_id", "ro-3");
  otlp::Span* both = e.span("both");
  add_string(both->mutable_attributes(), "agentlightning.rollout_id", "ro-3");
  add_string(both->mutable_attributes(), "agentlightning.attempt_id", "at-4");
  const std::vector<Json> spans = e.decoded();
  BOOST_REQUIRE(spans.size() == 1u);
  BOOST_TEST(spans[0]["name"] == "both");
  BOOST_TEST(spans[0]["resource"]["attributes"].dump() == R"({"service.name":"agent"})");
}

BOOST_AUTO_TEST_CASE(sequence_ids_are_ints_or_decimal_strings_and_others_are_left_to_the_store) {
  Export e;
  auto with_sequence = [&](const std::string& name, auto setter) {
    otlp::Span* s = e.span(name);
    otlp::KeyValue* pair = s->add_attributes();
    pair->set_key("agentlightning.span_sequence_id");
    setter(pair->mutable_value());
  };
  with_sequence("int", [](otlp::AnyValue* v) { v->set_int_value(5); });
  with_sequence("zero", [](otlp::AnyValue* v) { v->set_int_value(0); });
  with_sequence("decimal", [](otlp::AnyValue* v) { v->set_string_value("12"); });
  with_sequence("python int()", [](otlp::AnyValue* v) { v->set_string_value(" +1_000\n"); });
  with_sequence("negative", [](otlp::AnyValue* v) { v->set_int_value(-3); });
  with_sequence("negative string", [](otlp::AnyValue* v) { v->set_string_value("-3"); });
  with_sequence("words", [](otlp::AnyValue* v) { v->set_string_value("twelve"); });
  with_sequence("float", [](otlp::AnyValue* v) { v->set_double_value(5.0); });
  with_sequence("bool", [](otlp::AnyValue* v) { v->set_bool_value(true); });
  with_sequence("double underscore", [](otlp::AnyValue* v) { v->set_string_value("1__0"); });
  with_sequence("past int64", [](otlp::AnyValue* v) { v->set_string_value("99999999999999999999"); });
  const std::vector<Json> spans = e.decoded();
  BOOST_REQUIRE(spans.size() == 11u);
  const std::vector<std::int64_t> given{5, 0, 12, 1000};
  for (std::size_t i = 0; i < spans.size(); ++i) {
    BOOST_TEST_CONTEXT(spans[i]["name"]) {
      if (i < given.size())
        BOOST_TEST(spans[i]["sequence_id"].get<std::int64_t>() == given[i]);
      else
        BOOST_TEST(!spans[i].contains("sequence_id"));
    }
  }
  // The resource's sequence id goes to every span of it that names none (an LLM proxy's spans of one call).
  Export shared;
  add_string(shared.group->mutable_resource()->mutable_attributes(), "agentlightning.span_sequence_id", "8");
  shared.span("first");
  otlp::Span* own = shared.span("own");
  otlp::KeyValue* pair = own->add_attributes();
  pair->set_key("agentlightning.span_sequence_id");
  pair->mutable_value()->set_int_value(2);
  const std::vector<Json> two = shared.decoded();
  BOOST_REQUIRE(two.size() == 2u);
  BOOST_TEST(two[0]["sequence_id"] == 8);
  BOOST_TEST(two[1]["sequence_id"] == 2);
}

BOOST_AUTO_TEST_CASE(an_empty_body_is_an_empty_export_gzip_or_not) {
  BOOST_TEST(decode_otlp_traces("", protobuf, "").empty());
  BOOST_TEST(decode_otlp_traces("", protobuf, "gzip").empty());
  BOOST_TEST(decode_otlp_traces(gzip_compress(""), protobuf, "gzip").empty());
  BOOST_TEST(decode_otlp_traces("", "application/x-protobuf; charset=binary", "identity").empty());
}

BOOST_AUTO_TEST_CASE(gzip_bodies_inflate_one_member_or_several) {
  Export e;
  e.span("zipped");
  const std::string bytes = e.bytes();
  BOOST_TEST(decode_otlp_traces(gzip_compress(bytes), protobuf, "GZIP ")[0]["name"] == "zipped");
  const std::string half = bytes.substr(0, bytes.size() / 2);
  const std::string members = gzip_compress(half) + gzip_compress(bytes.substr(half.size()));
  BOOST_TEST(decode_otlp_traces(members, protobuf, "gzip")[0]["name"] == "zipped");
}

BOOST_AUTO_TEST_CASE(a_wrong_content_type_or_encoding_is_refused) {
  BOOST_CHECK_THROW(decode_otlp_traces("", "application/json", ""), OtlpError);
  BOOST_CHECK_THROW(decode_otlp_traces("", "", ""), OtlpError);
  BOOST_CHECK_THROW(decode_otlp_traces("", "application/x-protobufs", ""), OtlpError);
  BOOST_CHECK_THROW(decode_otlp_traces("", protobuf, "zstd"), OtlpError);
  try {
    decode_otlp_traces("{}", "application/json", "");
    BOOST_FAIL("no error");
  } catch (const OtlpError& e) {
    BOOST_TEST(std::string(e.what()) ==
               "Unsupported Content-Type 'application/json', expected 'application/x-protobuf'");
  }
}

BOOST_AUTO_TEST_CASE(bad_or_cut_gzip_and_a_zip_bomb_are_refused) {
  Export e;
  e.span("zipped");
  const std::string zipped = gzip_compress(e.bytes());
  BOOST_CHECK_THROW(decode_otlp_traces(e.bytes(), protobuf, "gzip"), OtlpError);  // not gzip at all
  for (std::size_t cut = 1; cut < zipped.size(); ++cut)
    BOOST_CHECK_THROW(decode_otlp_traces(zipped.substr(0, cut), protobuf, "gzip"), OtlpError);
  BOOST_CHECK_THROW(decode_otlp_traces(zipped + "trailing", protobuf, "gzip"), OtlpError);
  std::string corrupt = zipped;
  corrupt[corrupt.size() - 6] ^= 0x55;  // the CRC
  BOOST_CHECK_THROW(decode_otlp_traces(corrupt, protobuf, "gzip"), OtlpError);
  // 64 MiB of zeros in about 64 KiB: refused at the limit, long before the end.
  const std::string bomb = gzip_compress(std::string(64 << 20, '\0'));
  BOOST_TEST(bomb.size() < (100u << 10));
  OtlpOptions small;
  small.max_inflated_bytes = 1 << 20;
  try {
    decode_otlp_traces(bomb, protobuf, "gzip", small);
    BOOST_FAIL("no error");
  } catch (const OtlpError& error) {
    BOOST_TEST(std::string(error.what()).find("inflates past 1048576 bytes") != std::string::npos);
  }
  BOOST_CHECK_THROW(decode_otlp_traces(bomb, protobuf, "gzip"), OtlpError);  // the default limit (16 MiB)
  BOOST_TEST(gzip_inflate(gzip_compress(std::string(1 << 20, 'x')), 1 << 20).size() == (1u << 20));  // at it: fine
}

BOOST_AUTO_TEST_CASE(truncated_or_foreign_protobuf_is_refused) {
  Export e;
  otlp::Span* s = e.span("cut");
  add_string(s->mutable_attributes(), "last", "a value at the end");
  const std::string bytes = e.bytes();
  // Cut inside the outermost length-delimited field (resource_spans): never a whole message.
  for (std::size_t cut = 1; cut < bytes.size(); ++cut)
    BOOST_CHECK_THROW(decode_otlp_traces(bytes.substr(0, cut), protobuf, ""), OtlpError);
  BOOST_CHECK_THROW(decode_otlp_traces("\xff\xff\xff\xff", protobuf, ""), OtlpError);
  BOOST_CHECK_THROW(decode_otlp_traces(R"({"resourceSpans": []})", protobuf, ""), OtlpError);
}

BOOST_AUTO_TEST_CASE(text_that_is_not_utf8_is_refused) {
  for (const std::string bad : {"\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff"}) {
    Export name;
    name.span("ok")->set_name("span " + bad);
    BOOST_CHECK_THROW(name.decoded(), OtlpError);
    Export value;
    add_string(value.span("ok")->mutable_attributes(), "key", bad);
    BOOST_CHECK_THROW(value.decoded(), OtlpError);
    Export scope;  // protobuf's string fields that no span keeps are checked too
    scope.span("ok");
    scope.scope->mutable_scope()->set_name(bad);
    BOOST_CHECK_THROW(scope.decoded(), OtlpError);
  }
  Export fine;
  fine.span("𝄞 ok ✓");
  BOOST_TEST(fine.decoded()[0]["name"] == "𝄞 ok ✓");
}

BOOST_AUTO_TEST_CASE(a_large_resource_repeated_over_many_spans_is_refused) {
  Export e;
  add_string(e.group->mutable_resource()->mutable_attributes(), "big", std::string(64 << 10, 'r'));
  for (int i = 0; i < 300; ++i) e.scope->add_spans();  // 300 x 64 KiB of copies from a 64 KiB request
  BOOST_CHECK_THROW(e.decoded(), OtlpError);
  OtlpOptions roomy;
  roomy.max_inflated_bytes = 32 << 20;
  BOOST_TEST(decode_otlp_traces(e.bytes(), protobuf, "", roomy).size() == 300u);
  Export by_url;  // the group's schema_url is copied into each span too
  by_url.group->set_schema_url(std::string(64 << 10, 'u'));
  for (int i = 0; i < 300; ++i) by_url.scope->add_spans();
  BOOST_CHECK_THROW(by_url.decoded(), OtlpError);
}

// Spans are counted on the wire before the export is parsed: an empty span is 2 bytes there and a few hundred in memory
// (8 MiB of them parsed to about a gigabyte, and seconds of CPU). Over max_spans: refused; at it: taken, the spans of
// every group and scope counted.
BOOST_AUTO_TEST_CASE(an_export_of_more_spans_than_allowed_is_refused_before_it_is_parsed) {
  OtlpOptions few;
  few.max_spans = 10;
  Export e;
  for (int i = 0; i < 5; ++i) e.span("a");
  otlp::ScopeSpans* second_scope = e.group->add_scope_spans();
  for (int i = 0; i < 3; ++i) *second_scope->add_spans() = *e.scope->mutable_spans(0);
  otlp::ResourceSpans* second_group = e.request.add_resource_spans();
  *second_group->mutable_resource() = e.group->resource();
  otlp::ScopeSpans* third_scope = second_group->add_scope_spans();
  for (int i = 0; i < 2; ++i) *third_scope->add_spans() = *e.scope->mutable_spans(0);
  BOOST_TEST(decode_otlp_traces(e.bytes(), protobuf, "", few).size() == 10u);
  *third_scope->add_spans() = *e.scope->mutable_spans(0);
  try {
    decode_otlp_traces(e.bytes(), protobuf, "", few);
    BOOST_ERROR("11 spans taken, 10 allowed");
  } catch (const OtlpError& error) {
    BOOST_TEST(std::string(error.what()) == "an export of more than 10 spans: send them in batches");
  }
  // A million empty spans on the wire (2 MB): resource_spans { scope_spans { spans {} x 1,000,000 } }.
  const auto delimited = [](int field, const std::string& payload) {
    std::string out(1, static_cast<char>(field << 3 | 2));
    for (std::size_t n = payload.size();; n >>= 7) {
      out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
      if (n < 0x80) break;
    }
    return out + payload;
  };
  std::string empty_spans;
  for (int i = 0; i < 1000000; ++i) empty_spans += delimited(2, "");
  const std::string flood = delimited(1, delimited(2, empty_spans));
  BOOST_CHECK_EXCEPTION(decode_otlp_traces(flood, protobuf, ""), OtlpError, [](const OtlpError& error) {
    return std::string(error.what()) == "an export of more than 65536 spans: send them in batches";
  });
  // A group first (a field protobuf's parser skips, which no exporter sends) stopped the count, and the rest parsed.
  const std::string group("\x9b\x06\x9c\x06", 4);  // field 99: a group's start and end
  BOOST_CHECK_EXCEPTION(decode_otlp_traces(group + flood, protobuf, ""), OtlpError, [](const OtlpError& error) {
    return std::string(error.what()).find("not an ExportTraceServiceRequest") != std::string::npos;
  });
  BOOST_CHECK_EXCEPTION(
      decode_otlp_traces(gzip_compress(flood), protobuf, "gzip"), OtlpError,
      [](const OtlpError& error) { return std::string(error.what()).find("65536") != std::string::npos; });
}

// Every message inside an export is counted on the wire too, not the spans alone: an empty attribute, event, link or
// array value is 2 bytes there and hundreds in memory. At max_elements: taken; one more anywhere: refused.
BOOST_AUTO_TEST_CASE(an_export_of_more_messages_than_allowed_is_refused_before_it_is_parsed) {
  Export e;                     // resource_spans, resource, 3 attributes and their values, scope_spans: 9 messages
  otlp::Span* s = e.span("a");  // 10
  OtlpOptions few;
  few.max_elements = 10;
  BOOST_TEST(decode_otlp_traces(e.bytes(), protobuf, "", few).size() == 1u);
  const auto refused = [&](const std::string& what) {
    try {
      decode_otlp_traces(e.bytes(), protobuf, "", few);
      BOOST_ERROR(what << ": taken, with more messages than allowed");
    } catch (const OtlpError& error) {
      BOOST_TEST(std::string(error.what()) == "an export of more than " + std::to_string(few.max_elements) +
                                                  " messages (spans, attributes, values, events, links): send smaller "
                                                  "batches",
                 what);
    }
  };
  s->add_events();
  refused("an event");
  s->clear_events();
  s->add_links();
  refused("a link");
  s->clear_links();
  few.max_elements = 14;
  otlp::ArrayValue* array = s->add_attributes()->mutable_value()->mutable_array_value();  // a pair, its value, an array
  array->add_values();                                                                    // 14
  BOOST_TEST(decode_otlp_traces(e.bytes(), protobuf, "", few).size() == 1u);
  array->add_values();
  refused("a second value in an array");
  // 600,000 empty attributes on one span (1.2 MB on the wire) with the default bound.
  Export flood;
  otlp::Span* flooded = flood.span("a");
  for (int i = 0; i < 600000; ++i) flooded->add_attributes();
  BOOST_CHECK_EXCEPTION(flood.decoded(), OtlpError, [](const OtlpError& error) {
    return std::string(error.what()).find("more than 524288 messages") != std::string::npos;
  });
  // Values nested past protobuf's parser's depth: refused as not an export, counting or parsing.
  Export deep;
  otlp::AnyValue* value = deep.span("a")->add_attributes()->mutable_value();
  for (int i = 0; i < 120; ++i) value = value->mutable_array_value()->add_values();
  BOOST_CHECK_EXCEPTION(deep.decoded(), OtlpError, [](const OtlpError& error) {
    return std::string(error.what()).find("not an ExportTraceServiceRequest") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(accept_encoding_is_read_as_agent_lightning_reads_it) {
  BOOST_TEST(accepts_gzip("gzip"));
  BOOST_TEST(accepts_gzip("deflate, GZIP;q=0.5"));
  BOOST_TEST(!accepts_gzip("deflate, br"));
  BOOST_TEST(!accepts_gzip("x-gzip"));
  BOOST_TEST(!accepts_gzip(""));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- the route, over real HTTP ----
namespace {

struct Ingest {
  std::mutex mutex;
  std::vector<Json> spans;
  int calls = 0;
  bool fail = false;
};

struct TracesServer {
  Ingest ingest;
  HttpServer server;
  std::unique_ptr<httplib::Client> client;

  explicit TracesServer(std::size_t max_body_bytes = 1 << 20, OtlpOptions options = {})
      : server([&] {
          HttpServerOptions options;
          options.bearer_token = "secret";
          options.max_body_bytes = max_body_bytes;
          options.worker_threads = 4;
          return options;
        }()) {
    add_otlp_route(
        server,
        [this](std::vector<Json> spans) {
          std::lock_guard<std::mutex> lock(ingest.mutex);
          ++ingest.calls;
          if (ingest.fail) throw std::runtime_error("Rollout ro-1 not found");
          for (Json& s : spans) ingest.spans.push_back(std::move(s));
        },
        options);
    server.start();
    client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
    client->set_bearer_token_auth("secret");
    client->set_read_timeout(std::chrono::seconds(10));
    client->set_decompress(false);  // the answers' bytes as sent, and no Accept-Encoding unless a test sends one
  }
  httplib::Result post(const std::string& body, const std::string& content_type, httplib::Headers headers = {},
                       const std::string& path = "/v1/traces") {
    return client->Post(path.c_str(), headers, body, content_type.c_str());
  }
};

std::string status_message(const httplib::Result& result, int status) {
  BOOST_REQUIRE(result);
  BOOST_TEST(result->status == status);
  BOOST_TEST(result->get_header_value("Content-Type") == "application/x-protobuf");
  std::string body = result->body;
  if (result->get_header_value("Content-Encoding") == "gzip") body = gzip_inflate(body, 1 << 20);
  otlp::RpcStatus parsed;
  BOOST_REQUIRE(parsed.ParseFromString(body));
  BOOST_TEST(parsed.code() == 0);
  return parsed.message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(otlp_route)

BOOST_AUTO_TEST_CASE(an_export_is_ingested_and_answered_with_an_empty_response) {
  TracesServer t;
  Export e;
  e.span("one");
  e.span("two");
  auto result = t.post(e.bytes(), protobuf);
  BOOST_REQUIRE(result);
  BOOST_TEST(result->status == 200);
  BOOST_TEST(result->get_header_value("Content-Type") == "application/x-protobuf");
  BOOST_TEST(result->body.empty());  // an empty ExportTraceServiceResponse is zero bytes
  BOOST_TEST(!result->has_header("Content-Encoding"));
  BOOST_TEST(t.ingest.calls == 1);
  BOOST_REQUIRE(t.ingest.spans.size() == 2u);
  BOOST_TEST(t.ingest.spans[1]["name"] == "two");
  // An empty export and one whose spans are all dropped answer 200 and ingest nothing.
  BOOST_TEST(t.post("", protobuf)->status == 200);
  Export anonymous(false);
  anonymous.span("no ids");
  BOOST_TEST(t.post(anonymous.bytes(), protobuf)->status == 200);
  BOOST_TEST(t.ingest.calls == 1);
}

BOOST_AUTO_TEST_CASE(gzip_comes_in_and_goes_out_when_asked) {
  TracesServer t;
  Export e;
  e.span("zipped");
  auto result = t.post(gzip_compress(e.bytes()), protobuf, {{"Content-Encoding", "gzip"}, {"Accept-Encoding", "gzip"}});
  BOOST_REQUIRE(result);
  BOOST_TEST(result->status == 200);
  BOOST_TEST(result->get_header_value("Content-Encoding") == "gzip");
  BOOST_TEST(gzip_inflate(result->body, 1 << 10).empty());
  BOOST_REQUIRE(t.ingest.spans.size() == 1u);
  BOOST_TEST(t.ingest.spans[0]["name"] == "zipped");
}

BOOST_AUTO_TEST_CASE(errors_are_400_with_a_google_rpc_status) {
  TracesServer t;
  BOOST_TEST(status_message(t.post("{}", "application/json"), 400) ==
             "Unsupported Content-Type 'application/json', expected 'application/x-protobuf'");
  BOOST_TEST(status_message(t.post("\xff\xff\xff", protobuf), 400).find("Unable to parse") == 0u);
  // Gzip that does not inflate: the server's own decoder refuses it before the route runs; the answer is the same kind.
  const std::string refused =
      status_message(t.post("not gzip", protobuf, {{"Content-Encoding", "gzip"}, {"Accept-Encoding", "gzip"}}), 400);
  BOOST_TEST(!refused.empty());
  BOOST_TEST(t.ingest.calls == 0);
}

BOOST_AUTO_TEST_CASE(a_zip_bomb_is_413_and_the_server_goes_on) {
  TracesServer t(1 << 20);
  const std::string bomb = gzip_compress(std::string(64 << 20, '\0'));  // 64 MiB in about 64 KiB
  BOOST_TEST(status_message(t.post(bomb, protobuf, {{"Content-Encoding", "gzip"}}), 413) == "request body too large");
  // Upper case: the server's decoder leaves it to the route's, which refuses it the same way (it was 400).
  BOOST_TEST(status_message(t.post(bomb, protobuf, {{"Content-Encoding", "GZIP"}}), 413).find("inflates past") !=
             std::string::npos);
  Export e;
  e.span("after");
  BOOST_TEST(t.post(e.bytes(), protobuf)->status == 200);
}

BOOST_AUTO_TEST_CASE(the_route_can_sit_under_a_prefix) {
  OtlpOptions options;
  options.path = "/([a-z0-9]+)/v1/traces";
  TracesServer t(1 << 20, options);
  Export e;
  e.span("prefixed");
  BOOST_TEST(t.post(e.bytes(), protobuf, {}, "/abc123/v1/traces")->status == 200);
  BOOST_TEST(status_message(t.post("", "text/plain", {}, "/abc123/v1/traces"), 400).find("Unsupported") == 0u);
  BOOST_TEST(t.post(e.bytes(), protobuf)->status == 404);
  BOOST_TEST(t.ingest.spans.size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_ingest_that_throws_is_500_with_a_status) {
  TracesServer t;
  t.ingest.fail = true;
  Export e;
  e.span("unknown rollout");
  BOOST_TEST(status_message(t.post(e.bytes(), protobuf), 500).find("Rollout ro-1 not found") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace arclight::serve
