#include "rl/mpi/mpi_transport.h"

#include <cstring>
#include <type_traits>

#include "looptool/ir/error.h"

namespace looptune {

namespace {

// The first four bytes of each kind of buffer.
constexpr uint32_t kTransitions = 0x4c545452;  // "LTT" and a letter
constexpr uint32_t kStatus = 0x4c545453;
constexpr uint32_t kWeights = 0x4c545457;
constexpr uint32_t kText = 0x4c545458;
constexpr uint32_t kGrant = 0x4c545447;

class Writer {
public:
    explicit Writer(uint32_t kind) { put(kind); }
    template <class T>
    void put(T v) {
        static_assert(std::is_trivially_copyable_v<T>);
        const size_t at = out_.size();
        out_.resize(at + sizeof(T));
        std::memcpy(out_.data() + at, &v, sizeof(T));
    }
    template <class T>
    void put_vector(const std::vector<T> &v) {
        static_assert(std::is_trivially_copyable_v<T>);
        put<uint64_t>(v.size());
        const size_t at = out_.size();
        out_.resize(at + v.size() * sizeof(T));
        if (!v.empty()) std::memcpy(out_.data() + at, v.data(), v.size() * sizeof(T));
    }
    void put_state(const RlState &s) {
        put_vector(s.flat);
        put_vector(s.mask);
        put<int32_t>(s.graph.num_vertices);
        put_vector(s.graph.features);
        put_vector(s.graph.graph_features);
        std::vector<int32_t> edges;
        for (const auto &[from, to] : s.graph.edges) edges.insert(edges.end(), {from, to});
        put_vector(edges);
    }
    std::vector<char> take() { return std::move(out_); }

private:
    std::vector<char> out_;
};

class Reader {
public:
    Reader(const std::vector<char> &in, uint32_t kind, const char *what) : in_(in), what_(what) {
        if (get<uint32_t>() != kind)
            throw looptool::Error(std::string("MPI message: not a ") + what_ + " message");
    }
    template <class T>
    T get() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, in_.data() + at_, sizeof(T));
        at_ += sizeof(T);
        return v;
    }
    template <class T>
    std::vector<T> get_vector() {
        const uint64_t n = get<uint64_t>();
        if (n > (in_.size() - at_) / sizeof(T)) truncated();
        std::vector<T> v(n);
        if (n) std::memcpy(v.data(), in_.data() + at_, n * sizeof(T));
        at_ += n * sizeof(T);
        return v;
    }
    RlState get_state() {
        RlState s;
        s.flat = get_vector<float>();
        s.mask = get_vector<uint8_t>();
        s.graph.num_vertices = get<int32_t>();
        s.graph.features = get_vector<float>();
        s.graph.graph_features = get_vector<float>();
        const std::vector<int32_t> edges = get_vector<int32_t>();
        if (edges.size() % 2) truncated();
        for (size_t i = 0; i < edges.size(); i += 2)
            s.graph.edges.emplace_back(edges[i], edges[i + 1]);
        return s;
    }
    void finish() const {
        if (at_ != in_.size())
            throw looptool::Error(std::string("MPI message: ") + what_ +
                                  " message has trailing bytes");
    }

private:
    void need(size_t n) const {
        if (n > in_.size() - at_) truncated();
    }
    [[noreturn]] void truncated() const {
        throw looptool::Error(std::string("MPI message: truncated ") + what_ + " message");
    }
    const std::vector<char> &in_;
    const char *what_;
    size_t at_ = 0;
};

}  // namespace

std::vector<char> encode_transitions(const std::vector<Transition> &ts,
                                     const std::vector<float> &priorities) {
    LT_CHECK(ts.size() == priorities.size(), "one priority per transition");
    Writer w(kTransitions);
    w.put<uint64_t>(ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
        w.put_state(ts[i].state);
        w.put<int32_t>(ts[i].action);
        w.put<float>(ts[i].reward);
        w.put<float>(ts[i].discount);
        w.put_state(ts[i].next);
        w.put<float>(priorities[i]);
    }
    return w.take();
}

void decode_transitions(const std::vector<char> &buffer, std::vector<Transition> *ts,
                        std::vector<float> *priorities) {
    Reader r(buffer, kTransitions, "transitions");
    const uint64_t n = r.get<uint64_t>();
    ts->clear();
    priorities->clear();
    for (uint64_t i = 0; i < n; ++i) {
        Transition t;
        t.state = r.get_state();
        t.action = r.get<int32_t>();
        t.reward = r.get<float>();
        t.discount = r.get<float>();
        t.next = r.get_state();
        ts->push_back(std::move(t));
        priorities->push_back(r.get<float>());
    }
    r.finish();
}

std::vector<char> encode_status(const ActorStatus &s) {
    Writer w(kStatus);
    w.put<int64_t>(s.env_steps);
    w.put<int64_t>(s.episodes);
    w.put_vector(s.episode_rewards);
    w.put_vector(s.episode_speedups);
    return w.take();
}

ActorStatus decode_status(const std::vector<char> &buffer) {
    Reader r(buffer, kStatus, "status");
    ActorStatus s;
    s.env_steps = r.get<int64_t>();
    s.episodes = r.get<int64_t>();
    s.episode_rewards = r.get_vector<float>();
    s.episode_speedups = r.get_vector<float>();
    r.finish();
    return s;
}

std::vector<char> encode_weights(int64_t version, const std::vector<float> &weights) {
    Writer w(kWeights);
    w.put<int64_t>(version);
    w.put_vector(weights);
    return w.take();
}

std::vector<float> decode_weights(const std::vector<char> &buffer, int64_t *version) {
    Reader r(buffer, kWeights, "weights");
    *version = r.get<int64_t>();
    std::vector<float> w = r.get_vector<float>();
    r.finish();
    return w;
}

std::vector<char> encode_grant(int64_t steps) {
    Writer w(kGrant);
    w.put<int64_t>(steps);
    return w.take();
}

int64_t decode_grant(const std::vector<char> &buffer) {
    Reader r(buffer, kGrant, "grant");
    const int64_t steps = r.get<int64_t>();
    r.finish();
    return steps;
}

std::vector<char> encode_text(const std::string &text) {
    Writer w(kText);
    w.put_vector(std::vector<char>(text.begin(), text.end()));
    return w.take();
}

std::string decode_text(const std::vector<char> &buffer) {
    Reader r(buffer, kText, "text");
    std::vector<char> v = r.get_vector<char>();
    r.finish();
    return std::string(v.begin(), v.end());
}

std::string error_text(std::exception_ptr error) {
    try {
        std::rethrow_exception(error);
    } catch (const looptool::InternalError &e) {
        return std::string(e.what()) + '\1';
    } catch (const std::exception &e) {
        return e.what();
    }
}

std::exception_ptr error_from_text(const std::string &text) {
    if (!text.empty() && text.back() == '\1')
        return std::make_exception_ptr(looptool::InternalError(text.substr(0, text.size() - 1)));
    return std::make_exception_ptr(looptool::Error(text));
}

}  // namespace looptune
