#include "lib/dispatch_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace looptune {
namespace {

// The fixed part of the dispatch. Kernels need LT_ALIGN-byte aligned, non-overlapping buffers
// of exactly their shape; everything here exists to give them that from any caller's pointers.
constexpr const char *kDispatchBody = R"(
/* Elements a tensor may have: its bytes must fit a size_t and a ptrdiff_t. */
#define LT_MAX_ELEMS ((int64_t)1 << 60)

const char *lt_library_info(void) { return lt_info; }

/* -1, 0 or 1 as a is before, equal to or after b (n sizes, lexicographic). */
static int lt_cmp(const int64_t *a, const int64_t *b, int n) {
    for (int i = 0; i < n; ++i)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* The first of `count` entries (each `size` bytes, starting with its n sizes, sorted) not
   before `key`: count when there is none (the table's end marker). Binary search: a library
   holds any number of kernels. */
static size_t lt_lower_bound(const void *table, size_t count, size_t size, const int64_t *key,
                             int n) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (lt_cmp((const int64_t *)((const char *)table + mid * size), key, n) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int lt_aligned(const void *p) { return ((uintptr_t)p & (LT_ALIGN - 1u)) == 0; }

static float *lt_alloc(int64_t n) {
    size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63u) & ~(size_t)63u;
    return (float *)aligned_alloc(64, bytes);
}

/* *out = a * b; 1 when a or b is negative or the product exceeds LT_MAX_ELEMS. */
static int lt_mul(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (a != 0 && b > LT_MAX_ELEMS / a)) return 1;
    *out = a * b;
    return 0;
}

static int lt_overlap(const float *a, int64_t na, const float *c, int64_t nc) {
    uintptr_t a0 = (uintptr_t)a, c0 = (uintptr_t)c;
    if (na == 0 || nc == 0) return 0;
    return a0 < c0 + (uintptr_t)nc * 4u && c0 < a0 + (uintptr_t)na * 4u;
}

/* A kernel of exactly these sizes: its variant for 64-byte aligned pointers when it has one and
   every pointer is; else a pointer not LT_ALIGN-byte aligned goes through a copy. */
static int lt_call(lt_fn fn, lt_fn fn64, const float *a, int64_t na, const float *b, int64_t nb,
                   float *c, int64_t nc) {
    float *ta = NULL, *tb = NULL, *tc = NULL;
    int rc = LT_OK;
    if (fn64 && ((uintptr_t)a & 63u) == 0 && ((uintptr_t)b & 63u) == 0 &&
        ((uintptr_t)c & 63u) == 0) {
        fn64(a, b, c);
        return LT_OK;
    }
    if (!lt_aligned(a)) {
        if (!(ta = lt_alloc(na))) { rc = LT_ENOMEM; goto done; }
        memcpy(ta, a, (size_t)na * 4u);
        a = ta;
    }
    if (!lt_aligned(b)) {
        if (!(tb = lt_alloc(nb))) { rc = LT_ENOMEM; goto done; }
        memcpy(tb, b, (size_t)nb * 4u);
        b = tb;
    }
    if (!lt_aligned(c) && !(tc = lt_alloc(nc))) { rc = LT_ENOMEM; goto done; }
    fn(a, b, tc ? tc : c);
    if (tc) memcpy(c, tc, (size_t)nc * 4u);
done:
    free(ta);
    free(tb);
    free(tc);
    return rc;
}

/* rows x cols of src (row stride ld) into dst, rows_p x cols_p, zeros around. */
static void lt_pack(float *dst, const float *src, int64_t ld, int64_t rows, int64_t cols,
                    int64_t rows_p, int64_t cols_p) {
    for (int64_t r = 0; r < rows; ++r) {
        memcpy(dst + r * cols_p, src + r * ld, (size_t)cols * 4u);
        if (cols < cols_p) memset(dst + r * cols_p + cols, 0, (size_t)(cols_p - cols) * 4u);
    }
    if (rows < rows_p) memset(dst + rows * cols_p, 0, (size_t)((rows_p - rows) * cols_p) * 4u);
}

/* C over the block kernel: blocks of A and B packed (zero-padded at the edges) into aligned
   buffers, each block product added into C. */
static int lt_sgemm_blocked(int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                            float *C) {
    float *pa = lt_alloc(LT_BM * LT_BK), *pb = lt_alloc(LT_BK * LT_BN), *pc = lt_alloc(LT_BM * LT_BN);
    if (!pa || !pb || !pc) {
        free(pa);
        free(pb);
        free(pc);
        return LT_ENOMEM;
    }
    for (int64_t j0 = 0; j0 < N; j0 += LT_BN) {
        const int64_t nj = N - j0 < LT_BN ? N - j0 : LT_BN;
        for (int64_t k0 = 0; k0 < K; k0 += LT_BK) {
            const int64_t nk = K - k0 < LT_BK ? K - k0 : LT_BK;
            lt_pack(pb, B + k0 * N + j0, N, nk, nj, LT_BK, LT_BN);
            for (int64_t i0 = 0; i0 < M; i0 += LT_BM) {
                const int64_t ni = M - i0 < LT_BM ? M - i0 : LT_BM;
                lt_pack(pa, A + i0 * K + k0, K, ni, nk, LT_BM, LT_BK);
                LT_BLOCK(pa, pb, pc);
                for (int64_t i = 0; i < ni; ++i) {
                    float *restrict c = C + (i0 + i) * N + j0;
                    const float *restrict p = pc + i * LT_BN;
                    if (k0 == 0)
                        memcpy(c, p, (size_t)nj * 4u);
                    else
                        for (int64_t j = 0; j < nj; ++j) c[j] += p[j];
                }
            }
        }
    }
    free(pa);
    free(pb);
    free(pc);
    return LT_OK;
}

/* Plain loops (i, k, j: rows of B and C streamed, vectorized by the C compiler). */
static void lt_sgemm_loop(int64_t M, int64_t N, int64_t K, const float *restrict A,
                          const float *restrict B, float *restrict C) {
    for (int64_t i = 0; i < M; ++i) {
        float *restrict c = C + i * N;
        memset(c, 0, (size_t)N * 4u);
        for (int64_t k = 0; k < K; ++k) {
            const float a = A[i * K + k];
            const float *restrict b = B + k * N;
            for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
        }
    }
}

static int64_t lt_round_up(int64_t x, int64_t b) { return (x + b - 1) / b * b; }

int lt_sgemm(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C) {
    int64_t na, nb, nc;
    if (lt_mul(M, K, &na) || lt_mul(K, N, &nb) || lt_mul(M, N, &nc)) return LT_EINVAL;
    if ((na && !A) || (nb && !B) || (nc && !C)) return LT_EINVAL;
    if (lt_overlap(A, na, C, nc) || lt_overlap(B, nb, C, nc)) return LT_EINVAL;
    if (nc == 0) return LT_OK;
    if (K == 0) {
        memset(C, 0, (size_t)nc * 4u);
        return LT_OK;
    }
    const int64_t key[3] = {M, N, K};
    const struct lt_mm *e = lt_mm_table + lt_lower_bound(lt_mm_table, LT_MM_COUNT,
                                                         sizeof *lt_mm_table, key, 3);
    if (e->fn && lt_cmp(e->key, key, 3) == 0) return lt_call(e->fn, e->fn64, A, na, B, nb, C, nc);
    const double padded = (double)lt_round_up(M, LT_BM) * (double)lt_round_up(N, LT_BN) *
                          (double)lt_round_up(K, LT_BK);
    if (padded <= LT_MAX_WASTE * (double)M * (double)N * (double)K)
        return lt_sgemm_blocked(M, N, K, A, B, C);
    lt_sgemm_loop(M, N, K, A, B, C);
    return LT_OK;
}

/* One image's im2col: col[(ci KH + kh) KW + kw][ho WO + wo] = X[ci][ho S + kh - P][wo S + kw - P],
   zero outside the image. */
static void lt_im2col(const float *X, int64_t CI, int64_t H, int64_t W, int64_t KH, int64_t KW,
                      int64_t S, int64_t P, int64_t HO, int64_t WO, float *col) {
    for (int64_t ci = 0; ci < CI; ++ci)
        for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
                float *dst = col + ((ci * KH + kh) * KW + kw) * HO * WO;
                for (int64_t ho = 0; ho < HO; ++ho) {
                    float *d = dst + ho * WO;
                    const int64_t hi = ho * S + kh - P;
                    if (hi < 0 || hi >= H) {
                        memset(d, 0, (size_t)WO * 4u);
                        continue;
                    }
                    const float *src = X + (ci * H + hi) * W;
                    for (int64_t wo = 0; wo < WO; ++wo) {
                        const int64_t wi = wo * S + kw - P;
                        d[wo] = wi >= 0 && wi < W ? src[wi] : 0.0f;
                    }
                }
            }
}

/* Any other conv: per image, im2col (CI*KH*KW x HO*WO) and W (CO x CI*KH*KW) through
   lt_sgemm. */
static int lt_sconv2d_im2col(int64_t N, int64_t CI, int64_t H, int64_t W, int64_t CO,
                             int64_t KH, int64_t KW, int64_t S, int64_t P, int64_t HO,
                             int64_t WO, const float *X, const float *Wt, float *Y) {
    const int64_t rows = CI * KH * KW, cols = HO * WO;
    int64_t n_col;
    if (lt_mul(rows, cols, &n_col)) return LT_ENOMEM;
    float *col = lt_alloc(n_col);
    int rc = LT_OK;
    if (!col) return LT_ENOMEM;
    for (int64_t n = 0; n < N && rc == LT_OK; ++n) {
        lt_im2col(X + n * CI * H * W, CI, H, W, KH, KW, S, P, HO, WO, col);
        rc = lt_sgemm(CO, cols, rows, Wt, col, Y + n * CO * cols);
    }
    free(col);
    return rc;
}

int lt_sconv2d_ex(int64_t N, int64_t CI, int64_t H, int64_t W, int64_t CO, int64_t KH,
                  int64_t KW, int64_t S, int64_t P, const float *X, const float *Wt, float *Y) {
    int64_t nx, nw, ny, t;
    if (N < 0 || CI < 0 || CO < 0 || KH < 1 || KW < 1 || S < 1 || P < 0) return LT_EINVAL;
    if (H > LT_MAX_ELEMS || W > LT_MAX_ELEMS || S > LT_MAX_ELEMS || P > LT_MAX_ELEMS)
        return LT_EINVAL;
    if (H + 2 * P < KH || W + 2 * P < KW) return LT_EINVAL;
    const int64_t HO = (H + 2 * P - KH) / S + 1, WO = (W + 2 * P - KW) / S + 1;
    if (lt_mul(N, CI, &t) || lt_mul(t, H, &t) || lt_mul(t, W, &nx)) return LT_EINVAL;
    if (lt_mul(CO, CI, &t) || lt_mul(t, KH, &t) || lt_mul(t, KW, &nw)) return LT_EINVAL;
    if (lt_mul(N, CO, &t) || lt_mul(t, HO, &t) || lt_mul(t, WO, &ny)) return LT_EINVAL;
    if ((nx && !X) || (nw && !Wt) || (ny && !Y)) return LT_EINVAL;
    if (lt_overlap(X, nx, Y, ny) || lt_overlap(Wt, nw, Y, ny)) return LT_EINVAL;
    if (ny == 0) return LT_OK;
    if (CI == 0) {
        memset(Y, 0, (size_t)ny * 4u);
        return LT_OK;
    }
    const int64_t key[9] = {N, CI, H, W, CO, KH, KW, S, P};
    const struct lt_conv *e = lt_conv_table + lt_lower_bound(lt_conv_table, LT_CONV_COUNT,
                                                             sizeof *lt_conv_table, key, 9);
    if (e->fn && lt_cmp(e->key, key, 9) == 0) return lt_call(e->fn, e->fn64, X, nx, Wt, nw, Y, ny);
    return lt_sconv2d_im2col(N, CI, H, W, CO, KH, KW, S, P, HO, WO, X, Wt, Y);
}

int lt_sconv2d(int64_t N, int64_t CI, int64_t H, int64_t W, int64_t CO, int64_t KH, int64_t KW,
               const float *X, const float *Wt, float *Y) {
    if (H < KH || W < KW) return LT_EINVAL;
    return lt_sconv2d_ex(N, CI, H, W, CO, KH, KW, 1, 0, X, Wt, Y);
}
)";

