#include "arclight/app/event_writer.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "arclight/core/crc32c.hpp"
#include "arclight/core/error.hpp"
#include "event.pb.h"

namespace arclight::app {
std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  const std::uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

EventWriter::EventWriter(const std::string& dir) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ = (std::filesystem::path(dir) /
           ("events.out.tfevents." + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) +
            "." + host))
              .string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw UsageError("cannot write " + path_);
  tensorboard::Event event;
  event.set_wall_time(std::chrono::duration<double>(now).count());
  event.set_file_version("brain.Event:2");
  record(event.SerializeAsString());
}

void EventWriter::scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values,
                          double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  for (const auto& [tag, value] : values) {
    tensorboard::SummaryValue* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  record(event.SerializeAsString());
  out_.flush();
  if (!out_) throw Error("writing " + path_ + " failed (a full disk or quota?)");
}

void EventWriter::record(const std::string& data) {
  const std::uint64_t length = data.size();
  const std::uint32_t length_crc = masked_crc32c(&length, sizeof length);
  const std::uint32_t data_crc = masked_crc32c(data.data(), data.size());
  out_.write(reinterpret_cast<const char*>(&length), sizeof length);
  out_.write(reinterpret_cast<const char*>(&length_crc), sizeof length_crc);
  out_.write(data.data(), static_cast<std::streamsize>(data.size()));
  out_.write(reinterpret_cast<const char*>(&data_crc), sizeof data_crc);
  if (!out_) throw Error("writing " + path_ + " failed");
}

}  // namespace arclight::app
