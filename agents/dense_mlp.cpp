#include "agents/dense_mlp.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>

#include "looptool/error.h"

// libgomp's (oneDNN's and LibTorch's threading runtime); declared here to keep -fopenmp out.
extern "C" void omp_set_num_threads(int);
extern "C" int omp_get_max_threads();

namespace looptune {
namespace {

// One thread per call: the GEMMs here take 2-90 us, too short to share, and on the 2-core
// machines the other core belongs to an actor or the environment. oneDNN reads the calling
// thread's OpenMP setting, which is restored afterwards (LibTorch's ops read it too).
class OneThread {
public:
    OneThread() : saved_(omp_get_max_threads()) {
        if (saved_ != 1) omp_set_num_threads(1);
    }
    ~OneThread() {
        if (saved_ != 1) omp_set_num_threads(saved_);
    }
    OneThread(const OneThread &) = delete;
    OneThread &operator=(const OneThread &) = delete;

private:
    int saved_;
};

// Row-major C[M x N] = op(A) op(B) + beta C, op(X) = X or X^T.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
          const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.f, a, lda, b, ldb, beta, c, ldc) !=
        dnnl_success)
        throw looptool::InternalError("dnnl_sgemm failed");
}

// The elementwise loops below are cloned for AVX-512 and AVX2, like fused_adam.cpp's, because
// the project builds for baseline x86-64.
#define LT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// y[r, o] = relu(y[r, o] + bias[o]) (hidden layers) or y + bias (outputs).
LT_VECTOR_CLONES void add_bias(float *y, int64_t R, int64_t O, const float *bias, bool relu) {
    for (int64_t r = 0; r < R; ++r) {
        float *row = y + r * O;
        for (int64_t o = 0; o < O; ++o) {
            const float v = row[o] + bias[o];
            row[o] = relu ? std::max(v, 0.f) : v;
        }
    }
}

// d[r, o] = 0 where the layer's output h[r, o] was clamped by its relu (h = relu(z) > 0 iff z > 0).
LT_VECTOR_CLONES void relu_backward(float *d, const float *h, int64_t n) {
    for (int64_t i = 0; i < n; ++i) d[i] = h[i] > 0.f ? d[i] : 0.f;
}

// out[o] = sum over r of d[r, o] (a bias's gradient).
LT_VECTOR_CLONES void column_sums(const float *d, int64_t R, int64_t O, float *out) {
    std::fill_n(out, O, 0.f);
    for (int64_t r = 0; r < R; ++r)
        for (int64_t o = 0; o < O; ++o) out[o] += d[r * O + o];
}

// used[f] |= row[f] != 0 over `rows` rows of width F.
LT_VECTOR_CLONES void mark_nonzero(const float *rows, int64_t count, int64_t F, uint8_t *used) {
    for (int64_t r = 0; r < count; ++r)
        for (int64_t f = 0; f < F; ++f) used[f] |= rows[r * F + f] != 0.f ? 1 : 0;
}

float *grad_of(torch::Tensor &p) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    return p.mutable_grad().data_ptr<float>();
}

}  // namespace

bool DenseMlp::applies(QNet &net) {
    if (net->config().encoder != "mlp") return false;
    const auto params = net->parameters();
    if (params.size() != 12) return false;
    for (const torch::Tensor &p : params)
        if (!p.device().is_cpu() || p.scalar_type() != torch::kFloat32 || !p.is_contiguous())
            return false;
    return true;
}

DenseMlp::DenseMlp(QNet &net) : params_(net->parameters()) {
    LT_CHECK(applies(net), "DenseMlp: not an MLP Q-network of float32 CPU parameters");
    F_ = params_[0].size(1);
    H_ = params_[0].size(0);
    H2_ = params_[4].size(0);
    A_ = params_[10].size(0);
    LT_CHECK(params_[2].size(0) == H_ && params_[2].size(1) == H_ && params_[4].size(1) == H_ &&
                 params_[6].size(0) == 1 && params_[6].size(1) == H2_ &&
                 params_[8].size(0) == H2_ && params_[10].size(1) == H2_,
             "DenseMlp: parameters not in QNetImpl's MLP layout");
}

