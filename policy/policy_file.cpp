#include "policy/policy_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <bit>
#include <boost/crc.hpp>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "looptool/ir/error.h"

namespace looptune {

// The weights are written as the machine holds them; the format says little-endian.
static_assert(std::endian::native == std::endian::little, "policy files are little-endian");

namespace {

constexpr const char *kMagic = "looptune-policy";
constexpr int kVersion = 1;
// Far above any policy (the shipped one is ~1 MB): a larger file is refused before it is read.
constexpr int64_t kMaxFileBytes = int64_t(1) << 30;
constexpr int kMaxRank = 8;

std::string crc_line(const char *data, size_t n) {
    boost::crc_32_type crc;
    crc.process_bytes(data, n);
    return fmt::format("crc32 {:08x}\n", crc.checksum());
}

// The file's bytes, one field at a time; every failure is a looptool::Error saying what.
class Reader {
public:
    explicit Reader(const std::string &bytes) : s_(bytes) {}

    std::string line(const char *what) {
        const size_t end = s_.find('\n', at_);
        if (end == std::string::npos) throw looptool::Error(fmt::format("truncated in {}", what));
        std::string l = s_.substr(at_, end - at_);
        at_ = end + 1;
        return l;
    }
    std::string bytes(int64_t n, const char *what) {
        if (n < 0 || uint64_t(n) > s_.size() - at_)
            throw looptool::Error(fmt::format("truncated in {}: {} bytes announced, {} left", what,
                                              n, s_.size() - at_));
        std::string b = s_.substr(at_, size_t(n));
        at_ += size_t(n);
        return b;
    }
    size_t offset() const { return at_; }

private:
    const std::string &s_;
    size_t at_ = 0;
};

// Whitespace-separated words of a header line.
std::vector<std::string> words(const std::string &line) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at < line.size()) {
        const size_t end = std::min(line.find(' ', at), line.size());
        if (end > at) out.push_back(line.substr(at, end - at));
        at = end + 1;
    }
    return out;
}

int64_t number(const std::string &word, int64_t max, const std::string &what) {
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    if (ec != std::errc() || end != word.data() + word.size() || v < 0 || v > max)
        throw looptool::Error(fmt::format("{}: '{}' is not a number in [0, {}]", what, word, max));
    return v;
}

// `keyword N`: N, checked to lie in [0, max].
int64_t counted_line(Reader &r, const char *keyword, int64_t max) {
    const std::vector<std::string> w = words(r.line(keyword));
    if (w.size() != 2 || w[0] != keyword)
        throw looptool::Error(fmt::format("expected a '{} N' line", keyword));
    return number(w[1], max, keyword);
}

PolicyTensor tensor_header(const std::string &line, int64_t max_floats) {
    const std::vector<std::string> w = words(line);
    if (w.size() < 2) throw looptool::Error(fmt::format("bad tensor line '{}'", line));
    PolicyTensor t;
    t.name = w[0];
    const int64_t rank = number(w[1], kMaxRank, "tensor " + t.name + " rank");
    if (int64_t(w.size()) != 2 + rank)
        throw looptool::Error(fmt::format("tensor {}: {} dimensions announced, {} given", t.name,
                                          rank, w.size() - 2));
    int64_t size = 1;
    for (int64_t d = 0; d < rank; ++d) {
        t.shape.push_back(number(w[size_t(2 + d)], max_floats, "tensor " + t.name + " shape"));
        size = t.shape.back() == 0 ? 0 : std::min(size * t.shape.back(), max_floats + 1);
    }
    if (size > max_floats) throw looptool::Error("tensor " + t.name + " is larger than the file");
    t.data.resize(size_t(size));
    return t;
}

