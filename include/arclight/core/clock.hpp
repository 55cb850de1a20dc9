#pragma once
#include <atomic>
#include <chrono>

namespace arclight {

// Seconds since the Unix epoch. Injectable, so that timeouts can be tested without sleeping.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() const = 0;
};

class SystemClock : public Clock {
 public:
  double now() const override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
};

// A clock that moves only when told to.
class ManualClock : public Clock {
 public:
  explicit ManualClock(double start = 1000.0) : now_(start) {}
  double now() const override { return now_.load(); }
  void advance(double seconds) { now_.store(now_.load() + seconds); }
  void set(double t) { now_.store(t); }

 private:
  std::atomic<double> now_;
};

}  // namespace arclight
