#include "rl/dense_qnet.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>

#include "looptool/ir/error.h"

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

// Messages along edges: to[into[e]] += from[out_of[e]] (times scale[out_of[e]] when given), rows
// of G floats, for the first E edges.
void scatter_rows(const float *from, const int64_t *out_of, const float *scale, const int64_t *into,
                  int64_t E, int64_t G, float *to) {
    for (int64_t e = 0; e < E; ++e) {
        const float k = scale ? scale[out_of[e]] : 1.f;
        const float *f = from + out_of[e] * G;
        float *t = to + into[e] * G;
        for (int64_t j = 0; j < G; ++j) t[j] += f[j] * k;
    }
}

// Y[R x O] = X[R x I] W[O x I]^T + b, with a relu when `relu`.
void linear(const float *x, int64_t R, int64_t I, const float *w, const float *b, int64_t O,
            float *y, bool relu) {
    gemm(false, true, R, O, I, x, I, w, I, 0.f, y, O);
    add_bias(y, R, O, b, relu);
}

// The weight and bias gradients of that layer from dY [R x O]: gW = dY^T X, gb = column sums.
void linear_grads(const float *dy, int64_t R, int64_t O, const float *x, int64_t I, float *gw,
                  float *gb) {
    gemm(true, false, O, I, R, dy, O, x, I, 0.f, gw, I);
    column_sums(dy, R, O, gb);
}

}  // namespace

bool DenseQNet::applies(QNet &net) {
    const QNetConfig &c = net->config();
    const auto params = net->parameters();
    const size_t expected = c.encoder == "mlp"   ? 12
                            : c.encoder == "gnn" ? size_t(14 + 6 * c.gnn_rounds)
                                                 : 0;
    if (params.size() != expected) return false;
    for (const torch::Tensor &p : params)
        if (!p.device().is_cpu() || p.scalar_type() != torch::kFloat32 || !p.is_contiguous())
            return false;
    return true;
}

DenseQNet::DenseQNet(QNet &net) : params_(net->parameters()) {
    LT_CHECK(applies(net), "DenseQNet: not a Q-network of float32 CPU parameters");
    const QNetConfig &c = net->config();
    gnn_ = c.encoder == "gnn";
    F_ = c.shape.flat_size();
    head_ = params_.size() - 8;
    H_ = params_[head_].size(1);
    H2_ = params_[head_].size(0);
    A_ = params_[head_ + 6].size(0);
    LT_CHECK(params_[head_ + 2].size(0) == 1 && params_[head_ + 2].size(1) == H2_ &&
                 params_[head_ + 4].size(0) == H2_ && params_[head_ + 4].size(1) == H_ &&
                 params_[head_ + 6].size(1) == H2_ && A_ == c.shape.num_actions,
             "DenseQNet: heads not in QNetImpl's layout");
    if (gnn_) {
        G_ = c.gnn_hidden;
        rounds_ = c.gnn_rounds;
        Gs_ = c.shape.globals_size();
        LT_CHECK(params_[0].size(0) == G_ && params_[0].size(1) == kGraphVertexFeatures &&
                     params_[2 + 6 * rounds_].size(1) == Gs_ &&
                     params_[4 + 6 * rounds_].size(1) == 3 * G_,
                 "DenseQNet: gnn encoder not in QNetImpl's layout");
    } else {
        LT_CHECK(params_[0].size(1) == F_ && params_[0].size(0) == H_ && params_[2].size(1) == H_,
                 "DenseQNet: mlp encoder not in QNetImpl's layout");
    }
}

const float *DenseQNet::forward(const std::vector<RowBlock> &blocks) {
    OneThread one_thread;
    R_ = 0;
    for (const RowBlock &b : blocks) R_ += b.count;
    enc_.resize(R_ * H_);
    if (gnn_)
        forward_gnn(blocks);
    else
        forward_mlp(blocks);
    forward_heads();
    return q_.data();
}

void DenseQNet::backward(const float *dq, int64_t R) {
    LT_CHECK(R <= R_, "DenseQNet::backward: more rows than the forward had");
    OneThread one_thread;
    backward_heads(dq, R);
    relu_backward(denc_.data(), enc_.data(), R * H_);  // both encoders end in a relu
    if (gnn_)
        backward_gnn(R);
    else
        backward_mlp(R);
}