PolicyFile parse(const std::string &bytes) {
    Reader r(bytes);
    if (r.line("the header") != fmt::format("{} {}", kMagic, kVersion))
        throw looptool::Error(fmt::format("not '{} {}' on the first line", kMagic, kVersion));
    PolicyFile p;
    p.meta_json = r.bytes(counted_line(r, "meta", kMaxFileBytes), "the description");
    if (r.line("the description") != "")
        throw looptool::Error("the description does not end where its length says");
    const int64_t max_floats = int64_t(bytes.size() / sizeof(float));
    const int64_t count = counted_line(r, "tensors", max_floats);
    int64_t total = 0;
    for (int64_t i = 0; i < count; ++i) {
        p.tensors.push_back(tensor_header(r.line("the tensor list"), max_floats));
        total += int64_t(p.tensors.back().data.size());
        if (total > max_floats) throw looptool::Error("the tensors are larger than the file");
    }
    if (counted_line(r, "data", max_floats) != total)
        throw looptool::Error(
            fmt::format("the data line does not announce the tensors' {} floats", total));
    const std::string data = r.bytes(total * int64_t(sizeof(float)), "the weights");
    size_t at = 0;
    for (PolicyTensor &t : p.tensors) {
        std::memcpy(t.data.data(), data.data() + at, t.data.size() * sizeof(float));
        at += t.data.size() * sizeof(float);
    }
    if (r.offset() != bytes.size()) throw looptool::Error("bytes after the weights");
    return p;
}

std::string slurp(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw looptool::Error("cannot open policy file " + path);
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0 || size > kMaxFileBytes)
        throw looptool::Error(path + ": not a looptune policy file (larger than 1 GiB)");
    in.seekg(0);
    std::string bytes(size_t(size), '\0');
    if (!in.read(bytes.data(), size)) throw looptool::Error("cannot read policy file " + path);
    return bytes;
}

}  // namespace

const PolicyTensor *PolicyFile::find(const std::string &name) const {
    for (const PolicyTensor &t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

PolicyFile read_policy_file(const std::string &path) {
    std::string bytes = slurp(path);
    if (bytes.rfind("PK\x03\x04", 0) == 0)  // a zip archive: LibTorch's serialisation
        throw looptool::Error(fmt::format(
            "{}: a LibTorch policy file (the format `tune` read before it needed no LibTorch); "
            "convert it with `looptool policy convert {} OUT.policy`",
            path, path));
    if (bytes.rfind(kMagic, 0) != 0)
        throw looptool::Error(path + ": not a looptune policy file (no '" + kMagic + "' header)");
    // The checksum line closes the file (a fixed 15 bytes): without it the file was cut short.
    constexpr size_t kCrcLine = 15;  // "crc32 " 8 hex digits "\n"
    const std::string stored = bytes.size() < kCrcLine ? "" : bytes.substr(bytes.size() - kCrcLine);
    if (stored.rfind("crc32 ", 0) != 0 || stored.back() != '\n')
        throw looptool::Error(path +
                              ": not a looptune policy file: truncated (no checksum at its end)");
    bytes.resize(bytes.size() - kCrcLine);
    if (const std::string computed = crc_line(bytes.data(), bytes.size()); computed != stored)
        throw looptool::Error(
            fmt::format("{}: damaged policy file: checksum {} does not match the stored {}", path,
                        computed.substr(0, 14), stored.substr(0, 14)));
    try {
        return parse(bytes);
    } catch (const looptool::Error &e) {
        throw looptool::Error(path + ": not a looptune policy file: " + e.what());
    }
}

void write_policy_file(const std::string &path, const PolicyFile &policy) {
    std::string out = fmt::format("{} {}\nmeta {}\n{}\ntensors {}\n", kMagic, kVersion,
                                  policy.meta_json.size(), policy.meta_json, policy.tensors.size());
    size_t total = 0;
    for (const PolicyTensor &t : policy.tensors) {
        size_t size = 1;
        for (int64_t d : t.shape) size *= size_t(d);
        LT_CHECK(size == t.data.size() && t.name.find_first_of(" \n") == std::string::npos &&
                     !t.name.empty(),
                 "write_policy_file: tensor " + t.name + " does not match its shape");
        out += fmt::format("{} {}{}{}\n", t.name, t.shape.size(), t.shape.empty() ? "" : " ",
                           fmt::join(t.shape, " "));
        total += size;
    }
    out += fmt::format("data {}\n", total);
    for (const PolicyTensor &t : policy.tensors)
        out.append(reinterpret_cast<const char *>(t.data.data()), t.data.size() * sizeof(float));
    out += crc_line(out.data(), out.size());
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f.write(out.data(), std::streamsize(out.size()));
        f.close();
        if (!f) {
            std::remove(tmp.c_str());
            throw looptool::Error("cannot write " + path);
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw looptool::Error("cannot write " + path);
    }
}

}  // namespace looptune
