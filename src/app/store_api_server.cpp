#include "store_api_server.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/serve/store_routes.hpp"
#include "roles.hpp"

namespace arclight::app {
namespace {

serve::HttpServerOptions store_api_options(const Config& config, const std::string& secret) {
  serve::HttpServerOptions o;
  o.host = config.store.http_host;
  o.port = config.store.http_port;
  o.bearer_token = secret;
  o.token_in_path = true;
  o.missing_token_status = 404;
  // Agent Lightning's client waits 30 s for an answer; a request or answer stalled that long is dropped.
  o.read_timeout = o.write_timeout = std::chrono::seconds(30);
  // Each open connection holds one of the server's threads. A kept-alive one goes after 5 s without a request: the
  // runners' heartbeats (every 10 s) kept theirs for good, and 64 of them starved every other client.
  o.idle_timeout = std::chrono::seconds(5);
  o.worker_threads = 256;
  return o;
}

void write_private(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(log::concat("cannot write ", path, ": ", std::strerror(errno)));
  const bool written = fchmod(fd, 0600) == 0 && write(fd, text.data(), text.size()) == ssize_t(text.size());
  close(fd);
  if (!written) throw Error(log::concat("cannot write ", path, ": ", std::strerror(errno)));
}

}  // namespace

StoreApiServer::StoreApiServer(const Config& config, store::Store& store, const std::string& secret)
    : server_(store_api_options(config, secret)),
      url_file_((std::filesystem::path(config.run.dir) / "store_api.url").string()) {
  serve::StoreRouteOptions options;
  options.rollout_defaults = rollout_config(config.rollout);
  serve::add_store_routes(server_, store, options);
  server_.start();
  const std::string root = log::concat("http://", serve::url_host(config.store.http_host), ":", server_.port());
  write_private(url_file_, root + "/" + secret + "\n");
  log::info("Agent Lightning's store API on ", root, "/<job secret>/v1/agl (the URL is in ", url_file_, ")");
}

StoreApiServer::~StoreApiServer() {
  server_.stop();
  std::error_code ignored;
  std::filesystem::remove(url_file_, ignored);
}

}  // namespace arclight::app
