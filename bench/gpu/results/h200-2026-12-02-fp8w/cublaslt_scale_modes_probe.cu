#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
int main() {
  cublasLtHandle_t lt; cublasLtCreate(&lt);
  int ver = cublasLtGetVersion(); printf("cublasLt version %d\n", ver);
  void* ws; cudaMalloc(&ws, 32<<20);
  float* sc; cudaMalloc(&sc, 1<<20);
  const int m = 12288, k = 4096;
  const char* mode_names[] = {"scalar", "vec16", "vec32", "outer", "vec128", "blk128"};
  for (int amode : {0, 3, 4}) for (int bmode : {0, 3, 4}) for (int dt : {0, 1}) for (int n : {2, 128}) {
    cublasLtMatmulDesc_t d; cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
    int32_t am = amode, bm = bmode;
    cublasStatus_t s1 = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof(am));
    cublasStatus_t s2 = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof(bm));
    const void* p = sc;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p, sizeof(p));
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p, sizeof(p));
    cudaDataType_t ct = dt ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, k, m, k);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, k, n, k);
    cublasLtMatrixLayoutCreate(&c, ct, m, n, m);
    cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref);
    size_t wsb = 32<<20; cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb));
    cublasLtMatmulHeuristicResult_t r[4]; int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, d, a, b, c, c, pref, 4, r, &found);
    printf("A %-6s B %-6s CD %s n %4d: set %d %d heuristic %d (%s) found %d\n", mode_names[amode], mode_names[bmode],
           dt ? "bf16" : "f32 ", n, s1, s2, (int)s, cublasGetStatusString(s), found);
    cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(a); cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c); cublasLtMatmulDescDestroy(d);
  }
  return 0;
}
