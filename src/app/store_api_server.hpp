#pragma once
// Rank 0's store over HTTP (store.http; app-private): Agent Lightning v0.3's LightningStore API and OTLP trace ingest
// on the coordinator's store, reachable only with the job's secret (a bearer header, or the URL's first path segment:
// http://host:port/<secret>, which Agent Lightning's client keeps as a prefix); without it, 404.
#include <string>

#include "arclight/core/config.hpp"
#include "arclight/serve/http_server.hpp"
#include "arclight/store/store.hpp"

namespace arclight::app {

class StoreApiServer {
 public:
  // Serves `store` (which outlives this) and writes the URL, secret included, to <run.dir>/store_api.url (mode
  // 0600) for local clients. Throws Error when it cannot listen.
  StoreApiServer(const Config& config, store::Store& store, const std::string& secret);
  ~StoreApiServer();  // stops serving, removes the URL file
  StoreApiServer(const StoreApiServer&) = delete;
  StoreApiServer& operator=(const StoreApiServer&) = delete;

 private:
  serve::HttpServer server_;
  std::string url_file_;
};

}  // namespace arclight::app
