# Sourced by the scripts that run on the GPU machine: gpu_env LIBDIR puts
# LIBDIR (the shared libraries a bundle carries) on LD_LIBRARY_PATH, finds the
# folders of libnvrtc and libcublas in PyTorch's nvidia-* wheels unless
# MEMPO_CUDA_LIB_DIR is set, and gives the NVRTC kernel cache a default home.
gpu_env() {
	export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	if [[ -z "${MEMPO_CUDA_LIB_DIR:-}" ]]; then
		MEMPO_CUDA_LIB_DIR=$(python3 - <<'PY' 2>/dev/null
import os
try:
    import nvidia
    ds = set()
    for p in nvidia.__path__:
        for d in os.listdir(p):
            for sub in ("lib", "lib64"):
                q = os.path.join(p, d, sub)
                if os.path.isdir(q):
                    ds.add(q)
    print(os.pathsep.join(sorted(ds)))
except Exception:
    pass
PY
)
		export MEMPO_CUDA_LIB_DIR
	fi
	export MEMPO_CUDA_CACHE=${MEMPO_CUDA_CACHE:-/tmp/mempo-cuda-cache}
}