std::string join_shape(const std::vector<int64_t> &shape, const char *sep) {
    std::string s;
    for (int64_t d : shape) s += fmt::format("{}{}", s.empty() ? "" : sep, d);
    return s;
}

}  // namespace

std::string c_string_literal(const std::string &text) {
    std::string s = "\"";
    for (unsigned char ch : text) {
        if (ch == '"' || ch == '\\')
            s += fmt::format("\\{}", char(ch));
        else if (ch < 0x20 || ch >= 0x7f)
            s += fmt::format("\\{:03o}", ch);  // octal: never swallows the next character
        else
            s += char(ch);
    }
    return s + "\"";
}

std::string library_header(const std::vector<DispatchKernel> &kernels, const std::string &machine,
                           const std::string &cpu, const std::string &triple,
                           const std::array<int64_t, 3> &block, int align) {
    std::string decls;
    for (const DispatchKernel &k : kernels) {
        decls += fmt::format("/* {} */\nvoid {}({});\n", k.comment, k.function, k.params);
        if (!k.aligned_function.empty())
            decls += fmt::format("void {}({}); /* the same, 64-byte aligned pointers */\n",
                                 k.aligned_function, k.params);
    }
    return fmt::format(
        R"(/* looptune_kernels.h: kernels tuned by looptune (`looptool lib build`).
   Machine {machine}; compiled for {triple}, CPU {cpu}. Link liblooptune_kernels.so or
   liblooptune_kernels.a (needs libc only). Single-threaded; no global state: calls from
   several threads at once are fine.

   lt_sgemm: C[M][N] = A[M][K] B[K][N], float32, row-major, C overwritten. The kernel tuned for
   exactly (M, N, K) when the library has one; any other shape is tiled over the tuned block
   kernel of {bm} x {bn} x {bk} (M x N x K; edges zero-padded in aligned copies) when padding
   at most doubles the work, else computed by plain loops (tiny or skinny shapes). Correct for
   every M, N, K >= 0 (K = 0 gives C = 0).
   lt_sconv2d: Y[N][CO][H-KH+1][W-KW+1] = X[N][CI][H][W] (*) Wt[CO][CI][KH][KW], NCHW and
   OIHW, stride 1, no padding. lt_sconv2d_ex: stride S >= 1 along rows and columns, X padded
   with P >= 0 zeros on each side; Y[N][CO][(H+2P-KH)/S+1][(W+2P-KW)/S+1]. The tuned kernel of
   that shape, stride and padding, else im2col and lt_sgemm.
   Pointers: any alignment; a tuned kernel takes every {align}-byte aligned pointer as it is
   (float arrays are), any other is copied into an aligned buffer first; when every pointer is
   64-byte aligned, its variant lowered for that (_a64) is called. NULL only with no
   elements; the output must not overlap an input.
   Return: LT_OK, or LT_EINVAL (negative or overflowing sizes, a NULL pointer with elements,
   overlap, KH or KW < 1 or larger than the (padded) image, S < 1, P < 0), or LT_ENOMEM.

   Each kernel also under its own name: exactly its shape, every pointer {align}-byte aligned,
   no overlap, no checks. */
#ifndef LOOPTUNE_KERNELS_H
#define LOOPTUNE_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

#define LT_OK 0
#define LT_EINVAL 1
#define LT_ENOMEM 3

int lt_sgemm(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C);
int lt_sconv2d(int64_t N, int64_t CI, int64_t H, int64_t W, int64_t CO, int64_t KH, int64_t KW,
               const float *X, const float *Wt, float *Y);
int lt_sconv2d_ex(int64_t N, int64_t CI, int64_t H, int64_t W, int64_t CO, int64_t KH, int64_t KW,
                  int64_t S, int64_t P, const float *X, const float *Wt, float *Y);
/* The manifest (looptune_kernels.json) as a JSON string. */
const char *lt_library_info(void);

{decls}
#ifdef __cplusplus
}}
#endif