const float *DenseMlp::forward(const std::vector<RowBlock> &blocks) {
    OneThread one_thread;
    int64_t R = 0;
    for (const RowBlock &b : blocks) R += b.count;
    R_ = R;
    const float *w1 = params_[0].data_ptr<float>(), *b1 = params_[1].data_ptr<float>();
    // The first layer over the columns that are not zero in every row (most of an encoded
    // state is zeros: padding loop rows, empty stride buckets, the one-hot action history): the
    // same product at ~37% of the FLOPs on a batch of 64. Small batches (acting) and dense ones
    // use every column, as QNetImpl::encode_mlp does.
    cols_.clear();
    if (R >= 16) {
        std::vector<uint8_t> used(F_, 0);
        for (const RowBlock &b : blocks) mark_nonzero(b.rows, b.count, F_, used.data());
        for (int64_t f = 0; f < F_; ++f)
            if (used[f]) cols_.push_back(f);
        if (cols_.size() * 4 > size_t(F_) * 3) cols_.clear();
    }
    const bool gather = !cols_.empty();
    if (!gather)
        for (int64_t f = 0; f < F_; ++f) cols_.push_back(f);
    K_ = static_cast<int64_t>(cols_.size());
    xc_.resize(R * K_);
    float *x = xc_.data();
    for (const RowBlock &b : blocks)
        for (int64_t r = 0; r < b.count; ++r, x += K_) {
            const float *row = b.rows + r * F_;
            if (gather)
                for (int64_t k = 0; k < K_; ++k) x[k] = row[cols_[k]];
            else
                std::memcpy(x, row, F_ * sizeof(float));
        }
    const float *w1c = w1;
    if (gather) {
        w1c_.resize(H_ * K_);
        for (int64_t h = 0; h < H_; ++h)
            for (int64_t k = 0; k < K_; ++k) w1c_[h * K_ + k] = w1[h * F_ + cols_[k]];
        w1c = w1c_.data();
    }
    h1_.resize(R * H_);
    h2_.resize(R * H_);
    hv_.resize(R * H2_);
    ha_.resize(R * H2_);
    v_.resize(R);
    q_.resize(R * A_);
    gemm(false, true, R, H_, K_, xc_.data(), K_, w1c, K_, 0.f, h1_.data(), H_);
    add_bias(h1_.data(), R, H_, b1, true);
    gemm(false, true, R, H_, H_, h1_.data(), H_, params_[2].data_ptr<float>(), H_, 0.f, h2_.data(),
         H_);
    add_bias(h2_.data(), R, H_, params_[3].data_ptr<float>(), true);
    // Dueling heads: V(s) and A(s, .), each a hidden layer of H/2.
    gemm(false, true, R, H2_, H_, h2_.data(), H_, params_[4].data_ptr<float>(), H_, 0.f,
         hv_.data(), H2_);
    add_bias(hv_.data(), R, H2_, params_[5].data_ptr<float>(), true);
    gemm(false, true, R, 1, H2_, hv_.data(), H2_, params_[6].data_ptr<float>(), H2_, 0.f, v_.data(),
         1);
    add_bias(v_.data(), R, 1, params_[7].data_ptr<float>(), false);
    gemm(false, true, R, H2_, H_, h2_.data(), H_, params_[8].data_ptr<float>(), H_, 0.f,
         ha_.data(), H2_);
    add_bias(ha_.data(), R, H2_, params_[9].data_ptr<float>(), true);
    gemm(false, true, R, A_, H2_, ha_.data(), H2_, params_[10].data_ptr<float>(), H2_, 0.f,
         q_.data(), A_);
    add_bias(q_.data(), R, A_, params_[11].data_ptr<float>(), false);
    // Q = V + A - mean_a A.
    for (int64_t r = 0; r < R; ++r) {
        float *q = q_.data() + r * A_;
        float mean = 0;
        for (int64_t a = 0; a < A_; ++a) mean += q[a];
        mean /= static_cast<float>(A_);
        for (int64_t a = 0; a < A_; ++a) q[a] += v_[r] - mean;
    }
    return q_.data();
}

