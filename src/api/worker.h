// A tensor-parallel worker process (ranks 1..N-1; seeds: ModelRunner.loop). Started by rank 0's
// RunnerGroup as `minivllm-worker --control-fd FD --rank R --parent PID`: it attaches the inherited
// control segment, builds the same ModelRunner as rank 0 from the "init" message (the model is
// opened here from its path: each rank maps the checkpoint and reads only its shards), then reads
// [method, args] messages and calls them until "exit". It dies with rank 0 (PR_SET_PDEATHSIG, and a
// parent check while waiting), ignores SIGINT (a terminal's Ctrl-C is rank 0's to handle), and on an
// error leaves its message in the segment and exits with status 1 for rank 0 to report.
#pragma once

namespace minivllm {

int worker_main(int argc, char** argv);

}  // namespace minivllm
