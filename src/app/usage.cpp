#include "arclight/app/usage.hpp"

#include <sys/resource.h>

#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "arclight/core/log.hpp"

namespace arclight::app {
namespace {
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
double seconds(const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); }
}  // namespace

ComputeClock::Section::Section(ComputeClock& clock) : clock_(clock), started_(thread_cpu_seconds()) {}

ComputeClock::Section::~Section() {
  const double spent = thread_cpu_seconds() - started_;
  std::lock_guard<std::mutex> lock(clock_.mutex_);
  clock_.total_ += spent;
}

double ComputeClock::seconds() {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

ProcessCpu ProcessCpu::now() {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  return {seconds(self.ru_utime), seconds(self.ru_stime)};
}

void write_usage(const comm::MpiRuntime& mpi, const Layout& layout, const ProcessCpu& since, double compute_seconds,
                 double wall_seconds, const std::string& path) {
  const ProcessCpu now = ProcessCpu::now();
  rusage self{};
  getrusage(RUSAGE_SELF, &self);  // ru_maxrss: the peak resident memory in KiB (Linux)
  std::ostringstream mine;
  mine << std::setprecision(6) << "{\"rank\": " << mpi.rank() << ", \"role\": \"" << role_name(layout.roles[mpi.rank()])
       << "\", \"user_seconds\": " << now.user - since.user << ", \"system_seconds\": " << now.system - since.system
       << ", \"compute_seconds\": " << compute_seconds << ", \"start_cpu_seconds\": " << since.user + since.system
       << ", \"peak_resident_mib\": " << self.ru_maxrss / 1024 << "}";
  const std::vector<std::string> all = mpi.gather(mine.str(), 0);
  if (mpi.rank() != 0) return;
  std::ofstream out(path);
  out << std::setprecision(6) << "{\"wall_seconds\": " << wall_seconds
      << ", \"node_cores\": " << std::thread::hardware_concurrency() << ", \"ranks\": [\n";
  for (std::size_t r = 0; r < all.size(); ++r) out << "  " << all[r] << (r + 1 < all.size() ? ",\n" : "\n");
  out << "]}\n";
  if (!out) log::warn("could not write ", path);
}

}  // namespace arclight::app
