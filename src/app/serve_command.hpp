#pragma once
#include "arclight/app/cli.hpp"

namespace arclight::app {

// `arclight serve CONFIG`: the config's policy (a from-scratch model drawn from run.seed, or model.path) behind the
// OpenAI-compatible endpoint, one process, no training: for checking a model, its template and an agent against the
// endpoint. Prints the endpoint's URL on stdout's first line; the bearer token is $ARCLIGHT_API_KEY (else a random
// one, printed on the second line). Runs until SIGTERM or SIGUSR1.
int serve_model(const Invocation& inv);

}  // namespace arclight::app
