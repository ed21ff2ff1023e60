// Programmatic dependent launch (sm_90+): a kernel launched with Launch()
// below may start while the kernel before it on the stream is still running,
// once every block of that one has called AllowDependents(). It must call
// WaitForPrerequisites() before it reads anything the earlier kernels write
// and before any global write of its own (the wait returns once they have all
// completed and their memory is visible); work before the wait may only read
// what no kernel of the stream writes (weights) and fill shared memory. The
// point is the head's long chains of small kernels: each one's launch and
// weight prefetch overlap the one before (kernels/flow_head_gemm.cu).
// Stream capture records the programmatic edges, so graphs keep the overlap.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace argen::kernels::pdl {

__device__ __forceinline__ void WaitForPrerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void AllowDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream
// serialization allowed (a no-op before sm_90: the launch waits as usual).
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace argen::kernels::pdl