#endif
)",
        fmt::arg("machine", machine), fmt::arg("triple", triple), fmt::arg("cpu", cpu),
        fmt::arg("bm", block[0]), fmt::arg("bn", block[1]), fmt::arg("bk", block[2]),
        fmt::arg("decls", decls), fmt::arg("align", align));
}

std::string dispatch_source(const std::vector<DispatchKernel> &kernels,
                            const std::string &block_function, const std::array<int64_t, 3> &block,
                            const std::string &manifest, int align) {
    // Each table sorted by its sizes (lt_lower_bound searches it); stable: of two kernels of
    // one shape the first listed is called.
    std::vector<std::pair<std::vector<int64_t>, std::string>> mms, convs;
    for (const DispatchKernel &k : kernels) {
        const std::string fns = fmt::format(
            "{}, {}", k.function, k.aligned_function.empty() ? "NULL" : k.aligned_function);
        if (k.kind == "matmul" && k.shape.size() == 3) mms.push_back({k.shape, fns});
        if (k.kind == "conv2d" && (k.shape.size() == 7 || k.shape.size() == 9)) {
            std::vector<int64_t> key = k.shape;
            if (key.size() == 7) key.insert(key.end(), {1, 0});  // stride 1, no padding
            convs.push_back({key, fns});
        }
    }
    auto rows = [](auto &entries) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto &a, const auto &b) { return a.first < b.first; });
        std::string text;
        for (const auto &[key, fns] : entries)
            text += fmt::format("    {{{{{}}}, {}}},\n", join_shape(key, ", "), fns);
        return text;
    };
    const std::string mm = rows(mms), conv = rows(convs);
    return fmt::format(
        R"(/* Generated by `looptool lib build`: lt_sgemm and lt_sconv2d choose a kernel by shape. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

{header_include}

typedef void (*lt_fn)(const float *, const float *, float *);
struct lt_mm {{
    int64_t key[3]; /* M, N, K */
    lt_fn fn, fn64; /* fn64: for 64-byte aligned pointers, or NULL */
}};
struct lt_conv {{
    int64_t key[9]; /* N, CI, H, W, CO, KH, KW, stride, pad */
    lt_fn fn, fn64;
}};
/* Sorted by their sizes; each ends with a marker (fn NULL) that is not counted. */
static const struct lt_mm lt_mm_table[] = {{
{mm}    {{{{0}}, NULL, NULL}}}};
#define LT_MM_COUNT (sizeof lt_mm_table / sizeof *lt_mm_table - 1)
static const struct lt_conv lt_conv_table[] = {{
{conv}    {{{{0}}, NULL, NULL}}}};
#define LT_CONV_COUNT (sizeof lt_conv_table / sizeof *lt_conv_table - 1)

#define LT_BM ((int64_t){bm})
#define LT_BN ((int64_t){bn})
#define LT_BK ((int64_t){bk})
#define LT_BLOCK {block}
/* Largest padded/actual work for which the block kernel is used. */
#define LT_MAX_WASTE 2.0
/* The bytes the kernels' pointers must be aligned to. */
#define LT_ALIGN ((uintptr_t){align})
static const char lt_info[] = {info};
{body})",
        fmt::arg("mm", mm), fmt::arg("conv", conv), fmt::arg("bm", block[0]),
        fmt::arg("bn", block[1]), fmt::arg("bk", block[2]), fmt::arg("block", block_function),
        fmt::arg("info", c_string_literal(manifest)),
        fmt::arg("header_include", "#include \"looptune_kernels.h\""),
        fmt::arg("body", kDispatchBody), fmt::arg("align", align));
}

}  // namespace looptune
