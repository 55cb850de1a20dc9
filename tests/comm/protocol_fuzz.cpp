// libFuzzer target for the control plane's decoder and request handler.
// Each input is tried twice: as a raw message, and as the body of a message of
// the type its first byte names, under a well-formed header (to reach the body decoders).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "arclight/comm/protocol.hpp"
#include "arclight/core/clock.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;
namespace wire = arclight::comm::wire;

namespace {
ManualClock clock_;
std::unique_ptr<MemoryStore> fuzz_store;
int runs = 0;

void fresh_store() {
  RolloutConfig config;
  config.max_attempts = 2;
  config.retry_condition = bit(AttemptStatus::failed);
  fuzz_store = std::make_unique<MemoryStore>(clock_, config);
  std::vector<NewRollout> rollouts(4);
  fuzz_store->enqueue(rollouts);
  fuzz_store->dequeue("w", 2);
  fuzz_store->add_resources("policy", "v1");
}

void check(const std::optional<std::string>& reply) {
  if (reply) wire::decode_header(*reply);  // a reply is always well-formed; throws (and aborts) if not
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!fuzz_store || ++runs % 5000 == 0) fresh_store();  // bounded memory over long runs
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  check(wire::handle_request(*fuzz_store, raw));
  if (size >= 1) {
    auto type = static_cast<wire::Type>(data[0] % static_cast<std::uint8_t>(wire::Type::end_));
    std::string framed = wire::encode(type, false, 1);
    framed.append(raw.substr(1));
    ByteWriter(framed).patch_u32(8, static_cast<std::uint32_t>(framed.size() - wire::header_size));
    check(wire::handle_request(*fuzz_store, framed));
  }
  return 0;
}
