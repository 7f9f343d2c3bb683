# Sourced by the GPU scripts (gpu_run.sh, gpu_ws2.sh) for a prebuilt folder of tools/make_gpu_dist.sh:
# its libraries first, then CUDA's, then the machine's NCCL (not carried, 218 MB: the one torch
# ships). Sets gpu_bin to the folder's absolute path.
#
#   . tools/gpu_env.sh BIN
gpu_bin="$(cd "${1:?BIN}" && pwd)"
export LD_LIBRARY_PATH="$gpu_bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