void DenseQNet::forward_mlp(const std::vector<RowBlock> &blocks) {
    const int64_t R = R_;
    const float *w1 = param(0);
    // The first layer over the columns that are not zero in every row (most of an encoded
    // state is zeros: padding loop rows, empty stride buckets, the one-hot action history): the
    // same product at ~37% of the FLOPs on a batch of 64. Small batches (acting) and dense ones
    // use every column, as QNetImpl::encode_mlp does.
    cols_.clear();
    if (R >= 16) {
        used_.assign(F_, 0);
        for (const RowBlock &b : blocks) mark_nonzero(b.rows, b.count, F_, used_.data());
        for (int64_t f = 0; f < F_; ++f)
            if (used_[f]) cols_.push_back(f);
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
    linear(xc_.data(), R, K_, w1c, param(1), H_, h1_.data(), true);
    linear(h1_.data(), R, H_, param(2), param(3), H_, enc_.data(), true);
}

void DenseQNet::backward_mlp(int64_t R) {
    linear_grads(denc_.data(), R, H_, h1_.data(), H_, grad_of(params_[2]), grad_of(params_[3]));
    dh1_.resize(R * H_);
    gemm(false, false, R, H_, H_, denc_.data(), H_, param(2), H_, 0.f, dh1_.data(), H_);
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

// Message passing over the batch's disjoint union of loop trees, as QNetImpl::encode_gnn: each
// round a vertex adds relu(W_self h + W_down mean(parents) + W_up mean(children)) to itself;
// the readout is relu(W [mean over vertices, cursor vertex, relu(W_g globals)]).
void DenseQNet::forward_gnn(const std::vector<RowBlock> &blocks) {
    gather_graphs(blocks);
    count_degrees();
    h_.resize(rounds_ + 1);
    act_.resize(rounds_);
    mp_.resize(rounds_);
    mc_.resize(rounds_);
    h_[0].resize(N_ * G_);
    linear(x_.data(), N_, kGraphVertexFeatures, param(0), param(1), G_, h_[0].data(), true);
    bias_.resize(G_);
    for (int r = 0; r < rounds_; ++r) message_round(r);
    readout();
}

// The batch's graphs as one: vertex features, edges renumbered, where each state's vertices and
// edges start, and each state's global features (the end of its flat row: loops ++ globals).
void DenseQNet::gather_graphs(const std::vector<RowBlock> &blocks) {
    constexpr int V = kGraphVertexFeatures;
    vertex_start_.assign(1, 0);
    edge_start_.assign(1, 0);
    src_.clear();
    dst_.clear();
    x_.clear();
    globals_in_.resize(R_ * Gs_);
    int64_t row = 0;
    const int64_t globals_offset = F_ - Gs_;
    for (const RowBlock &b : blocks) {
        LT_CHECK(b.count == 0 || b.graphs, "DenseQNet: the gnn encoder needs the states' graphs");
        for (int64_t i = 0; i < b.count; ++i, ++row) {
            const DenseGraph &g = *b.graphs[i];
            if (g.num_vertices == 0 || g.features.size() != size_t(g.num_vertices) * V)
                throw looptool::Error("the gnn encoder needs states encoded with their graph");
            const int64_t base = vertex_start_.back();
            x_.insert(x_.end(), g.features.begin(), g.features.end());
            for (auto [s, t] : g.edges) {
                src_.push_back(base + s);
                dst_.push_back(base + t);
            }
            vertex_start_.push_back(base + g.num_vertices);
            edge_start_.push_back(static_cast<int64_t>(src_.size()));
            std::memcpy(&globals_in_[row * Gs_], b.rows + i * F_ + globals_offset,
                        Gs_ * sizeof(float));
        }
    }
    N_ = vertex_start_.back();
}

// 1 / in-degree and 1 / out-degree of every vertex (1 without edges): the means' scales.
void DenseQNet::count_degrees() {
    const int64_t N = N_, E = static_cast<int64_t>(src_.size());
    inv_in_.assign(N, 0.f);
    inv_out_.assign(N, 0.f);
    for (int64_t e = 0; e < E; ++e) {
        ++inv_in_[dst_[e]];
        ++inv_out_[src_[e]];
    }
    for (int64_t v = 0; v < N; ++v) {
        inv_in_[v] = 1.f / std::max(inv_in_[v], 1.f);
        inv_out_[v] = 1.f / std::max(inv_out_[v], 1.f);
    }
}

// Round r: h_[r + 1] = h_[r] + relu(W_self h + W_down mean(parents) + W_up mean(children) + b).
void DenseQNet::message_round(int r) {
    const int64_t N = N_, G = G_, E = static_cast<int64_t>(src_.size());
    const size_t p = 2 + 6 * r;  // self, down, up: weight and bias each
    const float *h = h_[r].data();
    Floats &mp = mp_[r], &mc = mc_[r], &act = act_[r], &bias = bias_;
    mp.assign(N * G, 0.f);
    mc.assign(N * G, 0.f);
    scatter_rows(h, src_.data(), nullptr, dst_.data(), E, G, mp.data());
    scatter_rows(h, dst_.data(), nullptr, src_.data(), E, G, mc.data());
    for (int64_t v = 0; v < N; ++v)
        for (int64_t j = 0; j < G; ++j) {
            mp[v * G + j] *= inv_in_[v];
            mc[v * G + j] *= inv_out_[v];
        }
    act.resize(N * G);
    gemm(false, true, N, G, G, h, G, param(p), G, 0.f, act.data(), G);
    gemm(false, true, N, G, G, mp.data(), G, param(p + 2), G, 1.f, act.data(), G);
    gemm(false, true, N, G, G, mc.data(), G, param(p + 4), G, 1.f, act.data(), G);
    for (int64_t j = 0; j < G; ++j) bias[j] = param(p + 1)[j] + param(p + 3)[j] + param(p + 5)[j];
    add_bias(act.data(), N, G, bias.data(), true);
    h_[r + 1].resize(N * G);
    for (int64_t i = 0; i < N * G; ++i) h_[r + 1][i] = h[i] + act[i];
}

// Readout: [mean over the state's vertices, the cursor vertex (feature 8), globals] into the
// encoding.
void DenseQNet::readout() {
    constexpr int V = kGraphVertexFeatures;
    constexpr int kCursorFeature = 8;  // as in QNetImpl::encode_gnn
    const int64_t R = R_, G = G_;
    const float *h = h_[rounds_].data();
    pooled_.assign(R * 3 * G, 0.f);
    for (int64_t b = 0; b < R; ++b) {
        float *mean = &pooled_[b * 3 * G], *cursor = mean + G;
        const int64_t v0 = vertex_start_[b], v1 = vertex_start_[b + 1];
        for (int64_t v = v0; v < v1; ++v)
            for (int64_t j = 0; j < G; ++j) {
                mean[j] += h[v * G + j];
                cursor[j] += h[v * G + j] * x_[v * V + kCursorFeature];
            }
        const float inv = 1.f / std::max<float>(float(v1 - v0), 1.f);
        for (int64_t j = 0; j < G; ++j) mean[j] *= inv;
    }
    const size_t gi = 2 + 6 * rounds_;  // globals_in, then readout
    globals_.resize(R * G);
    linear(globals_in_.data(), R, Gs_, param(gi), param(gi + 1), G, globals_.data(), true);
    for (int64_t b = 0; b < R; ++b)
        std::memcpy(&pooled_[b * 3 * G + 2 * G], &globals_[b * G], G * sizeof(float));
    linear(pooled_.data(), R, 3 * G, param(gi + 2), param(gi + 3), H_, enc_.data(), true);
}

void DenseQNet::backward_gnn(int64_t R) {
    constexpr int V = kGraphVertexFeatures;
    constexpr int kCursorFeature = 8;
    const int64_t G = G_, Nb = vertex_start_[R], Eb = edge_start_[R];
    const size_t gi = 2 + 6 * rounds_;
    linear_grads(denc_.data(), R, H_, pooled_.data(), 3 * G, grad_of(params_[gi + 2]),
                 grad_of(params_[gi + 3]));
    dpooled_.resize(R * 3 * G);
    gemm(false, false, R, 3 * G, H_, denc_.data(), H_, param(gi + 2), 3 * G, 0.f, dpooled_.data(),
         3 * G);
    dg_.resize(R * G);
    for (int64_t b = 0; b < R; ++b)
        std::memcpy(&dg_[b * G], &dpooled_[b * 3 * G + 2 * G], G * sizeof(float));
    relu_backward(dg_.data(), globals_.data(), R * G);
    linear_grads(dg_.data(), R, G, globals_in_.data(), Gs_, grad_of(params_[gi]),
                 grad_of(params_[gi + 1]));
    // Into the last round's vertices: the mean's share and the cursor's.
    dh_.assign(Nb * G, 0.f);
    for (int64_t b = 0; b < R; ++b) {
        const float *dmean = &dpooled_[b * 3 * G], *dcursor = dmean + G;
        const int64_t v0 = vertex_start_[b], v1 = vertex_start_[b + 1];
        const float inv = 1.f / std::max<float>(float(v1 - v0), 1.f);
        for (int64_t v = v0; v < v1; ++v)
            for (int64_t j = 0; j < G; ++j)
                dh_[v * G + j] = dmean[j] * inv + dcursor[j] * x_[v * V + kCursorFeature];
    }
    dz_.resize(Nb * G);
    dm_.resize(Nb * G);
    for (int r = rounds_ - 1; r >= 0; --r) {
        const size_t p = 2 + 6 * r;
        // h_{r+1} = h_r + relu(z): dz = dh where z > 0, and dh flows on to h_r unchanged.
        for (int64_t i = 0; i < Nb * G; ++i) dz_[i] = act_[r][i] > 0.f ? dh_[i] : 0.f;
        gemm(true, false, G, G, Nb, dz_.data(), G, h_[r].data(), G, 0.f, grad_of(params_[p]), G);
        gemm(true, false, G, G, Nb, dz_.data(), G, mp_[r].data(), G, 0.f, grad_of(params_[p + 2]),
             G);
        gemm(true, false, G, G, Nb, dz_.data(), G, mc_[r].data(), G, 0.f, grad_of(params_[p + 4]),
             G);
        column_sums(dz_.data(), Nb, G, grad_of(params_[p + 1]));
        std::memcpy(grad_of(params_[p + 3]), grad_of(params_[p + 1]), G * sizeof(float));
        std::memcpy(grad_of(params_[p + 5]), grad_of(params_[p + 1]), G * sizeof(float));
        gemm(false, false, Nb, G, G, dz_.data(), G, param(p), G, 1.f, dh_.data(), G);
        // mp[t] = mean of h[s] over edges s -> t: each h[s] gets dmp[t] / in-degree(t).
        gemm(false, false, Nb, G, G, dz_.data(), G, param(p + 2), G, 0.f, dm_.data(), G);
        scatter_rows(dm_.data(), dst_.data(), inv_in_.data(), src_.data(), Eb, G, dh_.data());
        // mc[s] = mean of h[t] over edges s -> t: each h[t] gets dmc[s] / out-degree(s).
        gemm(false, false, Nb, G, G, dz_.data(), G, param(p + 4), G, 0.f, dm_.data(), G);
        scatter_rows(dm_.data(), src_.data(), inv_out_.data(), dst_.data(), Eb, G, dh_.data());
    }
    relu_backward(dh_.data(), h_[0].data(), Nb * G);
    linear_grads(dh_.data(), Nb, G, x_.data(), V, grad_of(params_[0]), grad_of(params_[1]));
}

void DenseQNet::forward_heads() {
    const int64_t R = R_;
    const size_t p = head_;  // value.0, value.2, advantage.0, advantage.2
    hv_.resize(R * H2_);
    ha_.resize(R * H2_);
    v_.resize(R);
    q_.resize(R * A_);
    linear(enc_.data(), R, H_, param(p), param(p + 1), H2_, hv_.data(), true);
    linear(hv_.data(), R, H2_, param(p + 2), param(p + 3), 1, v_.data(), false);
    linear(enc_.data(), R, H_, param(p + 4), param(p + 5), H2_, ha_.data(), true);
    linear(ha_.data(), R, H2_, param(p + 6), param(p + 7), A_, q_.data(), false);
    // Q = V + A - mean_a A.
    for (int64_t r = 0; r < R; ++r) {
        float *q = q_.data() + r * A_;
        float mean = 0;
        for (int64_t a = 0; a < A_; ++a) mean += q[a];
        mean /= static_cast<float>(A_);
        for (int64_t a = 0; a < A_; ++a) q[a] += v_[r] - mean;
    }
}

void DenseQNet::backward_heads(const float *dq, int64_t R) {
    const size_t p = head_;
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
    linear_grads(da_.data(), R, A_, ha_.data(), H2_, grad_of(params_[p + 6]),
                 grad_of(params_[p + 7]));
    dha_.resize(R * H2_);
    gemm(false, false, R, H2_, A_, da_.data(), A_, param(p + 6), H2_, 0.f, dha_.data(), H2_);
    relu_backward(dha_.data(), ha_.data(), R * H2_);
    linear_grads(dha_.data(), R, H2_, enc_.data(), H_, grad_of(params_[p + 4]),
                 grad_of(params_[p + 5]));
    linear_grads(dv_.data(), R, 1, hv_.data(), H2_, grad_of(params_[p + 2]),
                 grad_of(params_[p + 3]));
    dhv_.resize(R * H2_);
    const float *wv2 = param(p + 2);
    for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < H2_; ++j) dhv_[r * H2_ + j] = dv_[r] * wv2[j];
    relu_backward(dhv_.data(), hv_.data(), R * H2_);
    linear_grads(dhv_.data(), R, H2_, enc_.data(), H_, grad_of(params_[p]),
                 grad_of(params_[p + 1]));
    // Both heads flow back into the encoding.
    denc_.resize(R * H_);
    gemm(false, false, R, H_, H2_, dha_.data(), H2_, param(p + 4), H_, 0.f, denc_.data(), H_);
    gemm(false, false, R, H_, H2_, dhv_.data(), H2_, param(p), H_, 1.f, denc_.data(), H_);
}

}  // namespace looptune
