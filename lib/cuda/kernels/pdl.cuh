// pdl.cuh: programmatic dependent launch (Hopper and later), prepended to
// every kernel module that NVRTC compiles (nvrtc.go). A kernel launched with
// Device.LaunchOverlap may start while the kernel before it in the stream is
// still running:
//   PDL_WAIT()    waits until the kernels before it have finished and their
//                 writes are visible; it must come before the kernel reads
//                 or writes anything they touch;
//   PDL_RELEASE() lets the next overlapped launch begin (its blocks then wait
//                 in their own PDL_WAIT until this grid has finished).
// Both are no-ops below sm_90 and for a launch without the attribute. The
// CPU emulation (lib/cuda/cudaemu's prelude) defines them as no-ops.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define PDL_RELEASE() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define PDL_WAIT()
#define PDL_RELEASE()
#endif