void DenseMlp::backward(const float *dq, int64_t R) {
    LT_CHECK(R <= R_, "DenseMlp::backward: more rows than the forward had");
    OneThread one_thread;
    // dL/dV = sum_a dq; dL/dA_j = dq_j - mean_a dq (the mean subtracted from every advantage).
    dv_.resize(R);
    da_.resize(R * A_);
    for (int64_t r = 0; r < R; ++r) {
        float sum = 0;
        for (int64_t a = 0; a < A_; ++a) sum += dq[r * A_ + a];
        dv_[r] = sum;
        for (int64_t a = 0; a < A_; ++a)
            da_[r * A_ + a] = dq[r * A_ + a] - sum / static_cast<float>(A_);
    }
    // Advantage head.
    gemm(true, false, A_, H2_, R, da_.data(), A_, ha_.data(), H2_, 0.f, grad_of(params_[10]), H2_);
    column_sums(da_.data(), R, A_, grad_of(params_[11]));
    dha_.resize(R * H2_);
    gemm(false, false, R, H2_, A_, da_.data(), A_, params_[10].data_ptr<float>(), H2_, 0.f,
         dha_.data(), H2_);
    relu_backward(dha_.data(), ha_.data(), R * H2_);
    gemm(true, false, H2_, H_, R, dha_.data(), H2_, h2_.data(), H_, 0.f, grad_of(params_[8]), H_);
    column_sums(dha_.data(), R, H2_, grad_of(params_[9]));
    // Value head.
    gemm(true, false, 1, H2_, R, dv_.data(), 1, hv_.data(), H2_, 0.f, grad_of(params_[6]), H2_);
    column_sums(dv_.data(), R, 1, grad_of(params_[7]));
    dhv_.resize(R * H2_);
    const float *wv2 = params_[6].data_ptr<float>();
    for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < H2_; ++j) dhv_[r * H2_ + j] = dv_[r] * wv2[j];
    relu_backward(dhv_.data(), hv_.data(), R * H2_);
    gemm(true, false, H2_, H_, R, dhv_.data(), H2_, h2_.data(), H_, 0.f, grad_of(params_[4]), H_);
    column_sums(dhv_.data(), R, H2_, grad_of(params_[5]));
    // Both heads flow back into the second hidden layer.
    dh2_.resize(R * H_);
    gemm(false, false, R, H_, H2_, dha_.data(), H2_, params_[8].data_ptr<float>(), H_, 0.f,
         dh2_.data(), H_);
    gemm(false, false, R, H_, H2_, dhv_.data(), H2_, params_[4].data_ptr<float>(), H_, 1.f,
         dh2_.data(), H_);
    relu_backward(dh2_.data(), h2_.data(), R * H_);
    gemm(true, false, H_, H_, R, dh2_.data(), H_, h1_.data(), H_, 0.f, grad_of(params_[2]), H_);
    column_sums(dh2_.data(), R, H_, grad_of(params_[3]));
    dh1_.resize(R * H_);
    gemm(false, false, R, H_, H_, dh2_.data(), H_, params_[2].data_ptr<float>(), H_, 0.f,
         dh1_.data(), H_);
    relu_backward(dh1_.data(), h1_.data(), R * H_);
    // The first layer's weights: only the columns the forward used get a gradient (the others
    // multiplied zeros), scattered back into the [H x F] gradient.
    float *gw1 = grad_of(params_[0]);
    if (K_ == F_) {
        gemm(true, false, H_, F_, R, dh1_.data(), H_, xc_.data(), K_, 0.f, gw1, F_);
    } else {
        dw1c_.resize(H_ * K_);
        gemm(true, false, H_, K_, R, dh1_.data(), H_, xc_.data(), K_, 0.f, dw1c_.data(), K_);
        std::fill_n(gw1, H_ * F_, 0.f);
        for (int64_t h = 0; h < H_; ++h)
            for (int64_t k = 0; k < K_; ++k) gw1[h * F_ + cols_[k]] = dw1c_[h * K_ + k];
    }
    column_sums(dh1_.data(), R, H_, grad_of(params_[1]));
}

}  // namespace looptune
