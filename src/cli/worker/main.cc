// minivllm-worker: a tensor-parallel rank started by minivllm (see api/worker.h).
#include "api/worker.h"

int main(int argc, char** argv) { return minivllm::worker_main(argc, argv); }
