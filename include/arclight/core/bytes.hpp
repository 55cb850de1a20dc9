#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "arclight/core/error.hpp"

// Little-endian binary encoding with bounds checks, shared by the wire
// protocol and the store's compact span records.
namespace arclight {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the encoding copies little-endian scalars as they are");

// Input that does not decode: truncated, oversized or malformed.
class DecodeError : public Error {
 public:
  explicit DecodeError(const std::string& what) : Error(what, exit_usage) {}
};

class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { scalar(v); }
  void u32(std::uint32_t v) { scalar(v); }
  void u64(std::uint64_t v) { scalar(v); }
  void i64(std::int64_t v) { scalar(v); }
  void f32(float v) { scalar(v); }
  void f64(double v) { scalar(v); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  // A length-prefixed byte string.
  void bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void raw(const void* data, std::size_t size) { out_.append(static_cast<const char*>(data), size); }
  std::size_t size() const { return out_.size(); }
  void patch_u32(std::size_t at, std::uint32_t v) { std::memcpy(&out_[at], &v, sizeof v); }

 private:
  template <class T>
  void scalar(T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out_.append(buf, sizeof(T));
  }
  std::string& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)[0]); }
  std::uint16_t u16() { return scalar<std::uint16_t>(); }
  std::uint32_t u32() { return scalar<std::uint32_t>(); }
  std::uint64_t u64() { return scalar<std::uint64_t>(); }
  std::int64_t i64() { return scalar<std::int64_t>(); }
  float f32() { return scalar<float>(); }
  double f64() { return scalar<double>(); }
  bool boolean() {
    std::uint8_t v = u8();
    if (v > 1) throw DecodeError("bad boolean byte");
    return v == 1;
  }
  std::string_view bytes() { return take(u32()); }
  std::string_view raw(std::size_t size) { return take(size); }
  // A count of items that each take at least `min_item_bytes`: refuses counts the input cannot hold,
  // so that a corrupt count never makes us allocate gigabytes.
  std::uint32_t count(std::size_t min_item_bytes) {
    std::uint32_t n = u32();
    if (min_item_bytes > 0 && n > remaining() / min_item_bytes) throw DecodeError("count exceeds the message");
    return n;
  }
  std::size_t remaining() const { return in_.size() - pos_; }
  std::size_t position() const { return pos_; }
  std::string_view consumed_since(std::size_t start) const { return in_.substr(start, pos_ - start); }
  void expect_end() const {
    if (pos_ != in_.size()) throw DecodeError("trailing bytes");
  }

 private:
  std::string_view take(std::size_t n) {
    if (n > remaining()) throw DecodeError("truncated");
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  template <class T>
  T scalar() {
    T v;
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }
  std::string_view in_;
  std::size_t pos_ = 0;
};

}  // namespace arclight
