#!/usr/bin/env python3
"""make kernel-check: compile every CUDA module of lib/cuda/kernels with NVRTC
on this machine, as lib/cuda does at run time (pdl.cuh and async.cuh prepended, C++17,
-default-device), and print ptxas's registers, spills and stack per kernel,
so that a kernel change is checked before a GPU call. No GPU is needed, only
an NVRTC library: $MEMPO_NVRTC, libnvrtc.so from a CUDA toolkit or a pip
nvidia-cuda-nvrtc wheel, or Debian's libnvrtc11.2 (non-free; NVRTC 11.8 knows
sm_90). -lineinfo is left out: NVRTC 11.8 crashes on macro-made kernels with it.

usage: scripts/kernel_check.py [--arch sm_90] [--fail-on-spill] [module ...]
Exits 1 when a module does not compile (or spills, with --fail-on-spill),
2 when no NVRTC library is found."""
import argparse, ctypes, glob, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
kdir = os.path.join(here, "..", "lib", "cuda", "kernels")


def nvrtc():
    names = [os.environ.get("MEMPO_NVRTC", "")] + ["libnvrtc.so"] + [
        "libnvrtc.so.%s" % v for v in ("13", "12", "11.2")]
    for n in names:
        if not n:
            continue
        try:
            return ctypes.CDLL(n)
        except OSError:
            pass
    return None


def compile_module(nv, name, src, arch):
    prog = ctypes.c_void_p()
    if nv.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), (name + ".cu").encode(), 0, None, None) != 0:
        return 1, "nvrtcCreateProgram failed"
    opts = [b"--gpu-architecture=" + arch.encode(), b"-default-device", b"--std=c++17", b"-Xptxas", b"-v"]
    rc = nv.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    nv.nvrtcGetProgramLog(prog, log)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc, log.value.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--fail-on-spill", action="store_true")
    ap.add_argument("modules", nargs="*")
    a = ap.parse_args()
    nv = nvrtc()
    if nv is None:
        print("kernel-check: no NVRTC library here (set MEMPO_NVRTC, or install a CUDA toolkit's, pip's "
              "nvidia-cuda-nvrtc or Debian non-free's libnvrtc11.2)", file=sys.stderr)
        return 2
    # lib/cuda/nvrtc.go's devicePrelude: pdl.cuh, then async.cuh.
    prelude = "".join(open(os.path.join(kdir, f), encoding="utf-8").read() for f in ("pdl.cuh", "async.cuh"))
    mods = a.modules or sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(kdir, "*.cu")))
    bad = 0
    print("%-11s %-34s %5s %7s %7s %6s" % ("module", "kernel", "regs", "spill-st", "spill-ld", "stack"))
    for m in mods:
        rc, log = compile_module(nv, m, prelude + open(os.path.join(kdir, m + ".cu"), encoding="utf-8").read(), a.arch)
        if rc != 0:
            print("kernel-check: %s.cu does not compile for %s:\n%s" % (m, a.arch, log), file=sys.stderr)
            bad = 1
            continue
        for fn, body in re.findall(r"Compiling entry function '(\w+)'.*?\n(.*?)(?=ptxas info\s+: Compiling|\Z)", log, re.S):
            st = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", body)
            rg = re.search(r"Used (\d+) registers", body)
            stack, sst, sld = (int(x) for x in st.groups()) if st else (0, 0, 0)
            print("%-11s %-34s %5s %7d %7d %6d" % (m, fn, rg.group(1) if rg else "?", sst, sld, stack))
            if a.fail_on_spill and (sst or sld):
                bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
