#pragma once
// TensorBoard event files written by the binary itself: TFRecord framing (length, masked
// CRC-32C, data, masked CRC-32C) of Event protobufs, one Summary of scalars per step.
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace arclight::app {

std::uint32_t masked_crc32c(const void* data, std::size_t size);

class EventWriter {
 public:
  // A new file events.out.tfevents.<seconds>.<host> in `dir`, opened with its file_version record.
  explicit EventWriter(const std::string& dir);
  void scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values, double wall_time);
  const std::string& path() const { return path_; }

 private:
  void record(const std::string& data);
  std::string path_;
  std::ofstream out_;
};

}  // namespace arclight::app
