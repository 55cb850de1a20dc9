#include "arclight/app/run.hpp"

int main(int argc, char** argv) {
  arclight::comm::MpiRuntime mpi(argc, argv);
  return arclight::app::run(mpi, argc, argv);
}
